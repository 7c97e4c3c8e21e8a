# FlashPass (Zeng et al.) §IV-A: flow sizes on the links between two data centres of a
# production Alibaba WAN, reconstructed from the paper's text only (Fig. 8 is a plot without
# printed values). Constraints used, exactly:
#   Table V: 15.8 % of flows are small (0–10 MB), 84.2 % large (> 10 MB), mean 65 MB;
#   §II-C / §IV-C2: "flow sizes varied from 10MB to 80MB (based on our WAN measurement)":
#     most large flows lie in 10–80 MB;
#   §IV-A: "the largest flows on WAN can get up to GBs (not shown in the figure)".
# Choices (ours, not the paper's): small flows spread over 10 kB–10 MB with 2 % below
# 100 kB and 6 % below 1 MB; large flows uniform in 10–80 MB, then a tail uniform in
# 80 MB–1 GB whose weight (5.36 %) is solved so that the mean is 65.0 MB (the
# piecewise-linear mean is 64.98 MB). Interpolation is linear between points, as for every
# CDF of this folder.
10000 1 0
100000 1 0.02
1000000 1 0.06
10000000 1 0.158
80000000 1 0.9464
1000000000 1 1

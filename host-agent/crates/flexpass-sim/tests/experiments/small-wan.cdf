# workloads/alibaba-wan.cdf with every size divided by 20 (test-sized FlashPass §IV-B2).
500 1 0
5000 1 0.02
50000 1 0.06
500000 1 0.158
4000000 1 0.9464
50000000 1 1

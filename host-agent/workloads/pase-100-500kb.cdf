# PASE (Munir et al., SIGCOMM'14) §6 testbed (Fig. 13(b)): "flow sizes uniformly
# distributed between 100 KB and 500 KB". Mean 300 kB. (The excerpt of the evaluation holds
# no other size distribution; the model's Fig. 10 runs use this one, docs/results-pase.md.)
100000 1 0
500000 1 1

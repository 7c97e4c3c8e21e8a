# FlashPass §IV-C2 (and §II-C, Fig. 5): "Flow sizes are varied from 10MB to 80MB" -
# uniform over 10-80 MB (the paper names no other shape). Mean 45 MB.
10000000 1 0
80000000 1 1

"""Packet blaster + counter for bench_pps.sh (runs inside its namespace).

python3 blast.py SECONDS: sends small UDP frames (legacy DSCP) on fp-h1 to
10.0.3.0/24 as fast as one Python thread can, and prints the switch's
forwarding rate measured from fp-h3's kernel rx counter over the middle of the
run (packets/s), plus the offered rate.
"""
import socket
import sys
import time

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

seconds = float(sys.argv[1])
frames = [bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:01:01")
                / IP(src="10.0.1.2", dst="10.0.3.2", tos=0, ttl=64) / UDP(sport=1000 + i, dport=5000)
                / Raw(b"\x00" * 58)) for i in range(64)]  # 100-byte frames


def rx():
    with open("/sys/class/net/fp-h3/statistics/rx_packets") as f:
        return int(f.read())


s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("fp-h1", 0))
start = time.monotonic()
marks = {}
sent = 0
while True:
    now = time.monotonic()
    t = now - start
    if t >= seconds:
        break
    for key, at in (("a", seconds * 0.25), ("b", seconds * 0.9)):
        if key not in marks and t >= at:
            marks[key] = (now, rx())
    for f in frames:
        try:
            s.send(f)
            sent += 1
        except OSError:
            pass
(t0, r0), (t1, r1) = marks["a"], marks["b"]
print(f"{(r1 - r0) / (t1 - t0):.0f} {sent / seconds:.0f}")

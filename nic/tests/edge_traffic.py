#!/usr/bin/env python3
"""Traffic for the eBPF edge's rate test (test_ebpf_rate.py), run inside a namespace.

  edge_traffic.py send DST SECONDS CREDITS_PER_S DATA_PER_S
      FlexPass CREDITs (18-byte messages, DSCP 46) and PROACTIVE_DATA (DSCP 26) over UDP
      from port 7890 to DST:7890, paced by a busy loop; prints {"credits": n, "data": n}.
  edge_traffic.py recv BIND IDLE_S
      counts what arrives on BIND:7890 until IDLE_S without a packet (after the first);
      prints {"credits": n, "data": n, "times": [...]}: each credit's kernel receive
      timestamp (SO_TIMESTAMPNS, s), immune to this process being descheduled.
"""

import json
import os
import socket
import struct
import sys
import time

PORT = 7890
CREDIT_TOS, DATA_TOS = 46 << 2, 26 << 2
SO_TIMESTAMPNS = 35  # = SCM_TIMESTAMPNS (asm-generic/socket.h)


def credit(flow_id: int, seq: int) -> bytes:
    return struct.pack("!BBHII", 0x11, 0, 18, flow_id, seq) + bytes(6)  # docs/protocol.md §6.1


def data(flow_id: int, seq: int, payload: int = 1000) -> bytes:
    # PROACTIVE_DATA: header 8 + 20 bytes of fields (§6.2) + payload; the edge reads 8 of them.
    return struct.pack("!BBHI", 0x12, 0, 28 + payload, flow_id) + struct.pack("!I", seq) + bytes(16 + payload)


def send(dst: str, seconds: float, credits_per_s: float, data_per_s: float) -> dict:
    # A steady offered load: a stall longer than the bucket's burst loses tokens, so the
    # sender runs SCHED_FIFO where allowed, else at nice -10.
    rt = True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except OSError:
        rt = False
        try:
            os.nice(-10)
        except OSError:
            pass
    cs = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cs.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, CREDIT_TOS)
    cs.bind(("0.0.0.0", PORT))
    ds = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ds.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, DATA_TOS)
    ds.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    ncredit = ndata = 0
    t0 = time.monotonic()
    while True:
        t = time.monotonic() - t0
        if t >= seconds:
            break
        while ncredit < t * credits_per_s:
            cs.sendto(credit(7, ncredit), (dst, PORT))
            ncredit += 1
        while ndata < t * data_per_s:
            ds.sendto(data(7, ndata), (dst, PORT))
            ndata += 1
        # Sleep to the next credit rather than spin: a spinning SCHED_FIFO task is throttled
        # for 50 ms each second (sched_rt_runtime_us), a gap that loses tokens.
        wait = (ncredit + 1) / credits_per_s - (time.monotonic() - t0)
        if wait > 50e-6:
            time.sleep(wait - 20e-6)
    return {"credits": ncredit, "data": ndata, "seconds": time.monotonic() - t0, "sched_fifo": rt}


def recv(bind: str, idle: float) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((bind, PORT))
    s.settimeout(30)  # the sender starts within this
    print("ready", flush=True)
    out = {"credits": 0, "data": 0, "times": []}
    while True:
        try:
            msg, anc, _flags, _addr = s.recvmsg(65536, 64)
        except socket.timeout:
            break
        s.settimeout(idle)
        if msg[:1] == b"\x11":
            out["credits"] += 1
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    out["times"].append(sec + nsec * 1e-9)
        elif msg[:1] == b"\x12":
            out["data"] += 1
    return out


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "send":
        r = send(args[0], float(args[1]), float(args[2]), float(args[3]))
    else:
        r = recv(args[0], float(args[1]))
    print(json.dumps(r), flush=True)

#!/usr/bin/env python3
"""Raw-socket flood generator for the host agent's flood tests (test_netns_floods.py,
bench_floods.py). Prebuilt Ethernet frames sent with AF_PACKET in a tight, paced loop (Scapy
would manage a few thousand packets per second; this reaches 10⁵ on one core).

Modes (stdout gets one JSON line at the end: frames sent, seconds, achieved rate):

  hello   spoofed HELLOs (flexpass / expresspass / dctcp, random flow ids) from random
          source addresses of --src-net and random ports, to --dst; --creq-share of the
          frames are CREDIT_REQUESTs, half for flows of those spoofed HELLOs (same source,
          port and flow id: they restart a half-open flow's credits), half for random flows.
  credit  sniff --iface until a HELLO from --victim leaves towards --dst (its flow id and
          port), then send forged CREDITs for that flow "from" --dst (DSCP EF) to the victim.

Needs root (AF_PACKET). Example:
  flood_gen.py hello --iface h2a --dst-mac 02:.. --src-mac 02:.. --dst 10.78.3.2 --rate 100000 --seconds 5
"""

import argparse
import ipaddress
import json
import random
import signal
import socket
import struct
import sys
import time

PORT = 7890
STOP = []  # set by SIGTERM / SIGINT: finish and report
ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003
T_CREDIT, T_CREDIT_REQUEST, T_HELLO = 0x1, 0x5, 0x7


def csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(dst_mac: bytes, src_mac: bytes, src: bytes, dst: bytes, sport: int, dport: int,
          payload: bytes, tos: int = 0) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # no UDP checksum
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(udp), random.getrandbits(16), 0x4000, 64,
                     socket.IPPROTO_UDP, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + struct.pack("!H", ETH_P_IP) + ip + udp


def hello(flow_id: int, transport: int) -> bytes:
    return struct.pack("!BBHIB3xQ", 0x10 | T_HELLO, 0, 20, flow_id, transport, 0)


def credit_request(flow_id: int) -> bytes:
    return struct.pack("!BBHIQ", 0x10 | T_CREDIT_REQUEST, 0, 16, flow_id, 1 << 20)


def credit(flow_id: int, seq: int) -> bytes:
    return struct.pack("!BBHII6x", 0x10 | T_CREDIT, 0, 18, flow_id, seq)


def mac(s: str) -> bytes:
    return bytes.fromhex(s.replace(":", ""))


class TxRing:
    """PACKET_TX_RING (TPACKET_V2): frames are written into a ring shared with the kernel
    and one send() hands it every frame written since the last one (no syscall per frame)."""

    SOL_PACKET, PACKET_VERSION, PACKET_TX_RING, TPACKET_V2 = 263, 10, 13, 1
    FRAME, NFRAMES, DATA = 256, 4096, 32  # slot size, slots, data offset (TPACKET2 header)

    def __init__(self, sock):
        import mmap
        sock.setsockopt(self.SOL_PACKET, self.PACKET_VERSION, self.TPACKET_V2)
        block = 1 << 16
        nblocks = self.FRAME * self.NFRAMES // block
        sock.setsockopt(self.SOL_PACKET, self.PACKET_TX_RING,
                        struct.pack("IIII", block, nblocks, self.FRAME, self.NFRAMES))
        self.ring = mmap.mmap(sock.fileno(), block * nblocks, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
        self.sock, self.i = sock, 0

    def put(self, f):
        """Queue one frame; False if its slot is still in the kernel's hands."""
        off = self.i * self.FRAME
        if struct.unpack_from("I", self.ring, off)[0] != 0:  # not TP_STATUS_AVAILABLE
            return False
        self.ring[off + self.DATA:off + self.DATA + len(f)] = f
        struct.pack_into("II", self.ring, off, 1, len(f))  # TP_STATUS_SEND_REQUEST, tp_len
        self.i = (self.i + 1) % self.NFRAMES
        return True

    def flush(self):
        try:
            self.sock.send(b"")
        except OSError:
            pass


def blast(sock, frames, rate, seconds):
    """Send the frames round-robin at `rate` per second (bursts every ms) for `seconds`:
    through a PACKET_TX_RING when the kernel offers it, else one send() per frame."""
    try:
        ring = TxRing(sock)
    except OSError:
        ring = None
    if ring is None:
        return blast_send(sock, frames, rate, seconds)
    n = len(frames)
    sent = errors = i = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        now = time.perf_counter()
        if now >= end or STOP:
            break
        due = min(int((now - start) * rate) + 1, sent + 512)
        while sent < due and (sent & 255 or time.perf_counter() < end):
            if not ring.put(frames[i]):
                errors += 1  # ring full: the kernel is behind
                break
            sent += 1
            i += 1
            if i == n:
                i = 0
        ring.flush()
        if sent >= int((time.perf_counter() - start) * rate):
            time.sleep(0.0005)
    ring.flush()
    return sent, errors, time.perf_counter() - start


def blast_send(sock, frames, rate, seconds):
    """Like blast, one send() per frame."""
    n = len(frames)
    sent = 0
    errors = 0
    start = time.perf_counter()
    end = start + seconds
    i = 0
    send = sock.send
    while True:
        now = time.perf_counter()
        if now >= end or STOP:
            break
        due = int((now - start) * rate) + 1
        while sent < due:
            try:
                send(frames[i])
            except OSError:  # ENOBUFS: the device queue is full
                errors += 1
            sent += 1
            i += 1
            if i == n:
                i = 0
        if sent >= int((time.perf_counter() - start) * rate):
            time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    return sent, errors, elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["hello", "credit"])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--dst-mac", required=True, help="next hop's MAC")
    ap.add_argument("--src-mac", required=True)
    ap.add_argument("--dst", required=True, help="the agent under flood (hello) / the receiver whose credits are forged (credit)")
    ap.add_argument("--rate", type=float, default=100_000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--src-net", default="198.18.0.0/15")
    ap.add_argument("--frames", type=int, default=1 << 16)
    ap.add_argument("--creq-share", type=float, default=0.25)
    ap.add_argument("--victim", help="credit: the sender's address")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tos", type=int, default=0, help="hello: IPv4 TOS byte of the flood (0: legacy class)")
    a = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: STOP.append(1))
    random.seed(a.seed)
    dmac, smac = mac(a.dst_mac), mac(a.src_mac)
    dst = socket.inet_aton(a.dst)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((a.iface, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    if a.mode == "hello":
        net = ipaddress.ip_network(a.src_net)
        frames = []
        spoofed = []
        for _ in range(a.frames):
            r = random.random()
            if r < a.creq_share and spoofed:
                if r < a.creq_share / 2:
                    src, sport, fid = random.choice(spoofed)
                else:
                    src = net[random.randrange(net.num_addresses)].packed
                    sport, fid = random.randrange(1024, 65536), random.getrandbits(32)
                payload = credit_request(fid)
            else:
                src = net[random.randrange(net.num_addresses)].packed
                sport, fid = random.randrange(1024, 65536), random.getrandbits(32)
                spoofed.append((src, sport, fid))
                payload = hello(fid, random.choice((1, 1, 2, 3)))
            frames.append(frame(dmac, smac, src, dst, sport, PORT, payload, tos=a.tos))
        print(json.dumps({"event": "ready", "frames": len(frames)}), flush=True)
        sent, errors, secs = blast(sock, frames, a.rate, a.seconds)
    else:
        victim = socket.inet_aton(a.victim)
        sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sniff.bind((a.iface, 0))
        sniff.settimeout(30)
        print(json.dumps({"event": "ready"}), flush=True)
        while True:
            pkt, (_, _, ptype, _, _) = sniff.recvfrom(65536)
            if len(pkt) < 14 + 20 + 8 + 8 or pkt[12:14] != b"\x08\x00":
                continue
            ip = pkt[14:]
            ihl = (ip[0] & 0xF) * 4
            if ip[9] != socket.IPPROTO_UDP or ip[12:16] != victim or ip[16:20] != dst:
                continue
            sport, dport = struct.unpack_from("!HH", ip, ihl)
            fp = ip[ihl + 8:]
            if dport == PORT and fp[0] == 0x10 | T_HELLO:
                (fid,) = struct.unpack_from("!I", fp, 4)
                break
        print(json.dumps({"event": "hello", "flow_id": fid, "port": sport}), flush=True)
        frames = [frame(dmac, smac, dst, victim, PORT, sport, credit(fid, (1 << 31) + i), tos=46 << 2)
                  for i in range(a.frames)]
        sent, errors, secs = blast(sock, frames, a.rate, a.seconds)
    print(json.dumps({"event": "done", "mode": a.mode, "sent": sent, "send_errors": errors,
                      "seconds": round(secs, 3), "rate": round(sent / secs)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

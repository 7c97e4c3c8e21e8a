"""pFabric in flexpass_switch (Alizadeh et al., SIGCOMM'13 §4.1): the P4 program reads the
PRIO field of FlexPass data (docs/protocol.md §6.2) into the metadata pfabric_rank and a flow
key into pfabric_flow, and the TM's queue in discipline "pfabric" sends the smallest rank
first (the earliest packet of that packet's flow) and, when full, drops the largest rank.

Uses test_switch.py's fixtures and helpers (a switch started for this module), inside
run.sh's namespace."""

from __future__ import annotations

import socket
import struct
import threading
import time

from test_switch import OUT, Q_LEGACY, drain, queue_stats, send_burst, switch, tm  # noqa: F401

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

FLEXPASS_UDP = 7890
SIZE = 1400  # frame bytes
LINK_BPS = 100_000  # 1424 wire bytes: 114 ms per frame, so the burst is queued before the first leaves


def prio_data(flow_id: int, rank: int, tag: int) -> bytes:
    """A REACTIVE_DATA with flag PRIO (transport pfabric's data, class legacy: DSCP 0), its
    `tag` in subflow_seq."""
    head = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:01:01")
            / IP(src="10.0.1.2", dst="10.0.3.2", tos=0, ttl=64)
            / UDP(sport=FLEXPASS_UDP, dport=FLEXPASS_UDP))
    payload_len = SIZE - len(head) - 32
    msg = struct.pack("!BBHIQIIII", 0x13, 0x40, 32 + payload_len, flow_id, 0, tag, 0, 0, rank)
    return bytes(head / (msg + b"\x00" * payload_len))


class TagReceiver:
    """Records the tags (subflow_seq) of FlexPass data frames arriving on an interface."""

    def __init__(self, iface: str = "fp-h3"):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((iface, 0))
        self.sock.settimeout(0.1)
        self.tags = []
        self.messages = {}  # tag -> the FlexPass message (UDP payload) as received
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            # Ethernet 14 + IPv4 20 + UDP 8, then the FlexPass message.
            if addr[2] == socket.PACKET_OUTGOING or len(data) < 42 + 32 or data[12:14] != b"\x08\x00":
                continue
            if struct.unpack("!H", data[36:38])[0] != FLEXPASS_UDP or data[42] != 0x13:
                continue
            tag = struct.unpack("!I", data[42 + 16:42 + 20])[0]
            self.tags.append(tag)
            self.messages[tag] = data[42:42 + struct.unpack("!H", data[42 + 2:42 + 4])[0]]

    def stop(self):
        self._stop = True
        self._t.join()
        self.sock.close()
        return self.tags


def test_pfabric_queue_order_and_drop_the_lowest(tm):  # noqa: F811
    """One frame occupies the 100 kbit/s link; eight arrive behind it into a pFabric queue of
    five frames.  Tags: (flow_id, rank)
        1 (1, 700)  2 (2, 300)  3 (3, 900)  4 (1, 600)  5 (4, 800)   -> full
        6 (5, 100): evicts 3 (900)   7 (6, 950): the lowest, dropped   8 (1, 50): evicts 5 (800)
    Left: 1, 2, 4, 6, 8.  Flow 1 holds the highest priority (8, rank 50) and leaves first,
    its earliest packet first (§4.1): 1, 4, 8; then 6 (100), then 2 (300)."""
    tm.set_port(OUT, link_rate_bps=LINK_BPS)
    cfg = tm.set_queue(OUT, Q_LEGACY, priority=0, weight=1.0, buffer_bytes=5 * SIZE, discipline="pfabric")
    assert cfg["discipline"] == "pfabric"
    before = queue_stats(tm)[Q_LEGACY]
    rx = TagReceiver()
    try:
        send_burst([prio_data(9, 10, 100)])  # on the wire at once (idle link)
        time.sleep(0.002)
        arrivals = [(1, 700), (2, 300), (3, 900), (1, 600), (4, 800), (5, 100), (6, 950), (1, 50)]
        send_burst([prio_data(f, r, tag) for tag, (f, r) in enumerate(arrivals, start=1)])
        drain(tm)
    finally:
        tags = rx.stop()
    after = queue_stats(tm)[Q_LEGACY]
    pushed_out = after["dropped_pkts"]["pushed_out"] - before["dropped_pkts"]["pushed_out"]
    full = after["dropped_pkts"]["queue_full"] - before["dropped_pkts"]["queue_full"]
    print(f"\npfabric burst: received {tags}, pushed out {pushed_out}, dropped on arrival {full}")
    assert tags == [100, 1, 4, 8, 6, 2], tags
    # The parsed data header and priority are deparsed in place: the message is unchanged.
    sent = {tag: prio_data(f, r, tag)[42:] for tag, (f, r) in enumerate(arrivals, start=1)}
    assert all(rx.messages[t] == sent[t] for t in (1, 4, 8, 6, 2))
    assert (pushed_out, full) == (2, 1)
    assert after["max_depth_bytes"] <= 5 * SIZE


def test_fifo_queue_ignores_the_priority(tm):  # noqa: F811
    """The same burst into the queue in discipline fifo: arrival order, tail drop."""
    tm.set_port(OUT, link_rate_bps=LINK_BPS)
    tm.set_queue(OUT, Q_LEGACY, priority=0, weight=1.0, buffer_bytes=5 * SIZE)
    rx = TagReceiver()
    try:
        send_burst([prio_data(9, 10, 100)])
        time.sleep(0.002)
        send_burst([prio_data(f, r, tag) for tag, (f, r) in
                    enumerate([(1, 700), (2, 300), (3, 900), (1, 600), (4, 800), (5, 100)], start=1)])
        drain(tm)
    finally:
        tags = rx.stop()
    assert tags == [100, 1, 2, 3, 4, 5], tags

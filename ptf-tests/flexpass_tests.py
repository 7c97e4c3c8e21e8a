"""PTF data-plane tests for p4src/v1model/flexpass.p4 on simple_switch_grpc,
and (the timing-independent ones, with tofino_model_tests.py) for
p4src/tna/flexpass.p4 on the Tofino model.

Run through ptf-tests/run_ptf.sh, which starts the switch in a private network
namespace, applies ptf-tests/ptf-config.yaml with flexpass-ctl and passes
these test parameters: grpc_addr, p4info, config, repo.
ptf-tests/run_tofino_model.sh passes target=tofino (or tofino2), grpc_addr
(BfRt), p4_name, config, repo instead; counters are then read over BfRt.

Observability: packets on the PTF ports, and the P4 counters read over
P4Runtime (forwarded / ecn_marked / red_dropped / credit_dropped per
(port, queue), ingress_events).  Queue ids are BMv2 priorities from the config
(credit 7, legacy 6, flexpass 5).
"""

import itertools
import os
import sys
import time

import ptf
import ptf.testutils as testutils
from ptf.base_tests import BaseTest

_REPO = testutils.test_param_get("repo") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_REPO, "control-plane"))

from scapy.layers.inet import IP, TCP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from flexpass_cp.config import load_config  # noqa: E402
from flexpass_cp.config.derive import derived  # noqa: E402
from flexpass_cp.config.targets import TOFINO_CHIPS  # noqa: E402
from flexpass_cp.p4_program import INGRESS_EVENTS, port_queue_index  # noqa: E402
from flexpass_cp.scapy_flexpass import FlexPass, FlexPassCredit, FlexPassData  # noqa: E402

CFG = load_config(testutils.test_param_get("config") or os.path.join(_REPO, "ptf-tests", "ptf-config.yaml"))
SW = CFG.switch("s1")
DSCP = CFG.dscp
Q = CFG.bmv2_priority  # logical queue -> BMv2 priority
FP_PORT = 7890
HOST_MAC = "02:00:00:00:aa:aa"  # sender MAC (anything: the switch is L3)

EVT_PARSER_ERROR, EVT_BAD_CHECKSUM, EVT_TTL_EXPIRED, EVT_FLEXPASS_SEEN = 0, 2, 3, 5
# Tofino runs a counter once per packet: ingress_events counts the drop reason,
# else the parser error, else "FlexPass seen" (p4src/tna/flexpass.p4).
TOFINO = SW.target in TOFINO_CHIPS

_election = itertools.count(100)


def host_ip(port, i=1):
    return {1: "10.0.1.%d", 2: "10.0.2.%d", 3: "10.0.3.%d"}[port] % i


def fp_packet(dst_port, dscp, ecn=2, body=None, src="10.0.1.1", ttl=64, sport=FP_PORT):
    """Ether/IPv4/UDP(7890)/FlexPass packet towards the host on dst_port."""
    if body is None:
        body = FlexPass(type=2, flow_id=1) / FlexPassData(flow_seq=0) / Raw(b"x" * 100)
    return (Ether(dst="02:00:00:00:01:01", src=HOST_MAC)
            / IP(src=src, dst=host_ip(dst_port), tos=(dscp << 2) | ecn, ttl=ttl, flags="DF")
            / UDP(sport=sport, dport=FP_PORT) / body)


def credit(dst_port, seq=0, src="10.0.1.1", pad=6):
    # CREDIT is Not-ECT (docs/protocol.md §10); 6 bytes of padding make the minimum 60-byte
    # frame, 14 the 68-byte frame of a credit with options (§9 "Credits in frame bytes").
    return fp_packet(dst_port, DSCP.credit, ecn=0, src=src,
                     body=FlexPass(flow_id=7) / FlexPassCredit(credit_seq=seq, pad=b"\0" * pad))


def expected(pkt, out_port):
    """What the switch should emit: MACs rewritten, TTL - 1, checksum redone."""
    nh = next(n for n in SW.next_hops.values() if n.port == out_port)
    e = pkt.copy()
    e[Ether].src = SW.ports[out_port].mac
    e[Ether].dst = nh.dmac
    e[IP].ttl -= 1
    del e[IP].chksum
    return Ether(bytes(e))


class _SharedBfrt:
    """One BfRt session for the whole run (a BfRt client id stays taken until the
    server notices the stream closed); close() is a no-op."""

    client = None

    def __init__(self, client):
        self._c = client

    def __getattr__(self, name):
        return getattr(self._c, name)

    def close(self):
        pass


def _shared_bfrt(addr):
    if _SharedBfrt.client is None:
        from flexpass_cp.bfrt_client import BfrtClient
        from flexpass_cp.bfrt_ops import tm_prefix

        c = BfrtClient(addr, SW.device_id, p4_name=testutils.test_param_get("p4_name") or "flexpass",
                       tm_prefix=tm_prefix(CFG, "s1"), client_id=2)
        c.bind()
        _SharedBfrt.client = c
    return _SharedBfrt(_SharedBfrt.client)


def switch_client():
    """Counter reader of the switch under test: P4Runtime (BMv2) or BfRt (Tofino);
    both have read_counter(name) -> {index: (packets, bytes)} and close()."""
    addr = testutils.test_param_get("grpc_addr") or SW.grpc_addr
    if TOFINO:
        return _shared_bfrt(addr)
    from flexpass_cp.p4runtime_client import P4RuntimeClient

    c = P4RuntimeClient(addr, SW.device_id, (0, next(_election)))
    c.load_p4info(testutils.test_param_get("p4info")
                  or os.path.join(_REPO, "build", "p4", "flexpass.p4info.txtpb"))
    return c


class FlexPassTest(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.client = switch_client()

    def tearDown(self):
        self.client.close()
        BaseTest.tearDown(self)

    # --- helpers ---------------------------------------------------------

    def counter(self, name, port, qid):
        return self.client.read_counter(name).get(port_queue_index(port, qid), (0, 0))[0]

    def counters(self, port, qid):
        return {n: self.counter(n, port, qid)
                for n in ("forwarded", "ecn_marked", "red_dropped", "credit_dropped")}

    def event(self, idx):
        return self.client.read_counter(INGRESS_EVENTS).get(idx, (0, 0))[0]

    def collect(self, port, timeout, quiet=1.0):
        """All packets received on `port` until `quiet` s pass without one
        (or `timeout` s in total)."""
        got = []
        end = time.time() + timeout
        while time.time() < end:
            res = testutils.dp_poll(self, device_number=0, port_number=port, timeout=quiet)
            if not isinstance(res, self.dataplane.PollSuccess):
                break
            got.append(Ether(res.packet))
        return got

    def send_burst(self, port, pkts):
        t0 = time.time()
        for p in pkts:
            testutils.send_packet(self, port, p)
        return time.time() - t0


class Classification(FlexPassTest):
    """Each DSCP class lands in its queue (observed in the per-queue
    `forwarded` counter) and is forwarded otherwise unchanged; unassigned
    DSCP values are legacy.  A frame larger than the credit burst marked as
    credit is dropped by the meter."""

    def runTest(self):
        cases = [
            ("credit", DSCP.credit, Q["credit"], 0),
            ("proactive_data", DSCP.proactive_data, Q["flexpass"], 2),
            ("reactive_data", DSCP.reactive_data, Q["flexpass"], 2),
            ("control", DSCP.control, Q["flexpass"], 2),
            ("legacy", DSCP.legacy, Q["legacy"], 2),
            ("unassigned DSCP 10", 10, Q["legacy"], 2),
        ]
        for name, dscp, qid, ecn in cases:
            before = self.counter("forwarded", 3, qid)
            # A credit must be credit-sized: the meter burst is two credits
            # (120 B as BMv2 counts), so a larger frame with DSCP 46 is dropped.
            pkt = credit(3) if name == "credit" else fp_packet(3, dscp, ecn=ecn)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, expected(pkt, 3), 3)
            testutils.verify_no_other_packets(self)
            after = self.counter("forwarded", 3, qid)
            self.assertEqual(after - before, 1, f"{name}: forwarded[port 3, q{qid}] did not count it")
        before = self.counter("credit_dropped", 3, Q["credit"])
        # A 456-byte "credit": more than the burst of any target's meter (BMv2 120 B,
        # Tofino 2 kbit = 250 B).
        testutils.send_packet(self, 1, fp_packet(3, DSCP.credit, ecn=0, body=FlexPass(type=2, flow_id=1)
                                                 / FlexPassData(flow_seq=0) / Raw(b"x" * 400)))
        testutils.verify_no_other_packets(self, timeout=0.5)
        self.assertEqual(self.counter("credit_dropped", 3, Q["credit"]) - before, 1)


class CreditMeter(FlexPassTest):
    """Credits above w_q·C·84/(84+1538) are dropped and counted; the number
    forwarded is within tolerance of rate x time + burst (2 credits)."""

    def runTest(self):
        port, qid = 2, Q["credit"]
        d = derived(CFG, "s1", port)
        rate = d.credits_per_second  # 38.5/s on the 1 Mbit/s port
        burst = d.meter_burst_bytes // d.credit_bmv2_bytes
        before = self.counters(port, qid)
        n = 200
        elapsed = self.send_burst(1, [credit(port, seq=i) for i in range(n)])
        got = self.collect(port, timeout=10)
        after = self.counters(port, qid)
        fwd = after["forwarded"] - before["forwarded"]
        dropped = after["credit_dropped"] - before["credit_dropped"]
        allowed = burst + rate * (elapsed + 0.5)
        print(f"\ncredits: sent {n} in {elapsed:.3f}s, forwarded {fwd}, dropped {dropped}, "
              f"received {len(got)}, allowed <= {allowed:.1f} (rate {rate:.1f}/s, burst {burst})")
        self.assertEqual(fwd + dropped, n, "every credit is either forwarded or counted as dropped")
        self.assertEqual(len(got), fwd, "received credits == forwarded counter")
        self.assertGreaterEqual(fwd, burst, "at least the burst passes")
        self.assertLessEqual(fwd, allowed * 1.2 + 2, "meter lets through more than rate x time + burst")
        self.assertGreater(dropped, n // 2)
        # After a pause the bucket refills: a single credit passes again.
        time.sleep(0.2)
        pkt = credit(port, seq=999)
        testutils.send_packet(self, 1, pkt)
        testutils.verify_packet(self, expected(pkt, port), port)


class CreditMeterCountsFrameBytes(FlexPassTest):
    """docs/protocol.md §9 "Credits in frame bytes": the switch's byte meter charges a credit
    its frame, as the NIC edges and the agent do (nic/tests/test_nic_from_config.py), so
    credits with 8 bytes of options (68 B) pass at 60/68 of the minimum credits' rate.
    Credits of each size offered at twice the control plane's credits_per_second for
    SECONDS; the meter's passes (offered - credit_dropped) against rate·60/frame·time plus
    the burst, and the two sizes' ratio against 60/68.  BMv2 only (the Tofino model's
    timing is not asserted)."""

    SECONDS = 4.0

    def offer(self, port, pad, rate, seq0):
        """Credits of `pad` padding paced at 2·rate for SECONDS: (passed the meter, elapsed)."""
        qid = Q["credit"]
        before = self.counter("credit_dropped", port, qid)
        n = int(2 * rate * self.SECONDS)
        t0 = time.time()
        for i in range(n):
            delay = t0 + i / (2 * rate) - time.time()
            if delay > 0:
                time.sleep(delay)
            testutils.send_packet(self, 1, credit(port, seq=seq0 + i, pad=pad))
        elapsed = time.time() - t0
        self.collect(port, timeout=3, quiet=0.5)
        return n - (self.counter("credit_dropped", port, qid) - before), elapsed

    def runTest(self):
        if TOFINO:
            self.skipTest("meter timing is asserted on BMv2 only")
        port = 2
        d = derived(CFG, "s1", port)
        rate = d.credits_per_second  # minimum credits/s, 38.5 on the 1 Mbit/s port
        passed = {}
        for pad, frame in ((6, 60), (14, 68)):
            time.sleep(0.5)  # a full bucket
            got, elapsed = self.offer(port, pad, rate, 1000 * pad)
            want = rate * d.credit_bmv2_bytes / frame * elapsed + d.meter_burst_bytes // frame
            print(f"\n{frame}-byte credits: {got} passed the meter in {elapsed:.2f} s, "
                  f"expected {want:.1f} (rate {rate:.1f}/s x 60/{frame}, burst {d.meter_burst_bytes} B)")
            self.assertLess(abs(got - want), 0.06 * want,
                            f"{frame}-byte credits: {got} passed, the frame-byte rule says {want:.1f}")
            passed[frame] = got / elapsed
        ratio = passed[68] / passed[60]
        self.assertLess(abs(ratio - 60 / 68), 0.05, f"68/60-byte pass ratio {ratio:.3f}, want {60 / 68:.3f}")


class CreditMeterBatchBurst(FlexPassTest):
    """Credits paced in batches (agent --credit-batch B, docs/protocol.md §11) through the
    P4 credit meter, with control-plane `credit_meter_burst_packets` = 9 on the port: a
    batch of 9 credits sent back to back passes the meter whole, twice in a row once the
    bucket has refilled; two batches back to back pass one batch and the credit rate, no
    more.  With the default burst (2) only 2 of such a batch pass (CreditMeter).

    The meter's decision is read from the ingress counter `credit_dropped` (every credit
    is either dropped there or forwarded to the queue).  Behind the meter BMv2's credit
    queue is `credit_queue_packets` (8) deep and drains at the port's 81 packets/s, so a
    switch whose egress thread is held up for a moment drops the ninth credit of a batch
    there (stock BMv2 shows no queue drop counter; we report it as metered - received)."""

    BURST = 9

    def setUp(self):
        FlexPassTest.setUp(self)
        import dataclasses

        from flexpass_cp.config.entries import switch_entries

        self.port = 2
        pc = SW.ports[self.port]
        q = dataclasses.replace(pc.queues, credit_meter_burst_packets=self.BURST)
        sw = dataclasses.replace(SW, ports={**SW.ports, self.port: dataclasses.replace(pc, queues=q)})
        self.burst_cfg = dataclasses.replace(CFG, switches={**CFG.switches, "s1": sw})
        self.client.apply(switch_entries(self.burst_cfg, "s1"))

    def tearDown(self):
        from flexpass_cp.config.entries import switch_entries

        try:
            self.client.apply(switch_entries(CFG, "s1"))
        finally:
            FlexPassTest.tearDown(self)

    def passed(self, n, first_seq):
        """Of `n` credits sent back to back: how many the meter passed, how many arrived at
        the port (== the egress `forwarded` counter), and how long sending took."""
        qid = Q["credit"]
        before = self.counters(self.port, qid)
        elapsed = self.send_burst(1, [credit(self.port, seq=first_seq + i) for i in range(n)])
        got = self.collect(self.port, timeout=5)  # ends after 1 s without a packet: refilled
        after = self.counters(self.port, qid)
        self.assertEqual(len(got), after["forwarded"] - before["forwarded"],
                         "received credits == forwarded counter")
        metered = n - (after["credit_dropped"] - before["credit_dropped"])
        # Whatever the meter passed reaches the port, up to what the credit queue holds.
        queue = self.burst_cfg.switch("s1").ports[self.port].queues.credit_queue_packets
        self.assertGreaterEqual(len(got), min(metered, queue))
        self.assertLessEqual(len(got), metered)
        return metered, len(got), elapsed

    def runTest(self):
        d = derived(self.burst_cfg, "s1", self.port)
        self.assertEqual(d.meter_burst_bytes // d.credit_bmv2_bytes, self.BURST)
        time.sleep(self.BURST / d.credits_per_second + 0.1)  # a full bucket
        one = [self.passed(self.BURST, 100 * k) for k in range(2)]
        two, two_received, elapsed = self.passed(2 * self.BURST, 1000)
        allowed = self.BURST + d.credits_per_second * (elapsed + 0.05)
        print(f"\nmeter burst {self.BURST}: batches of {self.BURST} passed the meter "
              f"{[m for m, _, _ in one]}, reached the port {[r for _, r, _ in one]}; two batches "
              f"back to back ({elapsed * 1e3:.1f} ms): {two} passed the meter (allowed <= "
              f"{allowed:.1f}), {two_received} reached the port")
        self.assertEqual([m for m, _, _ in one], [self.BURST, self.BURST],
                         "a batch as large as the burst passes the meter whole")
        self.assertGreaterEqual(two, self.BURST)
        self.assertLessEqual(two, allowed + 1, "the meter still holds the credit rate")


class SymmetricEcmp(FlexPassTest):
    """A flow and its reverse pick the same ECMP member; many flows spread."""

    members = (4, 5, 6)

    def flow_pkt(self, src, dst, sport, dport, proto="udp"):
        l4 = UDP(sport=sport, dport=dport) if proto == "udp" else TCP(sport=sport, dport=dport, flags="A")
        return (Ether(dst="02:00:00:00:01:01", src=HOST_MAC)
                / IP(src=src, dst=dst, tos=DSCP.legacy << 2, ttl=64) / l4 / Raw(b"y" * 40))

    def egress_of(self, pkt):
        testutils.send_packet(self, 1, pkt)
        for port in self.members:
            res = testutils.dp_poll(self, 0, port, timeout=0.5)
            if isinstance(res, self.dataplane.PollSuccess):
                got = Ether(res.packet)
                self.assertEqual(got[IP].src, pkt[IP].src)
                self.assertEqual(got[IP].ttl, pkt[IP].ttl - 1)
                return port
        self.fail(f"no packet on ECMP members for {pkt.summary()}")

    def runTest(self):
        used = {}
        for i in range(48):
            a, b = f"10.100.{i}.{i + 1}", f"10.200.{i % 7}.{(i * 13) % 250 + 1}"
            sport, dport = 1024 + 37 * i, 7890 if i % 2 else 5000 + i
            proto = "udp" if i % 3 else "tcp"
            fwd = self.egress_of(self.flow_pkt(a, b, sport, dport, proto))
            rev = self.egress_of(self.flow_pkt(b, a, dport, sport, proto))
            self.assertEqual(fwd, rev, f"flow {a}:{sport}->{b}:{dport}/{proto} took port {fwd}, reverse took {rev}")
            used[fwd] = used.get(fwd, 0) + 1
        testutils.verify_no_other_packets(self)
        print(f"\nECMP spread over members: {used}")
        self.assertEqual(set(used), set(self.members), f"48 flows should use all 3 members, got {used}")


class EcnMarking(FlexPassTest):
    """ECT packets are marked CE when the queue at enqueue exceeds K, never
    below K."""

    def runTest(self):
        port, qid = 2, Q["flexpass"]
        k = derived(CFG, "s1", port).ecn_threshold_qdepth
        # Below K: packets spaced so the queue (81 pkt/s) is empty each time.
        before = self.counters(port, qid)
        for i in range(5):
            pkt = fp_packet(port, DSCP.proactive_data, ecn=2)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, expected(pkt, port), port)  # ECT(0) kept
            time.sleep(0.05)
        self.assertEqual(self.counter("ecn_marked", port, qid), before["ecn_marked"])

        # Above K: a burst of 40 builds a queue of > K packets.
        before = self.counters(port, qid)
        n = 40
        pkts = [fp_packet(port, DSCP.proactive_data, ecn=2 if i % 2 else 1,
                          body=FlexPass(type=2, flow_id=2) / FlexPassData(subflow_seq=i) / Raw(b"z" * 200))
                for i in range(n)]
        self.send_burst(1, pkts)
        got = self.collect(port, timeout=15)
        after = self.counters(port, qid)
        ecns = [p[IP].tos & 3 for p in got]
        marked = ecns.count(3)
        print(f"\nECN: {n} sent, {len(got)} received, {marked} CE, K={k} packets; ecn sequence {ecns}")
        self.assertEqual(len(got), n, "green packets below the buffer limit are not dropped")
        self.assertNotEqual(ecns[0], 3, "the first packet saw an empty queue and must not be marked")
        self.assertTrue(all(e != 3 for e in ecns[:k + 1]), "packets with queue depth <= K must not be marked")
        self.assertGreater(marked, 0)
        self.assertEqual(after["ecn_marked"] - before["ecn_marked"], marked)
        self.assertTrue(all(e == 3 for e in ecns[ecns.index(3):]) or marked > n // 4)

        # Not-ECT packets are never marked, even above K.
        before = self.counters(port, qid)
        self.send_burst(1, [fp_packet(port, DSCP.control, ecn=0) for _ in range(30)])
        got = self.collect(port, timeout=15)
        self.assertEqual(len(got), 30)
        self.assertTrue(all(p[IP].tos & 3 == 0 for p in got))
        self.assertEqual(self.counter("ecn_marked", port, qid), before["ecn_marked"])


class SelectiveDrop(FlexPassTest):
    """Red (reactive) packets are dropped once the queue exceeds the red
    threshold; green (proactive) packets in the same situation are not."""

    def runTest(self):
        port, qid = 2, Q["flexpass"]
        red_thr = derived(CFG, "s1", port).red_threshold_qdepth
        n = 60
        before = self.counters(port, qid)
        self.send_burst(1, [fp_packet(port, DSCP.reactive_data,
                                      body=FlexPass(type=3, flow_id=3) / FlexPassData(subflow_seq=i) / Raw(b"r" * 200))
                            for i in range(n)])
        got = self.collect(port, timeout=20)
        after = self.counters(port, qid)
        red_dropped = after["red_dropped"] - before["red_dropped"]
        print(f"\nred: sent {n}, received {len(got)}, red_dropped {red_dropped}, threshold {red_thr} packets")
        self.assertGreater(red_dropped, 0, "a red burst above the threshold must lose packets")
        self.assertEqual(len(got) + red_dropped, n)
        self.assertGreaterEqual(len(got), red_thr, "red packets below the threshold are forwarded")

        time.sleep(0.5)
        before = self.counters(port, qid)
        self.send_burst(1, [fp_packet(port, DSCP.proactive_data,
                                      body=FlexPass(type=2, flow_id=3) / FlexPassData(subflow_seq=i) / Raw(b"g" * 200))
                            for i in range(n)])
        got = self.collect(port, timeout=20)
        after = self.counters(port, qid)
        print(f"green: sent {n}, received {len(got)}")
        self.assertEqual(len(got), n, "green packets are not selectively dropped")
        self.assertEqual(after["red_dropped"], before["red_dropped"])


class LegacyUntouched(FlexPassTest):
    """Legacy traffic (TCP and UDP, DSCP 0, any ECN) is forwarded with DSCP
    and ECN unchanged, also when its queue builds up (no AQM on Q2 here)."""

    def runTest(self):
        # Fast port: byte-exact apart from L3 forwarding rewrites.
        for ecn in (0, 1, 2):
            for l4 in (TCP(sport=40000, dport=80, flags="PA"), UDP(sport=5353, dport=5353)):
                pkt = (Ether(dst="02:00:00:00:01:01", src=HOST_MAC)
                       / IP(src="10.0.1.1", dst="10.0.3.1", tos=ecn, ttl=20) / l4 / Raw(b"legacy" * 10))
                testutils.send_packet(self, 1, pkt)
                testutils.verify_packet(self, expected(pkt, 3), 3)
        # Slow port with a backlog: nothing marked or dropped.
        port, qid = 2, Q["legacy"]
        before = self.counters(port, qid)
        n = 50
        self.send_burst(1, [Ether(dst="02:00:00:00:01:01", src=HOST_MAC)
                            / IP(src="10.0.1.1", dst=host_ip(port), tos=2, ttl=64)
                            / TCP(sport=40001, dport=80, seq=i) / Raw(b"l" * 200) for i in range(n)])
        got = self.collect(port, timeout=20)
        after = self.counters(port, qid)
        self.assertEqual(len(got), n)
        self.assertTrue(all(p[IP].tos == 2 for p in got), "legacy DSCP/ECN must be untouched")
        self.assertEqual(after["forwarded"] - before["forwarded"], n)
        self.assertEqual(after["ecn_marked"], before["ecn_marked"])
        self.assertEqual(after["red_dropped"], before["red_dropped"])


class MalformedAndTtl(FlexPassTest):
    """Truncated / bad FlexPass headers do not upset the switch (forwarded on
    their IPv4 header and counted as parser errors); TTL <= 1 and bad IPv4
    checksums are dropped and counted; the switch keeps forwarding."""

    def raw_udp(self, payload, sport=FP_PORT, dport=FP_PORT, ttl=64, dscp=None):
        dscp = DSCP.proactive_data if dscp is None else dscp
        return (Ether(dst="02:00:00:00:01:01", src=HOST_MAC)
                / IP(src="10.0.1.1", dst="10.0.3.1", tos=dscp << 2, ttl=ttl)
                / UDP(sport=sport, dport=dport) / Raw(payload))

    def runTest(self):
        perr0, seen0 = self.event(EVT_PARSER_ERROR), self.event(EVT_FLEXPASS_SEEN)
        cases = [
            ("3-byte FlexPass header", self.raw_udp(b"\x11\x00\x00"), True),
            ("credit without credit_seq", self.raw_udp(b"\x11\x00\x00\x0a\x00\x00\x00\x01\x00\x00"), True),
            ("version 2 header", self.raw_udp(b"\x21\x00\x00\x12" + b"\x00" * 14), False),
            ("unknown type 0xF", self.raw_udp(b"\x1f\xff\xff\xff" + b"\x00" * 4), False),
            ("empty UDP payload on 7890 (source port only)", self.raw_udp(b"", sport=FP_PORT, dport=9), True),
            ("UDP header cut short", Ether(bytes(self.raw_udp(b""))[:14 + 20 + 4]), True),
        ]
        if TOFINO:
            # Tofino MACs take frames of at least 64 bytes: the cut headers above
            # end inside the minimum frame, where a wire would carry padding.  The
            # model still gets the short frames; only forwarding is asserted.
            cases = [(name, pkt, None) for name, pkt, _ in cases]
        for name, pkt, parse_error in cases:
            before = self.event(EVT_PARSER_ERROR)
            testutils.send_packet(self, 1, pkt)
            if isinstance(pkt[IP].payload, UDP) and len(bytes(pkt)) >= 14 + 20 + 8:
                testutils.verify_packet(self, expected(pkt, 3), 3)
            else:
                # Truncated UDP header: forwarded on its IPv4 header, bytes kept.
                res = testutils.dp_poll(self, 0, 3, timeout=2)
                self.assertIsInstance(res, self.dataplane.PollSuccess, f"{name}: not forwarded")
                self.assertEqual(bytes(res.packet)[34:], bytes(pkt)[34:])
            if parse_error is not None:
                self.assertEqual(self.event(EVT_PARSER_ERROR) - before, 1 if parse_error else 0, name)
        if not TOFINO:
            # Common header parsed: credit without credit_seq, version 2, type 0xF.
            self.assertEqual(self.event(EVT_FLEXPASS_SEEN) - seen0, 3)
            self.assertGreater(self.event(EVT_PARSER_ERROR), perr0)
        else:
            # Version 2 and type 0xF: header parsed, no parser error (one event each).
            self.assertGreaterEqual(self.event(EVT_FLEXPASS_SEEN) - seen0, 2)

        # TTL expiry: dropped and counted.
        for ttl in (0, 1):
            before = self.event(EVT_TTL_EXPIRED)
            testutils.send_packet(self, 1, fp_packet(3, DSCP.proactive_data, ttl=ttl))
            testutils.verify_no_other_packets(self, timeout=0.5)
            self.assertEqual(self.event(EVT_TTL_EXPIRED) - before, 1)
        # TTL 2 still forwarded (leaves with TTL 1).
        pkt = fp_packet(3, DSCP.proactive_data, ttl=2)
        testutils.send_packet(self, 1, pkt)
        testutils.verify_packet(self, expected(pkt, 3), 3)

        # Bad IPv4 header checksum: dropped and counted.
        bad = fp_packet(3, DSCP.proactive_data)
        bad = Ether(bytes(bad))
        bad[IP].chksum ^= 0x5555
        before = self.event(EVT_BAD_CHECKSUM)
        testutils.send_packet(self, 1, bad)
        testutils.verify_no_other_packets(self, timeout=0.5)
        self.assertEqual(self.event(EVT_BAD_CHECKSUM) - before, 1)

        # The switch is still alive and forwarding.
        pkt = credit(3, seq=42)
        testutils.send_packet(self, 1, pkt)
        testutils.verify_packet(self, expected(pkt, 3), 3)
        testutils.verify_no_other_packets(self)


class ProfileTest(FlexPassTest):
    """A test of another profile on the same program: s1's entries and BMv2 queues are
    switched to `PROFILE` (what flexpass-ctl apply writes for it; `self.profile_cfg`) for
    the test, then back.  BMv2 / flexpass_switch only."""

    PROFILE = ""

    def setUp(self):
        FlexPassTest.setUp(self)
        import dataclasses

        from flexpass_cp.bmv2_queues import apply_queue_settings
        from flexpass_cp.config.entries import switch_entries

        if TOFINO:
            self.skipTest(f"profile {self.PROFILE} is BMv2 / flexpass_switch only")
        sw = dataclasses.replace(SW, profile=self.PROFILE)
        self.profile_cfg = dataclasses.replace(CFG, switches={**CFG.switches, "s1": sw})
        self.thrift = int(testutils.test_param_get("thrift_port") or SW.thrift_port)
        self.client.apply(switch_entries(self.profile_cfg, "s1"))
        apply_queue_settings(self.profile_cfg, "s1", thrift_port=self.thrift)

    def tearDown(self):
        from flexpass_cp.bmv2_queues import apply_queue_settings
        from flexpass_cp.config.entries import switch_entries

        try:
            self.client.apply(switch_entries(CFG, "s1"))
            apply_queue_settings(CFG, "s1", thrift_port=self.thrift)
        finally:
            FlexPassTest.tearDown(self)


class PptProfile(ProfileTest):
    """The PPT profile (SIGCOMM'24 §4.2, docs/protocol.md §10) on the same program.
    DSCP 32 + p lands in queue 7 - p for each priority P0..P7;
    legacy, FlexPass and unassigned DSCPs with P3; each queue marks ECT packets above
    its own K (HCP 10 packets, LCP 4 here), never below it."""

    PROFILE = "ppt"

    def runTest(self):
        from flexpass_cp.config.profiles import ppt_qid

        cases = [(f"P{p}", DSCP.priority[p], ppt_qid(p)) for p in range(8)]
        cases += [("legacy", DSCP.legacy, ppt_qid(3)), ("proactive_data", DSCP.proactive_data, ppt_qid(3)),
                  ("unassigned DSCP 10", 10, ppt_qid(3))]
        for name, dscp, qid in cases:
            before = self.counter("forwarded", 3, qid)
            pkt = fp_packet(3, dscp, ecn=2)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, expected(pkt, 3), 3)
            testutils.verify_no_other_packets(self)
            self.assertEqual(self.counter("forwarded", 3, qid) - before, 1, f"{name}: not counted in q{qid}")

        # Per-queue ECN on the slow port (81 frames/s): a burst of 30 ECT packets builds a
        # queue; marks start only above that queue's K.
        port = 2
        d = derived(self.profile_cfg, "s1", port)
        for p in (1, 6):
            qid, k = ppt_qid(p), d.qdepth(d.ppt_ecn_threshold_bytes(p))
            before = self.counter("ecn_marked", port, qid)
            pkts = [fp_packet(port, DSCP.priority[p], ecn=2,
                              body=FlexPass(type=3 if p < 4 else 2, flow_id=9)
                              / FlexPassData(subflow_seq=i) / Raw(b"p" * 200)) for i in range(30)]
            self.send_burst(1, pkts)
            got = self.collect(port, timeout=20)
            ecns = [x[IP].tos & 3 for x in got]
            marked = ecns.count(3)
            print(f"\nPPT P{p} (queue {qid}, K {k} packets): {len(got)} received, {marked} CE: {ecns}")
            self.assertEqual(len(got), 30)
            self.assertTrue(all(e != 3 for e in ecns[:k + 1]), f"P{p}: marked at depth <= K")
            self.assertGreater(marked, 0, f"P{p}: a queue above K must mark")
            self.assertEqual(self.counter("ecn_marked", port, qid) - before, marked)
            time.sleep(0.5)


class PaseOnPriorityProfile(ProfileTest):
    """PASE (Munir et al. SIGCOMM'14 §3.2: "in-network prioritization" with the switches'
    priority queues; docs/protocol.md §10) on the eight-priority profile: data the
    arbitrators put in queue q carries DSCP 32 + q and lands in priority queue P<q>; a
    probe (the bare 28-byte header, flag PROBE) in the lowest queue P7; ARBITRATION
    messages in P0 (Not-ECT). Each is forwarded unchanged and counted in its queue."""

    PROFILE = "ppt"

    def runTest(self):
        from flexpass_cp.config.profiles import ppt_qid
        from flexpass_cp.scapy_flexpass import (FLAG_PROBE, PROBE_SEQ, FlexPassArbitrationRequest,
                                                FlexPassArbitrationResponse)

        def data(q, probe=False):
            hdr = FlexPass(type=3, flags=FLAG_PROBE if probe else 0, flow_id=11)
            body = FlexPassData(subflow_seq=PROBE_SEQ) if probe else FlexPassData(subflow_seq=q) / Raw(b"a" * 300)
            return fp_packet(3, DSCP.priority[q], ecn=2, body=hdr / body)

        cases = [(f"data in queue {q}", data(q), ppt_qid(q)) for q in range(8)]
        cases.append(("probe in the lowest queue", data(7, probe=True), ppt_qid(7)))
        cases.append(("ARBITRATION_REQUEST", fp_packet(3, DSCP.priority[0], ecn=0, body=FlexPass(flow_id=11)
                                                       / FlexPassArbitrationRequest(arb_seq=1, remaining=10**6,
                                                                                    demand_bps=10**9)), ppt_qid(0)))
        cases.append(("ARBITRATION_RESPONSE", fp_packet(3, DSCP.priority[0], ecn=0, body=FlexPass(flow_id=11)
                                                        / FlexPassArbitrationResponse(arb_seq=1, queue=2,
                                                                                      reference_rate_bps=10**8)),
                      ppt_qid(0)))
        for name, pkt, qid in cases:
            before = self.counter("forwarded", 3, qid)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, expected(pkt, 3), 3)
            testutils.verify_no_other_packets(self)
            self.assertEqual(self.counter("forwarded", 3, qid) - before, 1, f"{name}: not counted in q{qid}")


class FlashPassProfile(ProfileTest):
    """The FlashPass profile (§III-B, §III-C, §IV-A; docs/protocol.md §10) on the same
    program.  EMULATION packets (DSCP 46) go to the
    emulation queue, every data class to one data queue; in a burst into the emulation
    queue the over-provisioned (Not-ECT) packets are dropped once 2 are queued while the
    ordinary (ECT) ones interleaved with them all get through (CE-marked above 2); and the
    emulation queue passes at most its rate C·84/(84 + 1538) plus its 8 packets."""

    PROFILE = "flashpass"

    @staticmethod
    def emulation(port, seq, ecn):
        from flexpass_cp.scapy_flexpass import FlexPassEmulation

        return fp_packet(port, DSCP.credit, ecn=ecn,
                         body=FlexPass(flow_id=11) / FlexPassEmulation(emu_seq=seq, timestamp=seq, hold=0))

    def collect_timed(self, port, timeout, quiet=1.0):
        """(arrival time, packet) of everything received on `port` (see collect)."""
        got = []
        end = time.time() + timeout
        while time.time() < end:
            res = testutils.dp_poll(self, device_number=0, port_number=port, timeout=quiet)
            if not isinstance(res, self.dataplane.PollSuccess):
                break
            got.append((res.time, Ether(res.packet)))  # when the dataplane received it
        return got

    def runTest(self):
        from flexpass_cp.scapy_flexpass import FlexPassEmulation

        cq, dq = Q["credit"], Q["flexpass"]
        cases = [("ordinary emulation", self.emulation(3, 0, 2), cq),
                 ("over-provisioned emulation", self.emulation(3, 1, 0), cq),
                 ("proactive_data", fp_packet(3, DSCP.proactive_data), dq),
                 ("unscheduled data", fp_packet(3, DSCP.reactive_data), dq),
                 ("control", fp_packet(3, DSCP.control), dq),
                 ("legacy", fp_packet(3, DSCP.legacy), dq)]
        for name, pkt, qid in cases:
            before = self.counter("forwarded", 3, qid)
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, expected(pkt, 3), 3)
            testutils.verify_no_other_packets(self)
            self.assertEqual(self.counter("forwarded", 3, qid) - before, 1, f"{name}: not counted in q{qid}")

        # Selective dropping on the slow port (77 emulation packets/s): a burst of eight,
        # ordinary and over-provisioned alternating, no more than the queue holds.
        port = 2
        d = derived(self.profile_cfg, "s1", port)
        before = self.counters(port, cq)
        burst = [self.emulation(port, i, 2 if i % 2 == 0 else 0) for i in range(8)]
        self.send_burst(1, burst)
        got = self.collect(port, timeout=10)
        after = self.counters(port, cq)
        seqs = {x[FlexPassEmulation].emu_seq: x[IP].tos & 3 for x in got}
        ordinary = [s for s in seqs if s % 2 == 0]
        over = [s for s in seqs if s % 2 == 1]
        print(f"\nemulation burst: ordinary {sorted(ordinary)} over-provisioned {sorted(over)} received; "
              f"ECN {seqs}; counters {dict((k, after[k] - before[k]) for k in after)}")
        self.assertEqual(sorted(ordinary), [0, 2, 4, 6], "every ordinary emulation packet gets through")
        self.assertLess(len(over), 4, "over-provisioned packets are dropped once the queue holds 2")
        self.assertEqual(after["red_dropped"] - before["red_dropped"], 4 - len(over))
        self.assertEqual(after["credit_dropped"] - before["credit_dropped"], 0, "the meter drops none")
        self.assertGreater(after["ecn_marked"] - before["ecn_marked"], 0,
                           "ordinary packets above the threshold are CE-marked")
        time.sleep(0.5)

        # The emulation queue's rate: 80 ordinary packets offered at twice C·84/(84+1538)
        # (77/s) leave at about that rate, at most the queue and the meter's burst ahead.
        rate = d.credits_per_second
        before = self.counters(port, cq)
        n = 80
        t0 = time.time()
        for i in range(n):
            testutils.send_packet(self, 1, self.emulation(port, 100 + i, 2))
            time.sleep(max(0.0, t0 + (i + 1) / (2 * rate) - time.time()))
        elapsed = time.time() - t0
        got = self.collect_timed(port, timeout=15)
        after = self.counters(port, cq)
        fwd = after["forwarded"] - before["forwarded"]
        span = got[-1][0] - got[8][0] if len(got) > 9 else 0.0
        measured = (len(got) - 9) / span if span > 0 else float("inf")
        print(f"emulation rate: sent {n} in {elapsed:.3f}s, forwarded {fwd}, received {len(got)}, "
              f"after the first 8: {measured:.1f}/s (C·84/1622 = {rate:.1f}/s)")
        self.assertEqual(len(got), fwd)
        self.assertLess(fwd, n, "the emulation queue drops beyond its rate")
        self.assertLessEqual(fwd, 2 * 8 + rate * (elapsed + 0.2) * 1.2 + 2)
        self.assertLessEqual(measured, rate * 1.25, "drains no faster than C·84/(84+1538)")
        self.assertGreaterEqual(measured, rate * 0.75, "and at that rate while backlogged")

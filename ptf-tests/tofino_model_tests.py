"""Tofino-model variants of the PTF tests that depend on timing on BMv2.

tofino-model simulates the pipeline and the traffic manager's logic, not its
timing: ports do not drain at their line or shaped rate in wall-clock time,
so a burst from PTF does not reliably build a queue.  These tests build the
queue deterministically instead: they pause the egress queue
(tfN.tm.queue.sched_cfg.scheduling_enable = false), send the burst, and resume
it.  Every packet then sees an exact enqueue depth (its position times its
cells), so ECN marking and the red colour drop limit are checked exactly.  The
credit meter's rate (timing) is not asserted; every credit must be accounted
for (forwarded, dropped by the meter, or dropped by the TM's credit queue).

Run by ptf-tests/run_tofino_model.sh (test params target=tofino, grpc_addr,
p4_name, config, repo), with the timing-independent classes of
flexpass_tests.py.  @disabled keeps them out of BMv2's run_ptf.sh.
"""

import contextlib
import time

import ptf.testutils as testutils

from flexpass_tests import CFG, DSCP, Q, FlexPassTest, credit, fp_packet  # noqa: F401
from flexpass_cp.config.derive import derived
from flexpass_cp.scapy_flexpass import FlexPass, FlexPassData
from scapy.layers.inet import IP
from scapy.packet import Raw

SLOW = 2  # the port the queue tests use (ptf-tests/tofino-model-config.yaml)


class ModelTest(FlexPassTest):
    @contextlib.contextmanager
    def paused(self, port, qid):
        """Queue (port, qid) holds what arrives until the block ends."""
        self.client.set_queue_scheduling(port, qid, False)
        try:
            yield
            time.sleep(1.0)  # the model has taken every packet of the burst in
        finally:
            self.client.set_queue_scheduling(port, qid, True)

    def tm_drops(self, port, qid):
        return self.client.queue_counters(port, qid)["drop_count_packets"]

    def data_packets(self, n, dscp, kind, ecn=2):
        return [fp_packet(SLOW, dscp, ecn=ecn(i) if callable(ecn) else ecn,
                          body=FlexPass(type=kind, flow_id=9) / FlexPassData(subflow_seq=i) / Raw(b"z" * 200))
                for i in range(n)]


@testutils.disabled
class CreditMeterModel(ModelTest):
    """A burst of credits to the slow port: each is forwarded, dropped by the
    meter (credit_dropped) or by the TM's few-credit queue; the meter drops."""

    def runTest(self):
        qid, n = Q["credit"], 200
        before, tm0 = self.counters(SLOW, qid), self.tm_drops(SLOW, qid)
        self.send_burst(1, [credit(SLOW, seq=i) for i in range(n)])
        got = self.collect(SLOW, timeout=15)
        after, tm1 = self.counters(SLOW, qid), self.tm_drops(SLOW, qid)
        fwd = after["forwarded"] - before["forwarded"]
        dropped = after["credit_dropped"] - before["credit_dropped"]
        print(f"\ncredits: sent {n}, forwarded {fwd}, meter-dropped {dropped}, TM-dropped {tm1 - tm0}, "
              f"received {len(got)}")
        self.assertEqual(fwd + dropped + (tm1 - tm0), n)
        self.assertEqual(len(got), fwd)
        self.assertGreater(dropped, 0, "a back-to-back burst exceeds the 2-credit meter")


@testutils.disabled
class EcnMarkingModel(ModelTest):
    """With the FlexPass queue paused, packet i is enqueued at depth i x cells;
    exactly those with depth > K leave CE, and ecn_marked counts them."""

    def runTest(self):
        qid, n = Q["flexpass"], 30
        d = derived(CFG, "s1", SLOW)
        pkts = self.data_packets(n, DSCP.proactive_data, 2, ecn=lambda i: 2 if i % 2 else 1)
        per, k = d.frame_qdepth(len(bytes(pkts[0]))), d.ecn_threshold_qdepth
        before = self.counters(SLOW, qid)
        with self.paused(SLOW, qid):
            self.send_burst(1, pkts)
        got = self.collect(SLOW, timeout=15)
        after = self.counters(SLOW, qid)
        ecns = [p[IP].tos & 3 for p in got]
        marked = [e == 3 for e in ecns]
        # enq_qdepth without / with the packet itself (the TNA docs leave it open).
        without = [i * per > k for i in range(n)]
        with_self = [(i + 1) * per > k for i in range(n)]
        print(f"\nECN: K={k} cells, {per} cells/packet; ecn sequence {ecns}; enq_qdepth "
              + ("excludes" if marked == without else "includes" if marked == with_self else "?")
              + " the packet")
        self.assertEqual(len(got), n)
        self.assertIn(marked, (without, with_self))
        self.assertEqual(after["ecn_marked"] - before["ecn_marked"], sum(marked))


@testutils.disabled
class SelectiveDropModel(ModelTest):
    """With the FlexPass queue paused, red packets are admitted up to the red
    colour limit (the selective-drop threshold) and the rest are dropped by the
    TM; the same burst in green is admitted in full."""

    def runTest(self):
        qid, n = Q["flexpass"], 60
        d = derived(CFG, "s1", SLOW)
        pct, guaranteed = d.tofino_red_limit
        limit = guaranteed * pct / 100  # cells; >= the selective-drop threshold
        pkts = self.data_packets(n, DSCP.reactive_data, 3)
        per = d.frame_qdepth(len(bytes(pkts[0])))
        tm0 = self.tm_drops(SLOW, qid)
        with self.paused(SLOW, qid):
            self.send_burst(1, pkts)
        got = self.collect(SLOW, timeout=15)
        tm_dropped = self.tm_drops(SLOW, qid) - tm0
        print(f"\nred: sent {n}, received {len(got)}, TM dropped {tm_dropped}, "
              f"red limit {limit:g} cells = {limit / per:.1f} packets")
        self.assertEqual(len(got) + tm_dropped, n)
        self.assertGreaterEqual(len(got), int(limit // per))
        self.assertLessEqual(len(got), int(limit // per) + 1)

        tm0 = self.tm_drops(SLOW, qid)
        with self.paused(SLOW, qid):
            self.send_burst(1, self.data_packets(n, DSCP.proactive_data, 2))
        got = self.collect(SLOW, timeout=15)
        print(f"green: sent {n}, received {len(got)}")
        self.assertEqual(len(got), n)
        self.assertEqual(self.tm_drops(SLOW, qid), tm0)

"""The egress backlog is bounded (switch-target/README.md "Egress backlog"): when
BMv2's egress (pipeline + transmit) is slower than the TM's link rate, packets
wait in the TM queues, where admission drops them and counts the drops, instead
of piling up between the TM and the egress thread (unbounded memory, no drops).

The slow egress is made real: a tbf qdisc on the switch's veth fp-s3 at 5 Mbit/s
with a large limit, so BMv2's transmit blocks on the socket's send buffer, while
the TM port runs at 100 Mbit/s and 24 Mbit/s of 1000 B frames arrive.  Before
the bound, this grew the switch by about 100 MB/s (18 000 departures queued after
8 s, no TM drop).  A separate module: it starts its own switch with the default
--tm-egress-backlog (the bytes-mode switch of test_switch.py is stopped first).
"""

import shutil
import subprocess
import threading
import time

import pytest

from test_switch import (LEGACY, OUT, Q_LEGACY, REPO, TM_PORT, Receiver, TmClient, blast, frame,
                         queue_stats, start_switch, stop_switch)

LIMIT = 64  # default --tm-egress-backlog
EGRESS_BPS = "5mbit"  # what BMv2 can put on fp-s3
TM_RATE = 100_000_000
OFFERED_BPS = 24_000_000
SECONDS = 4.0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.fixture
def slow_egress():
    if not shutil.which("tc"):
        pytest.skip("SKIPPED: tc (iproute2) not found: cannot slow down the switch's egress")
    r = subprocess.run(["tc", "qdisc", "add", "dev", "fp-s3", "root", "tbf", "rate", EGRESS_BPS,
                        "burst", "20kb", "limit", "20mb"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"SKIPPED: cannot add a tbf qdisc on fp-s3 (kernel without sch_tbf?): {r.stderr.strip()}")
    yield
    subprocess.run(["tc", "qdisc", "del", "dev", "fp-s3", "root"], capture_output=True)


def test_egress_slower_than_tm_rate_keeps_packets_in_the_tm(slow_egress):
    proc = start_switch(REPO / "build/switch-target/integration-logs/egress-backlog")
    try:
        with TmClient("127.0.0.1", TM_PORT) as c:
            c.set_port(OUT, link_rate_bps=TM_RATE)
            frames = [frame(LEGACY, 1000, sport=1000 + i) for i in range(8)]
            rx = Receiver("fp-h3")
            rss0 = rss_mb(proc.pid)
            peak_rss, peak_backlog = rss0, 0
            n = {}
            t = threading.Thread(target=lambda: n.setdefault("sent", blast(frames, OFFERED_BPS, SECONDS)))
            t.start()
            while t.is_alive():
                time.sleep(0.25)
                peak_rss = max(peak_rss, rss_mb(proc.pid))
                peak_backlog = max(peak_backlog, c.get_stats(OUT).get("egress", {}).get("backlog_pkts", 0))
            t.join()
            # Drain: the TM queue and the egress backlog empty at 5 Mbit/s.
            end = time.monotonic() + 10
            while time.monotonic() < end:
                st = c.get_stats(OUT)
                if st["totals"]["buffered_pkts"] == 0 and st.get("egress", {}).get("backlog_pkts", 0) == 0:
                    break
                time.sleep(0.1)
            time.sleep(0.3)
            records = rx.stop()
            st = c.get_stats(OUT)
            q = queue_stats(c)[Q_LEGACY]
        sent = n["sent"]
        dropped = q["dropped_pkts"]["queue_full"]
        print(f"sent {sent}, TM enqueued {q['enqueued_pkts']} dequeued {q['dequeued_pkts']} "
              f"queue_full {dropped}, egress {st.get('egress')}, RSS {rss0:.0f} -> peak {peak_rss:.0f} MB, "
              f"received {len(records)}")
        # The excess is dropped, and counted, by the TM's admission.  The link
        # carries about 5/24 of the offer, so most of it is dropped.
        # (A few percent may be lost in the host's receive path on a loaded machine.)
        assert q["enqueued_pkts"] + dropped >= 0.95 * sent, "frames lost before the TM"
        assert dropped >= 0.5 * sent, f"only {dropped} of {sent} frames dropped by the TM"
        # The departures waiting for egress stay within the bound; memory stays flat.
        assert st["egress"]["limit_pkts"] == LIMIT
        assert st["egress"]["max_backlog_pkts"] <= LIMIT
        assert peak_backlog <= LIMIT
        assert st["egress"]["holds"] > 0, "the bound never held the TM back: egress not slowed?"
        assert peak_rss - rss0 < 40, f"RSS grew {peak_rss - rss0:.0f} MB"
        # Nothing the TM let out is lost, and nothing is stuck: all drained and received.
        assert st["totals"]["buffered_pkts"] == 0 and st["egress"]["backlog_pkts"] == 0
        assert sum(1 for r in records if r[1] == LEGACY and r[3] >= 1000) == q["dequeued_pkts"]
    finally:
        stop_switch(proc)

"""FlashPass through a FlashPass switch, short (issue #13): root, Mininet, flexpass_switch,
P4 build, agent.

Runs mininet-topos/experiments/flashpass-quick.toml with `flexpass emulate` (2 flows of 10 MB
model size, 1 MB on Mininet, into one receiver through flexpass_switch with the FlashPass
profile; the same flows with the agent's window transport for contrast; about 10 s each)
and checks FlashPass §III-B's claim on real packets:

* every flow byte-exact (each flow's SHA-256 at both ends), both transports;
* FlashPass's data arrives at the rate and spacing its emulation got through: the
  bottleneck's data queue stays near empty (mean below one full frame, a small fraction
  of the window transport's) and the switch drops almost no data packet (the window
  transport, loss-driven, overflows the shallow buffer);
* the emulation ran: emulation packets sent and granted, the switch's emulation queue
  used (its packets dequeued) and never deeper than its 8 packets.

Skipped with the reason when something is missing (like test_mininet_e2e.py).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import env  # noqa: E402
from flexpass_mininet.scaling import FRAME  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)


def test_flashpass_data_meets_a_near_empty_queue_without_loss(tmp_path):
    experiment = env.REPO / "mininet-topos" / "experiments" / "flashpass-quick.toml"
    r = subprocess.run([str(env.FLEXPASS_BIN), "emulate", str(experiment), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    runs = {}
    for p in tmp_path.glob("*/result.json"):
        x = json.loads(p.read_text())
        (t,) = {f["transport"] for f in x["flows"]}
        runs[t] = x
    f, w = runs["flashpass"], runs["dctcp"]
    for x in (f, w):
        o = x["fct"]["overall"]
        assert (o["completed"], o["incomplete"]) == (o["flows"], 0), x["flows"]
    fd, wd = f["queue_summary"]["q1"], w["queue_summary"]["q1"]
    assert fd[0] < FRAME, f["queue_summary"]
    assert fd[0] < 0.25 * wd[0], (f["queue_summary"], w["queue_summary"])
    f_drops, w_drops = f["data_drops_full"] + f["data_drops_red"], w["data_drops_full"] + w["data_drops_red"]
    assert f_drops <= 2 and f_drops < w_drops, (f["bottleneck"], w["bottleneck"])
    em, eq = f["emulation"], f["credit_queues"]
    assert em["emulation_sent"] > 0 and em["grants_received"] > 0.8 * em["emulation_sent"], em
    assert eq["dequeued_pkts"] > 0 and eq["max_depth_pkts"] <= 8, eq
    point = next(p.parent for p in tmp_path.glob("*/result.json") if "flashpass" in p.parent.name)
    assert (point / "queue.png").stat().st_size > 10_000 and (point / "queue.csv").is_file()

"""Mininet + flexpass_switch end to end (root, Mininet, BMv2 target, P4 build, agent).

Short versions of the runners with the acceptance properties of issue #5
(honest tolerances for 6-second runs on a shared 2-core machine):
FlexPass and DCTCP share the bottleneck and DCTCP does not starve; a naive
ExpressPass deployment starves DCTCP; Q1 stays below the red threshold plus a
credit-bounded amount of green data; FlexPass incast has no timeouts; on a
leaf-spine, each flow's credits and data cross the same spine.

Skipped with the reason when something is missing (`SKIP` is read by the Makefile).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import env  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)

if not SKIP:
    from flexpass_mininet import experiments as ex  # noqa: E402
    from flexpass_mininet.scaling import FRAME  # noqa: E402


@pytest.fixture
def opts(tmp_path):
    return ex.Options(switch="flexpass_switch", duration_s=6.0, warmup_s=2.0, out=tmp_path)


def _by_transport(result):
    return {k.split()[0]: v for k, v in result["flows"].items()}


def test_flexpass_and_dctcp_share_the_link_without_starvation(opts):
    r = ex.long_flows(opts, "fig9b", *ex.FIG9["fig9b"])
    f = _by_transport(r)
    assert set(f) == {"flexpass", "dctcp"}, r
    for t in ("flexpass", "dctcp"):
        assert 0.35 <= f[t]["share_of_link"] <= 0.65, (t, r)
    assert f["dctcp"]["starvation_fraction"] < 0.1, r
    # Fig. 7c: the reactive sub-flow hardly gets anything next to a legacy flow.
    assert f["flexpass"]["reactive_share"] < 0.2, r
    assert r["total_share"] > 0.8, r
    # Selective dropping (FlexPass §4.1): a red packet is admitted only below the red
    # threshold, so the red bytes queued never exceed it by more than one frame (checked at
    # every 100 ms sample), and red packets were dropped. Green (proactive) data above it
    # is bounded by the credits that can arrive bunched: in the median 100 ms interval after
    # warm-up Q1 peaks below red + 8 frames (the credit queue's 8). Not asserted for every
    # interval: when this 2-core machine slows the software switch below its nominal link
    # rate, green data queues for seconds (measured up to red + 14 frames).
    q1, red = r["queues"]["flexpass"], r["thresholds"]["red_threshold"]
    assert 0 < q1["max_red_bytes_sampled"] <= red + FRAME, r
    assert q1["drops_after_warmup"]["red"] > 0, r
    assert red < q1["p50_interval_max_depth_bytes"] <= red + 8 * FRAME, r


def test_naive_expresspass_starves_dctcp(opts):
    r = ex.long_flows(opts, "fig9a", *ex.FIG9["fig9a"])
    f = _by_transport(r)
    assert f["dctcp"]["share_of_link"] < 0.3, r
    assert f["expresspass"]["share_of_link"] > 0.5, r


def test_flexpass_incast_has_no_timeouts(opts):
    r = ex.fig8(opts, flow_counts=(16,), transports=("flexpass",), repeats=1)
    runs = r["results"]["flexpass"]["runs"]
    assert all(x["ok"] for x in runs), r
    assert r["results"]["flexpass"]["agent_timeouts_total"] == 0, r


def test_leaf_spine_credits_and_data_cross_the_same_spine(opts):
    r = ex.leafspine(opts, pairs=4, flow_bytes=150_000)
    assert all(x["ok"] for x in r["flows"]), r
    assert r["symmetric_flows"] == len(r["flows"]), r
    # The flows' 5-tuples are fixed (bind ports 20000+i), so the spread is deterministic:
    # ECMP does use both spines, and symmetry is not just everything on one path.
    assert r["spines_used"] == ["spine1", "spine2"], r

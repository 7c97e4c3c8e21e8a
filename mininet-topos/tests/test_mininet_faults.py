"""Network faults in Mininet (issue #14): root, Mininet, flexpass_switch, P4 build, agent.

experiments/faults-quick.toml on the leaf-spine: six long flows (FlexPass,
ExpressPass, DCTCP; one of each pinned to each spine) while the leaf1-spine1 link
goes down and up (Mininet + flexpass-ctl link-down/up, applied by the resident
controller flexpass-ctl run), leaf2's switch process is killed and restarted
(reconciled by the controller, then `flexpass-ctl apply` must write nothing), and
the controller is killed and restarted.  Asserted:

* every flow completes and is byte-exact (sizes and SHA-256 at both ends);
* the ECMP groups read back from the switches after every change are symmetric
  (both directions of every leaf pair over the same spines, same order), a link
  change is a handful of writes (group MODIFYs, withdrawn routes), and `apply`
  on every switch at the end writes nothing;
* recovery: at every fault, each flow's longest throughput gap is at most the
  control plane's repair time (groups rewritten on every switch, the restarted
  leaf reconciled) plus the file's recovery_bound_s (its comment justifies the
  bound); flows on the other spine stay within the bound alone;
* the controller restart: mastership back with the same election id, 0 writes,
  no entry lost, no throughput gap beyond one sample interval.

Skipped with the reason when something is missing (like test_mininet_e2e.py).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import env  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)


def _events(r, name):
    return [e for e in r["timeline"] if e["event"] == name]


def test_spine_link_leaf_and_controller_failures_lose_nothing(tmp_path):
    from flexpass_mininet import faults as fl

    exp = fl.load_experiment("faults-quick")
    r = fl.run(exp, tmp_path)
    print(fl.summary(r))
    s, bound = r["summary"], exp.recovery_bound_s
    # Byte-exact, all complete.
    assert s["complete"] == s["flows"] == len(exp.flows), r["flows"]
    assert s["byte_exact"] == s["flows"] and s["lost_bytes"] == 0 and s["corrupted_bytes"] == 0, r["flows"]
    # Link down / up: a few writes, symmetric groups read back, the controller was quick.
    (down,), (up,) = _events(r, "link down"), _events(r, "link up")
    for ev in (down, up):
        assert ev["asymmetric"] == [], ev
        assert sum(ev["writes"].values()) == 4, ev  # a group MODIFY per leaf + spine1's 2 routes
    assert all(p == ["spine2"] for p in (down["paths"]["leaf1"]["h3"], down["paths"]["leaf2"]["h1"]))
    assert up["paths"]["leaf1"]["h3"] == up["paths"]["leaf2"]["h1"] == ["spine1", "spine2"]
    assert up["frames_dropped_on_link"] > 0, up  # the failed link did carry flows (pinned there)
    # Every flow was running at the failure.  Recovery: no flow stalled longer than the
    # control plane's repair (groups rewritten on every switch; the restarted leaf
    # reconciled) plus the file's recovery_bound_s (its comment justifies it), at every
    # fault; the flows the link failure does not touch (spine2) within the bound alone.
    for f in r["flows"]:
        assert down["recovery"][f["flow"]]["active"], (f["flow"], down)
        if f["spine"] == "spine2":
            assert down["recovery"][f["flow"]]["gap_s"] <= bound, (f["flow"], down["recovery"])
    assert s["beyond_bound"] == [], s["beyond_bound"]
    # Leaf2 killed: reconciled (pipeline + entries + TM), apply afterwards writes nothing.
    (rs,) = [e for e in r["timeline"] if "killed and restarted" in e["event"] and "leaf2" in e["event"]]
    assert rs["pipeline_pushed"] and rs["reconcile_writes"] > 0 and rs["queues"], rs
    assert rs["apply_again_writes"] == 0 and not rs["apply_again_pipeline_pushed"], rs
    # Controller killed and restarted: same election id, nothing written, nothing lost, and
    # no flow stalled anywhere near the controller's absence (seconds).
    (cr,) = _events(r, "controller killed and restarted")
    assert cr["election_ids"] == [1] and not cr["took_over"], cr
    assert cr["writes"] == 0 and not cr["pipeline_pushed"] and cr["entries_lost"] == {}, cr
    assert not cr["entries_changed_while_down"], cr
    assert cr["max_gap_s"] is None or cr["max_gap_s"] <= bound < cr["absent_s"], cr
    # The end: groups symmetric, apply on every switch writes nothing.
    assert r["checks"]["final_asymmetric"] == [] and s["final_apply_writes"] == 0, r["checks"]
    assert (tmp_path / f"{exp.name}-{exp.switch}" / "timeline.png").is_file()


def test_controller_detects_a_cut_spine_link_with_probes(tmp_path):
    """faults-detect-quick.toml: leaf1-spine1 drops every frame (tc) and nobody tells the
    control plane; flexpass-ctl run --detect probe finds it (its probes cross the same
    qdisc as the traffic), rewrites the groups on every switch as link-down would, finds
    the repair too, and the flows lose nothing."""
    from flexpass_mininet import faults as fl

    exp = fl.load_experiment("faults-detect-quick")
    assert exp.detect == "probe"
    r = fl.run(exp, tmp_path)
    print(fl.summary(r))
    s = r["summary"]
    assert s["complete"] == s["flows"] == len(exp.flows) and s["byte_exact"] == s["flows"], r["flows"]
    assert s["lost_bytes"] == 0 and s["corrupted_bytes"] == 0
    (down,), (up,) = _events(r, "link down"), _events(r, "link up")
    for ev in (down, up):
        assert ev["detect"] == "probe" and ev["detected_s"] is not None, ev
        assert ev["asymmetric"] == [] and sum(ev["writes"].values()) == 4, ev
    # Detected within the probes' dead time plus scheduling on the shared machine; the
    # repair after up_ms of probes.  Nothing but the probes recorded it (no CLI ran).
    assert down["probe_silent_ms"] >= exp.probe_dead_ms and down["detected_s"] < 1.0, down
    assert exp.probe_up_ms / 1e3 <= up["detected_s"] < 2.0, up
    assert down["paths"]["leaf1"]["h3"] == down["paths"]["leaf2"]["h1"] == ["spine2"]
    assert up["paths"]["leaf1"]["h3"] == ["spine1", "spine2"]
    assert s["beyond_bound"] == [], s["beyond_bound"]
    assert r["checks"]["final_asymmetric"] == [] and s["final_apply_writes"] == 0

"""`flexpass emulate`: built-in model experiments, unchanged, on Mininet + flexpass_switch
(root, Mininet, BMv2 target, P4 build, agent), then `flexpass compare` against the model.

The dumbbell (flexpass-vs-dctcp: FlexPass and DCTCP share the bottleneck, neither starves),
the incast (8 FlexPass responses of 64 kB: all delivered byte-exact, no timeouts) and the
leaf-spine (link-failure: a spine link fails under 8 flows, all complete byte-exact).
Skipped with the reason when something is missing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import env  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)

BIN = str(env.FLEXPASS_BIN)


def emulate(out, *args):
    r = subprocess.run([BIN, "emulate", *args, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((out / "result.json").read_text())


def test_the_dumbbell_experiment_runs_unchanged_and_compares_with_the_model(tmp_path):
    r = emulate(tmp_path / "emu", "flexpass-vs-dctcp")
    assert r["backend"] == "mininet" and r["time_scale"] > 1
    share = {f["transport"]: f for f in r["flows"]}
    assert set(share) == {"flexpass", "dctcp"}, r["flows"]
    # FlexPass Fig. 9b: the two share the bottleneck (w_q = 0.5), neither starves.
    for t in ("flexpass", "dctcp"):
        assert 0.3 <= share[t]["share"] <= 0.7, (t, r["flows"])
    assert share["flexpass"]["share"] + share["dctcp"]["share"] > 0.8, r["flows"]
    subprocess.run([BIN, "sim", "flexpass-vs-dctcp", "--out", str(tmp_path / "model")], check=True,
                   capture_output=True)
    c = subprocess.run([BIN, "compare", str(tmp_path / "model"), str(tmp_path / "emu")], capture_output=True,
                       text=True)
    assert c.returncode == 0, c.stderr
    assert "flow 1 listed flexpass h1->h0 long-lived share" in c.stdout, c.stdout
    assert (tmp_path / "emu" / "compare.png").stat().st_size > 0


def test_the_incast_experiment_delivers_every_response_without_timeouts(tmp_path):
    r = emulate(tmp_path / "emu", "incast", "--no-sweep", "--set", "incast.0.flows=8")
    o = r["fct"]["overall"]
    assert (o["flows"], o["completed"], o["incomplete"]) == (8, 8, 0), r["flows"]
    assert r["timeouts"] == 0
    assert all(f["delivered_bytes"] == 64_000 for f in r["flows"])


def test_the_leaf_spine_experiment_survives_its_link_failure(tmp_path):
    r = emulate(tmp_path / "emu", "link-failure")
    o = r["fct"]["overall"]
    # Eight flows across both spines; leaf0->spine0 fails under them and the groups are
    # rewritten: every flow still completes, byte-exact.
    assert (o["flows"], o["completed"], o["incomplete"]) == (8, 8, 0), r["flows"]
    # The control plane dropped the link from every leaf's group, read back symmetric.
    (fault,) = r["faults"]
    assert fault["event"] == "link leaf0->spine0 down", fault
    cp = fault["control_plane"]
    assert cp["asymmetric"] == [] and cp["paths"]["leaf0"]["h4"] == ["spine1"], cp
    assert len(fault["recovery"]) == 8 and fault["max_gap_us"] is not None, fault

"""The fidelity study's runner (host-agent/fidelity/fidelity.py): its parsers, its table of
the compat preset against the binary, and the model side of the small matched cases against
the recorded ns-2 reference (the artifact-compatible mode within 25 % of ns-2). The ns-2 side
runs where the artifact's ns binary is given (NS2=path/to/ns) and is skipped loudly where not."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import fidelity  # noqa: E402

needs_binary = pytest.mark.skipif(
    not fidelity.FLEXPASS.exists(), reason=f"{fidelity.FLEXPASS} not built (make build)"
)


def test_percentile_is_numpys_linear_interpolation():
    assert fidelity.percentile([1, 2, 3, 4], 0.5) == 2.5
    assert fidelity.percentile([5], 0.99) == 5
    assert math.isnan(fidelity.percentile([], 0.5))
    assert fidelity.percentile(list(range(101)), 0.99) == pytest.approx(99.0)


def test_ns2_fct_files_keep_the_first_line_and_skip_what_does_not_parse(tmp_path):
    f = tmp_path / "fct_1.out"
    f.write_text(
        "Flow ID,Flow Size (bytes),Flow Completion Time (secs)\n"
        "10,1000000,0.0155094408,tcp,0,0,0,0\n"
        "garbage line\n"
        "10,1000000,0.0168374672,tcp,0,0,0,0\n"
        "4,1000000,0.0136183288,flexpass,4374,335801,667119,2920,1,94820232889053\n"
        "7,12,\n"
    )
    got = fidelity.read_ns2_fct(f)
    assert sorted(got) == [4, 10]
    assert got[10]["fct_us"] == pytest.approx(15509.4408)
    assert got[4]["type"] == "flexpass" and got[4]["cols"][5] == "335801"


def test_metrics_bucket_flows_as_the_artifacts_figures():
    flows = [
        {"size": 9000, "fct_us": 100.0, "timeouts": 0},
        {"size": 99_999, "fct_us": 300.0, "timeouts": 1},
        {"size": 100_000, "fct_us": 1000.0, "timeouts": 0},
        {"size": 20_000_000, "fct_us": 50_000.0, "timeouts": 0},
        {"size": 30_000_000, "fct_us": None, "timeouts": 2},
    ]
    m = fidelity.fct_metrics(flows)
    assert m["small_avg_us"] == 200.0
    assert m["all_avg_us"] == pytest.approx((100 + 300 + 1000 + 50_000) / 4)
    assert m["large_avg_us"] == 50_000.0
    assert m["incomplete"] == 1 and m["timeouts"] == 3
    assert fidelity.uplink_max_share({"tor0": [3.0, 1.0], "tor1": [5.0, 0.0]}) == pytest.approx(0.875)


@needs_binary
def test_the_preset_table_is_what_the_binary_applies(tmp_path):
    """Every key of fidelity.PRESET is the model's default without compat, something else
    with it, and back at the default when set explicitly beside compat."""

    def params(*sets):
        cmd = [str(fidelity.FLEXPASS), "sim", str(fidelity.EXPERIMENTS / "ns2-single-flow.toml"), "--no-sweep",
               "--set", "flow=[{ src = 0, dst = 191, bytes = 1000, start_us = 0 }]", "--json"]
        for s in sets:
            cmd += ["--set", s]
        return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["params"]

    def get(p, key):
        table, name = key.split(".")
        return p[table][name]

    plain = params()
    compat = params(f'compat="{fidelity.COMPAT}"')
    for p in fidelity.PRESET:
        default = p["default"]
        assert get(plain, p["key"]) in (default, None), p["key"]
        assert get(compat, p["key"]) not in (default, None), p["key"]
        back = params(f'compat="{fidelity.COMPAT}"', f"{p['key']}={fidelity.toml_value(default)}")
        assert get(back, p["key"]) == default, p["key"]


# The differences over 25 % that docs/fidelity.md ("Remaining differences") explains, with
# the band each must stay in; anything else over 25 % fails the test below.
KNOWN_GAPS = {
    # The artifact's FlexPass agent recovers a 32-flow incast more slowly (its rc3 recovery
    # and the compounding credit cut; the ns-2 toggle runs bring it to 0.8x).
    ("incast", "FlexPass 100 %", "max_fct_us_32"): (0.5, 1.0),
    # ns-2 counts every firing of the FlexPass agent's reactive retransmission timer,
    # including those after the flow completed; the model counts RTOs that retransmit.
    ("incast", "FlexPass 100 %", "timeouts_8"): "not comparable",
    ("incast", "FlexPass 100 %", "timeouts_16"): "not comparable",
    ("incast", "FlexPass 100 %", "timeouts_32"): "not comparable",
    ("incast", "FlexPass 100 %", "timeouts_64"): "not comparable",
}


@needs_binary
def test_the_small_cases_match_the_recorded_ns2_in_compat_mode(tmp_path):
    """Single flows, incast and the dumbbell on the model against the reference: in the
    artifact-compatible mode every FCT within 25 % of ns-2 and the dumbbell's shares within
    3 points (#24's acceptance), and the default mode's differences where docs/fidelity.md
    says they are (small flows' handshake, the FlexPass credit rate)."""
    ref = json.loads(fidelity.REFERENCE.read_text())
    args = type("A", (), {})()
    args.out = str(tmp_path)
    args.cases = ["single-flow", "incast", "dumbbell"]
    args.ns2 = None
    args.ns2_tree = None
    args.jobs = os.cpu_count() or 1
    args.no_toggles = True
    args.update_reference = False
    args.write_docs = False
    fidelity.run_study(args)
    rows = list(fidelity.table_rows(json.loads((tmp_path / "fidelity.json").read_text())))
    assert rows, "no rows"
    checked = 0
    for r in rows:
        assert r["ns2"] is not None, f"{r['case']} {r['point']} {r['metric']}: no recorded ns-2 value"
        gap = KNOWN_GAPS.get((r["case"], r["point"], r["metric"]))
        if gap == "not comparable":
            continue
        if gap:
            # A documented difference: it stays within the band docs/fidelity.md gives it.
            assert gap[0] <= r["compat_vs_ns2"] <= gap[1], r
        elif r["metric"].startswith(("timeouts", "incomplete")):
            assert r["compat"] == r["ns2"], r
        elif r["metric"] == "share_new":
            assert abs(r["compat"] - r["ns2"]) <= 0.03, r
            checked += 1
        elif "_us" in r["metric"]:  # fct_us_SIZE, max_fct_us_N, *_avg_fct_us
            assert 0.75 <= r["compat_vs_ns2"] <= 1.25, r
            checked += 1
    assert checked >= 30
    # The default mode differs where the study says: a 1 kB DCTCP flow is 1.5 RTT faster
    # without the handshake and the ACK in its FCT.
    one = [r for r in rows if r["case"] == "single-flow" and r["point"] == "DCTCP" and r["metric"] == "fct_us_1000"][0]
    assert one["model_vs_ns2"] < 0.5
    assert ref["cases"]["single-flow"], "the reference holds the single-flow case"


@pytest.mark.skipif(not os.environ.get("NS2"), reason="NS2 not set: the ns-2 side needs the artifact's ns binary, built by hand (docs/fidelity.md)")
@needs_binary
def test_ns2_reproduces_its_reference_for_single_flows(tmp_path):
    """ns-2 is deterministic for a given binary and flow list: the single-flow case on the
    given ns matches the recorded reference."""
    ref = json.loads(fidelity.REFERENCE.read_text())["cases"]["single-flow"]
    args = type("A", (), {})()
    args.out = str(tmp_path)
    args.cases = ["single-flow"]
    args.ns2 = os.path.abspath(os.environ["NS2"])
    args.ns2_tree = os.environ.get("NS2_TREE", os.path.dirname(args.ns2))
    args.jobs = os.cpu_count() or 1
    args.no_toggles = True
    args.update_reference = False
    args.write_docs = False
    fidelity.run_study(args)
    got = json.loads((tmp_path / "fidelity.json").read_text())["cases"]["single-flow"]
    for name, pt in got.items():
        for k, v in pt["runs"]["ns2"].items():
            assert v == pytest.approx(ref[name][k], rel=1e-6), (name, k)

"""`flexpass emulate`: the model's experiment files planned for Mininet (no root): one
reader (the model's `sim --resolve`), the Mininet scaling rule, keys this backend cannot
honour refused by name, and the report built from the agents' records in the model's
shape (byte-exact check included). The runs themselves are in test_mininet_emulate.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import emulate as em  # noqa: E402
from flexpass_mininet import env  # noqa: E402
from flexpass_mininet.expfile import ExperimentError  # noqa: E402
from flexpass_mininet.scaling import FRAME  # noqa: E402

pytestmark = pytest.mark.skipif(not env.FLEXPASS_BIN.is_file(), reason=f"{env.FLEXPASS_BIN} not built (make build)")


def plans(name, *sets, no_sweep=False):
    r = em.resolve(name, list(sets), no_sweep)
    return [em.make_plan(r, p, 20.0, 1000.0) for p in r["points"]]


def test_the_dumbbell_runs_as_the_model_reads_it():
    (p,) = plans("flexpass-vs-dctcp")
    assert sorted(p.fabric.hosts) == ["h0", "h1", "h2"] and list(p.fabric.switches) == ["s0"]
    assert [(f.transport, f.src, f.dst, f.bytes) for f in p.flows] == [("flexpass", "h1", "h0", None),
                                                                        ("dctcp", "h2", "h0", None)]
    # Model RTT 4 x 5 us; 1 ms emulated: every time x 50, thresholds x BDP ratio (floors).
    assert p.model_rtt_us == 20.0 and p.time_scale == pytest.approx(50.0)
    assert p.duration_s == pytest.approx(0.030 * 50) and p.warmup_s == pytest.approx(0.002 * 50)
    assert p.scaled.bdp_ratio == pytest.approx(20e6 * 1e-3 / (10e9 * 20e-6))
    assert p.scaled.ecn_threshold == max(int(60_000 * p.scaled.bdp_ratio), 4 * FRAME)
    assert p.scaled.buffer == int(600_000 * p.scaled.bdp_ratio)
    assert "time x 50" in p.describe()


def test_a_sweep_is_one_plan_per_point_named_as_the_models_run_folders(tmp_path):
    ps = plans("incast")
    # The model's own sweep folders (flexpass sweep --print-commands: one --out per run).
    cmds = subprocess.run([str(env.FLEXPASS_BIN), "sweep", "incast", "--out", str(tmp_path), "--print-commands"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    folders = {c.split("--out ")[1].split()[0].strip("'").rsplit("/", 1)[1] for c in cmds if "--out " in c}
    assert len(ps) == 15 and {p.point for p in ps} == folders
    naive = next(p for p in ps if p.point == "incast.0.transport=expresspass,switch.profile=naive,incast.0.flows=8")
    assert naive.profile == "naive" and len(naive.flows) == 8
    # Incast responses keep their size (the burst, in packets per RTT), spread round-robin.
    assert {f.bytes for f in naive.flows} == {64_000}
    assert [f.src for f in naive.flows] == [f"h{i}" for i in range(1, 9)]


def test_the_leaf_spine_with_its_fault_is_scaled():
    (p,) = plans("link-failure")
    assert sorted(p.fabric.switches) == ["leaf0", "leaf1", "spine0", "spine1"]
    assert len(p.fabric.hosts) == 8 and p.model_rtt_us == 40.0
    f = p.flows[0]
    # A listed flow's size sets its duration: x BDP ratio.
    assert f.model_bytes == 10_000_000 and f.bytes == int(10_000_000 * p.scaled.bdp_ratio)
    (fault,) = p.faults
    assert fault.link == "leaf0->spine0" and not fault.up
    assert fault.at_s == pytest.approx(0.005 * p.time_scale)
    assert fault.reroute_after_s == pytest.approx(0.001 * p.time_scale)


def test_a_small_flow_is_never_scaled_below_sixteen_frames_or_grown():
    (p,) = plans("flexpass-vs-dctcp", "flow.0.bytes=100000", "flow.1.bytes=1000")
    assert p.flows[0].bytes == max(int(100_000 * p.scaled.bdp_ratio), 16 * FRAME)
    assert p.flows[1].bytes == 1000


def test_a_bottleneck_link_runs_at_its_scaled_rate(tmp_path):
    f = tmp_path / "db.toml"
    f.write_text('duration_ms = 10\n[topology]\nkind = "dumbbell"\nleft = 2\nright = 2\nbottleneck_gbps = 5\n'
                 '[[flow]]\nsrc = "h0"\ndst = "h3"\ntransport = "flexpass"\n'
                 '[[flow]]\nsrc = "h1"\ndst = "h2"\ntransport = "dctcp"\n')
    (p,) = plans(str(f))
    assert sorted(p.fabric.switches) == ["s0", "s1"]
    assert p.port_rates[("s0", "s1")] == pytest.approx(0.5 * 20e6)
    assert p.fabric.host_port("h0")[0] == "s0" and p.fabric.host_port("h3")[0] == "s1"


@pytest.mark.parametrize("sets, named", [
    (['compat="ns2-flexpass"'], "compat"),
    (["host.tcp_handshake=true"], "host.tcp_handshake"),
    (["host.alpha=0.5"], "host.alpha"),
    (["switch.k_q1_kb=30"], "switch.k_q1_kb"),
    (['topology.routing="single-path"'], "topology.routing"),
    (["deployment.fraction=0.5"], "deployment.fraction"),
])
def test_keys_this_backend_cannot_honour_are_refused_by_name(sets, named):
    with pytest.raises(ExperimentError) as e:
        plans("flexpass-vs-dctcp", *sets)
    assert named in str(e.value) and "mininet" in str(e.value)


def test_a_topology_mininet_cannot_build_is_refused_by_name():
    with pytest.raises(ExperimentError, match=r"topology.kind = 'clos3': not supported on mininet"):
        plans("clos-websearch")



def test_a_section_this_backend_lacks_is_named_once(tmp_path):
    f = tmp_path / "wl.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 4\n[workload]\ncdf = "search"\nload = 0.5\nflows = 100\n')
    with pytest.raises(ExperimentError) as e:
        plans(str(f))
    assert str(e.value).count("[workload]: not supported on mininet") == 1, e.value


def test_a_bad_file_is_the_models_error():
    with pytest.raises(ExperimentError, match="nosuchkey"):
        plans("flexpass-vs-dctcp", "switch.nosuchkey=1")


def test_the_cli_dry_run_prints_the_plan_without_root():
    r = subprocess.run([sys.executable, "-m", "flexpass_mininet", "emulate", "link-failure", "--dry-run"],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fault: leaf0->spine0 down" in r.stdout and "time x 25" in r.stdout
    r = subprocess.run([sys.executable, "-m", "flexpass_mininet", "emulate", "clos-websearch", "--dry-run"],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert r.returncode == 1 and "not supported on mininet" in r.stdout


def _lines(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_report_has_the_models_shape_and_checks_bytes(tmp_path):
    (p,) = plans("flexpass-vs-dctcp", "flow.0.bytes=200000", "flow.1.bytes=300000")
    b0, b1 = p.flows[0].bytes, p.flows[1].bytes
    _lines(tmp_path / "flow1-send.jsonl", {"event": "flow_sent", "bytes": b0, "sha256": "aa", "fct_us": 9000.0,
                                           "timeouts": 0, "retransmissions": 2})
    _lines(tmp_path / "flow2-send.jsonl", {"event": "flow_sent", "bytes": b1, "sha256": "bb", "fct_us": 12000.0,
                                           "timeouts": 1, "retransmissions": 5})
    # The receiver got flow 1 intact and flow 2 with other bytes.
    _lines(tmp_path / "h0-serve.jsonl", {"event": "flow_received", "bytes": b0, "sha256": "aa"},
           {"event": "flow_received", "bytes": b1, "sha256": "XX"})
    r = em.report(p, "flexpass_switch", tmp_path, {1: 0.0, 2: 0.0}, [], [], 1.0)
    assert r["backend"] == "mininet" and r["time_scale"] == pytest.approx(50.0)
    f1, f2 = r["flows"]
    assert f1["fct_us"] == 9000.0 and f1["error"] is None
    assert f2["fct_us"] is None and "SHA-256" in f2["error"]
    o = r["fct"]["overall"]
    assert (o["flows"], o["completed"], o["incomplete"]) == (2, 1, 1)
    assert o["all"]["max_us"] == 9000.0 and r["timeouts"] == 1
    assert r["fct"]["legacy"]["incomplete"] == 1 and r["fct"]["new"]["completed"] == 1
    head = (tmp_path / "flows.csv").read_text().splitlines()[0]
    assert head.startswith("id,kind,transport,src,dst,size_bytes,start_us,fct_us")
    assert json.loads((tmp_path / "result.json").read_text())["flows"][0]["id"] == 1


def test_incast_responses_are_matched_to_their_servers(tmp_path):
    (p,) = plans("incast", "incast.0.flows=4", "incast.0.senders=[1, 2]", no_sweep=True)
    _lines(tmp_path / "incast1.jsonl",
           *[{"event": "response", "from": f"10.0.0.{ip}:7890", "size": 64000, "fct_us": t}
             for ip, t in ((2, 100.0), (3, 150.0), (2, 200.0))])
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], [], 1.0)
    got = {f["id"]: (f["src"], f["fct_us"]) for f in r["flows"]}
    # h1 is 10.0.0.2 (hosts are numbered from 1 in the fabric), h2 10.0.0.3; one response missing.
    assert got == {1: (1, 100.0), 2: (2, 150.0), 3: (1, 200.0), 4: (2, None)}
    assert r["fct"]["overall"]["incomplete"] == 1


def test_long_lived_flows_are_measured_by_their_share(tmp_path):
    (p,) = plans("flexpass-vs-dctcp")
    # Receiver samples: 10 ms apart, h1's FlexPass flow at 40 % of C' (30 proactive + 10
    # reactive), h2's DCTCP flow at 50 %; before the warm-up ends at twice that.
    c, dt = p.scaled.link_rate_bps, p.sample_ms / 1e3
    per = lambda share: int(share * c * dt / 8)  # noqa: E731
    samples = []
    for k in range(1, 40):
        early = k * dt < p.warmup_s
        samples.append({"event": "sample", "t_ms": k * p.sample_ms, "flows": [
            {"peer": "10.0.0.2:40000", "transport": "flexpass",
             "proactive_bytes": per(0.6 if early else 0.3), "reactive_bytes": per(0.1)},
            {"peer": "10.0.0.3:40001", "transport": "dctcp", "proactive_bytes": 0, "reactive_bytes": per(0.5)}]})
    _lines(tmp_path / "h0-serve.jsonl", *samples)
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], [], 1.0)
    f1, f2 = r["flows"]
    assert f1["share"] == pytest.approx(0.4, abs=0.01) and f1["proactive_share"] == pytest.approx(0.3, abs=0.01)
    assert f2["share"] == pytest.approx(0.5, abs=0.01) and f2["reactive_share"] == pytest.approx(0.5, abs=0.01)
    assert f1["error"] is None and f1["fct_us"] is None and r["fct"]["overall"]["flows"] == 0


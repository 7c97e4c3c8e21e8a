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
from flexpass_mininet import pase as pase_mod  # noqa: E402
from flexpass_mininet.env import ExperimentError  # noqa: E402
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
    assert p.scaled.ecn_threshold == max(round(60_000 * p.scaled.bdp_ratio), 4 * FRAME)
    assert p.scaled.buffer == round(600_000 * p.scaled.bdp_ratio)
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
    assert f.model_bytes == 10_000_000 and f.bytes == round(10_000_000 * p.scaled.bdp_ratio)
    (fault,) = p.faults
    assert fault.link == "leaf0->spine0" and not fault.up
    assert fault.at_s == pytest.approx(0.005 * p.time_scale)
    assert fault.reroute_after_s == pytest.approx(0.001 * p.time_scale)


def test_a_small_flow_is_never_scaled_below_sixteen_frames_or_grown():
    (p,) = plans("flexpass-vs-dctcp", "flow.0.bytes=100000", "flow.1.bytes=1000")
    assert p.flows[0].bytes == max(round(100_000 * p.scaled.bdp_ratio), 16 * FRAME)
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
    f = tmp_path / "imp.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 4\n[[flow]]\nsrc = 1\ndst = 0\n'
                 '[impairment]\nloss = 0.01\nduplicate = 0.01\n')
    with pytest.raises(ExperimentError) as e:
        plans(str(f))
    assert str(e.value).count("[impairment]: not supported on mininet") == 1, e.value


def test_a_workload_runs_the_flows_the_model_draws_scaled(tmp_path):
    """[workload]: the model draws the flows (`sim --resolve` lists them); the emulation runs
    the same pairs, sizes and arrivals, bytes × BDP'/BDP and times × RTT'/RTT (the offered
    load kept), each flow one `flexpass send`."""
    f = tmp_path / "wl.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 4\nlink_gbps = 10\nlink_delay_us = 5\n'
                 '[workload]\ncdf = "search"\nload = 0.5\nflows = 40\nload_on = "hosts"\n')
    drawn = em.resolve(str(f), [])["points"][0]["workload_flows"]
    (p,) = plans(str(f))
    assert len(p.flows) == len(drawn) == 40 and {x.kind for x in p.flows} == {"background"}
    for x, d in zip(p.flows, drawn):
        assert (x.src, x.dst, x.model_bytes, x.transport) == (f"h{d['src']}", f"h{d['dst']}", d["bytes"], "flexpass")
        assert x.bytes == min(d["bytes"], max(round(d["bytes"] * p.scaled.bdp_ratio), 16 * FRAME))
        assert x.start_s == pytest.approx(d["start_us"] / 1e6 * p.time_scale)
    # The agents' records: `flexpass workload --trace` lines by trace_id, checked byte-exact.
    f0, f1 = p.flows[0], p.flows[1]
    _lines(tmp_path / f"workload-{f0.src}-flexpass.jsonl",
           {"event": "flow", "trace_id": f0.id, "size": f0.bytes, "sha256": "aa", "fct_us": 1500.0, "error": None},
           {"event": "summary"})
    _lines(tmp_path / f"workload-{f1.src}-flexpass.jsonl",
           {"event": "flow", "trace_id": f1.id, "size": f1.bytes, "sha256": "bb", "fct_us": 900.0, "error": None})
    _lines(tmp_path / f"{f0.dst}-serve.jsonl", {"event": "flow_received", "bytes": f0.bytes, "sha256": "aa"})
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], {}, 1.0)
    got = {x["id"]: x for x in r["flows"]}
    assert got[f0.id]["fct_us"] == 1500.0 and got[f0.id]["kind"] == "background"
    assert got[f1.id]["fct_us"] is None and "SHA-256" in got[f1.id]["error"]
    assert got[p.flows[2].id]["error"] == "no record from the agent"
    # Offered on the host links: bytes over the arrival span at C' per host, as in the model.
    span = p.flows[-1].start_s - p.flows[0].start_s
    model_bytes = sum(x.model_bytes for x in p.flows[1:])
    offered = model_bytes * p.scaled.bdp_ratio * 8 / span / (4 * p.scaled.link_rate_bps)
    assert 0.2 < offered < 1.0, offered


def test_a_bad_file_is_the_models_error():
    with pytest.raises(ExperimentError, match="nosuchkey"):
        plans("flexpass-vs-dctcp", "switch.nosuchkey=1")


def test_the_cli_dry_run_prints_the_plan_without_root():
    r = subprocess.run([sys.executable, "-m", "flexpass_mininet", "emulate", "link-failure", "--dry-run"],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fault 0: link leaf0->spine0 down at" in r.stdout and "time x 25" in r.stdout
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
    # The queue's measured window ends when the last flow completed (here 12 ms after its start).
    assert em._last_completion(p, tmp_path, {1: 0.0, 2: 0.5}) == pytest.approx(0.512)
    r = em.report(p, "flexpass_switch", tmp_path, {1: 0.0, 2: 0.0}, [], {}, 1.0)
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
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], {}, 1.0)
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
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], {}, 1.0)
    f1, f2 = r["flows"]
    assert f1["share"] == pytest.approx(0.4, abs=0.01) and f1["proactive_share"] == pytest.approx(0.3, abs=0.01)
    assert f2["share"] == pytest.approx(0.5, abs=0.01) and f2["reactive_share"] == pytest.approx(0.5, abs=0.01)
    assert f1["error"] is None and f1["fct_us"] is None and r["fct"]["overall"]["flows"] == 0



EXPERIMENTS = env.REPO / "mininet-topos" / "experiments"


def _switch_config(plan, target):
    from flexpass_cp.config import parse_config

    return parse_config(plan.fabric.control_plane_config(plan.scaled, target, plan.profile))


def test_the_credit_batch_files_set_the_switchs_credit_burst_and_queue():
    """mininet-topos/experiments/credit-batch*.toml: ExpressPass's token bucket of 2 credits
    in front of an 8-credit queue (a TM re-spaces a batch of 8), and the case a meter needs
    for batches of 8: a burst of 9 and a 9-credit queue (docs/datapath.md)."""
    from flexpass_cp.config.derive import derived
    from flexpass_cp.config.queues import bmv2_queue_commands, tm_settings
    from flexpass_mininet.switch_stats import model_queues

    for name in ("credit-batch", "credit-batch-quick"):
        ps = plans(str(EXPERIMENTS / f"{name}.toml"))
        assert len(ps) == 4 and all(f.transport == "expresspass" and f.bytes for p in ps for f in p.flows)
        for p in ps:
            batch = p.experiment["host"]["credit_batch"]
            burst = p.scaled.credit_burst_packets
            assert "--credit-batch" in em.agent_flags(p) or batch == 1
            tm = tm_settings(_switch_config(p, "flexpass_switch"), "s0")[0]
            credit = {q.queue: q for q in tm.queues}[model_queues(p.profile)[0]]
            # The FlexPass profile shapes credits to w_q·C'·84/(84 + 1538).
            assert p.profile == "flexpass" and credit.shaper_rate_bps == pytest.approx(0.5 * 20e6 * 84 / 1622)
            assert credit.shaper_burst_bytes == burst * 84 and burst in (2, 9)
            assert max(batch, 8) <= p.scaled.credit_queue_packets or batch == 1
            c = _switch_config(p, "simple_switch")
            for port in c.switch("s0").ports:
                d = derived(c, "s0", port)
                assert d.meter_burst_bytes // d.credit_bmv2_bytes == burst
            depth = {q.value for q in bmv2_queue_commands(c, "s0")
                     if q.verb == "set_queue_depth" and q.priority == model_queues(p.profile)[0]}
            assert depth == {p.scaled.credit_queue_packets}


def test_the_flashpass_files_run_plain_flashpass_against_a_window_transport_on_a_shallow_buffer():
    from flexpass_cp.config.queues import tm_settings
    from flexpass_mininet.switch_stats import model_queues

    for name in ("flashpass", "flashpass-quick"):
        ps = plans(str(EXPERIMENTS / f"{name}.toml"))
        assert [sorted({f.transport for f in p.flows}) for p in ps] == [["flashpass"], ["dctcp"]]
        for p in ps:
            flags = em.agent_flags(p)
            # T_wait 80 µs of model time = 4 base RTTs: 4 ms on Mininet; no pre-credit phase.
            assert flags[flags.index("--t-wait-us") + 1] == "4000" and "--flashpass-no-unscheduled" in flags
            tm = tm_settings(_switch_config(p, "flexpass_switch"), "s0")[0]
            emulation, data = ({q.queue: q for q in tm.queues}[qid] for qid in model_queues(p.profile))
            assert emulation.shaper_rate_bps == pytest.approx(20e6 * 84 / 1622)
            assert data.buffer_bytes == 15_140 and data.red_threshold == 2 * FRAME
            assert data.ecn_threshold is None


def test_the_pfabric_file_runs_pfabric_on_a_pfabric_queue_and_dctcp_on_an_ecn_queue():
    """mininet-topos/experiments/pfabric-quick.toml: the same flows (two long, three short
    started during their transfer) once with pFabric on the pFabric queue with ~2 BDP of
    buffer (no K or red floor: pFabric has neither) and once with DCTCP on the naive
    profile's ECN queue with a deep buffer; scaled as test_mininet_pfabric.py runs it."""
    from flexpass_cp.config.queues import tm_settings
    from flexpass_mininet.switch_stats import model_queues

    r = em.resolve(str(EXPERIMENTS / "pfabric-quick.toml"), [])
    ps = [em.make_plan(r, p) for p in r["points"]]  # the file's [emulation]: 20 Mbit/s, 3 ms
    assert [(p.profile, sorted({f.transport for f in p.flows})) for p in ps] == \
        [("pfabric", ["pfabric"]), ("naive", ["dctcp"])]
    assert [(f.src, f.dst, f.bytes) for f in ps[0].flows] == \
        [("h1", "h0", 3_000_000), ("h2", "h0", 3_000_000)] + [(f"h{i}", "h0", 60_000) for i in (3, 4, 5)]
    assert [f.start_s for f in ps[0].flows] == pytest.approx([0, 0, 0.3, 0.6, 0.9])
    flags = em.agent_flags(ps[0])  # pFabric's window: C'·RTT = 7.5 kB
    assert flags[flags.index("--rtt-us") + 1] == "3000" and flags[flags.index("--link-gbps") + 1] == "0.02"
    queues = []
    for p in ps:
        tm = tm_settings(_switch_config(p, "flexpass_switch"), "s0")[0]
        queues.append({q.queue: q for q in tm.queues}[model_queues(p.profile)[1]])
    pf, dc = queues
    assert pf.discipline == "pfabric" and pf.ecn_threshold is None and pf.buffer_bytes == 15_000
    assert dc.discipline == "fifo" and dc.ecn_threshold == 18_000 and dc.buffer_bytes == 90_000


def test_a_credit_burst_a_switch_cannot_pass_is_refused_by_name():
    with pytest.raises(ExperimentError, match=r"switch.credit_burst = 2.5: not supported on mininet"):
        plans(str(EXPERIMENTS / "credit-batch-quick.toml"), "switch.credit_burst=2.5", no_sweep=True)


def test_switch_statistics_become_the_models_queue_keys():
    """flexpass_switch's TM statistics and stock BMv2's P4 counters, summed over the ports
    into the model's keys; the bottleneck's queues in the model's order (credits, Q1, Q2);
    the data queue's depth samples inside the window only."""
    from flexpass_cp.p4_program import port_queue_index
    from flexpass_mininet import switch_stats as ss

    cq, fq, lq = ss.model_queues("flexpass")
    # The naive and FlashPass profiles have one data queue (the model's Q1): the switch's
    # legacy queue (naive: data shares it with legacy traffic) or its FlexPass queue.
    assert ss.model_queues("naive") == [cq, lq] and ss.model_queues("flashpass") == [cq, fq]
    tm = {
        ("s0", "h0"): {"queues": [
            {"queue": fq, "dequeued_pkts": 900, "max_depth_bytes": 3028, "max_depth_pkts": 2, "ecn_marked_pkts": 7,
             "dropped_pkts": {"queue_full": 3, "port_full": 1, "red": 5}},
            {"queue": lq, "dequeued_pkts": 10, "max_depth_bytes": 1514, "max_depth_pkts": 1, "dropped_pkts": {}}]},
        ("s0", "h1"): {"queues": [{"queue": cq, "dequeued_pkts": 400, "max_depth_pkts": 8, "max_depth_bytes": 540,
                                   "dropped_pkts": {"queue_full": 6}}]},
    }
    rows = [(0.05, {fq: 9000}), (0.2, {fq: 1514}), (0.3, {fq: 0}), (0.4, {fq: 3028}), (2.0, {fq: 9000})]
    r = ss.summarize(tm, "flexpass", ("s0", "h0"), rows, (0.1, 1.0))
    assert (r["data_drops_full"], r["data_drops_red"], r["credit_drops"]) == (4, 5, 6)
    assert r["credit_queues"] == {"ports": 2, "dequeued_pkts": 400, "max_depth_pkts": 8, "max_depth_bytes": 540}
    b = r["bottleneck"]
    assert b["port"] == "s0->h0" and b["max_queue_bytes"] == [0, 3028, 1514]
    q = r["queue_summary"]
    assert q["samples"] == 3 and q["q1"] == [pytest.approx(4542 / 3), 3028.0, 3028.0]
    assert q["q1_busy"] == [pytest.approx(2271.0), 3028.0, 3028.0]
    # Stock BMv2: its P4 counters (port 3 towards the receiver, 1 to a sender), no depths, no
    # full-buffer drops visible.
    counters = {"forwarded": {port_queue_index(3, fq): (900, 1_300_000), port_queue_index(1, cq): (400, 33_600)},
                "ecn_marked": {port_queue_index(3, fq): (12, 0)}, "red_dropped": {port_queue_index(3, fq): (2, 0)},
                "credit_dropped": {port_queue_index(1, cq): (30, 2520)}}
    p4 = {("s0", "h0"): ss.p4_port_stats(counters, 3), ("s0", "h1"): ss.p4_port_stats(counters, 1)}
    r = ss.summarize(p4, "flexpass", ("s0", "h0"), [], (0.0, 1.0))
    assert (r["data_drops_full"], r["data_drops_red"], r["credit_drops"]) == (None, 2, 30)
    assert r["credit_queues"]["max_depth_pkts"] is None is r["credit_queues"]["max_depth_bytes"]
    assert r["queue_summary"] is None
    assert r["bottleneck"]["queues"][1]["ecn_marked"] == 12 and r["bottleneck"]["source"] == "p4 counters"


def test_a_pfabric_queues_pushed_out_packets_are_full_buffer_drops():
    """pFabric's queue (the switch's legacy queue, the model's Q1) drops queued packets of
    lower priority for an arriving one (TM reason ``pushed_out``): the model counts those in
    data_drops_full, and so does the report."""
    from flexpass_mininet import switch_stats as ss

    cq, _, lq = ss.model_queues("flexpass")
    assert ss.model_queues("pfabric") == [cq, lq]
    tm = {("s0", "h0"): {"queues": [
        {"queue": lq, "dequeued_pkts": 500, "max_depth_bytes": 15140, "max_depth_pkts": 10,
         "dropped_pkts": {"queue_full": 2, "port_full": 0, "red": 0, "pushed_out": 37}}]}}
    r = ss.summarize(tm, "pfabric", ("s0", "h0"), [(0.5, {lq: 3028})], (0.0, 1.0))
    assert (r["data_drops_full"], r["data_drops_red"], r["credit_drops"]) == (39, 0, 0)
    assert r["bottleneck"]["queues"][1]["dropped"]["pushed_out"] == 37
    assert r["queue_summary"]["q1"] == [3028.0, 3028.0, 3028.0]


def test_compare_puts_the_switches_drops_and_queue_next_to_the_models_in_model_bytes(tmp_path):
    """`flexpass compare MODEL EMULATION`: the drops and the bottleneck's data queue of both,
    the emulation's bytes divided by its BDP ratio (here 0.1)."""
    exp = str(EXPERIMENTS / "credit-batch-quick.toml")
    subprocess.run([str(env.FLEXPASS_BIN), "sim", exp, "--no-sweep", "--out", str(tmp_path / "model")], check=True,
                   capture_output=True)
    (p,) = plans(exp, no_sweep=True)
    queues = {"data_drops_full": 3, "data_drops_red": 0, "credit_drops": 40,
              "bottleneck": {"port": "s0->h0", "max_queue_bytes": [84, 3028, 0]},
              "queue_summary": {"q1": [151.4, 1514.0, 3028.0]}}
    (tmp_path / "emu").mkdir()
    em.report(p, "flexpass_switch", tmp_path / "emu", {}, [], queues, 1.0)
    c = subprocess.run([str(env.FLEXPASS_BIN), "compare", str(tmp_path / "model"), str(tmp_path / "emu")],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    rows = {line.strip().split("  ")[0]: line for line in c.stdout.splitlines()}
    model = json.loads((tmp_path / "model" / "result.json").read_text())
    assert rows["credit drops"].split()[-1] == "40", c.stdout
    assert rows["data drops, full buffer"].split()[-1] == "3", c.stdout
    max_row = rows["bottleneck Q1 max (model bytes)"]
    assert f"{model['bottleneck']['max_queue_bytes'][1] / 1e3:.1f} kB" in max_row and "30.3 kB" in max_row, c.stdout
    assert "1.5 kB" in rows["bottleneck Q1 mean (model bytes)"], c.stdout
    # Flows are matched by the model's size (an emulated flow's own is scaled).
    assert "differs" not in c.stderr, c.stderr


def test_a_flow_the_agent_gave_up_on_reports_the_agents_reason(tmp_path):
    (p,) = plans("flexpass-vs-dctcp", "flow.0.bytes=200000", "flow.1.bytes=300000")
    _lines(tmp_path / "flow1-send.jsonl", {"event": "flow_failed", "bytes": p.flows[0].bytes, "sha256": "aa",
                                           "fct_us": 2.5e6, "error": "peer did not answer HELLO"})
    r = em.report(p, "flexpass_switch", tmp_path, {}, [], {}, 1.0)
    f1, f2 = r["flows"]
    assert f1["fct_us"] is None and f1["error"] == "peer did not answer HELLO"
    assert f2["error"] == "no record from the agent"
    assert em._last_completion(p, tmp_path, {}) is None


def test_the_fault_files_pin_flows_to_spines_and_plan_every_fault_kind():
    from flexpass_mininet.fabric import ecmp_member_index

    for name in ("faults", "faults-quick", "faults-detect-quick"):
        (p,) = plans(str(env.REPO / "mininet-topos" / "experiments" / f"{name}.toml"))
        listed = [f for f in p.flows if f.kind == "listed"]
        assert {f.via for f in listed} == {"spine0", "spine1"}
        # Each flow's source port hashes it (both directions) onto its spine: the leaf's
        # group members are its uplinks in port order.
        for f in listed:
            a, b = p.fabric.hosts[f.src].ip, p.fabric.hosts[f.dst].ip
            assert ["spine0", "spine1"][ecmp_member_index(a, b, f.sport, em.AGENT_PORT, 2)] == f.via
            assert ecmp_member_index(b, a, em.AGENT_PORT, f.sport, 2) == ecmp_member_index(a, b, f.sport,
                                                                                           em.AGENT_PORT, 2)
        assert len({f.sport for f in listed}) == len(listed)
        kinds = [x.kind for x in p.faults]
        assert kinds[:2] == ["link", "link"] and p.faults[0].link == "leaf0->spine0" and p.faults[1].up
        if name != "faults-detect-quick":
            assert kinds[2:] == ["switch-restart", "controller-restart"]
            restart = p.faults[2]
            assert restart.switch == "leaf1" and restart.down_s == pytest.approx(0.020 * p.time_scale)
            assert restart.event == "leaf1 restarted (20 ms down)"


def test_a_fault_with_another_kinds_key_or_a_bad_via_is_refused_by_name():
    f = str(env.REPO / "mininet-topos" / "experiments" / "faults-quick.toml")
    with pytest.raises(ExperimentError, match=r"fault\[2\].link: not a key of kind \"switch-restart\""):
        plans(f, "fault.2.link=leaf0->spine0")
    with pytest.raises(ExperimentError, match=r"fault\[3\] \(kind \"switch-restart\"\) needs `switch`"):
        plans(f, "fault.3.kind=switch-restart")
    with pytest.raises(ExperimentError, match=r"flow\[0\].via = 'leaf1': not an equal-cost next hop of h0's switch"):
        plans(f, "flow.0.via=leaf1")


def test_the_soak_file_runs_kernel_tcp_workloads_and_cycling_incasts_the_model_refuses_by_name(tmp_path):
    """soak.toml in the model's schema: several [[workload]]s, each with its own sources,
    destinations and transport (kernel TCP too), drawn by the model; incast bursts every
    repeat_step_us until the end (repeat = 0), each with the next transport of the list.
    The model runs none of it: kernel TCP is refused by name."""
    soak = str(env.REPO / "mininet-topos" / "experiments" / "soak.toml")
    (p,) = plans(soak, "duration_ms=4000")
    exp = p.experiment
    wl = [x for x in p.flows if x.kind == "background"]
    drawn = em.resolve(soak, ["duration_ms=4000"])["points"][0]["workload_flows"]
    assert len(wl) == len(drawn) > 50
    for d in drawn:  # each flow from its workload's source to one of its destinations
        w = exp["workload"][d["entry"]]
        assert f"h{d['src']}" in w["src"] and f"h{d['dst']}" in w["dst"] and d["transport"] == w["transport"]
        assert d["start_us"] < 4000e3
    assert {x.transport for x in wl} == {"flexpass", "dctcp", "expresspass", "tcp"}
    # Poisson arrivals at `load` of the source's link, same CDF: the flexpass workload of h0
    # (0.06) has about 3x the arrivals of the kernel TCP one of h0 (0.02).
    count = lambda i: sum(1 for d in drawn if d["entry"] == i)  # noqa: E731
    assert 2.0 < count(0) / count(5) < 4.5, (count(0), count(5))
    # Incast groups: 0.2 s, then every 0.6 s (receiver h0) and 0.8 s (h3) until 4 s.
    groups = {}
    for f in p.flows:
        if f.kind == "incast":
            groups.setdefault(f.group, []).append(f)
    by_receiver = {}
    for members in groups.values():
        assert len(members) == 6 and len({m.transport for m in members}) == 1
        by_receiver.setdefault(members[0].dst, []).append(members[0].transport)
    assert by_receiver["h0"] == ["flexpass", "dctcp", "expresspass", "tcp", "flexpass", "dctcp", "expresspass"]
    assert by_receiver["h3"] == ["dctcp", "flexpass", "tcp", "expresspass", "dctcp"]
    assert em.port_of("tcp") == em.TCP_PORT and em.port_of("flexpass") == em.AGENT_PORT
    # The model refuses it, naming the keys and why.
    r = subprocess.run([str(env.FLEXPASS_BIN), "sim", soak, "--set", "duration_ms=10", "--out", str(tmp_path / "m")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert 'workload[3].transport, workload[5].transport' in r.stderr and "kernel TCP" in r.stderr, r.stderr
    assert "incast[0].transport" in r.stderr


PASE_TESTBED = str(env.REPO / "host-agent" / "experiments" / "pase" / "pase-testbed.toml")


def test_the_pase_testbed_plans_a_rack_arbitrator_and_the_same_flows_for_both_transports():
    ps = plans(PASE_TESTBED)
    assert len(ps) == 8
    by = {(p.point.split("name=")[1].split(",")[0], p.point.rsplit("=", 1)[1]): p for p in ps}
    dctcp, pase = by[("dctcp", "0.7")], by[("pase", "0.7")]
    # 9 clients -> 1 server, the same flows (the model draws them once per seed).
    for p in (dctcp, pase):
        assert {f.src for f in p.flows} == {f"h{i}" for i in range(9)} and {f.dst for f in p.flows} == {"h9"}
        assert len(p.flows) == 500 and p.profile == "ppt"
    assert [(f.src, f.bytes, f.start_s) for f in dctcp.flows] == [(f.src, f.bytes, f.start_s) for f in pase.flows]
    assert {f.transport for f in dctcp.flows} == {"dctcp"} and {f.transport for f in pase.flows} == {"pase"}
    # load_on = "destinations": the offered load is on the server's link (λ = load·C / mean size
    # on the wire), so the arrivals span ≈ flows · mean / (load · C), times x time_scale.
    model_s = pase.flows[-1].start_s / pase.time_scale
    mean_wire = 300e3 * 1538 / 1448 * 8
    assert model_s == pytest.approx(500 * mean_wire / (0.7 * 1e9), rel=0.15)
    # Only PASE gets the arbitrator: one more host on the switch, on its own link.
    assert sorted(dctcp.fabric.hosts, key=lambda h: int(h[1:])) == [f"h{i}" for i in range(10)]
    assert "h10" in pase.fabric.hosts and pase.fabric.host_port("h10")[0] == "s0"
    flags = em.agent_flags(pase)
    ip = pase.fabric.hosts["h10"].ip
    # Model RTT 250 us -> 1 ms: time x 4; BDP x 0.2 at 50 Mbit/s; requests once per BDP of data.
    assert pase.time_scale == pytest.approx(4.0)
    assert flags[flags.index("--arbitrator") + 1] == f"{ip}:7900"
    assert "--pase-delegation" not in flags and "--pase-probing" not in flags  # the file's host.pase
    assert float(flags[flags.index("--arbitration-interval-us") + 1]) == pytest.approx(
        250 * pase.time_scale / pase.scaled.bdp_ratio)
    # RTO_min scaled like every time and the initial window with the BDP, both transports.
    for p in (dctcp, pase):
        f = em.agent_flags(p)
        assert float(f[f.index("--rto-min-ms") + 1]) == pytest.approx(4.0 * p.time_scale)
        assert float(f[f.index("--init-cwnd") + 1]) == max(1, round(10 * p.scaled.bdp_ratio))
    assert "--arbitrator" not in em.agent_flags(dctcp)
    cmd = pase_mod.arbitrator_command(pase)
    assert cmd[:3] == ["arbitrator", "--listen", f"{ip}:7900"] and cmd[cmd.index("--link-mbit") + 1] == "20"


def test_pase_keys_the_agent_has_no_flag_for_are_refused_by_name():
    with pytest.raises(ExperimentError, match=r"host.pase.reference_rate = false: not supported on mininet"):
        plans(PASE_TESTBED, "host.pase.reference_rate=false", no_sweep=True)
    with pytest.raises(ExperimentError, match=r"host.pase.arbitration = \"local\": not supported on mininet"):
        plans(PASE_TESTBED, "host.pase.arbitration=local", "host.pase.delegation=false", no_sweep=True)
    with pytest.raises(ExperimentError, match=r"switch.ecn_basis = 'port': not supported on mininet"):
        plans(PASE_TESTBED, "switch.ecn_basis=port", no_sweep=True)
    (p,) = plans(PASE_TESTBED, "host.pase.probing=true", "host.pase.queues=4", no_sweep=True)
    f = em.agent_flags(p)
    assert "--pase-probing" in f and f[f.index("--pase-queues") + 1] == "4"
    # RTO_min and the initial window: the agents' flags in a PASE experiment (scaled) ...
    (p,) = plans(PASE_TESTBED, "host.rto_min_ms=16", "host.init_cwnd=20", no_sweep=True)
    f = em.agent_flags(p)
    assert float(f[f.index("--rto-min-ms") + 1]) == pytest.approx(16 * p.time_scale)
    assert float(f[f.index("--init-cwnd") + 1]) == max(1, round(20 * p.scaled.bdp_ratio))
    # ... and refused by name in any other.
    with pytest.raises(ExperimentError, match=r"host.rto_min_ms = 16.0: not supported on mininet"):
        plans(PASE_TESTBED, "host.rto_min_ms=16", "deployment.transport=flexpass", no_sweep=True)


def test_the_files_emulation_scale_is_the_default_and_the_command_line_wins():
    """[emulation] link_mbps / rtt_us: the scale when `--link-mbps` / `--rtt-us` are not
    given; the command line overrides each; the model ignores the section; a bad value is
    refused naming the key."""
    r = em.resolve(str(EXPERIMENTS / "pfabric-quick.toml"), [], no_sweep=True)
    (point,) = r["points"]
    p = em.make_plan(r, point)
    assert (p.scaled.link_rate_bps, p.scaled.base_rtt_s) == (20e6, 3e-3)
    p = em.make_plan(r, point, 50.0)
    assert (p.scaled.link_rate_bps, p.scaled.base_rtt_s) == (50e6, 3e-3)
    p = em.make_plan(r, point, None, 1000.0)
    assert (p.scaled.link_rate_bps, p.scaled.base_rtt_s) == (20e6, 1e-3)
    # A file without the section: the defaults.
    r = em.resolve(str(EXPERIMENTS / "flashpass-quick.toml"), [], no_sweep=True)
    plain = em.make_plan(r, r["points"][0])
    assert (plain.scaled.link_rate_bps, plain.scaled.base_rtt_s) == (20e6, 1e-3)
    with pytest.raises(ExperimentError, match=r"emulation.rtt_us must be > 0, got -1"):
        em.resolve(str(EXPERIMENTS / "pfabric-quick.toml"), ["emulation.rtt_us=-1"])

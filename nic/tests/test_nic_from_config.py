"""The NIC edge from the control plane's config (`--config FILE --nic NAME`, issue #27):
the same tc commands and the same eBPF maps as the flags with the same numbers, the
config's DSCP plan, and its errors naming the key.  Pure: no root."""

import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "nic"))
import flexpass_ebpf as E  # noqa: E402
import flexpass_nic as N  # noqa: E402
from flexpass_cp.config import load_config  # noqa: E402
from flexpass_cp.config.derive import derived, nic_credits_per_second, nic_meter  # noqa: E402
from flexpass_cp.config.entries import nic_entries  # noqa: E402
from flexpass_cp.entities import MeterEntry  # noqa: E402

DUMBBELL = REPO / "control-plane" / "configs" / "dumbbell.yaml"
from edge_env import AGENT, agent_status  # noqa: E402


def qdisc_print(capsys, *args):
    assert N.main(["print", *args]) == 0
    return capsys.readouterr().out


def ebpf_edge(*args):
    return E.edge_config_from_args(E.build_parser().parse_args(["apply", *args]))


def write_config(tmp_path, **changes):
    raw = yaml.safe_load(DUMBBELL.read_text())
    for key, value in changes.items():
        raw[key] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_qdisc_edge_from_config_is_the_flags_edge(capsys):
    # dumbbell.yaml: nics.h2 = h2-eth0, 10 Gbit/s, w_q 0.25, edge qdisc.
    from_config = qdisc_print(capsys, "--config", str(DUMBBELL), "--nic", "h2")
    from_flags = qdisc_print(capsys, "--dev", "h2-eth0", "--link-mbit", "10000", "--w-q", "0.25")
    assert from_config == from_flags
    # ... and it is w_q 0.25 of the config, not the flags' default 0.5.
    # share·C·84/(84+F) in frame bytes, as htb counts (a minimum credit: 84 -> 60 B).
    credit_kbit = int(0.25 * 10_000_000 * 60 / (84 + 1538))
    assert f"rate {credit_kbit}kbit ceil {credit_kbit}kbit" in from_config
    # Flags the tool keeps for itself still apply with --config.
    red = qdisc_print(capsys, "--config", str(DUMBBELL), "--nic", "h2", "--aqm", "red")
    assert " red limit " in red and " red limit " not in from_config


def test_ebpf_edge_from_config_is_the_flags_edge_and_the_control_planes_meter():
    from_config = ebpf_edge("--config", str(DUMBBELL), "--nic", "h1")
    from_flags = ebpf_edge("--dev", "h1-eth0", "--link-mbit", "10000", "--w-q", "0.5", "--burst-packets", "2")
    assert from_config.nic.dev == "h1-eth0"
    assert from_config.config_value() == from_flags.config_value()
    assert from_config.dscp_plan() == from_flags.dscp_plan()
    cfg = load_config(DUMBBELL)
    # One formula: the bucket is the control plane's NIC meter and the switch port's meter
    # of the same C and w_q (s1 port 1: 10 Gbit/s, w_q 0.5).
    assert from_config.meter() == nic_meter(cfg, cfg.nic("h1"))
    d = derived(cfg, "s1", 1)
    assert from_config.meter() == (d.meter_cir_bytes_per_s, d.meter_burst_bytes)


def agent_credit_limit(tmp_path, link_bps, mtu):
    """The host agent's own credit limit (`status` → credit_limit.agent_bytes_per_s) on a
    link of ``link_bps`` and ``mtu``: the agent on loopback, no root."""
    limit = agent_status(tmp_path, "--mtu", str(mtu), link_gbps=link_bps / 1e9)[0]["credit_limit"]
    assert limit["policed_by"] == "agent", limit
    return limit["agent_bytes_per_s"]


# A credit's frame as every edge counts it: without options 60 B (84 on the wire), with 8 B
# of them 68 B (92 on the wire).
CREDIT_FRAMES = (60, 68)


@pytest.mark.parametrize("mtu, share", [(1500, 0.25), (9000, 1.0)])
def test_every_edge_counts_a_credit_as_the_control_plane(tmp_path, mtu, share):
    """One rule and one byte count on every edge (docs/protocol.md §9, "Credits in frame
    bytes"): the control plane's credit rate, share·C·84/(84+F) = share·C/(8·(84+F))
    minimum credits/s, is what the qdisc edge's htb class, the eBPF edge's bucket, the PNA
    program's meter entry and the host agent's own shaper let through, each counting a
    credit as its frame (60 B, or 68 B with options: then 60/68 as many credits/s)."""
    link = 10e9
    nics = {name: {"device": f"v{name}", "link_rate": "10Gbps", "edge": edge, "mtu": mtu, "credit_share": share}
            for name, edge in (("q", "qdisc"), ("e", "ebpf"), ("p", "pna"))}
    path = write_config(tmp_path, nics=nics)
    cfg = load_config(path)
    cps = nic_credits_per_second(cfg, cfg.nic("p"))
    assert cps == pytest.approx(share * link / (8 * (84 + mtu + 38)), rel=1e-12)
    htb = N.commands(N.from_config(path, "q", "qdisc")[0])
    kbit = next(c[c.index("rate") + 1] for c in htb if "1:10" in c and "class" in c)
    edges = {"qdisc (htb 1:10)": int(kbit.removesuffix("kbit")) * 1000 / 8,
             "ebpf (bucket)": ebpf_edge("--config", path, "--nic", "e").meter()[0],
             "pna (meter entry)": next(e.cir for e in nic_entries(cfg, "p") if isinstance(e, MeterEntry))}
    if share == 1.0:  # the agent's shaper holds the host to the full credit rate
        if not AGENT.exists():
            pytest.skip(f"SKIPPED the agent's credit limit: {AGENT} not built (cargo build --release -p flexpass-cli)")
        edges["agent (shaper)"] = agent_credit_limit(tmp_path, link, mtu)
    for name, frame_bytes_per_s in edges.items():
        for frame in CREDIT_FRAMES:
            got = frame_bytes_per_s / frame
            assert got == pytest.approx(cps * 60 / frame, rel=2e-5), (name, frame, got, cps)


def test_config_entry_overrides_and_dscp_plan_reach_the_edge(tmp_path, capsys):
    dscp = {"credit": 40, "proactive_data": 26, "reactive_data": 30, "control": 24, "legacy": 0}
    nics = {"n": {"device": "veth9", "link_rate": "40Gbps", "edge": "ebpf", "mtu": 9000, "credit_share": 1.0,
                  "credit_meter_burst_packets": 3},
            "q": {"device": "veth8", "link_rate": "1Gbps", "edge": "qdisc"}}
    path = write_config(tmp_path, dscp=dscp, nics=nics)
    edge = ebpf_edge("--config", path, "--nic", "n")
    flags = ebpf_edge("--dev", "veth9", "--link-mbit", "40000", "--credit-share", "1.0", "--mtu", "9000",
                      "--burst-packets", "3")
    assert edge.meter() == flags.meter()
    # 40 Gbit/s · 84/(84 + 9038) in 60-byte credits, a burst of three.
    assert edge.meter() == (round(40e9 * 84 / 9122 / (8 * 84) * 60), 180)
    plan = [E.DSCP_CLASS.unpack(c) for c in edge.dscp_plan()]
    assert plan[40][1] == E.KIND[E.TrafficClass.CREDIT]
    assert plan[46][1] == E.KIND[E.TrafficClass.LEGACY]  # 46 is no longer the credit DSCP
    out = qdisc_print(capsys, "--config", path, "--nic", "q")
    assert f"tos {hex(40 << 2)} 0xfc flowid 1:10" in out


@pytest.mark.parametrize("args, message", [
    (["--config", str(DUMBBELL), "--nic", "h1", "--link-mbit", "100"], "--link-mbit: given by nics.h1"),
    (["--config", str(DUMBBELL), "--nic", "h1", "--burst-packets", "3"], "--burst-packets: given by nics.h1"),
    (["--config", str(DUMBBELL)], "--config and --nic go together"),
    (["--config", str(DUMBBELL), "--nic", "h9"], "no NIC named 'h9'"),
    (["--config", str(DUMBBELL), "--nic", "h2"], "nics.h2.edge: the config says 'qdisc'"),
    (["--config", str(DUMBBELL), "--nic", "h3"], "nics.h3.edge: the config says 'pna'"),
    (["--w-q", "0.5"], "--dev and --link-mbit are required"),
])
def test_ebpf_apply_refuses_mixed_or_wrong_sources(args, message, capsys):
    assert E.main(["apply", *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_nic_entry_is_refused_naming_the_key(tmp_path, capsys):
    path = write_config(tmp_path, nics={"h1": {"device": "h1-eth0", "link_rate": "1kbps", "edge": "qdisc"}})
    assert N.main(["print", "--config", path, "--nic", "h1"]) == 2
    err = capsys.readouterr().err
    assert "nics.h1.link_rate" in err and "below one credit per second" in err


def test_ebpf_show_and_clear_find_the_device_from_the_config(capsys):
    def device(*args):
        return E.device_from_args(E.build_parser().parse_args(["show", *args]))

    assert device("--config", str(DUMBBELL), "--nic", "h1") == "h1-eth0" == device("--dev", "h1-eth0")
    for args, message in ((["--config", str(DUMBBELL), "--nic", "h1", "--dev", "x"], "--dev: given by nics.h1"),
                          (["--nic", "h1"], "--config and --nic go together"),
                          (["--config", str(DUMBBELL), "--nic", "h2"], "nics.h2.edge: the config says 'qdisc'"),
                          ([], "--dev is required")):
        assert E.main(["clear", *args]) == 2
        assert message in capsys.readouterr().err

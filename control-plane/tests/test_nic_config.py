"""The config's `nics:` section (issue #27): host NIC edges validated with errors naming
the key, defaults from port_defaults as a switch port's, the credit meter of the one
formula (derive.credit_meter), and the PNA program's entries from the same entry."""

import json
from pathlib import Path

import pytest
import yaml

from flexpass_cp import cli, frames
from flexpass_cp.config import ConfigError, load_config, parse_config
from flexpass_cp.config.derive import derived, nic_credits_per_second, nic_meter
from flexpass_cp.config.entries import nic_entries, switch_entries
from flexpass_cp.entities import MeterEntry, TableEntry
from flexpass_cp.p4_program import METER_CREDIT, T_CLASSIFIER, T_NIC_PORT

REPO = Path(__file__).resolve().parents[2]
DUMBBELL = REPO / "control-plane" / "configs" / "dumbbell.yaml"


def raw(**nics):
    cfg = yaml.safe_load(DUMBBELL.read_text())
    cfg["nics"] = nics
    return cfg


def nic(**fields):
    return {"device": "eth0", "link_rate": "10Gbps", "edge": "ebpf", **fields}


def test_dumbbell_nics_take_port_defaults_and_credit_mtu():
    cfg = load_config(DUMBBELL)
    assert set(cfg.nics) == {"h1", "h2", "h3"}
    h1, h2, h3 = (cfg.nic(n) for n in ("h1", "h2", "h3"))
    assert (h1.w_q, h1.credit_meter_burst_packets, h1.mtu, h1.edge) == (0.5, 2, 1500, "ebpf")
    assert (h2.w_q, h2.share, h2.edge) == (0.25, 0.25, "qdisc")
    assert (h3.share, h3.edge, h3.host_port, h3.network_port) == (1.0, "pna", 0, 1)


def test_nic_inherits_and_overrides_port_defaults():
    r = raw(a=nic(), b=nic(w_q=0.2, credit_meter_burst_packets=5, mtu=9000))
    r["port_defaults"].update(w_q=0.3, credit_meter_burst_packets=3)
    r["credit"]["mtu"] = 4000
    cfg = parse_config(r)
    a, b = cfg.nic("a"), cfg.nic("b")
    assert (a.w_q, a.credit_meter_burst_packets, a.mtu) == (0.3, 3, 4000)
    assert (b.w_q, b.credit_meter_burst_packets, b.mtu) == (0.2, 5, 9000)


@pytest.mark.parametrize("wire, mtu, rate, w_q", [
    (84, 1500, "10Gbps", 0.5), (84, 9000, "40Gbps", 0.25), (88, 1500, "100Mbps", 0.7), (92, 576, "1Gbps", 0.1)])
def test_nic_meter_is_the_switch_ports_meter(wire, mtu, rate, w_q):
    """One formula: a NIC edge with the C, w_q, MTU and burst of a BMv2 port meters
    credits as that port does (share·C·84/(84+F) in 60-byte credits)."""
    r = raw(h=nic(link_rate=rate, w_q=w_q, credit_meter_burst_packets=3))
    r["credit"] = {"wire_bytes": wire, "mtu": mtu}
    r["switches"]["s1"]["ports"][1].update(link_rate=rate, w_q=w_q, credit_meter_burst_packets=3)
    cfg = parse_config(r)
    d = derived(cfg, "s1", 1)
    assert nic_meter(cfg, cfg.nic("h")) == (d.meter_cir_bytes_per_s, d.meter_burst_bytes)
    assert nic_credits_per_second(cfg, cfg.nic("h")) == pytest.approx(d.credits_per_second, rel=1e-12)


def test_nic_meter_numbers():
    cfg = load_config(DUMBBELL)
    # h3: ExpressPass share 1 of 10 Gbit/s, F = 1538: 10e9·84/1622 bit/s of 84-byte credits.
    cps = 10e9 / (8 * (84 + frames.max_frame_wire(1500)))
    assert nic_credits_per_second(cfg, cfg.nic("h3")) == pytest.approx(cps)
    assert nic_meter(cfg, cfg.nic("h3")) == (round(cps * 60), 2 * 60)


@pytest.mark.parametrize("entry, key, words", [
    (nic(link_rate=-1), "nics.h.link_rate", "must be > 0"),
    (nic(link_rate="1kbps"), "nics.h.link_rate", "below one credit per second"),
    (nic(link_rate="5Tbps", credit_share=1.0), "nics.h.link_rate", "above the eBPF edge"),
    (nic(link_rate="10Gbs"), "nics.h.link_rate", "cannot parse rate"),
    (nic(edge="dpdk"), "nics.h.edge", "unknown edge 'dpdk'"),
    (nic(w_q=1.0), "nics.h.w_q", "open interval (0, 1)"),
    (nic(credit_share=0), "nics.h.credit_share", "(0, 1]"),
    (nic(mtu=100), "nics.h.mtu", "576..9000"),
    (nic(credit_meter_burst_packets=0), "nics.h.credit_meter_burst_packets", "1..64"),
    (nic(device=""), "nics.h.device", "network device name"),
    (nic(device="a-very-long-device-name"), "nics.h.device", "network device name"),
    (nic(host_port=1), "nics.h.network_port", "must differ from host_port"),
    (nic(network_port=64), "nics.h.network_port", "0..63"),
    (nic(speed="10G"), "nics.h.speed", "unknown field"),
    ({"link_rate": "10Gbps", "edge": "qdisc"}, "nics.h.device", "required field is missing"),
])
def test_bad_nic_is_refused_naming_the_key(entry, key, words):
    with pytest.raises(ConfigError) as e:
        parse_config(raw(h=entry))
    assert e.value.path == key and words in e.value.message


def test_fast_pna_nic_is_not_limited_by_the_ebpf_bound():
    cfg = parse_config(raw(h=nic(link_rate="5Tbps", credit_share=1.0, edge="pna")))
    assert nic_meter(cfg, cfg.nic("h"))[0] > 10**10


def test_nics_must_be_a_mapping():
    r = raw()
    r["nics"] = ["h1"]
    with pytest.raises(ConfigError, match="^nics: must be a mapping"):
        parse_config(r)


def test_pna_entries_from_the_nic_entry():
    cfg = load_config(DUMBBELL)
    entries = nic_entries(cfg, "h3")
    # The switch's FlexPass classifier (one DSCP plan, the switch's P4Runtime names).
    switch_classifier = [e for e in switch_entries(cfg, "s1") if getattr(e, "table", None) == T_CLASSIFIER]
    assert [e for e in entries if getattr(e, "table", None) == T_CLASSIFIER] == switch_classifier
    ports = {e.match[0][1]: e.params["port"] for e in entries
             if isinstance(e, TableEntry) and e.table == T_NIC_PORT}
    assert ports == {0: 1, 1: 0}
    meters = [e for e in entries if isinstance(e, MeterEntry)]
    cir, burst = nic_meter(cfg, cfg.nic("h3"))
    assert meters == [MeterEntry(METER_CREDIT, 1, cir, burst, cir, burst)]  # CIR = PIR, CBS = PBS (DPDK)
    moved = nic_entries(parse_config(raw(h=nic(edge="pna", host_port=4, network_port=2))), "h")
    assert [e.index for e in moved if isinstance(e, MeterEntry)] == [2]


def test_ctl_nic_prints_the_meter_and_entries(capsys):
    assert cli.main(["nic", "--config", str(DUMBBELL), "--nic", "h1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg = load_config(DUMBBELL)
    assert (out["credit_meter"]["cir_bytes_per_s"], out["credit_meter"]["burst_bytes"]) == nic_meter(cfg, cfg.nic("h1"))
    assert out["apply"].startswith("nic/flexpass_nic.py ebpf apply --config")
    assert any(e.startswith("nic_port[input_port=0] -> send_to(port=1)") for e in out["pna_entries"])
    # The agent is told the edge polices its credits, and where the eBPF edge's maps are.
    dev = cfg.nic("h1").device
    assert out["agent"] == f"flexpass agent --nic-edge ebpf --nic-edge-maps /sys/fs/bpf/flexpass-edge/{dev}/tc/globals"


def test_ctl_refuses_a_bad_nic_naming_the_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw(h1=nic(edge="smartnic"))))
    assert cli.main(["nic", "--config", str(path), "--nic", "h1"]) == 1
    assert "nics.h1.edge: unknown edge 'smartnic'" in capsys.readouterr().err
    # A config error stops every command, not only `nic`.
    assert cli.main(["show", "--config", str(path), "--switch", "s1"]) == 1


@pytest.mark.parametrize("nic_entry, dscp, key, words", [
    (nic(link_rate="1kbps", edge="pna"), {}, "nics.h1.link_rate", "below one credit per second"),
    (nic(link_rate="10Gbps", edge="pna", credit_share=0), {}, "nics.h1.credit_share", "(0, 1]"),
    (nic(edge="pna"), {"gold": 10}, "dscp.gold", "unknown DSCP class"),
    (nic(edge="pna"), {"credit": 64}, "dscp.credit", "0..63"),
])
def test_ctl_nic_apply_refuses_a_bad_config_naming_the_key(tmp_path, capsys, nic_entry, dscp, key, words):
    """`nic --apply` validates before it connects: an impossible rate or an unknown DSCP
    class is refused with its key, and nothing is written (the address has no pipeline)."""
    cfg = raw(h1=nic_entry)
    cfg.setdefault("dscp", {}).update(dscp)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert cli.main(["nic", "--config", str(path), "--nic", "h1", "--apply", "--swx-cli", "127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert f"{key}:" in err and words in err, err

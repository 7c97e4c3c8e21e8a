"""Config validation, derived values and config -> P4Runtime entities.

Pure tests: no switch, no P4 toolchain.
"""

import copy
import math
import re
from pathlib import Path

import pytest

from flexpass_cp.config import ConfigError, load_config, parse_config
from flexpass_cp.config.derive import Derived, derived
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.config.forwarding import member_ids
from flexpass_cp.config.queues import tm_settings, tofino_settings
from flexpass_cp.config.units import parse_rate, parse_size
from flexpass_cp.entities import ActionProfileGroup, ActionProfileMember, MeterEntry, TableEntry
from flexpass_cp.p4_program import AP_ECMP, METER_CREDIT, NO_THRESHOLD, T_CLASSIFIER, T_QUEUE_THRESHOLDS, T_ROUTING

REPO = Path(__file__).resolve().parents[2]
DUMBBELL = REPO / "control-plane" / "configs" / "dumbbell.yaml"
PTF_CONFIG = REPO / "ptf-tests" / "ptf-config.yaml"


def base():
    """A small valid config with an ECMP group."""
    return {
        "port_defaults": {"w_q": 0.5, "ecn_threshold": "60KB", "red_threshold": "100KB",
                          "legacy_ecn_threshold": "65KB", "buffer": "300KB"},
        "switches": {
            "s1": {
                "ports": {
                    1: {"link_rate": "10Gbps", "mac": "02:00:00:00:01:01"},
                    2: {"link_rate": "10Gbps", "mac": "02:00:00:00:01:02"},
                    3: {"link_rate": "10Gbps", "mac": "02:00:00:00:01:03"},
                    4: {"link_rate": "40Gbps", "mac": "02:00:00:00:01:04", "w_q": 0.25},
                },
                "next_hops": {
                    # Deliberately not in address order.
                    "c": {"ip": "10.9.0.3", "port": 3, "dmac": "02:00:00:00:00:03"},
                    "a": {"ip": "10.9.0.1", "port": 1, "dmac": "02:00:00:00:00:01"},
                    "b": {"ip": "10.9.0.2", "port": 2, "dmac": "02:00:00:00:00:02"},
                    "d": {"ip": "10.9.0.4", "port": 4, "dmac": "02:00:00:00:00:04"},
                },
                "ecmp_groups": {"up": ["c", "a", "b"]},
                "routes": [
                    {"prefix": "10.0.0.4/32", "next_hop": "d"},
                    {"prefix": "10.1.0.0/16", "ecmp_group": "up"},
                ],
            }
        },
    }


def err(raw):
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    return e.value


# ---------------------------------------------------------------- validation


def test_example_configs_load():
    cfg = load_config(DUMBBELL)
    assert set(cfg.switch("s1").ports) == {1, 2, 3}
    assert switch_entries(cfg, "s1")
    if PTF_CONFIG.exists():
        assert switch_entries(load_config(PTF_CONFIG), "s1")


def test_negative_rate():
    raw = base()
    raw["switches"]["s1"]["ports"][2]["link_rate"] = -1
    e = err(raw)
    assert e.path == "switches.s1.ports.2.link_rate"
    assert "> 0" in str(e)
    raw["switches"]["s1"]["ports"][2]["link_rate"] = "-10Gbps"
    assert err(raw).path == "switches.s1.ports.2.link_rate"


def test_bad_rate_unit():
    raw = base()
    raw["switches"]["s1"]["ports"][1]["link_rate"] = "10 furlongs"
    e = err(raw)
    assert e.path == "switches.s1.ports.1.link_rate" and "Gbps" in str(e)


@pytest.mark.parametrize("w", [0, 1, 1.5, -0.1, "half"])
def test_w_q_outside_open_interval(w):
    raw = base()
    raw["switches"]["s1"]["ports"][4]["w_q"] = w
    e = err(raw)
    assert e.path == "switches.s1.ports.4.w_q"
    assert "(0, 1)" in str(e)


def test_red_threshold_not_above_k():
    raw = base()
    raw["port_defaults"]["red_threshold"] = "60KB"  # == K
    e = err(raw)
    assert e.path.endswith("red_threshold") and "greater than ecn_threshold" in str(e)
    raw["port_defaults"]["red_threshold"] = "10KB"
    assert "greater than" in str(err(raw))


def test_unknown_dscp_class():
    raw = base()
    raw["dscp"] = {"credits": 46}
    e = err(raw)
    assert e.path == "dscp.credits" and "unknown DSCP class" in str(e)


def test_duplicate_dscp():
    raw = base()
    raw["dscp"] = {"reactive_data": 26}  # same as the default proactive_data
    e = err(raw)
    assert e.path == "dscp.reactive_data" and "proactive_data" in str(e)


def test_dscp_out_of_range():
    raw = base()
    raw["dscp"] = {"legacy": 64}
    assert err(raw).path == "dscp.legacy"


def test_next_hop_to_unknown_port():
    raw = base()
    raw["switches"]["s1"]["next_hops"]["a"]["port"] = 9
    e = err(raw)
    assert e.path == "switches.s1.next_hops.a.port" and "not configured" in str(e)


def test_route_to_unknown_next_hop_and_group():
    raw = base()
    raw["switches"]["s1"]["routes"][0]["next_hop"] = "zz"
    assert err(raw).path == "switches.s1.routes[0].next_hop"
    raw = base()
    raw["switches"]["s1"]["routes"][1]["ecmp_group"] = "down"
    assert err(raw).path == "switches.s1.routes[1].ecmp_group"


def test_route_to_port():
    raw = base()
    raw["switches"]["s1"]["routes"][0] = {"prefix": "10.0.0.4/32", "port": 7}
    e = err(raw)
    assert e.path == "switches.s1.routes[0].port" and "not configured" in str(e)


def test_route_needs_exactly_one_target():
    raw = base()
    raw["switches"]["s1"]["routes"][0]["ecmp_group"] = "up"
    assert err(raw).path == "switches.s1.routes[0]"


def test_bad_prefix_and_duplicate_prefix():
    raw = base()
    raw["switches"]["s1"]["routes"][0]["prefix"] = "10.0.0.4/33"
    assert err(raw).path == "switches.s1.routes[0].prefix"
    raw = base()
    raw["switches"]["s1"]["routes"][0]["prefix"] = "10.0.0.5/24"  # host bits set
    assert err(raw).path == "switches.s1.routes[0].prefix"
    raw = base()
    raw["switches"]["s1"]["routes"].append({"prefix": "10.1.0.0/16", "next_hop": "a"})
    e = err(raw)
    assert e.path == "switches.s1.routes[2].prefix" and "duplicate" in str(e)


def test_unknown_group_member():
    raw = base()
    raw["switches"]["s1"]["ecmp_groups"]["up"].append("nope")
    assert err(raw).path == "switches.s1.ecmp_groups.up[3]"


def test_port_out_of_range_and_bad_mac():
    raw = base()
    raw["switches"]["s1"]["ports"][64] = {"link_rate": 1e9, "mac": "02:00:00:00:00:09"}
    assert err(raw).path == "switches.s1.ports.64"
    raw = base()
    raw["switches"]["s1"]["ports"][1]["mac"] = "02:00:00:00:01"
    assert err(raw).path == "switches.s1.ports.1.mac"


def test_unknown_fields_and_missing_required():
    raw = base()
    raw["switches"]["s1"]["ports"][1]["speed"] = 1
    e = err(raw)
    assert e.path == "switches.s1.ports.1.speed" and "unknown field" in str(e)
    raw = base()
    del raw["switches"]["s1"]["ports"][1]["link_rate"]
    assert err(raw).path == "switches.s1.ports.1.link_rate"
    raw = base()
    del raw["port_defaults"]["w_q"]
    assert err(raw).path == "switches.s1.ports.1.w_q"


def test_unknown_profile():
    raw = base()
    raw["switches"]["s1"]["profile"] = "homa"
    assert err(raw).path == "switches.s1.profile"


def test_load_config_reports_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("switches:\n  s1:\n    ports:\n      1: {link_rate: -5, mac: '02:00:00:00:00:01'}\n"
                 "port_defaults: {w_q: 0.5, ecn_threshold: 1000, red_threshold: 2000}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert e.value.path == "switches.s1.ports.1.link_rate" and str(p) in str(e.value)
    p.write_text("switches: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_unknown_switch():
    cfg = parse_config(base())
    with pytest.raises(ConfigError, match="no switch named 's9'"):
        cfg.switch("s9")


# ---------------------------------------------------------------- units / derived


def test_units():
    assert parse_rate("10Gbps", "x") == 10e9
    assert parse_rate("1.5Mbps", "x") == 1.5e6
    assert parse_rate(1000, "x") == 1000
    assert parse_size("65KB", "x") == 65000
    assert parse_size("64KiB", "x") == 65536
    assert parse_size(1538, "x") == 1538


def test_derived_values():
    cfg = parse_config(base())
    d = derived(cfg, "s1", 1)
    # w_q · C · 84 / (84 + 1538)
    assert d.credit_rate_bps == pytest.approx(0.5 * 10e9 * 84 / 1622)
    assert d.credits_per_second == pytest.approx(d.credit_rate_bps / (8 * 84))
    # BMv2 counts a minimum credit as 60 bytes (no preamble/IFG/FCS).
    assert d.credit_bmv2_bytes == 60
    assert d.meter_cir_bytes_per_s == round(d.credits_per_second * 60)
    assert d.meter_burst_bytes == 120  # two credits
    # Thresholds: bytes -> packets, rounded up.
    assert d.ecn_threshold_qdepth == math.ceil(60000 / 1538) == 40
    assert d.red_threshold_qdepth == math.ceil(100000 / 1538) == 66
    assert d.legacy_ecn_threshold_qdepth == 43
    assert d.data_queue_depth_pkts == math.ceil(300000 / 1538)
    assert d.legacy_rate_pps == round(0.5 * 10e9 / (8 * 1538))
    # Per-port override of w_q and link rate.
    d4 = derived(cfg, "s1", 4)
    assert d4.credit_rate_bps == pytest.approx(0.25 * 40e9 * 84 / 1622)


def test_naive_profile_uses_full_rate_and_one_data_queue():
    raw = base()
    raw["switches"]["s1"]["profile"] = "naive"
    cfg = parse_config(raw)
    d = derived(cfg, "s1", 1)
    assert d.credit_rate_bps == pytest.approx(10e9 * 84 / 1622)
    cls = [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == T_CLASSIFIER]
    qids = {e.params["kind"]: e.params["qid"] for e in cls if not e.is_default}
    assert qids[1] == cfg.bmv2_priority["credit"]
    assert {qids[k] for k in (0, 2, 3, 4)} == {cfg.bmv2_priority["legacy"]}
    assert all(e.params["color"] == 0 for e in cls)
    # No selective dropping in the naive profile.
    thr = [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == T_QUEUE_THRESHOLDS]
    assert all(e.params["red_threshold"] == NO_THRESHOLD for e in thr)



def test_profiles_are_the_models_names():
    """One vocabulary: every profile a switch takes is a flexpass-sim switch.profile."""
    from flexpass_cp.config.profiles import MODEL_ONLY, PROFILES

    queue_rs = (REPO / "host-agent" / "crates" / "flexpass-sim" / "src" / "queue.rs").read_text()
    model = set(re.findall(r'Profile::\w+ => "(\w+)"', queue_rs))
    assert model == set(PROFILES) | set(MODEL_ONLY)


@pytest.mark.parametrize("old, message", [
    ("expresspass_naive", "switches.s1.profile: profile 'expresspass_naive' is now called 'naive'"),
    ("owf", "switches.s1.profile: profile 'owf' exists in the model only"),
    ("layering", "switches.s1.profile: profile 'layering' exists in the model only"),
    ("fifo", "switches.s1.profile: unknown profile 'fifo' (profiles: flexpass, naive, ppt, flashpass, pfabric)"),
])
def test_a_profile_the_switch_does_not_take_names_the_key_and_the_fix(old, message):
    raw = base()
    raw["switches"]["s1"]["profile"] = old
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value).startswith(message)


# ---------------------------------------------------------------- entries


def test_entries_counts_and_values():
    cfg = parse_config(base())
    ents = switch_entries(cfg, "s1")
    tables = [e for e in ents if isinstance(e, TableEntry)]
    cls = [e for e in tables if e.table == T_CLASSIFIER]
    assert len(cls) == 6 and sum(e.is_default for e in cls) == 1
    by_dscp = {dict(e.match)["dscp"]: e.params for e in cls if not e.is_default}
    assert by_dscp == {
        46: {"qid": 7, "color": 0, "kind": 1},
        26: {"qid": 5, "color": 0, "kind": 2},
        30: {"qid": 5, "color": 2, "kind": 3},
        24: {"qid": 5, "color": 0, "kind": 4},
        0: {"qid": 6, "color": 0, "kind": 0},
    }
    default = next(e for e in cls if e.is_default)
    assert default.params == {"qid": 6, "color": 0, "kind": 0}

    members = [e for e in ents if isinstance(e, ActionProfileMember)]
    groups = [e for e in ents if isinstance(e, ActionProfileGroup)]
    routes = [e for e in tables if e.table == T_ROUTING]
    meters = [e for e in ents if isinstance(e, MeterEntry)]
    assert len(members) == 4 and len(groups) == 1 and len(routes) == 2 and len(meters) == 4
    assert all(m.profile == AP_ECMP for m in members)
    r_host = next(r for r in routes if dict(r.match)["dst_addr"][1] == 32)
    assert r_host.member_id == member_ids(cfg.switch("s1"))["d"]
    r_net = next(r for r in routes if dict(r.match)["dst_addr"][1] == 16)
    assert r_net.group_id == groups[0].group_id
    assert dict(r_net.match)["dst_addr"][0] == (10 << 24) | (1 << 16)
    thr = [e for e in tables if e.table == T_QUEUE_THRESHOLDS]
    assert len(thr) == 8  # 4 ports x (FlexPass queue, legacy queue)
    m1 = next(m for m in meters if m.index == 1)
    d = derived(cfg, "s1", 1)
    assert (m1.meter, m1.cir, m1.pir, m1.cburst, m1.pburst) == (
        METER_CREDIT, d.meter_cir_bytes_per_s, d.meter_cir_bytes_per_s, 120, 120)


def test_credit_meter_burst_passes_batched_credits_and_the_tm_queue_still_respaces_them():
    """Hosts that pace credits in batches of B (agent --credit-batch B, docs/protocol.md
    §11) need the credit meter, a policer, to pass B + 1 credits at once:
    credit_meter_burst_packets sets its burst (default 2, ExpressPass). The TM credit
    queue absorbs a batch and its shaper keeps the 2-credit burst, so the data that the
    credits schedule stays spaced."""

    def limits(raw):
        cfg = parse_config(raw)
        meter = next(e for e in switch_entries(cfg, "s1") if isinstance(e, MeterEntry) and e.index == 1)
        tp = next(t for t in tm_settings(cfg, "s1") if t.port == 1)
        shaper = next(q for q in tp.queues if q.shaper_rate_bps is not None)
        return meter.cburst, meter.pburst, shaper.shaper_burst_bytes / cfg.credit_wire_bytes

    assert limits(base()) == (2 * 60, 2 * 60, 2)
    raw = base()
    raw["port_defaults"]["credit_meter_burst_packets"] = 9
    assert limits(raw) == (9 * 60, 9 * 60, 2)
    # The shaper's own burst (the model's switch.credit_burst sets both): a whole batch passes.
    raw["port_defaults"]["credit_shaper_burst_packets"] = 9
    assert limits(raw) == (9 * 60, 9 * 60, 9)
    for key in ("credit_meter_burst_packets", "credit_shaper_burst_packets"):
        for bad in (0, 65, "9"):
            raw = base()
            raw["port_defaults"][key] = bad
            with pytest.raises(ConfigError, match=key):
                parse_config(raw)


def test_ecmp_member_order_sorted_by_next_hop():
    cfg = parse_config(base())
    ents = switch_entries(cfg, "s1")
    members = {m.member_id: m for m in ents if isinstance(m, ActionProfileMember)}
    group = next(e for e in ents if isinstance(e, ActionProfileGroup))
    ports = [members[mid].params["port"] for mid in group.members]
    assert ports == [1, 2, 3]  # 10.9.0.1 < 10.9.0.2 < 10.9.0.3, whatever the config order
    assert list(group.members) == sorted(group.members)
    # Same next hops listed in another order give identical entries.
    raw = base()
    raw["switches"]["s1"]["ecmp_groups"]["up"] = ["b", "c", "a"]
    nh = raw["switches"]["s1"]["next_hops"]
    raw["switches"]["s1"]["next_hops"] = dict(reversed(list(nh.items())))
    assert switch_entries(parse_config(raw), "s1") == ents


def test_entries_are_deterministic():
    a = switch_entries(parse_config(base()), "s1")
    b = switch_entries(parse_config(copy.deepcopy(base())), "s1")
    assert a == b


# ---------------------------------------------------------------- PPT profile


def ppt_raw():
    raw = base()
    raw["port_defaults"] = {"buffer": "120KB"}  # a PPT port needs no FlexPass queue fields
    raw["switches"]["s1"]["profile"] = "ppt"
    raw["switches"]["s1"]["target"] = "flexpass_switch"
    raw["ppt"] = {"base_rtt_us": 20}
    return raw


def test_ppt_classifier_maps_each_priority_to_its_queue_and_the_rest_to_p3():
    from flexpass_cp.config.profiles import ppt_qid

    cfg = parse_config(ppt_raw())
    cls = [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == T_CLASSIFIER]
    by_dscp = {dict(e.match)["dscp"]: e.params for e in cls if not e.is_default}
    # docs/protocol.md §10: P<p> is DSCP 32 + p; BMv2 serves the highest index first.
    for p in range(8):
        assert by_dscp[32 + p]["qid"] == 7 - p == ppt_qid(p)
        assert by_dscp[32 + p]["color"] == 0
    for other in (0, 24, 26, 30, 46):
        assert by_dscp[other]["qid"] == ppt_qid(3)
    default = next(e for e in cls if e.is_default)
    assert default.params["qid"] == ppt_qid(3) and default.params["color"] == 0
    assert len(by_dscp) == 13


def test_ppt_ecn_thresholds_are_lambda_c_rtt_per_queue():
    cfg = parse_config(ppt_raw())
    thr = {(dict(e.match)["egress_port"], dict(e.match)["qid"]): e.params
           for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == T_QUEUE_THRESHOLDS}
    # PPT Eq. 3 on a 10 Gbit/s port, RTT 20 µs: 0.17 · 25 000 B = 4250 B, 0.1 · 25 000 B = 2500 B
    # (flexpass_switch counts bytes); 40 Gbit/s port 4: four times that.
    for p in range(8):
        assert thr[(1, 7 - p)] == {"ecn_threshold": 4250 if p < 4 else 2500, "red_threshold": NO_THRESHOLD}
        assert thr[(4, 7 - p)]["ecn_threshold"] == (17000 if p < 4 else 10000)
    assert len(thr) == 4 * 8
    # K in bytes (PPT §6.2: 96 kB / 86 kB) takes precedence; stock BMv2 counts packets.
    raw = ppt_raw()
    raw["ppt"].update(ecn_threshold_hcp="96KB", ecn_threshold_lcp="86KB")
    raw["switches"]["s1"]["target"] = "simple_switch"
    cfg = parse_config(raw)
    d = derived(cfg, "s1", 1)
    assert [d.ppt_ecn_threshold_bytes(p) for p in (0, 3, 4, 7)] == [96000, 96000, 86000, 86000]
    thr = {dict(e.match)["qid"]: e.params["ecn_threshold"]
           for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == T_QUEUE_THRESHOLDS
           and dict(e.match)["egress_port"] == 1}
    assert thr == {7 - p: math.ceil((96000 if p < 4 else 86000) / 1538) for p in range(8)}


def test_ppt_tm_port_is_eight_strict_priorities_sharing_the_buffer():
    cfg = parse_config(ppt_raw())
    tp = next(t for t in tm_settings(cfg, "s1") if t.port == 1)
    assert tp.shared_buffer_bytes == 120_000
    assert sorted(q.queue for q in tp.queues) == list(range(8))
    by_q = {q.queue: q for q in tp.queues}
    for p in range(8):
        q = by_q[7 - p]
        assert q.priority == 7 - p  # higher level served first: P0 on top
        assert q.buffer_bytes == 120_000 and q.red_threshold is None and q.shaper_rate_bps is None
        assert q.ecn_threshold == (4250 if p < 4 else 2500)
    assert len({q.priority for q in tp.queues}) == 8  # strict: no two queues share a level


def test_ppt_bmv2_queue_commands_cover_eight_queues():
    from flexpass_cp.config.queues import bmv2_queue_commands

    raw = ppt_raw()
    raw["switches"]["s1"]["target"] = "simple_switch"
    cmds = [c for c in bmv2_queue_commands(parse_config(raw), "s1") if c.port == 1]
    assert sorted({c.priority for c in cmds}) == list(range(8))
    assert {c.value for c in cmds if c.verb == "set_queue_depth"} == {math.ceil(120_000 / 1538)}


def test_ppt_on_tofino_is_eight_strict_priorities_sharing_the_port_buffer():
    """PPT §4.2/§6.2 on Tofino: P<p> in queue 7-p at strict priority 7-p, one egress
    limit of the port's buffer on their sum, each queue guaranteed one frame (guaranteed
    cells are reserved); K per priority in cells from λ·C·RTT."""
    from flexpass_cp.config.profiles import ppt_qid

    raw = ppt_raw()
    raw["switches"]["s1"]["target"] = "tofino"
    cfg = parse_config(raw)
    sw = cfg.switch("s1")
    for tp in tofino_settings(cfg, "s1"):
        d = Derived(cfg, sw, sw.ports[tp.port])
        assert tp.buffer_cells == math.ceil(120_000 / 80)
        assert [(q.role, q.qid, q.max_priority) for q in tp.queues] == \
            [(f"P{p}", 7 - p, 7 - p) for p in range(8)]
        # One 1518-byte frame (FCS included) and the 1-byte bridged header: 19 cells.
        assert all(q.guaranteed_cells == math.ceil((1518 + 1) / 80) == 19 for q in tp.queues)
        assert all(q.red_limit_percent is None and q.shaper_kbps is None for q in tp.queues)
        k = {e.match[1][1]: e.params["ecn_threshold"] for e in switch_entries(cfg, "s1")
             if isinstance(e, TableEntry) and e.table == "queue_thresholds" and e.match[0][1] == tp.port}
        for p in range(8):
            assert k[ppt_qid(p)] == d.cells(d.ppt_ecn_threshold_bytes(p))


def test_ppt_config_errors_name_the_field():
    raw = ppt_raw()
    raw["ppt"]["lambda_lcp"] = 0
    assert err(raw).path == "ppt.lambda_lcp"
    raw = ppt_raw()
    raw["ppt"]["base_rtt_us"] = -1
    assert err(raw).path == "ppt.base_rtt_us"
    raw = ppt_raw()
    raw["ppt"]["window"] = 3
    assert err(raw).path == "ppt.window"
    raw = ppt_raw()
    raw["dscp"] = {"priority": [32, 33, 34, 35, 36, 37, 38, 46]}
    assert err(raw).path == "dscp.priority[7]"
    # A FlexPass switch still needs its queue fields.
    raw = ppt_raw()
    raw["switches"]["s1"]["profile"] = "flexpass"
    assert err(raw).path.endswith("w_q")


# ---------------------------------------------------------------- FlashPass profile


def flashpass_raw(target="flexpass_switch"):
    raw = base()
    raw["switches"]["s1"]["profile"] = "flashpass"
    raw["switches"]["s1"]["target"] = target
    return raw


def _entries(cfg, table):
    return [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == table]


def test_flashpass_classifier_puts_emulation_in_q0_and_every_data_class_in_one_queue():
    from flexpass_cp.p4_program import T_ECN_COLOR

    cfg = parse_config(flashpass_raw())
    by_dscp = {dict(e.match)["dscp"]: e.params for e in _entries(cfg, T_CLASSIFIER) if not e.is_default}
    q = cfg.bmv2_priority
    assert by_dscp[46]["qid"] == q["credit"] and by_dscp[46]["color"] == 0  # EMULATION (and CREDIT)
    for dscp in (26, 24, 0):  # proactive data, control (EMULATION_CREDIT), legacy: green
        assert by_dscp[dscp] == {**by_dscp[dscp], "qid": q["flexpass"], "color": 0}
    assert by_dscp[30]["qid"] == q["flexpass"] and by_dscp[30]["color"] == 2  # unscheduled data: red
    default = next(e for e in _entries(cfg, T_CLASSIFIER) if e.is_default)
    assert default.params["qid"] == q["flexpass"]
    # §III-C: a Not-ECT (over-provisioned) packet in the emulation queue is red; ECT keeps green.
    colour = _entries(cfg, T_ECN_COLOR)
    assert [(dict(e.match), e.params) for e in colour if not e.is_default] == \
        [({"qid": q["credit"], "ecn": 0}, {"color": 2})]
    # Every BMv2 profile manages the table (its default), so switching profiles clears it.
    for profile in ("flexpass", "naive"):
        raw = flashpass_raw()
        raw["switches"]["s1"]["profile"] = profile
        assert [e.is_default for e in _entries(parse_config(raw), T_ECN_COLOR)] == [True]


def test_flashpass_emulation_queue_is_the_papers_on_both_bmv2_targets():
    from flexpass_cp.config.queues import bmv2_queue_commands

    # flexpass_switch: the TM shapes the emulation queue to C·84/(84+1538), 8 frames of 60 B
    # (as BMv2 counts an 84-byte frame), drops red (Not-ECT) at 2 queued, reports ECN above.
    cfg = parse_config(flashpass_raw())
    d = derived(cfg, "s1", 1)
    assert d.credit_rate_bps == pytest.approx(10e9 * 84 / (84 + 1538))
    tp = next(t for t in tm_settings(cfg, "s1") if t.port == 1)
    emu, data = sorted(tp.queues, key=lambda q: -q.priority)
    assert emu.queue == cfg.bmv2_priority["credit"] and emu.priority > data.priority
    assert emu.shaper_rate_bps == pytest.approx(10e9 * 84 / 1622)
    assert (emu.buffer_bytes, emu.red_threshold, emu.ecn_threshold) == (8 * 60, 2 * 60, 2 * 60 - 1)
    assert data.queue == cfg.bmv2_priority["flexpass"]
    assert (data.buffer_bytes, data.red_threshold, data.ecn_threshold) == (300_000, 2 * 1514, None)
    thr = {dict(e.match)["qid"]: e.params for e in _entries(cfg, T_QUEUE_THRESHOLDS)
           if dict(e.match)["egress_port"] == 1}
    assert thr[cfg.bmv2_priority["credit"]] == {"ecn_threshold": 119, "red_threshold": NO_THRESHOLD}
    # Stock BMv2: enq_qdepth in packets, the egress drops red above 1 queued (2 with it);
    # the emulation queue drains at C/(8·1622) packets/s; the meter's burst is the queue.
    cfg = parse_config(flashpass_raw("simple_switch"))
    thr = {dict(e.match)["qid"]: e.params for e in _entries(cfg, T_QUEUE_THRESHOLDS)
           if dict(e.match)["egress_port"] == 1}
    assert thr == {cfg.bmv2_priority["credit"]: {"ecn_threshold": 1, "red_threshold": 1},
                   cfg.bmv2_priority["flexpass"]: {"ecn_threshold": NO_THRESHOLD, "red_threshold": 1}}
    lines = [c.line() for c in bmv2_queue_commands(cfg, "s1") if c.port == 1]
    assert lines == ["set_queue_depth 8 1 7", f"set_queue_rate {round(10e9 / (8 * 1622))} 1 7",
                     f"set_queue_depth {math.ceil(300_000 / 1538)} 1 5", f"set_queue_rate {round(10e9 / (8 * 1538))} 1 5"]
    meter = next(e for e in switch_entries(cfg, "s1") if isinstance(e, MeterEntry) and e.index == 1)
    assert meter.cburst == 8 * 60


def test_flashpass_thresholds_are_configurable_and_checked():
    raw = flashpass_raw()
    raw["flashpass"] = {"emulation_threshold_packets": 3, "unscheduled_threshold_packets": 4}
    tp = next(t for t in tm_settings(parse_config(raw), "s1") if t.port == 1)
    emu, data = sorted(tp.queues, key=lambda q: -q.priority)
    assert emu.red_threshold == 180 and data.red_threshold == 4 * 1514
    raw["flashpass"] = {"emulation_threshold_packets": 0}
    with pytest.raises(ConfigError, match="flashpass.emulation_threshold_packets"):
        parse_config(raw)
    raw["flashpass"] = {"threshold": 2}
    with pytest.raises(ConfigError, match="flashpass"):
        parse_config(raw)
    # Tofino: the red limit is a colour drop limit, a 12.5 % step of the emulation queue.
    raw = flashpass_raw("tofino")
    raw["port_defaults"]["credit_queue_packets"] = 6
    with pytest.raises(ConfigError, match="33.3 %.*12.5"):
        tofino_settings(parse_config(raw), "s1")


def test_flashpass_on_tofino():
    """FlashPass on Tofino: the emulation queue at strict priority 7, shaped to
    C·84/(84+1538), 8 emulation frames deep (1 cell each), red (Not-ECT, coloured by
    ecn_color) dropped by the TM at 25 % = 2 of them; ECT ones CE-marked by the egress
    above 2 queued; one data queue, its red (unscheduled) data dropped by the egress
    above 2 frames (19 cells each)."""
    cfg = parse_config(flashpass_raw("tofino"))
    d = derived(cfg, "s1", 1)
    tp = next(t for t in tofino_settings(cfg, "s1") if t.port == 1)
    emu, data = tp.queues
    assert (emu.role, emu.qid, emu.max_priority) == ("credit", cfg.bmv2_priority["credit"], 7)
    assert emu.shaper_kbps == round(10e9 * 84 / 1622 / 1000)
    assert (emu.guaranteed_cells, emu.red_limit_percent) == (8, 25.0)
    assert (data.role, data.qid, data.max_priority, data.red_limit_percent) == \
        ("flexpass", cfg.bmv2_priority["flexpass"], 0, None)
    assert data.guaranteed_cells == math.ceil(300_000 / 80)
    thr = {dict(e.match)["qid"]: e.params for e in _entries(cfg, T_QUEUE_THRESHOLDS)
           if dict(e.match)["egress_port"] == 1}
    assert thr == {cfg.bmv2_priority["credit"]: {"ecn_threshold": 1, "red_threshold": NO_THRESHOLD},
                   cfg.bmv2_priority["flexpass"]: {"ecn_threshold": NO_THRESHOLD, "red_threshold": 2 * 19 - 1}}
    colour = [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == "ecn_color"]
    assert [(dict(e.match), e.action, e.params) for e in colour] == [
        ({"qid": cfg.bmv2_priority["credit"], "ecn": 0}, "set_color", {"color": 2}), ({}, "keep_color", {})]
    assert d.emulation_cells == 1 and d.data_frame_cells == 19

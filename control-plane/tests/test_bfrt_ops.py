"""Tofino: the BfRt operations generated from a config (golden file), their
values against the BMv2 path (one formula), Tofino config errors, the
desired-vs-read-back plan, the missing-SDE error, and the P4 names the ops use
against p4src/tna.  No SDE needed.

Regenerate the golden file after an intended change:
    FLEXPASS_UPDATE_GOLDEN=1 python3 -m pytest control-plane/tests/test_bfrt_ops.py
"""

import json
import math
import os
import re
from pathlib import Path

import pytest

from flexpass_cp import bfrt_ops as B
from flexpass_cp.bfrt_client import BfrtUnavailable, load_bfrt_grpc
from flexpass_cp.config import ConfigError, load_config, parse_config
from flexpass_cp.config.derive import derived
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.config.queues import port_queues, tofino_settings
from flexpass_cp.config.targets import FLEXPASS_SWITCH, TOFINO_COLOR_LIMITS
from flexpass_cp.entities import MeterEntry, TableEntry
from flexpass_cp.p4_program import NO_THRESHOLD

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
GOLDEN_CFG = DATA / "tofino-golden.yaml"
GOLDEN = DATA / "tofino-golden.json"
TNA = REPO / "p4src" / "tna"


def golden_cfg():
    return load_config(GOLDEN_CFG)


def as_target(raw, target):
    raw = json.loads(json.dumps(raw))
    for sw in raw["switches"].values():
        sw["target"] = target
    return parse_config(raw)


def raw_golden():
    import yaml
    return yaml.safe_load(GOLDEN_CFG.read_text())


# ---------------------------------------------------------------- golden


def test_ops_match_golden_file():
    cfg = golden_cfg()
    got = {sw: json.loads(B.ops_to_json(B.switch_ops(cfg, sw))) for sw in sorted(cfg.switches)}
    if os.environ.get("FLEXPASS_UPDATE_GOLDEN"):
        GOLDEN.write_text("{\n" + ",\n".join(
            f' "{sw}": {B.ops_to_json(B.switch_ops(cfg, sw), indent=" ")}' for sw in sorted(cfg.switches))
            + "\n}\n")
    want = json.loads(GOLDEN.read_text())
    assert set(got) == set(want)
    for sw in want:
        assert len(got[sw]) == len(want[sw]), f"{sw}: {len(got[sw])} ops, golden has {len(want[sw])}"
        for i, (g, w) in enumerate(zip(got[sw], want[sw])):
            assert g == w, f"{sw} op {i} differs from {GOLDEN.name}"


@pytest.mark.parametrize("path", [REPO / "control-plane" / "configs" / "dumbbell-tofino.yaml",
                                  REPO / "ptf-tests" / "tofino-model-config.yaml"], ids=lambda p: p.name)
def test_example_tofino_configs(path):
    cfg = load_config(path)
    for sw in cfg.switches:
        ops = B.switch_ops(cfg, sw)
        assert len({op.ident for op in ops}) == len(ops)


def test_ops_are_deterministic_and_unique():
    cfg = golden_cfg()
    a, b = B.switch_ops(cfg, "s1"), B.switch_ops(cfg, "s1")
    assert a == b
    assert len({op.ident for op in a}) == len(a)


# ---------------------------------------------------------------- one formula


def test_p4_ops_are_the_bmv2_entities():
    """Same classifier, routes, members, groups, thresholds keys as P4Runtime."""
    cfg = golden_cfg()
    ents = switch_entries(cfg, "s1")
    ops = B.p4_ops(cfg, "s1")
    assert len(ops) == len(ents)
    for e, op in zip(ents, ops):
        if isinstance(e, TableEntry) and e.action:
            assert op.table == e.table and op.action == e.action and op.data_dict == e.params
        if isinstance(e, MeterEntry):
            assert op.table == "credit_meter" and op.key[0].value == e.index


def test_derived_values_equal_the_bmv2_path():
    raw = raw_golden()
    raw["switches"].pop("s2")
    bm, tf = as_target(raw, "simple_switch"), as_target(raw, "tofino")
    fs = as_target(raw, "flexpass_switch")
    for port in bm.switch("s1").ports:
        b, t, f = derived(bm, "s1", port), derived(tf, "s1", port), derived(fs, "s1", port)
        # The credit rate, credits/s and the TM design are one formula for all targets.
        assert t.credit_rate_bps == b.credit_rate_bps == f.credit_rate_bps
        assert t.credits_per_second == b.credits_per_second
        assert port_queues(t, FLEXPASS_SWITCH).queues == port_queues(f).queues
        # Only the unit a target counts differs: BMv2 60 B per credit, Tofino 64 B (FCS).
        assert b.credit_meter_bytes == 60 and t.credit_meter_bytes == 64
        assert t.meter_cir_bytes_per_s == round(t.credits_per_second * 64)
        assert t.meter_cir_kbps == round(t.meter_cir_bytes_per_s * 8 / 1000)
        assert t.meter_burst_bytes == 128 and t.meter_burst_kbits == 2
        q = tf.switch("s1").ports[port].queues
        assert t.ecn_threshold_qdepth == math.ceil(q.ecn_threshold_bytes / 80)
        assert t.red_threshold_qdepth == NO_THRESHOLD  # the TM drops red at admission


def test_tm_ops_carry_the_derived_values():
    cfg = golden_cfg()
    sw = cfg.switch("s1")
    ops = B.tm_ops(cfg, "s1")
    by = {(op.table, op.key[0].value.dev_port, op.key[0].value.qid): op.data_dict
          for op in ops if op.key and isinstance(op.key[0].value, B.PortQueue)}
    for port in sw.ports:
        d = derived(cfg, "s1", port)
        tm = port_queues(d, FLEXPASS_SWITCH)
        credit, flexpass, legacy = tm.queues
        shaper = by[("tf1.tm.queue.sched_shaping", port, credit.queue)]
        assert shaper["max_rate"] == round(d.credit_rate_bps / 1000)
        assert shaper["max_burst_size"] == 2 * 84 == credit.shaper_burst_bytes
        sched = {role: by[("tf1.tm.queue.sched_cfg", port, q.queue)] for role, q in
                 zip(("credit", "flexpass", "legacy"), tm.queues)}
        assert sched["credit"]["max_priority"] == "7" and sched["credit"]["max_rate_enable"] is True
        assert sched["flexpass"]["max_priority"] == sched["legacy"]["max_priority"] == "0"
        w_q = sw.ports[port].queues.w_q
        assert sched["flexpass"]["dwrr_weight"] == round(w_q * 1023)
        assert sched["legacy"]["dwrr_weight"] == round((1 - w_q) * 1023)
        color = by[("tf1.tm.queue.color", port, flexpass.queue)]
        buf = by[("tf1.tm.queue.buffer", port, flexpass.queue)]
        pct = float(color["drop_limit_red"].rstrip("%"))
        red_cells = math.ceil(sw.ports[port].queues.red_threshold_bytes / 80)
        # The red limit is the selective-drop threshold, exact to a cell.
        assert 0 <= buf["guaranteed_cells"] * pct / 100 - red_cells < 1
        assert by[("tf1.tm.queue.color", port, legacy.queue)] == {"drop_enable": False}
        assert by[("tf1.tm.queue.buffer", port, credit.queue)]["guaranteed_cells"] == 8


def test_frame_qdepth_per_target():
    raw = raw_golden()
    raw["switches"].pop("s2")
    units = {t: derived(as_target(raw, t), "s1", 1).frame_qdepth(300)
             for t in ("simple_switch", "flexpass_switch", "tofino", "tofino2")}
    # 300 B + FCS + 1 bridged byte = 305 B: 4 cells of 80 B, 2 of 176 B.
    assert units == {"simple_switch": 1, "flexpass_switch": 300, "tofino": 4, "tofino2": 2}


def test_red_limit_step_closest_to_buffer():
    cfg = golden_cfg()
    d = derived(cfg, "s1", 1)  # red 100 KB = 1250 cells, buffer 300 KB = 3750 cells
    pct, cells = d.tofino_red_limit
    assert pct == 37.5 and cells == 3334
    assert pct in TOFINO_COLOR_LIMITS
    d2 = derived(cfg, "s1", 2)  # red 30 KB = 375 cells, buffer 200 KB: 15 % -> 12.5 %
    assert d2.tofino_red_limit == (12.5, 3000)


def test_slow_port_is_shaped_and_fast_port_is_not():
    cfg = golden_cfg()
    ports = {tp.port: tp for tp in tofino_settings(cfg, "s1")}
    assert ports[2].speed == "BF_SPEED_1G" and ports[2].shaper_kbps == 1000
    assert ports[1].speed == "BF_SPEED_10G" and ports[1].shaper_kbps is None
    assert ports[4].speed == "BF_SPEED_100G"


def test_tofino2_uses_tf2_tables_and_176_byte_cells():
    cfg = golden_cfg()
    ops = B.switch_ops(cfg, "s2")
    assert {op.table.split(".")[0] for op in ops if ".tm." in op.table} == {"tf2"}
    d = derived(cfg, "s2", 8)
    assert d.cell_bytes == 176
    assert d.legacy_ecn_threshold_qdepth == math.ceil(65000 / 176)  # naive: legacy K only
    # naive profile: one shared data queue, no colour drop, credits at the full rate
    assert d.credit_rate_bps == pytest.approx(400e9 * 84 / 1622)
    assert not any(op.data_dict.get("drop_enable") for op in ops if op.table.endswith("queue.color"))


# ---------------------------------------------------------------- config errors


def test_tofino_rejects_link_rate_above_port_speed():
    raw = raw_golden()
    raw["switches"]["s1"]["ports"][1]["link_rate"] = "200Gbps"
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.path == "switches.s1.ports.1.link_rate" and "100Gbps" in str(e.value)
    raw["switches"]["s1"]["target"] = "tofino2"  # 200G ports exist on Tofino2
    assert parse_config(raw).switch("s1").target == "tofino2"


def test_tofino_port_out_of_range_and_unknown_target():
    raw = raw_golden()
    raw["switches"]["s1"]["ports"][128] = {"link_rate": "10Gbps", "mac": "02:00:00:00:01:09"}
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.path == "switches.s1.ports.128" and "0..63" in str(e.value)
    raw = raw_golden()
    raw["switches"]["s1"]["target"] = "tofino3"
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.path == "switches.s1.target" and "tofino2" in str(e.value)


def test_tofino_defaults_to_the_bfrt_grpc_port():
    cfg = golden_cfg()
    assert cfg.switch("s1").grpc_addr == "127.0.0.1:50052"


def test_bfrt_ops_refuse_a_bmv2_switch():
    cfg = load_config(REPO / "control-plane" / "configs" / "dumbbell.yaml")
    with pytest.raises(ConfigError) as e:
        B.switch_ops(cfg, "s1")
    assert e.value.path == "switches.s1.target" and "tofino" in str(e.value)


# ---------------------------------------------------------------- plan


def read_back(ops, tweak=None):
    """What a switch holding exactly `ops` would return."""
    out = []
    for op in ops:
        data = dict(op.data)
        if tweak:
            data = tweak(op, data)
        out.append(B.ReadEntry(op.table, () if op.write == B.DEFAULT else op.key, data, op.action,
                               op.write == B.DEFAULT))
    return out


def test_plan_empty_switch_inserts_entries_and_modifies_fixed_objects():
    ops = B.switch_ops(golden_cfg(), "s1")
    ups = B.plan(ops, [])
    assert len(ups) == len(ops)
    assert {u.op for u in ups if u.desired.write == B.ENTRY} == {B.INSERT}
    assert {u.op for u in ups if u.desired.write != B.ENTRY} == {B.MOD}


def test_plan_in_sync_tolerates_hardware_rounding_and_member_order():
    ops = B.switch_ops(golden_cfg(), "s1")

    def rounded(op, data):
        if "max_rate" in data:
            data["max_rate"] = int(data["max_rate"] * 1.03)  # mantissa/exponent
        if "$ACTION_MEMBER_ID" in data and isinstance(data["$ACTION_MEMBER_ID"], list):
            data["$ACTION_MEMBER_ID"] = list(reversed(data["$ACTION_MEMBER_ID"]))
        return data

    assert B.plan(ops, read_back(ops, rounded)) == []


def test_plan_modifies_changed_and_deletes_stale_in_safe_order():
    cfg = golden_cfg()
    ops = B.switch_ops(cfg, "s1")
    existing = read_back(ops)
    stale_route = B.ReadEntry("routing", (B.KeyField("dst_addr", "lpm", 10 << 24, 8),),
                              {"$SELECTOR_GROUP_ID": 9})
    stale_group = B.ReadEntry("ecmp_selector", (B.exact("$SELECTOR_GROUP_ID", 9),),
                              {"$ACTION_MEMBER_ID": [7]})
    stale_member = B.ReadEntry("ecmp_profile", (B.exact("$ACTION_MEMBER_ID", 7),),
                               {"port": 3, "dmac": 1}, "set_nexthop")
    changed = [e if e.table != "classifier" or e.is_default else
               B.ReadEntry(e.table, e.key, dict(e.data, qid=0), e.action) for e in existing]
    ups = B.plan(ops, [stale_member, stale_group] + changed + [stale_route])
    mods = [u for u in ups if u.op == B.MOD]
    assert len(mods) == 5 and all(u.desired.table == "classifier" for u in mods)
    assert "(was: qid=0)" in mods[0].describe()
    dels = [u.existing.table for u in ups if u.op == B.DELETE]
    assert dels == ["routing", "ecmp_selector", "ecmp_profile"]
    assert ups[-3:] == [u for u in ups if u.op == B.DELETE]


def test_plan_rejects_duplicates():
    ops = B.switch_ops(golden_cfg(), "s1")
    with pytest.raises(ValueError, match="duplicate"):
        B.plan(ops + ops[:1], [])


# ---------------------------------------------------------------- SDE client


def test_missing_sde_error_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "bfrt_grpc", None)  # not importable
    with pytest.raises(BfrtUnavailable) as e:
        load_bfrt_grpc({})
    msg = str(e.value)
    assert "bfrt_grpc" in msg and "SDE_INSTALL" in msg and "p4studio" in msg
    with pytest.raises(BfrtUnavailable) as e:
        load_bfrt_grpc({"SDE_INSTALL": str(tmp_path)})
    assert str(tmp_path) in str(e.value) and "site-packages/tofino/bfrt_grpc" in str(e.value)


def test_cli_apply_without_sde_fails_clearly(capsys, monkeypatch):
    from flexpass_cp import cli

    monkeypatch.setitem(__import__("sys").modules, "bfrt_grpc", None)
    monkeypatch.delenv("SDE_INSTALL", raising=False)
    monkeypatch.delenv("SDE", raising=False)
    rc = cli.main(["apply", "--config", str(GOLDEN_CFG), "--switch", "s1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "bfrt_grpc" in err and "SDE_INSTALL" in err


def test_cli_show_lists_ops_and_json(capsys):
    from flexpass_cp import cli

    assert cli.main(["show", "--config", str(GOLDEN_CFG), "--switch", "s1"]) == 0
    out = capsys.readouterr().out
    assert "80-byte cells" in out and "tf1.tm.queue.color" in out and "37.5%" in out
    assert cli.main(["show", "--config", str(GOLDEN_CFG), "--switch", "s1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(GOLDEN.read_text())["s1"]
    # PPT (s3): K per priority in cells; FlashPass (s4): the emulation queue's numbers.
    assert cli.main(["show", "--config", str(GOLDEN_CFG), "--switch", "s3"]) == 0
    out = capsys.readouterr().out
    assert "profile ppt" in out and re.search(r"^\s+1\s+40 Gbit/s\s+1500\s+149\s", out, re.M), out
    assert cli.main(["show", "--config", str(GOLDEN_CFG), "--switch", "s4"]) == 0
    out = capsys.readouterr().out
    assert "profile flashpass" in out and "25%" in out and "tf2.tm.queue.sched_shaping" in out, out


# ---------------------------------------------------------------- P4 names


def tna_source():
    return "\n".join(p.read_text() for p in sorted(TNA.rglob("*.p4")))


def test_ops_use_names_declared_in_p4src_tna():
    text = tna_source()
    declared = set(re.findall(r'@name\("\.([A-Za-z_0-9]+)"\)', text))
    cfg = golden_cfg()
    used = B.p4_names([op for sw in sorted(cfg.switches) for op in B.switch_ops(cfg, sw)])
    counters = set(B.counter_tables())
    missing = (used["tables"] | used["actions"] | counters) - declared
    assert not missing, f"used by bfrt_ops but not declared in p4src/tna: {sorted(missing)}"


def test_key_and_data_field_names_exist_in_p4src_tna():
    text = tna_source()
    key_names = set(re.findall(r':\s*(?:exact|lpm|ternary)\s*@name\("([A-Za-z_0-9]+)"\)', text))
    params = set()
    for m in re.finditer(r'action\s+\w+\(([^)]*)\)', text):
        params |= {a.split()[-1] for a in m.group(1).split(",") if a.strip()}
    for op in B.p4_ops(golden_cfg(), "s1"):
        for k in op.key:
            assert k.name.startswith("$") or k.name in key_names, f"{op.table}: key {k.name}"
        if op.action:
            for name, _ in op.data:
                assert name in params, f"{op.table}/{op.action}: parameter {name}"


def test_tna_program_shares_the_v1model_names():
    v1 = "\n".join(p.read_text() for p in (REPO / "p4src" / "v1model").rglob("*.p4"))
    names = lambda t: set(re.findall(r'@name\("\.([A-Za-z_0-9]+)"\)', t))  # noqa: E731
    # TNA adds only the ActionSelector's member profile; ecn_color (FlashPass's colour
    # by ECN code point) is v1model only: profile flashpass is BMv2 / flexpass_switch only.
    v1_only = {"ecmp_selector", "ecn_color", "set_color", "keep_color"}
    assert names(v1) - v1_only <= names(tna_source())
    assert names(tna_source()) - names(v1) == {B.AP_ECMP_MEMBERS}

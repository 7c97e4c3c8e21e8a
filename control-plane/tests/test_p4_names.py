"""The control plane and the P4 program agree on object names.

Always: the @name(".x") annotations in p4src/ name every table, action,
action profile, meter and counter the control plane uses.  When the P4 program
has been built (build/p4/flexpass.p4info.txtpb), every entity of the example
configs also converts to P4Runtime protobufs against the real P4Info (names,
match fields, parameter names and bit widths).
"""

import json
import re
from pathlib import Path

import pytest

from flexpass_cp import p4_program as P4
from flexpass_cp.config import load_config
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.dscp import TrafficClass
from flexpass_cp.entities import ActionProfileGroup

REPO = Path(__file__).resolve().parents[2]
P4SRC = REPO / "p4src"
P4INFO = REPO / "build" / "p4" / "flexpass.p4info.txtpb"
CONFIGS = [REPO / "control-plane" / "configs" / "dumbbell.yaml", REPO / "ptf-tests" / "ptf-config.yaml"]


def p4_names():
    text = "\n".join(p.read_text() for p in P4SRC.rglob("*.p4"))
    return set(re.findall(r'@name\("\.([A-Za-z_0-9]+)"\)', text)), text


def test_p4_declares_every_name_the_control_plane_uses():
    names, _ = p4_names()
    used = {P4.T_CLASSIFIER, P4.T_ROUTING, P4.T_QUEUE_THRESHOLDS, P4.T_PORT_SMAC, P4.AP_ECMP,
            P4.METER_CREDIT, P4.INGRESS_EVENTS, *P4.PORT_QUEUE_COUNTERS,
            "set_class", "set_nexthop", "set_thresholds", "set_smac"}
    assert used <= names, f"missing in p4src: {sorted(used - names)}"


def test_p4_constants_match():
    _, text = p4_names()
    kinds = dict(re.findall(r"const kind_t KIND_(\w+)\s*=\s*(\d+);", text))
    assert {k: int(v) for k, v in kinds.items()} == {
        "LEGACY": P4.KIND[TrafficClass.LEGACY], "CREDIT": P4.KIND[TrafficClass.CREDIT],
        "PROACTIVE": P4.KIND[TrafficClass.PROACTIVE_DATA],
        "REACTIVE": P4.KIND[TrafficClass.REACTIVE_DATA], "CONTROL": P4.KIND[TrafficClass.CONTROL]}
    assert re.search(rf"#define MAX_PORTS {P4.MAX_PORTS}\b", text)
    assert re.search(rf"#define ECMP_MAX_GROUP_SIZE {P4.ECMP_MAX_GROUP_SIZE}\b", text)
    assert re.search(r"#define FLEXPASS_UDP_PORT 7890\b", text)


DEFINE_P4 = P4SRC / "shared" / "define.p4"


def _p4_macro(text, name):
    """(parameters, body) of ``#define name(params) body``."""
    m = re.search(rf"^#define {name}\(([^)]*)\)\s+(.+?)\s*$", text, re.M)
    assert m, f"no #define {name}(...) in {DEFINE_P4}"
    return [a.strip() for a in m.group(1).split(",")], m.group(2)


def _p4_expr_to_python(body, concat_bits):
    """A P4 bit expression as Python: casts dropped, x[h:l] a shift and mask,
    a ++ b (b of `concat_bits` bits) a << concat_bits | b."""
    py = re.sub(r"\(bit<\d+>\)", "", body)
    py = re.sub(r"(\w+|\(\w+\))\[(\d+):(\d+)\]",
                lambda m: f"(({m.group(1)} >> {m.group(3)}) & {(1 << (int(m.group(2)) - int(m.group(3)) + 1)) - 1})",
                py)
    return py.replace("++", f"<< {concat_bits} |")


def test_queue_index_is_the_p4_macro():
    """p4_program.port_queue_index computes what define.p4's PORT_QUEUE_INDEX does,
    and every P4 counter index goes through the macro."""
    text = DEFINE_P4.read_text()
    qid_bits = int(re.search(r"typedef bit<(\d+)> qid_t;", text).group(1))
    assert int(re.search(r"#define QUEUES_PER_PORT (\d+)", text).group(1)) == P4.QUEUES_PER_PORT == 1 << qid_bits
    size = int(re.search(r"#define PORT_QUEUE_COUNTER_SIZE (\d+)", text).group(1))
    assert size == P4.MAX_PORTS * P4.QUEUES_PER_PORT
    params, body = _p4_macro(text, "PORT_QUEUE_INDEX")
    expr = compile(_p4_expr_to_python(body, qid_bits), "PORT_QUEUE_INDEX", "eval")
    cells = set()
    for port in range(P4.MAX_PORTS):
        for qid in range(P4.QUEUES_PER_PORT):
            cell = eval(expr, {}, dict(zip(params, (port, qid))))
            assert cell == P4.port_queue_index(port, qid), (port, qid, body)
            cells.add(cell)
    assert cells == set(range(size))
    uses = {p.relative_to(P4SRC).as_posix() for p in P4SRC.rglob("*.p4") if "PORT_QUEUE_INDEX(" in p.read_text()}
    assert uses >= {"v1model/include/control/counters.p4", "tna/include/control/credit_meter.p4",
                    "tna/include/control/ecn_red.p4"}
    for p in P4SRC.rglob("*.p4"):
        if p != DEFINE_P4:
            code = re.sub(r"/\*.*?\*/", "", p.read_text(), flags=re.S)
            assert not re.search(r"<< *3\b|\+\+ *[\w.]*qid", code), f"{p}: a queue index by hand"


def test_no_threshold_is_the_p4_constant():
    text = "\n".join(p.read_text() for p in P4SRC.rglob("*.p4"))
    (width, value), = re.findall(r"const bit<(\d+)> QDEPTH_NONE = (\w+);", text)
    assert int(value, 0) == P4.NO_THRESHOLD == (1 << int(width)) - 1
    assert "QDEPTH_NONE" in DEFINE_P4.read_text()
    assert len(re.findall(r"0x7FFFF", text, re.I)) == 1, "write QDEPTH_NONE, not its value"


@pytest.mark.skipif(not P4INFO.exists(), reason="P4 program not built (make p4)")
@pytest.mark.parametrize("cfg_path", CONFIGS, ids=lambda p: p.name)
def test_entities_encode_against_built_p4info(cfg_path):
    p4rt = pytest.importorskip("flexpass_cp.p4runtime_client")
    info = p4rt.P4Info.from_file(P4INFO)
    cfg = load_config(cfg_path)
    for sw in cfg.switches:
        for e in switch_entries(cfg, sw):
            proto = info.entity_proto(e)
            back = info.entity_from_proto(proto)
            if isinstance(e, ActionProfileGroup):
                assert back.same_state(e)
            else:
                assert back == e
    for name in (*P4.PORT_QUEUE_COUNTERS, P4.INGRESS_EVENTS):
        info.get("counters", name)


# --- Tofino: the compiled TNA program's bfrt.json -------------------------------

TOFINO_GOLDEN = REPO / "control-plane" / "tests" / "data" / "tofino-golden.yaml"
BFRT_JSONS = {chip: REPO / "build" / "p4-tofino" / chip / "bfrt.json" for chip in ("tofino", "tofino2")}
UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _width(spec):
    t = spec.get("type", {})
    return t.get("width") if t.get("type") == "bytes" else UINT_BITS.get(t.get("type"))


def _fields(table, action):
    """{data field name: bit width or None} an op on ``table`` may write with ``action``."""
    out = {}
    for d in table.get("data", []):
        for f in d.get("oneof", [d.get("singleton")]):
            out[f["name"]] = _width(f)
    for a in table.get("action_specs", []):
        if action is not None and a["name"].split(".")[-1] == action:
            out.update({f["name"]: _width(f) for f in a.get("data", [])})
    return out


@pytest.mark.parametrize("chip", sorted(BFRT_JSONS))
def test_bfrt_ops_fit_the_compiled_tna_program(chip):
    """Every P4 operation flexpass-ctl writes for a Tofino switch names a table, key
    fields (with their match type), an action and data fields of the program p4c's
    Tofino backend built (make p4-tofino), and every value fits its field's width:
    what bf_switchd would refuse at apply time fails here, without an SDE."""
    from flexpass_cp import bfrt_ops as B

    if not BFRT_JSONS[chip].is_file():
        pytest.skip(f"SKIPPED: {BFRT_JSONS[chip]} missing: make p4-tofino (needs p4c's Tofino backend)")
    tables = {t["name"]: t for t in json.loads(BFRT_JSONS[chip].read_text())["tables"]}
    cfg = load_config(TOFINO_GOLDEN)
    ops = [op for sw in cfg.switches for op in B.switch_ops(cfg, sw)
           if not op.table.startswith("$") and "." not in op.table]
    assert {op.table for op in ops} >= {P4.T_CLASSIFIER, P4.T_ROUTING, P4.T_QUEUE_THRESHOLDS,
                                       P4.T_PORT_SMAC, P4.METER_CREDIT}
    for op in ops:
        t = tables.get(f"pipe.{op.table}")
        assert t is not None, f"{chip}: no table pipe.{op.table} in bfrt.json ({op.describe()})"
        keys = {k["name"]: k for k in t.get("key", [])}
        for k in op.key:
            assert k.name in keys, f"{chip}: {op.table} has no key field {k.name} (has {sorted(keys)})"
            assert keys[k.name]["match_type"].lower() == k.match, f"{chip}: {op.describe()}: {keys[k.name]}"
            w = _width(keys[k.name])
            assert not (isinstance(k.value, int) and w) or k.value < 1 << w, f"{chip}: {op.describe()}"
        if op.action is not None:
            names = [a["name"].split(".")[-1] for a in t.get("action_specs", [])]
            assert op.action in names, f"{chip}: {op.table} has no action {op.action} (has {names})"
        fields = _fields(t, op.action)
        for name, v in op.data:
            assert name in fields, f"{chip}: {op.describe()}: no data field {name} (has {sorted(fields)})"
            w = fields[name]
            if isinstance(v, int) and not isinstance(v, bool) and w:
                assert 0 <= v < 1 << w, f"{chip}: {op.describe()}: {name}={v} exceeds {w} bits"

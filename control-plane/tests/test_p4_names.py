"""The control plane and the P4 program agree on object names.

Always: the @name(".x") annotations in p4src/ name every table, action,
action profile, meter and counter the control plane uses.  When the P4 program
has been built (build/p4/flexpass.p4info.txtpb), every entity of the example
configs also converts to P4Runtime protobufs against the real P4Info (names,
match fields, parameter names and bit widths).
"""

import re
from pathlib import Path

import pytest

from flexpass_cp import config as C

REPO = Path(__file__).resolve().parents[2]
P4SRC = REPO / "p4src"
P4INFO = REPO / "build" / "p4" / "flexpass.p4info.txtpb"
CONFIGS = [REPO / "control-plane" / "configs" / "dumbbell.yaml", REPO / "ptf-tests" / "ptf-config.yaml"]


def p4_names():
    text = "\n".join(p.read_text() for p in P4SRC.rglob("*.p4"))
    return set(re.findall(r'@name\("\.([A-Za-z_0-9]+)"\)', text)), text


def test_p4_declares_every_name_the_control_plane_uses():
    names, _ = p4_names()
    used = {C.T_CLASSIFIER, C.T_ROUTING, C.T_QUEUE_THRESHOLDS, C.T_PORT_SMAC, C.AP_ECMP,
            C.METER_CREDIT, C.INGRESS_EVENTS, *C.PORT_QUEUE_COUNTERS,
            "set_class", "set_nexthop", "set_thresholds", "set_smac"}
    assert used <= names, f"missing in p4src: {sorted(used - names)}"


def test_p4_constants_match():
    _, text = p4_names()
    kinds = dict(re.findall(r"const kind_t KIND_(\w+)\s*=\s*(\d+);", text))
    assert {k: int(v) for k, v in kinds.items()} == {
        "LEGACY": C.KIND[C.TrafficClass.LEGACY], "CREDIT": C.KIND[C.TrafficClass.CREDIT],
        "PROACTIVE": C.KIND[C.TrafficClass.PROACTIVE_DATA],
        "REACTIVE": C.KIND[C.TrafficClass.REACTIVE_DATA], "CONTROL": C.KIND[C.TrafficClass.CONTROL]}
    assert re.search(rf"#define MAX_PORTS {C.MAX_PORTS}\b", text)
    assert re.search(rf"#define ECMP_MAX_GROUP_SIZE {C.ECMP_MAX_GROUP_SIZE}\b", text)
    assert re.search(r"#define FLEXPASS_UDP_PORT 7890\b", text)


@pytest.mark.skipif(not P4INFO.exists(), reason="P4 program not built (make p4)")
@pytest.mark.parametrize("cfg_path", CONFIGS, ids=lambda p: p.name)
def test_entities_encode_against_built_p4info(cfg_path):
    p4rt = pytest.importorskip("flexpass_cp.p4runtime_client")
    info = p4rt.P4Info.from_file(P4INFO)
    cfg = C.load_config(cfg_path)
    for sw in cfg.switches:
        for e in C.switch_entries(cfg, sw):
            proto = info.entity_proto(e)
            back = info.entity_from_proto(proto)
            if isinstance(e, C.ActionProfileGroup):
                assert back.same_state(e)
            else:
                assert back == e
    for name in (*C.PORT_QUEUE_COUNTERS, C.INGRESS_EVENTS):
        info.get("counters", name)

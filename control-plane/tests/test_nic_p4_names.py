"""The NIC edge (p4src/pna, issue #27) takes the switch's classifier entries.

Always: p4src/pna declares the switch's classifier, its action and the credit
meter under the control plane's names.  When `make p4-nic` has built it, the
classifier entries the control plane writes for a switch (the same DSCP plan)
encode and decode unchanged against each backend's P4Info.
"""

import re
from pathlib import Path

import pytest

from flexpass_cp import p4_program as P4
from flexpass_cp.config import load_config
from flexpass_cp.config.entries import nic_entries, switch_entries
from flexpass_cp.entities import MeterEntry

REPO = Path(__file__).resolve().parents[2]
PNA = REPO / "p4src" / "pna"
P4INFOS = {b: REPO / "build" / "p4-nic" / b / "flexpass_nic.p4info.txtpb" for b in ("bmv2", "dpdk")}
CONFIG = REPO / "control-plane" / "configs" / "dumbbell.yaml"


def test_pna_declares_the_switch_names_it_shares():
    text = "\n".join(p.read_text() for p in PNA.rglob("*.p4"))
    names = set(re.findall(r'@name\("\.([A-Za-z_0-9]+)"\)', text))
    assert {P4.T_CLASSIFIER, "set_class", P4.METER_CREDIT, "credit_dropped", P4.T_NIC_PORT, "send_to"} <= names
    assert '#include "../shared/define.p4"' in (PNA / "flexpass_nic.p4").read_text()


@pytest.mark.parametrize("backend", sorted(P4INFOS))
def test_classifier_entries_encode_against_the_nic_p4info(backend):
    if not P4INFOS[backend].is_file():
        pytest.skip(f"SKIPPED: {P4INFOS[backend]} missing: make p4-nic (needs p4c-bm2-pna / p4c-dpdk)")
    p4rt = pytest.importorskip("flexpass_cp.p4runtime_client")
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    # Without type_info: its new_types map (PNA's PortId_t translation) does not
    # parse in text format with this protobuf; the classifier uses no such type.
    text = re.sub(r"^type_info \{.*?^\}\n", "", P4INFOS[backend].read_text(), flags=re.M | re.S)
    info = p4rt.P4Info(text_format.Parse(text, p4info_pb2.P4Info()))
    cfg = load_config(CONFIG)
    entries = [e for sw in cfg.switches for e in switch_entries(cfg, sw)
               if getattr(e, "table", None) == P4.T_CLASSIFIER]
    assert entries
    for e in entries:
        assert info.entity_from_proto(info.entity_proto(e)) == e


@pytest.mark.parametrize("backend", sorted(P4INFOS))
def test_nic_entries_encode_against_the_nic_p4info(backend):
    """What the control plane derives from a nics: entry (classifier, nic_port, the credit
    meter where the backend's P4Info lists it) is what the PNA program declares."""
    if not P4INFOS[backend].is_file():
        pytest.skip(f"SKIPPED: {P4INFOS[backend]} missing: make p4-nic (needs p4c-bm2-pna / p4c-dpdk)")
    p4rt = pytest.importorskip("flexpass_cp.p4runtime_client")
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    text = re.sub(r"^type_info \{.*?^\}\n", "", P4INFOS[backend].read_text(), flags=re.M | re.S)
    info = p4rt.P4Info(text_format.Parse(text, p4info_pb2.P4Info()))
    has_meter = f'name: "{P4.METER_CREDIT}"' in text
    cfg = load_config(CONFIG)
    entries = [e for e in nic_entries(cfg, "h3") if has_meter or not isinstance(e, MeterEntry)]
    assert any(getattr(e, "table", None) == P4.T_NIC_PORT for e in entries)
    for e in entries:
        assert info.entity_from_proto(info.entity_proto(e)) == e

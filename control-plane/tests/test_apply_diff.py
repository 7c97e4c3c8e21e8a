"""Idempotent apply: plan_updates against a fake switch, BMv2 queue commands,
and P4Runtime encodings (protobuf only, no switch)."""

import pytest

from flexpass_cp.config import parse_config
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.config.queues import bmv2_queue_commands
from flexpass_cp.entities import (
    DELETE,
    INSERT,
    MODIFY,
    ActionProfileGroup,
    ActionProfileMember,
    MeterEntry,
    TableEntry,
    plan_updates,
)

from test_config import base


class FakeSwitch:
    """Holds entities like a P4Runtime server; rejects dangling references."""

    def __init__(self):
        self.state = {}
        # Default entries and meter cells always exist.
        self.state[("table_entry", "classifier", "default")] = TableEntry(
            "classifier", (), "set_class", {"qid": 0, "color": 0, "kind": 0}, is_default=True)

    def read(self):
        return list(self.state.values())

    def write(self, updates):
        for u in updates:
            e, k = u.entity, u.entity.key
            if u.op == INSERT:
                assert k not in self.state, f"INSERT of existing {e.describe()}"
                self._check_refs(e)
                self.state[k] = e
            elif u.op == MODIFY:
                if not (isinstance(e, MeterEntry) or isinstance(e, TableEntry) and e.is_default):
                    assert k in self.state, f"MODIFY of missing {e.describe()}"
                self._check_refs(e)
                self.state[k] = e
            else:
                assert k in self.state, f"DELETE of missing {e.describe()}"
                self._check_unreferenced(e)
                del self.state[k]

    def _check_refs(self, e):
        if isinstance(e, TableEntry) and e.member_id is not None:
            assert ("member", "ecmp_selector", e.member_id) in self.state
        if isinstance(e, TableEntry) and e.group_id is not None:
            assert ("group", "ecmp_selector", e.group_id) in self.state
        if isinstance(e, ActionProfileGroup):
            for m in e.members:
                assert ("member", e.profile, m) in self.state, f"group uses missing member {m}"

    def _check_unreferenced(self, e):
        for other in self.state.values():
            if isinstance(e, ActionProfileMember):
                assert getattr(other, "member_id", None) != e.member_id or not isinstance(other, TableEntry)
                if isinstance(other, ActionProfileGroup):
                    assert e.member_id not in other.members, "member deleted while in a group"
            if isinstance(e, ActionProfileGroup) and isinstance(other, TableEntry):
                assert other.group_id != e.group_id, "group deleted while referenced"


def test_first_apply_inserts_everything_then_is_idempotent():
    cfg = parse_config(base())
    desired = switch_entries(cfg, "s1")
    sw = FakeSwitch()
    ups = plan_updates(desired, sw.read())
    # The default entries (classifier, ecn_color) and 4 meters are MODIFY.
    assert sum(u.op == INSERT for u in ups) == len(desired) - 2 - 4
    assert all(u.op != DELETE for u in ups)
    # Members before groups before table entries.
    kinds = [u.entity.kind for u in ups]
    assert kinds.index("group") > max(i for i, k in enumerate(kinds) if k == "member")
    assert kinds.index("table_entry") > kinds.index("group")
    sw.write(ups)
    assert plan_updates(desired, sw.read()) == []


def test_changed_config_modifies_and_deletes_stale():
    sw = FakeSwitch()
    sw.write(plan_updates(switch_entries(parse_config(base()), "s1"), sw.read()))

    raw = base()
    raw["dscp"] = {"control": 25}  # classifier: one entry moves (delete 24, insert 25)
    raw["switches"]["s1"]["ports"][1]["link_rate"] = "25Gbps"  # meter 1 modified
    raw["switches"]["s1"]["ecmp_groups"]["up"] = ["a", "b"]  # group modified
    raw["switches"]["s1"]["routes"] = raw["switches"]["s1"]["routes"][1:]  # host route removed
    del raw["switches"]["s1"]["next_hops"]["d"]  # member 4 removed
    desired = switch_entries(parse_config(raw), "s1")
    ups = plan_updates(desired, sw.read())
    desc = [(u.op, u.entity.kind) for u in ups]
    assert (INSERT, "table_entry") in desc and (DELETE, "table_entry") in desc
    assert (MODIFY, "group") in desc and (MODIFY, "meter") in desc and (DELETE, "member") in desc
    deleted = [u.entity for u in ups if u.op == DELETE]
    assert any(isinstance(e, TableEntry) and dict(e.match).get("dscp") == 24 for e in deleted)
    modified_meters = [u.entity.index for u in ups if u.op == MODIFY and u.entity.kind == "meter"]
    assert modified_meters == [1]
    sw.write(ups)  # the fake asserts reference safety
    assert plan_updates(desired, sw.read()) == []
    assert len(sw.read()) == len(desired)


def test_unmanaged_tables_are_left_alone():
    sw = FakeSwitch()
    foreign = TableEntry("some_other_table", (("x", 1),), "a", {})
    sw.state[foreign.key] = foreign
    ups = plan_updates(switch_entries(parse_config(base()), "s1"), sw.read())
    assert all(u.entity != foreign for u in ups)


def test_group_member_order_does_not_cause_spurious_modify():
    g1 = ActionProfileGroup("ecmp_selector", 1, (1, 2, 3), 16)
    g2 = ActionProfileGroup("ecmp_selector", 1, (3, 1, 2), 0)
    assert plan_updates([g1], [g2]) == []


def test_duplicate_desired_is_rejected():
    e = TableEntry("routing", (("dst_addr", (1, 32)),), member_id=1)
    with pytest.raises(ValueError, match="duplicate"):
        plan_updates([e, e], [])


def test_queue_commands():
    cfg = parse_config(base())
    cmds = bmv2_queue_commands(cfg, "s1")
    lines = [c.line() for c in cmds]
    assert "set_queue_depth 8 1 7" in lines  # credit queue: 8 credits
    assert f"set_queue_rate {round(0.5 * 10e9 / (8 * 1538))} 1 6" in lines  # legacy (1-w_q)C
    assert f"set_queue_rate {round(10e9 / (8 * 1538))} 1 7" in lines  # credits: the meter limits
    assert len(cmds) == 6 * 4


# ---------------------------------------------------------------- P4Runtime encoding

p4rt = pytest.importorskip("flexpass_cp.p4runtime_client", reason="p4runtime/grpcio not installed")


def _p4info():
    from p4.config.v1 import p4info_pb2

    info = p4info_pb2.P4Info()
    t = info.tables.add()
    t.preamble.id, t.preamble.name = 1, "routing"
    f = t.match_fields.add(id=1, name="dst_addr", bitwidth=32, match_type=p4info_pb2.MatchField.LPM)
    t2 = info.tables.add()
    t2.preamble.id, t2.preamble.name = 2, "classifier"
    t2.match_fields.add(id=1, name="dscp", bitwidth=6, match_type=p4info_pb2.MatchField.EXACT)
    a = info.actions.add()
    a.preamble.id, a.preamble.name = 10, "set_class"
    a.params.add(id=1, name="qid", bitwidth=3)
    a.params.add(id=2, name="color", bitwidth=2)
    a.params.add(id=3, name="kind", bitwidth=3)
    m = info.meters.add()
    m.preamble.id, m.preamble.name = 20, "credit_meter"
    return p4rt.P4Info(info)


def test_encode_canonical():
    assert p4rt.encode_value(0, 9, "x") == b"\x00"
    assert p4rt.encode_value(0x0a010000, 32, "x") == b"\x0a\x01\x00\x00"
    assert p4rt.encode_value(5, 9, "x") == b"\x05"
    with pytest.raises(p4rt.P4RuntimeError, match="does not fit"):
        p4rt.encode_value(64, 6, "dscp")


def test_entity_roundtrip():
    info = _p4info()
    for e in (TableEntry("classifier", (("dscp", 46),), "set_class", {"qid": 7, "color": 0, "kind": 1}),
              TableEntry("classifier", (), "set_class", {"qid": 6, "color": 0, "kind": 0}, is_default=True),
              TableEntry("routing", (("dst_addr", (0x0a010000, 16)),), group_id=3),
              MeterEntry("credit_meter", 2, 1000, 120, 1000, 120)):
        proto = info.entity_proto(e)
        assert info.entity_from_proto(proto) == e
    with pytest.raises(p4rt.P4RuntimeError, match="parameters"):
        info.entity_proto(TableEntry("classifier", (("dscp", 1),), "set_class", {"qid": 1}))
    with pytest.raises(p4rt.P4RuntimeError, match="no table named"):
        info.entity_proto(TableEntry("nope", (), "set_class", {}))


def test_unreachable_switch_error():
    with pytest.raises(p4rt.P4RuntimeError, match="switch not reachable"):
        p4rt.P4RuntimeClient("127.0.0.1:1", timeout=0.5)

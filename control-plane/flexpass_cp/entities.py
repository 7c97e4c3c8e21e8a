"""Switch state as plain values, independent of protobuf.

The config compiler (:mod:`flexpass_cp.config`) produces these; the P4Runtime
client (:mod:`flexpass_cp.p4runtime_client`) converts them to and from
``p4.v1.p4runtime_pb2`` messages using the P4Info.  :func:`plan_updates` is
the idempotent-apply logic (INSERT what is missing, MODIFY what differs,
DELETE what is stale), a pure function of (desired, existing).

Match values: exact -> int; lpm -> (int value, prefix length).
Action parameters: name -> int.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

Match = Tuple[Tuple[str, Union[int, Tuple[int, int]]], ...]


def _fmt_params(params: Dict[str, int]) -> str:
    return ", ".join(f"{k}={_fmt_int(k, v)}" for k, v in params.items())


def _fmt_int(name: str, v: int) -> str:
    if "mac" in name and isinstance(v, int):
        h = f"{v:012x}"
        return ":".join(h[i:i + 2] for i in range(0, 12, 2))
    return str(v)


def _fmt_match(match: Match) -> str:
    parts = []
    for name, v in match:
        if isinstance(v, tuple):
            ip = ".".join(str((v[0] >> s) & 0xFF) for s in (24, 16, 8, 0)) if name.endswith("addr") else str(v[0])
            parts.append(f"{name}={ip}/{v[1]}")
        else:
            parts.append(f"{name}={v}")
    return ", ".join(parts)


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: Match
    action: Optional[str] = None  # direct action (None when member_id/group_id is used)
    params: Dict[str, int] = field(default_factory=dict, hash=False, compare=True)
    member_id: Optional[int] = None
    group_id: Optional[int] = None
    is_default: bool = False

    kind = "table_entry"

    def __post_init__(self):
        # Canonical match order (by field name) so equality does not depend on it.
        object.__setattr__(self, "match", tuple(sorted(self.match)))

    @property
    def key(self):
        return (self.kind, self.table, "default" if self.is_default else tuple(sorted(self.match)))

    def describe(self) -> str:
        m = "(default)" if self.is_default else _fmt_match(self.match)
        if self.member_id is not None:
            a = f"member {self.member_id}"
        elif self.group_id is not None:
            a = f"group {self.group_id}"
        else:
            a = f"{self.action}({_fmt_params(self.params)})"
        return f"{self.table}[{m}] -> {a}"


@dataclass(frozen=True)
class ActionProfileMember:
    profile: str
    member_id: int
    action: str
    params: Dict[str, int] = field(default_factory=dict, hash=False)

    kind = "member"

    @property
    def key(self):
        return (self.kind, self.profile, self.member_id)

    def describe(self) -> str:
        return f"{self.profile} member {self.member_id} -> {self.action}({_fmt_params(self.params)})"


@dataclass(frozen=True)
class ActionProfileGroup:
    profile: str
    group_id: int
    members: Tuple[int, ...]
    max_size: int = 0

    kind = "group"

    @property
    def key(self):
        return (self.kind, self.profile, self.group_id)

    def same_state(self, other: "ActionProfileGroup") -> bool:
        # The switch may report members in any order and max_size as 0.
        return sorted(self.members) == sorted(other.members)

    def describe(self) -> str:
        return f"{self.profile} group {self.group_id} -> members {list(self.members)}"


@dataclass(frozen=True)
class MeterEntry:
    meter: str
    index: int
    cir: int  # units/s (bytes/s for a byte meter)
    cburst: int
    pir: int
    pburst: int

    kind = "meter"

    @property
    def key(self):
        return (self.kind, self.meter, self.index)

    def describe(self) -> str:
        return (f"{self.meter}[{self.index}] cir={self.cir} B/s cburst={self.cburst} B "
                f"pir={self.pir} B/s pburst={self.pburst} B")


Entity = Union[TableEntry, ActionProfileMember, ActionProfileGroup, MeterEntry]

INSERT, MODIFY, DELETE = "INSERT", "MODIFY", "DELETE"


@dataclass(frozen=True)
class Update:
    op: str
    entity: Entity
    old: Optional[Entity] = None

    def describe(self) -> str:
        s = f"{self.op:6} {self.entity.describe()}"
        if self.op == MODIFY and self.old is not None:
            s += f"   (was: {self.old.describe()})"
        return s


def _same(a: Entity, b: Entity) -> bool:
    if isinstance(a, ActionProfileGroup) and isinstance(b, ActionProfileGroup):
        return a.same_state(b)
    if isinstance(a, MeterEntry) and isinstance(b, MeterEntry):
        # BMv2 stores rates as units per microsecond (double); allow rounding.
        return all(abs(x - y) <= max(1, 1e-6 * max(x, y)) for x, y in
                   ((a.cir, b.cir), (a.pir, b.pir), (a.cburst, b.cburst), (a.pburst, b.pburst)))
    return a == b


def plan_updates(desired: Sequence[Entity], existing: Iterable[Entity],
                 managed_tables: Optional[Iterable[str]] = None) -> List[Update]:
    """Updates that turn ``existing`` into ``desired``, in a safe order.

    * Meters and default entries are never deleted: a meter cell absent from
      ``desired`` is left alone; a default entry can only be modified.
    * Order: members, groups, table entries (insert/modify), then deletes of
      table entries, groups, members, so that nothing references a deleted
      member/group and nothing references a not-yet-created one.
    * ``managed_tables``: only entries of these tables are deleted when stale
      (default: the tables that appear in ``desired``).
    """
    existing_by_key: Dict = {}
    for e in existing:
        existing_by_key[e.key] = e
    desired_keys = set()
    ins_mod: Dict[str, List[Update]] = {"member": [], "group": [], "table_entry": [], "meter": []}
    for d in desired:
        if d.key in desired_keys:
            raise ValueError(f"duplicate desired entity: {d.describe()}")
        desired_keys.add(d.key)
        old = existing_by_key.get(d.key)
        if old is None:
            if isinstance(d, TableEntry) and d.is_default or isinstance(d, MeterEntry):
                ins_mod[d.kind].append(Update(MODIFY, d))  # defaults/meters always exist
            else:
                ins_mod[d.kind].append(Update(INSERT, d))
        elif not _same(d, old):
            ins_mod[d.kind].append(Update(MODIFY, d, old))
    tables = set(managed_tables) if managed_tables is not None else {
        d.table for d in desired if isinstance(d, TableEntry)}
    profiles = {d.profile for d in desired if isinstance(d, (ActionProfileMember, ActionProfileGroup))}
    deletes: Dict[str, List[Update]] = {"table_entry": [], "group": [], "member": []}
    for key, e in existing_by_key.items():
        if key in desired_keys:
            continue
        if isinstance(e, TableEntry) and not e.is_default and e.table in tables:
            deletes["table_entry"].append(Update(DELETE, e))
        elif isinstance(e, (ActionProfileMember, ActionProfileGroup)) and e.profile in profiles:
            deletes[e.kind].append(Update(DELETE, e))
    return (ins_mod["member"] + ins_mod["group"] + ins_mod["table_entry"] + ins_mod["meter"]
            + deletes["table_entry"] + deletes["group"] + deletes["member"])

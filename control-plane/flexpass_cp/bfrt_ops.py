"""BfRt operations for a Tofino switch (``target: tofino`` / ``tofino2``), as
plain data.

Nothing here talks to a switch or needs the SDE: :func:`switch_ops` turns a
config into a list of :class:`BfrtOp` (table, key fields with match types,
action, data fields), :func:`plan` compares them with what a switch holds,
and :mod:`flexpass_cp.bfrt_client` applies / reads them with the SDE's own
``bfrt_grpc`` client.  All values come from :mod:`flexpass_cp.config`: the P4
tables from the same :func:`~flexpass_cp.config.entries.switch_entries` as BMv2's
P4Runtime entries, the traffic manager from
:func:`~flexpass_cp.config.queues.tofino_settings`.

Tables
------
* P4 (p4src/tna/flexpass.p4), by their unique short BfRt names: classifier,
  routing, ecmp_profile (the ActionSelector's ActionProfile: members),
  ecmp_selector (groups), credit_meter, queue_thresholds, port_smac.
* ``$PORT`` (bf-drivers src/bf_rt/bf_rt_port/bf_rt_port_tf1.json): port speed.
* Traffic manager, tfN.tm.* (bf-drivers src/bf_rt/bf_rt_tm/bf_rt_tm_tf1.json
  and bf_rt_tm_tf2.json in p4lang/open-p4studio; the fields used here are the
  same for both chips): tm.pipe.sched_cfg (shaper IFG compensation),
  tm.port.sched_cfg / sched_shaping (port shaper), tm.queue.sched_cfg
  (priority, DWRR weight, max-rate enable), tm.queue.sched_shaping (credit
  shaper), tm.queue.buffer (guaranteed cells), tm.queue.color (red drop
  limit).  TM queue tables are keyed by (pg_id, pg_queue); an op names the
  queue as (dev_port, qid) with :class:`PortQueue` and the client resolves it
  through tfN.tm.port.cfg (pg_id, egress_qid_queues[qid]).

Write kinds
-----------
* ``entry``: an entry that may or may not exist (P4 entries, members, groups,
  ``$PORT``): added, or modified when present; stale ones of the managed P4
  tables are deleted.
* ``modify``: an object that always exists (meter cells, TM queues and ports):
  modified only.
* ``default``: a table's default entry (classifier default, keyless
  tm.pipe.sched_cfg).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .config import Config, ConfigError
from .config.derive import Derived
from .config.entries import switch_entries
from .config.queues import tofino_settings
from .config.targets import TOFINO_CHIPS, WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO
from .p4_program import (
    AP_ECMP,
    INGRESS_EVENTS,
    METER_CREDIT,
    PORT_QUEUE_COUNTERS,
    T_CLASSIFIER,
    T_ECN_COLOR,
    T_PORT_SMAC,
    T_QUEUE_THRESHOLDS,
    T_ROUTING,
)
from .entities import ActionProfileGroup, ActionProfileMember, MeterEntry, TableEntry

#: The TNA ActionSelector's ActionProfile (members).  v1model's action_selector
#: is one object (p4_program.AP_ECMP); TNA splits it in members and groups.
AP_ECMP_MEMBERS = "ecmp_profile"
AP_ECMP_GROUPS = AP_ECMP

#: P4 tables whose stale entries apply deletes (everything else is modified only).
MANAGED_P4_TABLES = (T_CLASSIFIER, T_ECN_COLOR, T_ROUTING, AP_ECMP_MEMBERS, AP_ECMP_GROUPS,
                     T_QUEUE_THRESHOLDS, T_PORT_SMAC)

#: Counter data fields of BfRt indirect counters.
COUNTER_PKTS, COUNTER_BYTES = "$COUNTER_SPEC_PKTS", "$COUNTER_SPEC_BYTES"

ENTRY, MODIFY, DEFAULT = "entry", "modify", "default"

#: Read-back values the device rounds to its hardware representation
#: (meter and shaper mantissa/exponent, hysteresis in units of 8 cells):
#: :func:`same_data` accepts them within APPROX_TOLERANCE.
APPROX_FIELDS = frozenset({
    "$METER_SPEC_CIR_KBPS", "$METER_SPEC_PIR_KBPS", "$METER_SPEC_CBS_KBITS", "$METER_SPEC_PBS_KBITS",
    "max_rate", "max_burst_size", "min_rate", "min_burst_size",
    "hysteresis_cells", "hysteresis_red_cells", "hysteresis_yellow_cells"})
APPROX_TOLERANCE = 0.1  # relative, at least 1 unit (or 8 cells for hysteresis)


@dataclass(frozen=True)
class PortQueue:
    """A TM queue named by (dev_port, ingress qid); ``field`` is the key field
    (pg_id or pg_queue) the client reads from tfN.tm.port.cfg."""

    dev_port: int
    qid: int
    field: str

    def to_json(self) -> Dict[str, Any]:
        return {"port_queue": {"dev_port": self.dev_port, "qid": self.qid, "field": self.field}}


KeyValue = Union[int, str, PortQueue]


@dataclass(frozen=True)
class KeyField:
    name: str
    match: str  # exact | lpm
    value: KeyValue
    prefix_len: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        v = self.value.to_json() if isinstance(self.value, PortQueue) else self.value
        out: Dict[str, Any] = {"name": self.name, "match": self.match, "value": v}
        if self.prefix_len is not None:
            out["prefix_len"] = self.prefix_len
        return out


@dataclass(frozen=True)
class BfrtOp:
    """One BfRt write: table, key, action, data fields (name -> value)."""

    table: str
    key: Tuple[KeyField, ...] = ()
    data: Tuple[Tuple[str, Any], ...] = ()
    action: Optional[str] = None
    write: str = ENTRY
    why: str = ""

    @property
    def data_dict(self) -> Dict[str, Any]:
        return dict(self.data)

    @property
    def ident(self) -> Tuple:
        """(table, key) identity, independent of the data."""
        return (self.table, self.write == DEFAULT,
                tuple(sorted((k.name, k.value if not isinstance(k.value, PortQueue) else
                              (k.value.dev_port, k.value.qid, k.value.field), k.prefix_len)
                             for k in self.key)))

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"table": self.table, "write": self.write,
                               "key": [k.to_json() for k in self.key]}
        if self.action is not None:
            out["action"] = self.action
        out["data"] = {k: v for k, v in self.data}
        if self.why:
            out["why"] = self.why
        return out

    def describe(self) -> str:
        def kv(k: KeyField) -> str:
            if isinstance(k.value, PortQueue):
                return f"{k.name}=<{k.value.field} of port {k.value.dev_port} qid {k.value.qid}>"
            if k.prefix_len is not None:
                v = k.value
                ip = ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0)) if isinstance(v, int) else v
                return f"{k.name}={ip}/{k.prefix_len}"
            return f"{k.name}={k.value}"
        key = "(default)" if self.write == DEFAULT else ", ".join(kv(k) for k in self.key)
        act = f"{self.action}: " if self.action else ""
        data = ", ".join(f"{k}={_fmt(k, v)}" for k, v in self.data)
        return f"{self.table}[{key}] -> {act}{data}"


def _fmt(name: str, v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and "mac" in name:
        h = f"{v:012x}"
        return ":".join(h[i:i + 2] for i in range(0, 12, 2))
    return str(v)


def exact(name: str, value: KeyValue) -> KeyField:
    return KeyField(name, "exact", value)


def tm_prefix(cfg: Config, switch: str) -> str:
    """tf1 (Tofino) or tf2 (Tofino2): the BfRt traffic-manager table prefix."""
    target = cfg.switch(switch).target
    if target not in TOFINO_CHIPS:
        raise ConfigError(f"switches.{switch}.target",
                          f"BfRt operations need a Tofino target (tofino, tofino2), got {target!r}")
    return TOFINO_CHIPS[target][0]


# --------------------------------------------------------------------------
# Config -> operations (pure)
# --------------------------------------------------------------------------


def p4_ops(cfg: Config, switch: str) -> List[BfrtOp]:
    """The P4 program's entries: switch_entries() (the P4Runtime entities of
    BMv2) in BfRt form, meters in BfRt's kbit units."""
    sw = cfg.switch(switch)
    tm_prefix(cfg, switch)
    out: List[BfrtOp] = []
    for e in switch_entries(cfg, switch):
        if isinstance(e, TableEntry):
            key = tuple(KeyField(n, "lpm", v[0], v[1]) if isinstance(v, tuple) else exact(n, v)
                        for n, v in e.match)
            if e.member_id is not None:
                out.append(BfrtOp(e.table, key, (("$ACTION_MEMBER_ID", e.member_id),)))
            elif e.group_id is not None:
                out.append(BfrtOp(e.table, key, (("$SELECTOR_GROUP_ID", e.group_id),)))
            else:
                out.append(BfrtOp(e.table, () if e.is_default else key, tuple(e.params.items()),
                                  e.action, DEFAULT if e.is_default else ENTRY))
        elif isinstance(e, ActionProfileMember):
            out.append(BfrtOp(AP_ECMP_MEMBERS, (exact("$ACTION_MEMBER_ID", e.member_id),),
                              tuple(e.params.items()), e.action))
        elif isinstance(e, ActionProfileGroup):
            out.append(BfrtOp(AP_ECMP_GROUPS, (exact("$SELECTOR_GROUP_ID", e.group_id),),
                              (("$MAX_GROUP_SIZE", e.max_size),
                               ("$ACTION_MEMBER_ID", list(e.members)),
                               ("$ACTION_MEMBER_STATUS", [True] * len(e.members))),
                              why="members in next-hop order"))
        elif isinstance(e, MeterEntry):
            d = Derived(cfg, sw, sw.ports[e.index])
            out.append(BfrtOp(METER_CREDIT, (exact("$METER_INDEX", e.index),),
                              (("$METER_SPEC_CIR_KBPS", d.meter_cir_kbps),
                               ("$METER_SPEC_PIR_KBPS", d.meter_cir_kbps),
                               ("$METER_SPEC_CBS_KBITS", d.meter_burst_kbits),
                               ("$METER_SPEC_PBS_KBITS", d.meter_burst_kbits)),
                              write=MODIFY,
                              why=f"credits: {d.credits_per_second:.0f}/s x {d.credit_meter_bytes} B, "
                                  f"burst {d.meter_burst_bytes // d.credit_meter_bytes} credits"))
        else:  # pragma: no cover - switch_entries yields only the types above
            raise TypeError(f"no BfRt form for {e!r}")
    return out


def port_ops(cfg: Config, switch: str) -> List[BfrtOp]:
    """$PORT entries: each configured port at the smallest speed >= link_rate."""
    tm_prefix(cfg, switch)
    return [BfrtOp("$PORT", (exact("$DEV_PORT", tp.port),),
                   (("$SPEED", tp.speed), ("$FEC", "BF_FEC_TYP_NONE"), ("$PORT_ENABLE", True)))
            for tp in tofino_settings(cfg, switch)]


def tm_ops(cfg: Config, switch: str) -> List[BfrtOp]:
    """The traffic manager (FlexPass §4.1, §5) over tfN.tm.* tables."""
    tf = tm_prefix(cfg, switch)
    out = [BfrtOp(f"{tf}.tm.pipe.sched_cfg", (),
                  (("packet_ifg_compensation", WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO),), write=DEFAULT,
                  why="shapers count preamble + IFG: rates are wire rates")]
    for tp in tofino_settings(cfg, switch):
        port_key = (exact("dev_port", tp.port),)
        if tp.shaper_kbps is not None:
            out.append(BfrtOp(f"{tf}.tm.port.sched_shaping", port_key,
                              (("unit", "BPS"), ("provisioning", "UPPER"),
                               ("max_rate", tp.shaper_kbps), ("max_burst_size", tp.shaper_burst_bytes)),
                              write=MODIFY, why=f"link_rate below {tp.speed}"))
        out.append(BfrtOp(f"{tf}.tm.port.sched_cfg", port_key,
                          (("max_rate_enable", tp.shaper_kbps is not None),), write=MODIFY))
        if tp.buffer_cells is not None:
            out.append(BfrtOp(f"{tf}.tm.port.buffer", port_key,
                              (("eg_limit_cells", tp.buffer_cells), ("eg_hysteresis_cells", 0)),
                              write=MODIFY, why="one buffer shared by the port's queues"))
        for q in tp.queues:
            qkey = (exact("pg_id", PortQueue(tp.port, q.qid, "pg_id")),
                    exact("pg_queue", PortQueue(tp.port, q.qid, "pg_queue")))
            shaped = q.shaper_kbps is not None
            out.append(BfrtOp(f"{tf}.tm.queue.sched_cfg", qkey,
                              (("min_rate_enable", False), ("min_priority", str(q.max_priority)),
                               ("max_rate_enable", shaped), ("max_priority", str(q.max_priority)),
                               ("dwrr_weight", q.dwrr_weight), ("scheduling_enable", True)),
                              write=MODIFY, why=_sched_why(q)))
            if shaped:
                # LOWER: the hardware rate never exceeds the credit rate.
                out.append(BfrtOp(f"{tf}.tm.queue.sched_shaping", qkey,
                                  (("unit", "BPS"), ("provisioning", "LOWER"),
                                   ("max_rate", q.shaper_kbps), ("max_burst_size", q.shaper_burst_bytes)),
                                  write=MODIFY, why=f"{q.role}: w_q·C·84/(84+max frame), burst 2 credits"))
            out.append(BfrtOp(f"{tf}.tm.queue.buffer", qkey,
                              (("guaranteed_cells", q.guaranteed_cells), ("hysteresis_cells", 0),
                               ("tail_drop_enable", True)),
                              action="buffer_only", write=MODIFY, why=f"{q.role}: queue limit"))
            if q.red_limit_percent is not None:
                color = (("drop_enable", True), ("drop_limit_yellow", "100%"),
                         ("drop_limit_red", f"{q.red_limit_percent:g}%"),
                         ("hysteresis_yellow_cells", 0), ("hysteresis_red_cells", 0))
                why = f"{q.role}: red dropped above the selective-drop threshold"
            else:
                color, why = (("drop_enable", False),), f"{q.role}: no colour drop"
            out.append(BfrtOp(f"{tf}.tm.queue.color", qkey, color, write=MODIFY, why=why))
    return out


def _sched_why(q) -> str:
    if q.role.startswith("P"):  # PPT: one queue per priority level
        return f"{q.role}: strict priority {q.max_priority}"
    return f"{q.role}: " + ("strict priority" if q.max_priority else
                            f"DWRR weight {q.dwrr_weight}/{Derived.dwrr_weight(1.0)}")


def switch_ops(cfg: Config, switch: str) -> List[BfrtOp]:
    """Every BfRt operation of a Tofino switch, in apply order: ports, then the
    P4 tables (members before groups before routes), then the TM."""
    return port_ops(cfg, switch) + p4_ops(cfg, switch) + tm_ops(cfg, switch)


def ops_to_json(ops: Sequence[BfrtOp], indent: str = "") -> str:
    """Stable JSON of a list of operations, one operation per line (the
    golden-file format)."""
    lines = ",\n".join(f"{indent} {json.dumps(op.to_json())}" for op in ops)
    return f"[\n{lines}\n{indent}]" + ("" if indent else "\n")


def counter_tables() -> Tuple[str, ...]:
    """P4 counters that `flexpass-ctl counters` reads ($COUNTER_INDEX -> packets, bytes)."""
    return PORT_QUEUE_COUNTERS + (INGRESS_EVENTS,)


def p4_names(ops: Iterable[BfrtOp]) -> Dict[str, set]:
    """P4 object and action names the ops use (fixed tables $*, tfN.* excluded)."""
    tables, actions = set(), set()
    for op in ops:
        if op.table.startswith("$") or "." in op.table:
            continue
        tables.add(op.table)
        if op.action:
            actions.add(op.action)
    return {"tables": tables, "actions": actions}


# --------------------------------------------------------------------------
# Desired vs read-back (pure)
# --------------------------------------------------------------------------

INSERT, MOD, DELETE = "INSERT", "MODIFY", "DELETE"


@dataclass(frozen=True)
class ReadEntry:
    """An entry as read from the switch, in the ops' terms."""

    table: str
    key: Tuple[KeyField, ...]
    data: Mapping[str, Any]
    action: Optional[str] = None
    is_default: bool = False

    @property
    def ident(self) -> Tuple:
        return BfrtOp(self.table, self.key, write=DEFAULT if self.is_default else ENTRY).ident


@dataclass(frozen=True)
class BfrtUpdate:
    op: str
    desired: Optional[BfrtOp]
    existing: Optional[ReadEntry] = None

    def describe(self) -> str:
        if self.desired is not None:
            s = f"{self.op:6} {self.desired.describe()}"
            if self.op == MOD and self.existing is not None:
                diff = {k: self.existing.data.get(k) for k, v in self.desired.data
                        if not _same_value(k, v, self.existing.data.get(k))}
                was = ", ".join(f"{k}={v}" for k, v in diff.items() if v is not None)
                s += f"   (was: {was or 'not read back'})"
            return s
        e = self.existing
        assert e is not None
        return f"{self.op:6} {BfrtOp(e.table, e.key, tuple(e.data.items()), e.action).describe()}"


def _same_value(name: str, want: Any, got: Any) -> bool:
    if got is None:
        return False
    if name == "$ACTION_MEMBER_ID" and isinstance(want, list):
        return sorted(want) == sorted(got)
    if isinstance(want, bool) or isinstance(got, bool):
        return bool(want) == bool(got)
    if name in APPROX_FIELDS and isinstance(want, (int, float)) and isinstance(got, (int, float)):
        slack = 8 if name.startswith("hysteresis") else 1
        return abs(want - got) <= max(slack, APPROX_TOLERANCE * max(abs(want), abs(got)))
    return want == got


def same_data(op: BfrtOp, entry: ReadEntry) -> bool:
    """The read-back entry holds what the op writes (fields the op does not
    set are ignored; rounded hardware values within APPROX_TOLERANCE)."""
    if op.action is not None and entry.action is not None and entry.action.split(".")[-1] != op.action:
        return False
    return all(_same_value(k, v, entry.data.get(k)) for k, v in op.data)


def plan(desired: Sequence[BfrtOp], existing: Iterable[ReadEntry]) -> List[BfrtUpdate]:
    """Updates that turn ``existing`` into ``desired``: INSERT missing entries,
    MODIFY differing ones (``modify``/``default`` ops are never inserted), then
    DELETE stale entries of MANAGED_P4_TABLES (routes before groups before
    members, so nothing references a deleted member)."""
    have = {e.ident: e for e in existing}
    seen = set()
    updates: List[BfrtUpdate] = []
    for op in desired:
        if op.ident in seen:
            raise ValueError(f"duplicate BfRt operation: {op.describe()}")
        seen.add(op.ident)
        old = have.get(op.ident)
        if old is None:
            updates.append(BfrtUpdate(INSERT if op.write == ENTRY else MOD, op))
        elif not same_data(op, old):
            updates.append(BfrtUpdate(MOD, op, old))
    order = {t: i for i, t in enumerate((T_ROUTING, T_CLASSIFIER, T_ECN_COLOR, T_QUEUE_THRESHOLDS,
                                         T_PORT_SMAC, AP_ECMP_GROUPS, AP_ECMP_MEMBERS))}
    stale = [e for i, e in have.items()
             if i not in seen and not e.is_default and e.table in MANAGED_P4_TABLES]
    for e in sorted(stale, key=lambda e: order[e.table]):
        updates.append(BfrtUpdate(DELETE, None, e))
    return updates

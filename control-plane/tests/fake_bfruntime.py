"""A BfRuntime gRPC server on loopback that stores table entries, for testing
``flexpass-ctl`` with the SDE's *real* ``bfrt_grpc`` client and protobufs where the
SDE is installed but no bf_switchd runs (tests/test_bfrt_sde_client.py).

It uses only the installed SDE's generated ``bfruntime_pb2``/``bfruntime_pb2_grpc``
(passed in, never vendored) and serves:

* ``GetForwardingPipelineConfig``: one running program (its p4c ``bfrt.json``) and,
  as non-P4 config, the SDE's fixed-function schemas (``share/bf_rt_shared/
  bf_rt_{tm,port,…}_tf1.json``) — what bf_switchd answers.
* ``Write``: INSERT fails on an existing key, MODIFY/DELETE on a missing one, except
  in fixed tables (``tfN.tm.*``, and P4 meters/counters/registers: every key or
  index exists), where MODIFY merges the fields given into the entry (TM tables
  are partial updates).
* Errors as bf_switchd reports them: status UNKNOWN with one ``bfruntime.Error``
  (canonical code, message) per failed entity in the binary status details.
* ``Read``: one key, a table's default entry, or (no key) every entry of a table
  followed by its default entry if one was written (bf_switchd's ``read_entry``
  appends the default entry to a wildcard read).
  A P4 table's unwritten default entry reads as its default action.
  Unwritten fixed-table entries answer as bf_switchd would for what flexpass-ctl
  reads: ``tm.port.cfg`` with Tofino's queue mapping (4 ports per port group, 8
  queues per port), ``tm.cfg`` with the cell size and cell count given.
"""

from __future__ import annotations

import json
from concurrent import futures
from pathlib import Path
from typing import Dict, List, Tuple

import grpc

FIXED_FUNCTION = ("tm", "port", "dev", "pre", "mirror")
# bfrt.json table types whose entries are indices that always exist (MODIFY only).
INDEXED = ("Meter", "Counter", "Register")


def non_p4_schema(shared_dir: Path, chip: str = "tf1") -> bytes:
    tables = []
    for part in FIXED_FUNCTION:
        f = shared_dir / f"bf_rt_{part}_{chip}.json"
        if f.is_file():
            tables += json.loads(f.read_text())["tables"]
    return json.dumps({"tables": tables}).encode()


class FakeBfRuntime:
    def __init__(self, gc, p4_name: str, p4_json: bytes, non_p4_json: bytes,
                 cell_bytes: int = 80, total_cells: int = 262144):
        """``gc``: the SDE's ``bfrt_grpc.client`` module (its protobuf modules are used)."""
        pb2, pb2_grpc = gc.bfruntime_pb2, gc.bfruntime_pb2_grpc
        self.gc, self.pb2, self.p4_name, self.p4_json, self.non_p4_json = gc, pb2, p4_name, p4_json, non_p4_json
        self.cell_bytes, self.total_cells = cell_bytes, total_cells
        self.tables = {t["id"]: t for t in json.loads(p4_json)["tables"] + json.loads(non_p4_json)["tables"]}
        self.entries: Dict[Tuple, object] = {}  # (table_id, default, key bytes) -> TableEntry
        self.writes: List[Tuple[str, str]] = []  # (update type, table name), in order
        servicer = type("Servicer", (pb2_grpc.BfRuntimeServicer,), {
            "StreamChannel": lambda _s, it, ctx: self._stream(it),
            "GetForwardingPipelineConfig": lambda _s, req, ctx: self._get_config(),
            "SetForwardingPipelineConfig": lambda _s, req, ctx: pb2.SetForwardingPipelineConfigResponse(),
            "Write": lambda _s, req, ctx: self._write(req, ctx),
            "Read": lambda _s, req, ctx: self._read(req, ctx),
        })()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb2_grpc.add_BfRuntimeServicer_to_server(servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(0)

    def name(self, table_id: int) -> str:
        return self.tables[table_id]["name"]

    def entries_of(self, table: str) -> List[Dict[str, object]]:
        """The stored entries of a table as {field name: value} (key and data)."""
        t = next(t for t in self.tables.values() if t["name"] == table)
        names = {("k", k["id"]): k["name"] for k in t.get("key", [])}
        for d in t.get("data", []) + [d for a in t.get("action_specs", []) for d in a.get("data", [])]:
            d = d.get("singleton", d)  # fixed-function schemas wrap each field
            names[("d", d["id"])] = d["name"]
        out = []
        for (tid, _, _), e in self.entries.items():
            if tid != t["id"]:
                continue
            row = {names[("k", f.field_id)]: _key_value(f) for f in e.key.fields}
            for f in e.data.fields:
                row[names.get(("d", f.field_id), f.field_id)] = _data_value(f)
            out.append(row)
        return out

    # --- RPCs -------------------------------------------------------------------

    def _stream(self, requests):
        for req in requests:
            if req.HasField("subscribe"):
                resp = self.pb2.StreamMessageResponse()
                resp.subscribe.device_id = req.subscribe.device_id
                resp.subscribe.status.code = 0  # google.rpc OK
                yield resp

    def _get_config(self):
        resp = self.pb2.GetForwardingPipelineConfigResponse()
        cfg = resp.config.add()
        cfg.p4_name, cfg.bfruntime_info = self.p4_name, self.p4_json
        resp.non_p4_config.bfruntime_info = self.non_p4_json
        return resp

    def _ident(self, e) -> Tuple:
        key = b"".join(sorted(f.SerializeToString() for f in e.key.fields)) if e.HasField("key") else b""
        return (e.table_id, bool(e.is_default_entry), key)

    def _fixed(self, table_id: int) -> bool:
        """Every key exists: TM tables, and indexed P4 externs (one entry per index)."""
        return ".tm." in self.name(table_id) or self.tables[table_id].get("table_type") in INDEXED

    def _fail(self, ctx, code: grpc.StatusCode, message: str):
        err = self.pb2.Error(canonical_code=code.value[0], message=message)
        status = self.gc.status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message)
        status.details.add().Pack(err)
        ctx.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        ctx.abort(grpc.StatusCode.UNKNOWN, message)

    def _write(self, req, ctx):
        U = self.pb2.Update
        for u in req.updates:
            e = u.entity.table_entry
            ident, name = self._ident(e), self.name(e.table_id)
            have = self.entries.get(ident)
            self.writes.append((U.Type.Name(u.type), name))
            if u.type == U.INSERT:
                if have is not None:
                    self._fail(ctx, grpc.StatusCode.ALREADY_EXISTS, f"{name}: entry exists")
                self.entries[ident] = _copy(e)
            elif u.type == U.MODIFY:
                if have is None and not (self._fixed(e.table_id) or e.is_default_entry):
                    self._fail(ctx, grpc.StatusCode.NOT_FOUND, f"{name}: no such entry")
                if have is not None and (self._fixed(e.table_id) or e.data.action_id == 0):
                    merged = {f.field_id: f for f in have.data.fields}
                    merged.update({f.field_id: f for f in e.data.fields})
                    new = _copy(e)
                    del new.data.fields[:]
                    new.data.fields.extend(merged[i] for i in sorted(merged))
                    self.entries[ident] = new
                else:
                    self.entries[ident] = _copy(e)
            elif u.type == U.DELETE:
                if self.entries.pop(ident, None) is None:
                    self._fail(ctx, grpc.StatusCode.NOT_FOUND, f"{name}: no such entry")
            else:
                self._fail(ctx, grpc.StatusCode.UNIMPLEMENTED, f"update type {u.type}")
        return self.pb2.WriteResponse()

    def _read(self, req, ctx):
        resp = self.pb2.ReadResponse()
        for ent in req.entities:
            e = ent.table_entry
            if e.is_default_entry or e.HasField("key"):
                got = self.entries.get(self._ident(e)) or self._synthetic(e)
                if got is None:
                    self._fail(ctx, grpc.StatusCode.NOT_FOUND, f"{self.name(e.table_id)}: entry not found")
                resp.entities.add().table_entry.CopyFrom(got)
            else:
                # Like bf_switchd's read_entry: every entry, then the default entry.
                stored = [(d, v) for (tid, d, _), v in self.entries.items() if tid == e.table_id]
                for _, v in sorted(stored, key=lambda dv: dv[0]):
                    resp.entities.add().table_entry.CopyFrom(v)
        yield resp

    def _synthetic(self, e):
        """What an unwritten fixed-table entry, or a P4 table's unwritten default entry,
        reads as (only fields flexpass-ctl reads)."""
        name, table = self.name(e.table_id), self.tables[e.table_id]
        out = _copy(e)
        out.data.SetInParent()  # an entry with (maybe no) data, not "no entry"
        if e.is_default_entry and table.get("table_type", "").startswith("MatchAction"):
            # Every P4 table has a default entry: the program's default action (its
            # parameters are not in bfrt.json; they read as absent here).
            specs = table.get("action_specs", [])
            pick = next((a for a in specs if a.get("action_scope") == "DefaultOnly"), specs[0] if specs else None)
            if pick is not None:
                out.data.action_id = pick["id"]
            return out
        if not self._fixed(e.table_id):
            return None
        ids = {d["singleton"]["name"]: d["singleton"]["id"] for d in self.tables[e.table_id].get("data", [])}
        if name.endswith(".tm.port.cfg"):
            dev_port = int.from_bytes(e.key.fields[0].exact.value, "big")
            local = dev_port & 0x7F
            out.data.fields.add(field_id=ids["pg_id"], stream=bytes([local // 4]))
            q = out.data.fields.add(field_id=ids["egress_qid_queues"])
            q.int_arr_val.val.extend((local % 4) * 8 + i for i in range(8))
        elif name.endswith(".tm.cfg"):
            out.data.fields.add(field_id=ids["cell_size_bytes"], stream=self.cell_bytes.to_bytes(4, "big"))
            out.data.fields.add(field_id=ids["total_cells"], stream=self.total_cells.to_bytes(4, "big"))
        return out


def _copy(e):
    c = type(e)()
    c.CopyFrom(e)
    return c


def _key_value(f):
    kind = f.WhichOneof("match_type")
    m = getattr(f, kind)
    v = int.from_bytes(m.value, "big")
    return (v, m.prefix_len) if kind == "lpm" else v


def _data_value(f):
    kind = f.WhichOneof("value")
    if kind == "stream":
        return int.from_bytes(f.stream, "big")
    if kind in ("int_arr_val", "bool_arr_val", "str_arr_val"):
        return list(getattr(f, kind).val)
    return getattr(f, kind)

"""A P4Runtime server in Python with PI's semantics (the server inside
simple_switch_grpc, PI/proto/server/pi_server.cpp), so the client, apply,
link-down/up and the resident controller are tested over real gRPC without a
switch.

What it reproduces, as read in pi_server.cpp:

* mastership: live streams ordered by election id, the highest is primary; a
  second live stream with the same id ends with INVALID_ARGUMENT "Election id
  already exists"; every stream is told (arbitration update with the primary's
  id, OK or ALREADY_EXISTS) when it arrives and whenever the primary changes;
  a stream that ends is forgotten (its controller may come back with the same id);
* Write / SetForwardingPipelineConfig: refused (PERMISSION_DENIED) unless the
  election id is the primary's; Write needs a pipeline (FAILED_PRECONDITION);
* Read needs a pipeline; Get...Config with COOKIE_ONLY returns the cookie;
* table entries, action-profile members and groups, meter configs, with
  BMv2's checks: INSERT of an existing key, MODIFY/DELETE of a missing one,
  dangling member/group references, deleting a referenced member/group, and a
  route pointing to an EMPTY group (BMv2: EMPTY_GRP) are errors.

``stop()`` is a switch killed (streams break); a new server on the same port
is the switch restarted with empty tables and no pipeline.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent import futures

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import grpc  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from google.rpc import code_pb2  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402


def synthetic_p4info() -> p4info_pb2.P4Info:
    """The objects flexpass_cp uses, with the v1model program's names and widths."""
    info = p4info_pb2.P4Info()
    ids = iter(range(1, 1000))

    def action(name, *params):
        a = info.actions.add()
        a.preamble.id, a.preamble.name = next(ids), name
        for i, (pn, w) in enumerate(params, 1):
            a.params.add(id=i, name=pn, bitwidth=w)
        return a.preamble.id

    set_class = action("set_class", ("qid", 3), ("color", 2), ("kind", 3))
    set_nexthop = action("set_nexthop", ("port", 9), ("dmac", 48))
    set_smac = action("set_smac", ("smac", 48))
    set_thr = action("set_thresholds", ("ecn_threshold", 19), ("red_threshold", 19))
    set_color = action("set_color", ("color", 2))
    keep_color = action("keep_color")
    ap = info.action_profiles.add()
    ap.preamble.id, ap.preamble.name = next(ids), "ecmp_selector"
    ap.with_selector, ap.size, ap.max_group_size = True, 1024, 16

    def table(name, fields, actions, impl=0):
        t = info.tables.add()
        t.preamble.id, t.preamble.name = next(ids), name
        for i, (fn, w, mt) in enumerate(fields, 1):
            t.match_fields.add(id=i, name=fn, bitwidth=w, match_type=mt)
        for a in actions:
            t.action_refs.add(id=a)
        t.implementation_id = impl
        return t.preamble.id

    E, L = p4info_pb2.MatchField.EXACT, p4info_pb2.MatchField.LPM
    table("classifier", [("dscp", 6, E)], [set_class])
    ap_id = ap.preamble.id
    table("routing", [("dst_addr", 32, L)], [set_nexthop], ap_id)
    table("port_smac", [("egress_port", 9, E)], [set_smac])
    table("queue_thresholds", [("egress_port", 9, E), ("qid", 3, E)], [set_thr])
    table("ecn_color", [("qid", 3, E), ("ecn", 2, E)], [set_color, keep_color])
    m = info.meters.add()
    m.preamble.id, m.preamble.name = next(ids), "credit_meter"
    m.size = 64
    for c in ("forwarded", "ecn_marked", "red_dropped", "credit_dropped", "ingress_events"):
        ctr = info.counters.add()
        ctr.preamble.id, ctr.preamble.name = next(ids), c
        ctr.size = 512
    return info


def write_build(directory) -> tuple:
    """(p4info path, bmv2 json path) of a synthetic build in `directory`."""
    from pathlib import Path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p4info = d / "flexpass.p4info.txtpb"
    p4info.write_text(text_format.MessageToString(synthetic_p4info()))
    js = d / "flexpass.json"
    js.write_text('{"program": "synthetic flexpass for tests"}\n')
    return p4info, js


class _Abort(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code, self.msg = code, msg


def _key(ent: p4runtime_pb2.Entity):
    which = ent.WhichOneof("entity")
    if which == "table_entry":
        t = ent.table_entry
        if t.is_default_action:
            return ("table", t.table_id, "default")
        return ("table", t.table_id, tuple(sorted(m.SerializeToString(deterministic=True) for m in t.match)))
    if which == "action_profile_member":
        m = ent.action_profile_member
        return ("member", m.action_profile_id, m.member_id)
    if which == "action_profile_group":
        g = ent.action_profile_group
        return ("group", g.action_profile_id, g.group_id)
    if which == "meter_entry":
        m = ent.meter_entry
        return ("meter", m.meter_id, m.index.index)
    raise _Abort(grpc.StatusCode.UNIMPLEMENTED, f"entity {which}")


class FakeP4RuntimeSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):
    """One device (id `device_id`) behind a gRPC server on 127.0.0.1:`port` (0: any)."""

    def __init__(self, port: int = 0, device_id: int = 0):
        self.device_id = device_id
        self.lock = threading.RLock()
        self.connections = []  # [(election_id tuple, response queue)]
        self.cookie = None
        self.p4info = None
        self.state = {}  # key -> Entity proto
        self.writes = 0  # Write updates applied
        self.pipeline_pushes = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        assert self.port, f"could not bind 127.0.0.1:{port}"
        self.server.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """The switch process dies: streams break, state is gone."""
        with self.lock:
            for _, q in self.connections:
                q.put(None)
        self.server.stop(grace=0).wait()

    # -- mastership -----------------------------------------------------------

    def primary_election_id(self):
        with self.lock:
            return max((e for e, _ in self.connections), default=None)

    def _notify(self, conn) -> None:
        eid, q = conn
        primary = self.primary_election_id()
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.arbitration.device_id = self.device_id
        msg.arbitration.election_id.high, msg.arbitration.election_id.low = primary
        if eid == primary:
            msg.arbitration.status.code, msg.arbitration.status.message = code_pb2.OK, "Is primary"
        else:
            msg.arbitration.status.code, msg.arbitration.status.message = code_pb2.ALREADY_EXISTS, "Is backup"
        q.put(msg)

    def StreamChannel(self, request_iterator, context):
        out: "queue.Queue" = queue.Queue()
        state = {"conn": None, "error": None}

        def reader():
            try:
                for req in request_iterator:
                    if req.WhichOneof("update") != "arbitration":
                        continue
                    a = req.arbitration
                    eid = (a.election_id.high, a.election_id.low)
                    with self.lock:
                        if a.device_id != self.device_id:
                            state["error"] = (grpc.StatusCode.FAILED_PRECONDITION, "Invalid device id")
                            break
                        taken = {e for e, _ in self.connections if (e, _) != state["conn"]}
                        if eid in taken:
                            msg = "Election id already exists" if state["conn"] is None \
                                else "New election id already exists"
                            state["error"] = (grpc.StatusCode.INVALID_ARGUMENT, msg)
                            break
                        old_primary = self.primary_election_id()
                        if state["conn"] is not None:
                            self.connections.remove(state["conn"])
                        state["conn"] = (eid, out)
                        self.connections.append(state["conn"])
                        if self.primary_election_id() != old_primary:
                            for c in self.connections:
                                self._notify(c)
                        else:
                            self._notify(state["conn"])
            except Exception:  # noqa: BLE001 (client went away)
                pass
            finally:
                out.put(None)

        threading.Thread(target=reader, daemon=True).start()
        try:
            while True:
                msg = out.get()
                if msg is None:
                    break
                yield msg
        finally:
            with self.lock:
                if state["conn"] in self.connections:
                    was_primary = state["conn"][0] == self.primary_election_id()
                    self.connections.remove(state["conn"])
                    if was_primary:
                        for c in self.connections:
                            self._notify(c)
        if state["error"]:
            context.abort(*state["error"])

    def _check_primary(self, request, context) -> None:
        with self.lock:
            n = len(self.connections)
            eid = (request.election_id.high, request.election_id.low)
            if (n == 0 and request.HasField("election_id")) or (n and eid != self.primary_election_id()):
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "Not primary")

    # -- pipeline ---------------------------------------------------------------

    def SetForwardingPipelineConfig(self, request, context):
        self._check_primary(request, context)
        with self.lock:
            self.p4info = request.config.p4info
            self.cookie = request.config.cookie.cookie
            self.state = {}
            self.pipeline_pushes += 1
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        with self.lock:
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
            resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            resp.config.cookie.cookie = self.cookie
            return resp

    # -- entities ----------------------------------------------------------------

    def _refs_ok(self, ent) -> None:
        which = ent.WhichOneof("entity")
        if which == "table_entry" and ent.table_entry.action.WhichOneof("type") == "action_profile_member_id":
            t = ent.table_entry
            ap = self._table_profile(t.table_id)
            if ("member", ap, t.action.action_profile_member_id) not in self.state:
                raise _Abort(grpc.StatusCode.NOT_FOUND, "member does not exist")
        if which == "table_entry" and ent.table_entry.action.WhichOneof("type") == "action_profile_group_id":
            t = ent.table_entry
            g = self.state.get(("group", self._table_profile(t.table_id), t.action.action_profile_group_id))
            if g is None:
                raise _Abort(grpc.StatusCode.NOT_FOUND, "group does not exist")
            if not g.action_profile_group.members:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_GRP: route to an empty group")
        if which == "action_profile_group":
            g = ent.action_profile_group
            for m in g.members:
                if ("member", g.action_profile_id, m.member_id) not in self.state:
                    raise _Abort(grpc.StatusCode.NOT_FOUND, f"group member {m.member_id} does not exist")

    def _table_profile(self, table_id):
        return next(t.implementation_id for t in self.p4info.tables if t.preamble.id == table_id)

    def _referenced(self, key) -> bool:
        kind, ap, ident = key
        for k, e in self.state.items():
            if kind == "member" and k[0] == "group" and any(m.member_id == ident for m in e.action_profile_group.members):
                return True
            if k[0] == "table":
                a = e.table_entry.action
                if kind == "member" and a.WhichOneof("type") == "action_profile_member_id" \
                        and a.action_profile_member_id == ident:
                    return True
                if kind == "group" and a.WhichOneof("type") == "action_profile_group_id" \
                        and a.action_profile_group_id == ident:
                    return True
        return False

    def Write(self, request, context):
        self._check_primary(request, context)
        with self.lock:
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
            try:
                for up in request.updates:
                    ent = up.entity
                    key = _key(ent)
                    always = key[0] == "meter" or key[2] == "default"
                    if up.type == p4runtime_pb2.Update.INSERT:
                        if key in self.state:
                            raise _Abort(grpc.StatusCode.ALREADY_EXISTS, "entry exists")
                        self._refs_ok(ent)
                        self.state[key] = ent
                    elif up.type == p4runtime_pb2.Update.MODIFY:
                        if key not in self.state and not always:
                            raise _Abort(grpc.StatusCode.NOT_FOUND, "entry does not exist")
                        self._refs_ok(ent)
                        if key[0] == "group" and not ent.action_profile_group.members and self._referenced(key):
                            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "would empty a referenced group")
                        self.state[key] = ent
                    elif up.type == p4runtime_pb2.Update.DELETE:
                        if key not in self.state:
                            raise _Abort(grpc.StatusCode.NOT_FOUND, "entry does not exist")
                        if key[0] in ("member", "group") and self._referenced(key):
                            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, "entry is referenced")
                        del self.state[key]
                    self.writes += 1
            except _Abort as e:
                context.abort(e.code, e.msg)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        with self.lock:
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
            resp = p4runtime_pb2.ReadResponse()
            for want in request.entities:
                which = want.WhichOneof("entity")
                for key, ent in sorted(self.state.items(), key=lambda kv: repr(kv[0])):
                    if which == "table_entry" and key[0] == "table":
                        t = want.table_entry
                        if key[1] == t.table_id and (key[2] == "default") == t.is_default_action:
                            resp.entities.add().CopyFrom(ent)
                    elif which == "action_profile_member" and key[0] == "member" \
                            and key[1] == want.action_profile_member.action_profile_id:
                        resp.entities.add().CopyFrom(ent)
                    elif which == "action_profile_group" and key[0] == "group" \
                            and key[1] == want.action_profile_group.action_profile_id:
                        resp.entities.add().CopyFrom(ent)
                    elif which == "meter_entry" and key[0] == "meter" and key[1] == want.meter_entry.meter_id \
                            and key[2] == want.meter_entry.index.index:
                        resp.entities.add().CopyFrom(ent)
            yield resp

    # -- test helpers -----------------------------------------------------------

    def groups(self) -> dict:
        """group id -> member ids, as stored."""
        with self.lock:
            return {k[2]: tuple(m.member_id for m in e.action_profile_group.members)
                    for k, e in self.state.items() if k[0] == "group"}

    def routes(self) -> dict:
        """(prefix int, length) -> ("member"|"group", id)."""
        rid = next(t.preamble.id for t in self.p4info.tables if t.preamble.name == "routing")
        out = {}
        with self.lock:
            for k, e in self.state.items():
                if k[0] == "table" and k[1] == rid:
                    t = e.table_entry
                    lpm = t.match[0].lpm
                    which = t.action.WhichOneof("type")
                    out[(int.from_bytes(lpm.value, "big"), lpm.prefix_len)] = (
                        "member" if which == "action_profile_member_id" else "group",
                        t.action.action_profile_member_id or t.action.action_profile_group_id)
        return out

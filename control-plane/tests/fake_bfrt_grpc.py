"""An in-memory stand-in for the SDE's ``bfrt_grpc.client`` (the subset
flexpass_cp.bfrt_client uses), so the adapter and ``flexpass-ctl`` against a
Tofino target are tested without an SDE.

It mimics the behaviour the adapter relies on, as read in bf-drivers'
client.py and the BfRt schemas: entry_add fails on an existing key and
entry_get on a missing one ("not found"), a wildcard entry_get omits the default
entry (default_entry_get reads it), fixed tables (TM, meters, $PORT
reads) answer for any key, keys/data come back through ``to_dict()``
({"value": v} / {"value": v, "prefix_len": n}; data plus "action_name" and
"is_default_entry"), counters read ``$COUNTER_SPEC_PKTS``/``BYTES``.  The TM
queue mapping is Tofino's: 4 ports per port group, 8 queues per port.
"""

import types

FIXED_PREFIXES = ("tf1.tm.", "tf2.tm.")
COUNTERS = ("forwarded", "ecn_marked", "red_dropped", "credit_dropped", "ingress_events")


class FakeError(Exception):
    pass


class Target:
    def __init__(self, device_id=0, pipe_id=0xFFFF, direction=0xFF, prsr_id=0xFF):
        self.device_id_, self.pipe_id_ = device_id, pipe_id


class KeyTuple:
    def __init__(self, name, value=None, mask=None, prefix_len=None, low=None, high=None, is_valid=None):
        self.name, self.value, self.prefix_len = name, value, prefix_len


class DataTuple:
    def __init__(self, name, val=None, float_val=None, str_val=None, int_arr_val=None, bool_arr_val=None,
                 bool_val=None, container_arr_val=None, str_arr_val=None):
        self.name = name
        for v in (val, str_val, int_arr_val, bool_arr_val, bool_val, float_val):
            if v is not None:
                self.value = v
                break
        else:
            self.value = None


class _Key:
    def __init__(self, tuples):
        self.tuples = tuples

    def ident(self):
        return tuple(sorted((t.name, t.value, t.prefix_len) for t in self.tuples))

    def to_dict(self):
        return {t.name: ({"value": t.value, "prefix_len": t.prefix_len} if t.prefix_len is not None
                         else {"value": t.value}) for t in self.tuples}


class _Data:
    def __init__(self, tuples, action=None, default=False):
        self.fields = {t.name: t.value for t in tuples}
        self.action, self.default = action, default

    def to_dict(self):
        d = dict(self.fields)
        d["action_name"] = f"FlexPassIngress.{self.action}" if self.action else None
        d["is_default_entry"] = self.default
        return d


class _Table:
    def __init__(self, switch, name):
        self.switch, self.name = switch, name
        self.entries = {}  # key ident -> (_Key, _Data)
        self.default = None

    @property
    def fixed(self):
        return self.name.startswith(FIXED_PREFIXES) or self.name == "credit_meter"

    def make_key(self, tuples):
        for t in tuples:
            if not isinstance(t.value, int) or isinstance(t.value, bool):
                raise FakeError(f"{self.name}: key {t.name} must be an int, got {t.value!r}")
        return _Key(tuples)

    def make_data(self, tuples=(), action_name=None, get=False):
        return _Data(list(tuples), action_name)

    def entry_add(self, target, keys, datas):
        self.switch.log.append(("add", self.name))
        for k, d in zip(keys, datas):
            if k.ident() in self.entries or self.fixed:
                raise FakeError(f"ALREADY_EXISTS: {self.name} {k.to_dict()}")
            self.entries[k.ident()] = (k, d)

    def entry_mod(self, target, keys, datas):
        self.switch.log.append(("mod", self.name))
        for k, d in zip(keys, datas):
            if k.ident() not in self.entries and not self.fixed:
                raise FakeError(f"Object not found: {self.name} {k.to_dict()}")
            old = self.entries.get(k.ident(), (k, _Data([])))[1]
            merged = _Data([], d.action or old.action)
            merged.fields = dict(old.fields, **d.fields)
            self.entries[k.ident()] = (k, merged)

    def entry_del(self, target, keys):
        self.switch.log.append(("del", self.name))
        for k in keys:
            if self.entries.pop(k.ident(), None) is None:
                raise FakeError(f"Object not found: {self.name}")

    def entry_get(self, target, keys=None, flags=None, *a, **kw):
        if self.name.endswith("tm.port.cfg"):
            for k in keys:
                port = k.tuples[0].value
                queues = [(port % 4) * 8 + q for q in range(8)]
                yield _Data([DataTuple("pg_id", (port & 0x7F) // 4),
                             DataTuple("egress_qid_queues", int_arr_val=queues)]), k
            return
        if self.name in COUNTERS:
            for idx, (p, b) in sorted(self.switch.counters.get(self.name, {}).items()):
                yield _Data([DataTuple("$COUNTER_SPEC_PKTS", p), DataTuple("$COUNTER_SPEC_BYTES", b)]), \
                    _Key([KeyTuple("$COUNTER_INDEX", idx)])
            return
        if keys is None:
            # Like bfrt_grpc's entry_get: bf_switchd sends the default entry after a
            # wildcard read, but the client's parser drops it (only default_entry_get
            # returns it).
            for k, d in list(self.entries.values()):
                yield d, k
            return
        for k in keys:
            if k.ident() in self.entries:
                yield self.entries[k.ident()][1], k
            elif self.fixed:
                yield _Data([]), k
            else:
                raise FakeError(f"Object not found: {self.name} {k.to_dict()}")

    def default_entry_set(self, target, data, *a, **kw):
        self.switch.log.append(("default", self.name))
        data.default = True
        self.default = data

    def default_entry_get(self, target, flags=None, *a, **kw):
        if self.name.endswith("tm.cfg"):
            yield _Data([DataTuple("cell_size_bytes", self.switch.cell_bytes),
                         DataTuple("total_cells", 280000)], default=True), None
            return
        yield (self.default or _Data([], default=True)), None


class FakeSwitch:
    """The device behind the fake client (one per test)."""

    def __init__(self, programs=("flexpass",), cell_bytes=80):
        self.programs, self.cell_bytes = list(programs), cell_bytes
        self.tables = {}
        self.log = []
        self.counters = {}
        self.bound = None

    def table(self, name):
        if name not in self.tables:
            self.tables[name] = _Table(self, name)
        return self.tables[name]


class _Info:
    def __init__(self, switch):
        self.switch = switch

    def table_get(self, name):
        return self.switch.table(name)


def make_module(switch, reachable=True):
    """A module object that quacks like bfrt_grpc.client for `switch`."""
    mod = types.ModuleType("bfrt_grpc.client")

    class ClientInterface:
        def __init__(self, grpc_addr, client_id, device_id, notifications=None, timeout=1, num_tries=5,
                     perform_subscribe=True):
            if not reachable:
                raise RuntimeError(f"Failed to subscribe to server at {grpc_addr}")
            self.client_id = client_id
            self.stub = types.SimpleNamespace(GetForwardingPipelineConfig=lambda req: types.SimpleNamespace(
                config=[types.SimpleNamespace(p4_name=p) for p in switch.programs]))

        def bind_pipeline_config(self, p4_name):
            if p4_name not in switch.programs:
                raise FakeError(f"no program {p4_name}")
            switch.bound = p4_name

        def bfrt_info_get(self, p4_name=None):
            return _Info(switch)

        def tear_down_stream(self):
            pass

    class _Req:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    mod.ClientInterface = ClientInterface
    mod.Target, mod.KeyTuple, mod.DataTuple = Target, KeyTuple, DataTuple
    mod.bfruntime_pb2 = types.SimpleNamespace(GetForwardingPipelineConfigRequest=_Req)
    return mod

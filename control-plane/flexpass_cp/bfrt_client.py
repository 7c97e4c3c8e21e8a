"""Thin adapter: :mod:`flexpass_cp.bfrt_ops` operations over BfRt gRPC with
the SDE's own Python client, ``bfrt_grpc.client`` (bf-drivers,
src/bf_rt/bfruntime_grpc_client/python in p4lang/open-p4studio).

The client is imported from the installed SDE, never vendored: first from
the normal ``sys.path`` (e.g. a PYTHONPATH set by the SDE's environment),
then from ``$SDE_INSTALL`` (or ``$SDE/install``), where the SDE installs it
as ``lib/python3.*/site-packages/tofino/bfrt_grpc``.  Without it every
operation raises :class:`BfrtUnavailable` naming what is missing.

Everything that decides *what* to write is in bfrt_ops (pure, tested without
an SDE); this module only converts to ``KeyTuple``/``DataTuple``, resolves TM
queues to (pg_id, pg_queue) through tfN.tm.port.cfg, and reads entries back.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .bfrt_ops import (
    DEFAULT,
    DELETE,
    INSERT,
    MANAGED_P4_TABLES,
    COUNTER_BYTES,
    COUNTER_PKTS,
    BfrtOp,
    BfrtUpdate,
    KeyField,
    PortQueue,
    ReadEntry,
    plan,
)

INSTALL_HINT = ("install the Tofino SDE (open-p4studio's p4studio tool, or Intel's SDE; README: "
                "\"Tofino\") and set SDE_INSTALL to its install directory")


class BfrtUnavailable(RuntimeError):
    """The SDE's BfRt Python client cannot be imported."""


class BfrtError(RuntimeError):
    """A BfRt operation failed; the message says which and why."""


def sde_python_dirs(env: Optional[Mapping[str, str]] = None) -> List[Path]:
    """site-packages/tofino directories of the installed SDE that hold bfrt_grpc."""
    env = os.environ if env is None else env
    roots = []
    if env.get("SDE_INSTALL"):
        roots.append(Path(env["SDE_INSTALL"]))
    if env.get("SDE"):
        roots.append(Path(env["SDE"]) / "install")
    found = []
    for root in roots:
        for client in sorted(glob.glob(str(root / "lib" / "python3*" / "site-packages" / "tofino"
                                           / "bfrt_grpc" / "client.py"))):
            found.append(Path(client).parent.parent)
    return found


def load_bfrt_grpc(env: Optional[Mapping[str, str]] = None):
    """Import ``bfrt_grpc.client`` from the installed SDE, or raise BfrtUnavailable."""
    env = os.environ if env is None else env
    try:
        return importlib.import_module("bfrt_grpc.client")
    except ImportError as e:
        first_error = e
    if not env.get("SDE_INSTALL") and not env.get("SDE"):
        raise BfrtUnavailable(
            "tofino target: the SDE's BfRt Python client (bfrt_grpc) is not importable and "
            f"neither SDE_INSTALL nor SDE is set; {INSTALL_HINT}") from None
    dirs = sde_python_dirs(env)
    if not dirs:
        where = ", ".join(f"{k}={env[k]}" for k in ("SDE_INSTALL", "SDE") if env.get(k))
        raise BfrtUnavailable(
            f"tofino target: no lib/python3*/site-packages/tofino/bfrt_grpc/client.py under {where} "
            f"(is the SDE built with bf-drivers' BfRt gRPC?); {INSTALL_HINT}")
    last: Exception = first_error
    for tofino_dir in dirs:
        # bfrt_grpc and its generated protobufs; the SDE's other Python deps after ours.
        for p, front in ((tofino_dir, True), (tofino_dir.parent, False)):
            if str(p) not in sys.path:
                sys.path.insert(0, str(p)) if front else sys.path.append(str(p))
        sys.modules.pop("bfrt_grpc", None)
        try:
            return importlib.import_module("bfrt_grpc.client")
        except ImportError as e:
            last = e
    raise BfrtUnavailable(f"tofino target: found {dirs[0]}/bfrt_grpc but importing it failed: {last} "
                          f"(the SDE's Python dependencies, e.g. grpcio/protobuf, must be importable)")


def _pipe_of(dev_port: int) -> int:
    return dev_port >> 7  # dev_port[8:7] is the pipe (DEVPORT_PIPE in tofino*_specs.p4)


class BfrtClient:
    """A BfRt gRPC session bound to one P4 program on one device."""

    def __init__(self, grpc_addr: str, device_id: int = 0, p4_name: str = "flexpass",
                 tm_prefix: str = "tf1", client_id: int = 1, timeout: float = 5.0, gc=None):
        self.gc = gc if gc is not None else load_bfrt_grpc()
        self.grpc_addr, self.device_id, self.p4_name = grpc_addr, device_id, p4_name
        self.tm_prefix = tm_prefix  # bfrt_ops.tm_prefix(): tf1 (Tofino) / tf2 (Tofino2)
        self._port_cfg: Dict[int, Tuple[int, List[int]]] = {}
        try:
            self.iface = self.gc.ClientInterface(grpc_addr, client_id=client_id, device_id=device_id,
                                                 num_tries=max(1, int(timeout)), timeout=1)
        except Exception as e:  # grpc errors, RuntimeError("Failed to subscribe")
            raise BfrtError(f"switch not reachable: BfRt gRPC at {grpc_addr} (device {device_id}): {e} "
                            "(is bf_switchd running?)") from None
        self.info = None

    # --- session -------------------------------------------------------------

    def close(self) -> None:
        iface, self.iface = getattr(self, "iface", None), None
        if iface is not None:
            try:
                iface.tear_down_stream()
            except Exception:
                pass

    def __enter__(self) -> "BfrtClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def running_programs(self) -> List[str]:
        req = self.gc.bfruntime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, client_id=self.iface.client_id)
        try:
            msg = self.iface.stub.GetForwardingPipelineConfig(req)
        except Exception as e:
            raise BfrtError(f"GetForwardingPipelineConfig at {self.grpc_addr}: {e}") from None
        return [c.p4_name for c in msg.config]

    def set_pipeline(self, build_dir: Optional[Path] = None, force: bool = False) -> bool:
        """Bind to the program; push ``build_dir`` (p4c output: bfrt.json,
        pipe/context.json, pipe/tofino.bin) first when the device does not run
        it, or when ``force``.  Returns True when a pipeline was pushed."""
        pushed = False
        running = self.running_programs()
        if force or self.p4_name not in running:
            if build_dir is None:
                raise BfrtError(f"the switch runs {running or 'no program'}, not {self.p4_name!r}: start "
                                f"bf_switchd with the program's .conf or pass the p4c output directory")
            files = self._build_files(Path(build_dir))
            cfg = self.gc.ForwardingConfig(self.p4_name, str(files["bfrt"]), [
                self.gc.ProfileInfo("pipe", str(files["context"]), str(files["binary"]), [0, 1, 2, 3])])
            try:
                ok = self.iface.send_set_forwarding_pipeline_config_request(
                    self.gc.bfruntime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_WARM_INIT_BEGIN_AND_END,
                    str(Path(build_dir).resolve()), [cfg])
            except Exception as e:
                raise BfrtError(f"SetForwardingPipelineConfig of {build_dir}: {e}") from None
            if not ok:
                raise BfrtError(f"SetForwardingPipelineConfig of {build_dir}: no WARM_INIT_FINISHED")
            pushed = True
        try:
            self.iface.bind_pipeline_config(self.p4_name)
            self.info = self.iface.bfrt_info_get(self.p4_name)
        except Exception as e:
            raise BfrtError(f"cannot bind to {self.p4_name!r} at {self.grpc_addr}: {e}") from None
        return pushed

    @staticmethod
    def _build_files(build_dir: Path) -> Dict[str, Path]:
        files = {"bfrt": build_dir / "bfrt.json", "context": build_dir / "pipe" / "context.json"}
        bins = sorted((build_dir / "pipe").glob("tofino*.bin"))
        if bins:
            files["binary"] = bins[0]
        missing = [k for k in ("bfrt", "context", "binary") if k not in files or not files[k].is_file()]
        if missing:
            raise BfrtError(f"{build_dir}: no compiled Tofino program ({', '.join(missing)} missing): "
                            "make p4-tofino")
        return files

    def bind(self) -> None:
        if self.info is None:
            self.set_pipeline(None)

    # --- conversion ----------------------------------------------------------

    def _table(self, name: str):
        self.bind()
        try:
            return self.info.table_get(name)
        except KeyError:
            raise BfrtError(f"no BfRt table {name!r} in {self.p4_name!r} (program and control plane "
                            "out of sync? make p4-tofino)") from None

    def _port_queue(self, dev_port: int, qid: int) -> Tuple[int, int]:
        """(pg_id, pg_queue) of a port's ingress qid, from tfN.tm.port.cfg."""
        if dev_port not in self._port_cfg:
            t = self._table(self._tm("port.cfg"))
            key = t.make_key([self.gc.KeyTuple("dev_port", dev_port)])
            try:
                data, _ = next(t.entry_get(self._target(), [key], {"from_hw": False}))
            except Exception as e:
                raise BfrtError(f"{self._tm('port.cfg')}[dev_port={dev_port}]: {e} (port not added?)") from None
            d = data.to_dict()
            self._port_cfg[dev_port] = (int(d["pg_id"]), [int(x) for x in d["egress_qid_queues"]])
        pg_id, queues = self._port_cfg[dev_port]
        if qid >= len(queues):
            raise BfrtError(f"dev_port {dev_port} has {len(queues)} queues; qid {qid} is not mapped")
        return pg_id, queues[qid]

    def _tm(self, name: str) -> str:
        return f"{self.tm_prefix}.tm.{name}"

    def _target(self, pipe: int = 0xFFFF):
        return self.gc.Target(device_id=self.device_id, pipe_id=pipe)

    def _key(self, table, fields: Sequence[KeyField]):
        tuples, pipe = [], 0xFFFF
        for k in fields:
            v = k.value
            if isinstance(v, PortQueue):
                pg_id, pg_queue = self._port_queue(v.dev_port, v.qid)
                v, pipe = (pg_id if v.field == "pg_id" else pg_queue), _pipe_of(v.dev_port)
            tuples.append(self.gc.KeyTuple(k.name, v, prefix_len=k.prefix_len))
        return table.make_key(tuples), pipe

    def _data(self, table, op: BfrtOp):
        gc, tuples = self.gc, []
        for name, v in op.data:
            if isinstance(v, bool):
                tuples.append(gc.DataTuple(name, bool_val=v))
            elif isinstance(v, str):
                tuples.append(gc.DataTuple(name, str_val=v))
            elif isinstance(v, list) and v and isinstance(v[0], bool):
                tuples.append(gc.DataTuple(name, bool_arr_val=v))
            elif isinstance(v, list):
                tuples.append(gc.DataTuple(name, int_arr_val=v))
            else:
                tuples.append(gc.DataTuple(name, v))
        return table.make_data(tuples, op.action)

    @staticmethod
    def _key_fields(key_dict: Mapping[str, Any]) -> Tuple[KeyField, ...]:
        out = []
        for name, v in key_dict.items():
            if isinstance(v, dict) and "prefix_len" in v:
                out.append(KeyField(name, "lpm", v["value"], int(v["prefix_len"])))
            elif isinstance(v, dict):
                out.append(KeyField(name, "exact", v.get("value")))
            else:
                out.append(KeyField(name, "exact", v))
        return tuple(out)

    # --- read ------------------------------------------------------------------

    def _read_entries(self, table_name: str, key_fields=None, pipe: int = 0xFFFF,
                      from_hw: bool = False) -> List[Tuple[Dict, Dict]]:
        t = self._table(table_name)
        keys = None
        if key_fields is not None:
            k, pipe = self._key(t, key_fields)
            keys = [k]
        try:
            return [(d.to_dict(), k.to_dict() if k is not None else {})
                    for d, k in t.entry_get(self._target(pipe), keys, {"from_hw": from_hw})]
        except Exception as e:
            if key_fields is not None and "NOT_FOUND" in str(e).upper().replace(" ", "_"):
                return []
            raise BfrtError(f"read {table_name}: {e}") from None

    def read_existing(self, desired: Sequence[BfrtOp]) -> List[ReadEntry]:
        """What the switch holds for ``desired``: every entry of the managed P4
        tables, and the entry of each other op."""
        out: List[ReadEntry] = []
        for table in MANAGED_P4_TABLES:
            for data, key in self._read_entries(table):
                # bfrt_grpc's wildcard entry_get skips the default entry (it is
                # read below, with default_entry_get, when an op writes it).
                if data.pop("is_default_entry", False):
                    continue
                action = data.pop("action_name", None)
                out.append(ReadEntry(table, self._key_fields(key), data,
                                     action.split(".")[-1] if action else None))
        for op in desired:
            if op.write == DEFAULT:
                t = self._table(op.table)
                try:
                    data = next(t.default_entry_get(self._target(), {"from_hw": False}))[0].to_dict()
                except Exception as e:
                    raise BfrtError(f"read default of {op.table}: {e}") from None
                data.pop("is_default_entry", None)
                action = data.pop("action_name", None)
                out.append(ReadEntry(op.table, (), data, action.split(".")[-1] if action else None, True))
                continue
            if op.table in MANAGED_P4_TABLES:
                continue
            for data, _ in self._read_entries(op.table, op.key):
                action = data.pop("action_name", None)
                data.pop("is_default_entry", None)
                out.append(ReadEntry(op.table, op.key, data, action.split(".")[-1] if action else None))
        return out

    def plan(self, desired: Sequence[BfrtOp]) -> List[BfrtUpdate]:
        return plan(desired, self.read_existing(desired))

    # --- write -----------------------------------------------------------------

    def write(self, u: BfrtUpdate) -> None:
        if u.op == DELETE:
            e = u.existing
            t = self._table(e.table)
            key, pipe = self._key(t, e.key)
            call, args = t.entry_del, (self._target(pipe), [key])
        else:
            op = u.desired
            t = self._table(op.table)
            data = self._data(t, op)
            if op.write == DEFAULT:
                call, args = t.default_entry_set, (self._target(), data)
            else:
                key, pipe = self._key(t, op.key)
                call = t.entry_add if u.op == INSERT else t.entry_mod
                args = (self._target(pipe), [key], [data])
        try:
            call(*args)
        except Exception as e:
            raise BfrtError(f"{u.describe()}: {e}") from None

    def apply(self, desired: Sequence[BfrtOp]) -> List[BfrtUpdate]:
        updates = self.plan(desired)
        for u in updates:
            self.write(u)
        return updates

    # --- counters and TM state ---------------------------------------------------

    def read_counter(self, name: str) -> Dict[int, Tuple[int, int]]:
        """Indirect P4 counter: index -> (packets, bytes), summed over pipes."""
        out: Dict[int, Tuple[int, int]] = {}
        for data, key in self._read_entries(name, from_hw=True):
            idx = key["$COUNTER_INDEX"]["value"]
            p, b = out.get(idx, (0, 0))
            out[idx] = (p + int(data.get(COUNTER_PKTS, 0)), b + int(data.get(COUNTER_BYTES, 0)))
        return out

    def queue_counters(self, dev_port: int, qid: int) -> Dict[str, int]:
        """tfN.tm.counter.queue: drop_count_packets, usage_cells, watermark_cells."""
        key = (KeyField("pg_id", "exact", PortQueue(dev_port, qid, "pg_id")),
               KeyField("pg_queue", "exact", PortQueue(dev_port, qid, "pg_queue")))
        rows = self._read_entries(self._tm("counter.queue"), key, from_hw=True)
        d = rows[0][0] if rows else {}
        return {k: int(d.get(k, 0)) for k in ("drop_count_packets", "usage_cells", "watermark_cells")}

    def set_queue_scheduling(self, dev_port: int, qid: int, enable: bool) -> None:
        """Pause / resume a queue (tfN.tm.queue.sched_cfg.scheduling_enable)."""
        op = BfrtOp(self._tm("queue.sched_cfg"),
                    (KeyField("pg_id", "exact", PortQueue(dev_port, qid, "pg_id")),
                     KeyField("pg_queue", "exact", PortQueue(dev_port, qid, "pg_queue"))),
                    (("scheduling_enable", enable),), write="modify")
        self.write(BfrtUpdate("MODIFY", op))

    def check_tm(self, cell_bytes: int, guaranteed_cells: int) -> None:
        """The device's TM cell size is the one the config assumes, and the
        guaranteed buffers fit in it."""
        t = self._table(self._tm("cfg"))
        try:
            d = next(t.default_entry_get(self._target(), {"from_hw": False}))[0].to_dict()
        except Exception as e:
            raise BfrtError(f"read {self._tm('cfg')}: {e}") from None
        if int(d.get("cell_size_bytes", cell_bytes)) != cell_bytes:
            raise BfrtError(f"{self._tm('cfg')}.cell_size_bytes is {d['cell_size_bytes']}, the config "
                            f"assumes {cell_bytes} (wrong target in the config: tofino vs tofino2?)")
        total = int(d.get("total_cells", 0))
        if total and guaranteed_cells > total:
            raise BfrtError(f"the queues' guaranteed buffers need {guaranteed_cells} cells, the TM has "
                            f"{total}: lower port_defaults.buffer")

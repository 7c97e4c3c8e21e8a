#!/usr/bin/env python3
"""FlexPass NIC edge as eBPF: loader and inspector of nic/ebpf/flexpass_edge.bpf.c.

The tc egress program (clsact, cls_bpf direct-action) is the PNA program's edge
(p4src/pna/flexpass_nic.p4) for a Linux netdev: DSCP -> class as the switch's classifier
(kind, colour; skb->priority = the htb class of flexpass_nic.py, replacing its u32
filters), credits policed by a token bucket at share·C·84/(84+F) with the PNA meter's rate
and burst (flexpass_cp.config.derive.nic_credit_meter), counters per (kind, colour) and
per event. Configuration and counters live in maps pinned under
<bpffs>/flexpass-edge/<dev>/tc/globals/, read and written here with the bpf(2) syscall
(ctypes; no bpftool).

Usage (root; `flexpass_nic.py ebpf ...` is the same):
  flexpass_ebpf.py apply --dev eth0 --link-mbit 10000 [--w-q 0.5] [--credit-share W] [--mtu 1500]
                   [--burst-packets 2] [--no-htb] [--drop-malformed] [--bpffs /sys/fs/bpf] [--netns NS]
  flexpass_ebpf.py apply --config control-plane/configs/X.yaml --nic h1 [--no-htb] ...
                   (the config's nics.h1 entry, edge ebpf, in place of the first line's numbers)
  flexpass_ebpf.py show --dev eth0 [--json]     counters and configuration
  flexpass_ebpf.py clear --dev eth0             filter, clsact, htb root and pinned maps removed
  flexpass_ebpf.py build [--out FILE]            compile only (make nic-ebpf)
  flexpass_ebpf.py bench [--repeat N]           ns/packet per path (BPF_PROG_TEST_RUN; scratch netns)
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

NIC_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(NIC_DIR))
sys.path.insert(0, str(NIC_DIR.parent / "control-plane"))
import flexpass_nic  # noqa: E402
from flexpass_cp.config.derive import nic_credit_meter  # noqa: E402
from flexpass_cp.config.profiles import CLASS_QUEUES, FLEXPASS  # noqa: E402
from flexpass_cp.config.targets import EBPF_EDGE_MAX_CREDIT_BYTES_PER_S, EBPF_EDGE_PIN_DIR, nic_agent_flags  # noqa: E402
from flexpass_cp.dscp import TrafficClass  # noqa: E402
from flexpass_cp.p4_program import KIND  # noqa: E402

SRC = NIC_DIR / "ebpf" / "flexpass_edge.bpf.c"
SECTION = "tc"
FILTER_PREF = "49"  # our egress filter's preference (tc filter ... pref 49)
FLEXPASS_UDP_PORT = 7890  # docs/protocol.md §2

# ---- The program's layouts and ids (nic/ebpf/flexpass_edge.bpf.c) ----------------------
EDGE_CONFIG = struct.Struct("<QQQIHBBII")  # rate, burst, test clock, min frame, port, flags, configured, legacy prio
DSCP_CLASS = struct.Struct("<IBBBB")       # priority, kind, colour, qid, pad
BUCKET = struct.Struct("<IIQQ")            # spin lock, pad, tokens (nano-bytes), last ns
EDGE_DROP_MALFORMED = 1
MIN_FRAME_BYTES = 60  # a minimum Ethernet frame without FCS: the least a credit costs
NIC_EVENTS = {0: "parser_error", 1: "not_ipv4", 5: "flexpass_seen", 7: "bad_flexpass",
              9: "credit_dropped", 10: "malformed_dropped"}
KIND_NAMES = {v: k.value for k, v in KIND.items()}
COLOR_NAMES = {0: "green", 2: "red"}
MAPS = ("edge_config", "dscp_plan", "credit_bucket", "nic_events", "class_packets", "class_bytes", "flow_credits")
FLOW_KEY = struct.Struct("!4s4sI")  # src, dst, flow_id as on the wire
MAX_RATE_BYTES_PER_S = EBPF_EDGE_MAX_CREDIT_BYTES_PER_S  # refill of 1 s·rate in u64 (config/targets.py)
TC_ACT_OK, TC_ACT_SHOT = 0, 2


class EdgeError(RuntimeError):
    """What is missing or wrong, in words a user can act on (a RuntimeError: the tools'
    `run_command` reports it as one line)."""


# ---- bpf(2) through ctypes ----------------------------------------------------------------
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "ppc64le": 361, "s390x": 351, "riscv64": 280}
BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY = 3, 4
BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_OBJ_GET, BPF_PROG_TEST_RUN, BPF_PROG_GET_FD_BY_ID = 1, 2, 7, 10, 13
_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: bytes) -> Tuple[int, bytes]:
    nr = _SYS_BPF.get(platform.machine())
    if nr is None:
        raise EdgeError(f"bpf(2) syscall number unknown for {platform.machine()}")
    buf = ctypes.create_string_buffer(attr, 128)
    r = _libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), buf, ctypes.c_uint(128))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf(cmd {cmd}): {os.strerror(e)}")
    return r, buf.raw


def _ptr(buf) -> int:
    return ctypes.addressof(buf)


def obj_get(path: Path) -> int:
    """A file descriptor for a pinned map or program."""
    p = ctypes.create_string_buffer(str(path).encode())
    try:
        return _bpf(BPF_OBJ_GET, struct.pack("<QII", _ptr(p), 0, 0))[0]
    except OSError as e:
        raise EdgeError(f"{path}: {e.strerror} (is the edge applied? flexpass_nic.py ebpf apply)") from None


def map_lookup(fd: int, key, size: int) -> bytes:
    """The value at ``key`` (an array index, or the raw key bytes of a hash map)."""
    raw = key if isinstance(key, bytes) else struct.pack("<I", key)
    k, v = ctypes.create_string_buffer(raw, len(raw)), ctypes.create_string_buffer(size)
    _bpf(BPF_MAP_LOOKUP_ELEM, struct.pack("<IIQQQ", fd, 0, _ptr(k), _ptr(v), 0))
    return v.raw


def map_update(fd: int, key: int, value: bytes) -> None:
    k, v = ctypes.create_string_buffer(struct.pack("<I", key)), ctypes.create_string_buffer(value, len(value))
    _bpf(BPF_MAP_UPDATE_ELEM, struct.pack("<IIQQQ", fd, 0, _ptr(k), _ptr(v), 0))


def map_delete(fd: int, key: bytes) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    _bpf(BPF_MAP_DELETE_ELEM, struct.pack("<IIQ", fd, 0, _ptr(k)))


def map_keys(fd: int, key_size: int) -> List[bytes]:
    """Every key of a hash map (BPF_MAP_GET_NEXT_KEY from none)."""
    keys, cur = [], None
    while True:
        k = ctypes.create_string_buffer(cur, key_size) if cur else None
        nxt = ctypes.create_string_buffer(key_size)
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, struct.pack("<IIQQ", fd, 0, _ptr(k) if k else 0, _ptr(nxt)))
        except OSError as e:
            if e.errno == 2:  # ENOENT: the last key
                return keys
            raise
        cur = nxt.raw
        keys.append(cur)


def prog_fd_by_id(prog_id: int) -> int:
    return _bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("<II", prog_id, 0))[0]


@dataclass
class RunResult:
    retval: int          # TC_ACT_*
    duration_ns: int     # the kernel's mean per run
    data: bytes          # the packet after the program
    priority: int        # skb->priority after the program


def prog_test_run(fd: int, packet: bytes, repeat: int = 1) -> RunResult:
    """BPF_PROG_TEST_RUN: run the program on ``packet`` ``repeat`` times in the kernel."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    data_out = ctypes.create_string_buffer(len(packet) + 256)
    ctx_size = 192  # struct __sk_buff
    ctx_in, ctx_out = ctypes.create_string_buffer(ctx_size), ctypes.create_string_buffer(ctx_size)
    attr = struct.pack("<IIIIQQIIIIQQII", fd, 0, len(packet), len(data_out), _ptr(data_in), _ptr(data_out),
                       repeat, 0, ctx_size, ctx_size, _ptr(ctx_in), _ptr(ctx_out), 0, 0)
    _, out = _bpf(BPF_PROG_TEST_RUN, attr)
    _fd, retval, _si, size_out = struct.unpack_from("<IIII", out)
    duration = struct.unpack_from("<I", out, 36)[0]
    priority = struct.unpack_from("<I", ctx_out.raw, 32)[0]  # __sk_buff.priority
    return RunResult(retval, duration, data_out.raw[:size_out], priority)


# ---- What the loader writes ---------------------------------------------------------------
def htb_priority(classid: str) -> int:
    """skb->priority that makes htb pick class "major:minor" (hex, as tc writes it)."""
    major, minor = (int(x, 16) for x in classid.split(":"))
    return major << 16 | minor


@dataclass
class EdgeConfig:
    """The edge's settings: a NicConfig (link, w_q, share, MTU, DSCP plan) plus the policer's."""

    nic: flexpass_nic.NicConfig
    burst_packets: int = 2  # the switch's credit_meter_burst_packets
    drop_malformed: bool = False
    udp_port: int = FLEXPASS_UDP_PORT

    def validate(self) -> None:
        self.nic.validate()
        if not 1 <= self.burst_packets <= 64:
            raise ValueError(f"--burst-packets must be in 1..64, got {self.burst_packets}")
        if not 0 < self.udp_port < 65536:
            raise ValueError(f"--udp-port must be in 1..65535, got {self.udp_port}")
        rate, _ = self.meter()
        if rate > MAX_RATE_BYTES_PER_S:
            raise ValueError(f"--link-mbit: credit rate {rate} B/s above the program's {MAX_RATE_BYTES_PER_S}")

    def meter(self) -> Tuple[int, int]:
        """(rate bytes/s, burst bytes): the PNA meter's numbers (derive.nic_credit_meter)."""
        return nic_credit_meter(self.nic.link_mbit * 1e6, self.nic.share(), self.nic.mtu, self.burst_packets)

    def config_value(self, test_clock_ns: int = 0) -> bytes:
        rate, burst = self.meter()
        legacy = htb_priority(flexpass_nic.HTB_CLASS[CLASS_QUEUES[FLEXPASS][TrafficClass.LEGACY][0]])
        return EDGE_CONFIG.pack(rate, burst, test_clock_ns, MIN_FRAME_BYTES, self.udp_port,
                                EDGE_DROP_MALFORMED if self.drop_malformed else 0, 1, legacy, 0)

    def dscp_plan(self) -> List[bytes]:
        """64 cells: the switch's classifier entries for the FlexPass profile
        (config/entries.py: classifier_entries), unassigned DSCPs legacy (its default)."""
        plan = self.nic.dscp or flexpass_nic.DEFAULT_DSCP
        queues = CLASS_QUEUES[FLEXPASS]

        def cell(cls: TrafficClass) -> bytes:
            queue, color = queues[cls]
            return DSCP_CLASS.pack(htb_priority(flexpass_nic.HTB_CLASS[queue]), KIND[cls], color,
                                   list(flexpass_nic.HTB_CLASS).index(queue), 0)
        cells = [cell(TrafficClass.LEGACY)] * 64
        for name, dscp in plan.items():
            cells[dscp] = cell(TrafficClass(name))
        return cells


# ---- Tools, bpffs, tc ---------------------------------------------------------------------
def find_clang() -> str:
    for c in [os.environ.get("FLEXPASS_BPF_CLANG"), "clang"] + [f"clang-{v}" for v in range(19, 13, -1)]:
        if c and shutil.which(c):
            return c
    raise EdgeError("clang not found (install clang, e.g. `apt-get install clang`, or set FLEXPASS_BPF_CLANG)")


def compile_program(out: Path) -> Path:
    """clang -O2 -g -target bpf: the object tc loads (BTF for the bucket's spin lock)."""
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("gcc") else ""
    cmd = [find_clang(), "-O2", "-g", "-target", "bpf", "-Wall", "-Werror",
           f"-I/usr/include/{multiarch or 'x86_64-linux-gnu'}", "-c", str(SRC), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise EdgeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return out


def bpffs_mounts() -> List[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] == "bpf":
            out.append(left.split()[4])
    return out


def pin_dir(bpffs: str, dev: str) -> Path:
    """Where the device's maps are pinned (tc pins under <this>/tc/globals)."""
    root = os.path.realpath(bpffs)
    if root not in bpffs_mounts():
        raise EdgeError(f"no bpf filesystem mounted at {bpffs}: mount -t bpf bpf {bpffs} (or --bpffs DIR)")
    return Path(root) / EBPF_EDGE_PIN_DIR / dev


def maps_dir(bpffs: str, dev: str) -> Path:
    return pin_dir(bpffs, dev) / "tc" / "globals"


def tc(args: List[str], netns: Optional[str] = None, env=None, check=True) -> str:
    cmd = (["ip", "netns", "exec", netns] if netns else []) + ["tc"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise EdgeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise EdgeError(f"{what} needs root (CAP_NET_ADMIN and CAP_BPF: tc, bpffs, bpf(2))")
    if not shutil.which("tc"):
        raise EdgeError("tc not found (iproute2)")


def apply(cfg: EdgeConfig, bpffs: str = "/sys/fs/bpf", htb: bool = True, netns: Optional[str] = None,
          test_clock_ns: int = 0) -> int:
    """Build the port: htb classes (flexpass_nic.py without u32) unless ``htb`` is false, the
    program on clsact egress, its maps written. Returns the program id."""
    cfg.validate()
    require_root("ebpf apply")
    dev = cfg.nic.dev
    pins = pin_dir(bpffs, dev)
    with tempfile.TemporaryDirectory(prefix="flexpass-edge-") as tmp:
        obj = compile_program(Path(tmp) / "flexpass_edge.bpf.o")
        if htb:
            for cmd in flexpass_nic.commands(cfg.nic, u32=False):
                tc(cmd[1:], netns)
        tc(["qdisc", "replace", "dev", dev, "clsact"], netns)
        pins.mkdir(parents=True, exist_ok=True)
        # tc pins the maps by name under TC_BPF_MNT/tc/globals, and reuses them if there.
        env = dict(os.environ, TC_BPF_MNT=str(pins))
        tc(["filter", "replace", "dev", dev, "egress", "pref", FILTER_PREF, "handle", "1", "bpf", "da",
            "obj", str(obj), "sec", SECTION], netns, env=env)
    write_config(cfg, bpffs, test_clock_ns)
    return prog_id(dev, netns)


def prog_id(dev: str, netns: Optional[str] = None) -> int:
    out = tc(["filter", "show", "dev", dev, "egress", "pref", FILTER_PREF], netns)
    for word, nxt in zip(out.split(), out.split()[1:]):
        if word == "id":
            return int(nxt)
    raise EdgeError(f"no FlexPass edge filter on {dev} egress (flexpass_nic.py ebpf apply)")


class EdgeMaps:
    """The pinned maps of one device's edge, opened with BPF_OBJ_GET."""

    def __init__(self, bpffs: str, dev: str):
        d = maps_dir(bpffs, dev)
        self.fd = {name: obj_get(d / name) for name in MAPS}

    def close(self) -> None:
        for fd in self.fd.values():
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def u64(self, name: str, idx: int) -> int:
        return struct.unpack("<Q", map_lookup(self.fd[name], idx, 8))[0]

    def write(self, cfg: EdgeConfig, test_clock_ns: int = 0) -> None:
        for dscp, cell in enumerate(cfg.dscp_plan()):
            map_update(self.fd["dscp_plan"], dscp, cell)
        # An empty bucket last filled at 0: the first credit finds it full.
        map_update(self.fd["credit_bucket"], 0, BUCKET.pack(0, 0, 0, 0))
        map_update(self.fd["edge_config"], 0, cfg.config_value(test_clock_ns))

    def set_clock(self, now_ns: int) -> None:
        """Move the test clock (only for a config written with test_clock_ns != 0)."""
        raw = bytearray(map_lookup(self.fd["edge_config"], 0, EDGE_CONFIG.size))
        struct.pack_into("<Q", raw, 16, now_ns)
        map_update(self.fd["edge_config"], 0, bytes(raw))

    def flows(self) -> Dict[Tuple[str, str, int], int]:
        """(credit source, credit destination, flow_id) -> credits passed."""
        out = {}
        for key in map_keys(self.fd["flow_credits"], FLOW_KEY.size):
            try:
                n = struct.unpack("<Q", map_lookup(self.fd["flow_credits"], key, 8))[0]
            except OSError:
                continue  # evicted meanwhile
            src, dst, flow_id = FLOW_KEY.unpack(key)
            out[(socket.inet_ntoa(src), socket.inet_ntoa(dst), flow_id)] = n
        return out

    def clear_counters(self) -> None:
        for name, n in (("nic_events", 16), ("class_packets", 32), ("class_bytes", 32)):
            for i in range(n):
                map_update(self.fd[name], i, bytes(8))
        for key in map_keys(self.fd["flow_credits"], FLOW_KEY.size):
            map_delete(self.fd["flow_credits"], key)

    def counters(self) -> Dict:
        classes = {}
        for kind, kname in KIND_NAMES.items():
            for color, cname in COLOR_NAMES.items():
                idx = kind << 2 | color
                pk = self.u64("class_packets", idx)
                if pk:
                    classes[f"{kname}/{cname}"] = {"packets": pk, "ip_bytes": self.u64("class_bytes", idx)}
        events = {name: self.u64("nic_events", i) for i, name in NIC_EVENTS.items()}
        rate, burst, clock, _mf, port, flags, configured, _lp, _ = EDGE_CONFIG.unpack(
            map_lookup(self.fd["edge_config"], 0, EDGE_CONFIG.size))
        config = {"credit_rate_bytes_per_s": rate, "credit_burst_bytes": burst, "udp_port": port,
                  "drop_malformed": bool(flags & EDGE_DROP_MALFORMED), "configured": bool(configured)}
        if clock:
            config["test_clock_ns"] = clock
        flows = [{"src": s, "dst": d, "flow_id": f, "credits": n}
                 for (s, d, f), n in sorted(self.flows().items(), key=lambda kv: -kv[1])]
        return {"config": config, "classes": classes, "events": events, "flow_credits": flows}


def write_config(cfg: EdgeConfig, bpffs: str, test_clock_ns: int = 0) -> None:
    with EdgeMaps(bpffs, cfg.nic.dev) as m:
        m.write(cfg, test_clock_ns)


def clear(dev: str, bpffs: str = "/sys/fs/bpf", netns: Optional[str] = None) -> None:
    """Remove the edge: our filter, clsact when nothing else is on it, our htb root, the pins."""
    require_root("ebpf clear")
    tc(["filter", "del", "dev", dev, "egress", "pref", FILTER_PREF], netns, check=False)
    if not tc(["filter", "show", "dev", dev, "egress"], netns, check=False).strip() and \
            not tc(["filter", "show", "dev", dev, "ingress"], netns, check=False).strip():
        tc(["qdisc", "del", "dev", dev, "clsact"], netns, check=False)
    if "htb 1: root" in tc(["qdisc", "show", "dev", dev, "root"], netns, check=False):
        tc(["qdisc", "del", "dev", dev, "root"], netns, check=False)
    pins = pin_dir(bpffs, dev)
    if pins.exists():
        shutil.rmtree(pins)


# ---- A throw-away edge: BPF_PROG_TEST_RUN tests and `bench` ---------------------------------
def run_quiet(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def private_bpffs():
    """A bpf filesystem of our own, mounted on a temporary directory (the edge's pins go
    there, not into /sys/fs/bpf): yields its path; unmounted and removed after, also on
    failure. Root."""
    path = tempfile.mkdtemp(prefix="flexpass-bpffs-")
    mounted = False
    try:
        run_quiet("mount", "-t", "bpf", "bpf", path)
        mounted = True
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", path], capture_output=True)
        os.rmdir(path)


@contextlib.contextmanager
def netns(name: str):
    """A network namespace with its loopback up, deleted after (with whatever is in it)."""
    run_quiet("ip", "netns", "add", name)
    try:
        run_quiet("ip", "-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@contextlib.contextmanager
def scratch_edge(cfg: Optional[EdgeConfig] = None, test_clock_ns: int = 0):
    """The program loaded on `lo` of a new network namespace, its maps pinned in a private
    bpf filesystem: yields (program fd, EdgeMaps); all removed after, also on failure. Root."""
    require_root("a scratch edge (BPF_PROG_TEST_RUN)")
    cfg = cfg or EdgeConfig(flexpass_nic.NicConfig(dev="lo", link_mbit=10_000))
    with private_bpffs() as bpffs, netns(f"fpedge{os.getpid()}") as ns:
        fd = prog_fd_by_id(apply(cfg, bpffs, htb=False, netns=ns, test_clock_ns=test_clock_ns))
        try:
            with EdgeMaps(bpffs, "lo") as maps:
                yield fd, maps
        finally:
            os.close(fd)


def frame(tos: int, payload: bytes, sport: int = FLEXPASS_UDP_PORT, dport: int = FLEXPASS_UDP_PORT,
          proto: int = 17) -> bytes:
    """Ethernet + IPv4 (no options) + UDP + payload (proto 17), or + payload as the L4 (else)."""
    l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload if proto == 17 else payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(l4), 0, 0x4000, 64, proto, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return bytes(6 * [2]) + bytes(6 * [4]) + b"\x08\x00" + ip + l4


def bench(repeat: int) -> Dict[str, float]:
    """ns/packet of the program (BPF_PROG_TEST_RUN, `repeat` runs, the kernel's mean) per path."""
    credit = bytes.fromhex("110000120102030400000001000000000000")  # docs/protocol-vectors.json credit_min
    data = bytes.fromhex("12000034") + bytes(4) + bytes(20) + bytes(24)
    dscp = flexpass_nic.DEFAULT_DSCP
    cases = {
        "credit within the rate": frame(dscp["credit"] << 2, credit),
        "credit over the rate (dropped)": frame(dscp["credit"] << 2, credit),
        "proactive data": frame(dscp["proactive_data"] << 2, data),
        "legacy TCP": frame(0, bytes(20), proto=6),
    }
    out = {}
    # 1 Tbit/s: every credit conforms (2.3 GB/s of credits); 10 Mbit/s: all but the burst is over.
    for link, names in ((1_000_000, ["credit within the rate", "proactive data", "legacy TCP"]),
                        (10, ["credit over the rate (dropped)"])):
        cfg = EdgeConfig(flexpass_nic.NicConfig(dev="lo", link_mbit=link))
        with scratch_edge(cfg) as (fd, _maps):
            for name in names:
                r = prog_test_run(fd, cases[name], repeat)
                want = TC_ACT_SHOT if "dropped" in name else TC_ACT_OK
                if r.retval != want:
                    raise EdgeError(f"bench: {name}: the program returned {r.retval}, not {want}")
                out[name] = r.duration_ns
    return out


# ---- CLI --------------------------------------------------------------------------------
def edge_config_from_args(a) -> EdgeConfig:
    """The edge of `apply`'s flags, or of --config FILE --nic NAME (the control plane's
    nics: entry, edge ebpf): the same EdgeConfig for the same numbers."""
    nic, burst = flexpass_nic.nic_from_args(a, "ebpf", extra_dests=("burst_packets",))
    if burst is None:
        burst = 2 if a.burst_packets is None else a.burst_packets
    return EdgeConfig(nic, burst_packets=burst, drop_malformed=a.drop_malformed)


def device_from_args(a) -> str:
    """`show` / `clear`: --dev, or the device of --config FILE --nic NAME (an ebpf entry)."""
    if a.config or a.nic:
        if not (a.config and a.nic):
            raise ValueError("--config and --nic go together")
        if a.dev is not None:
            raise ValueError(f"--dev: given by nics.{a.nic} in {a.config}; use either --config --nic or --dev")
        nic, _ = flexpass_nic.from_config(a.config, a.nic, "ebpf")
        return nic.dev
    if a.dev is None:
        raise ValueError("--dev is required (or --config FILE --nic NAME)")
    return a.dev


def cmd_apply(a) -> None:
    cfg = edge_config_from_args(a)
    pid = apply(cfg, a.bpffs, htb=not a.no_htb, netns=a.netns)
    rate, burst = cfg.meter()
    print(f"flexpass edge on {cfg.nic.dev} egress: program id {pid}, credits <= {rate} B/s "
          f"({rate / MIN_FRAME_BYTES:.0f} minimum credits/s), burst {burst} B; maps in {maps_dir(a.bpffs, cfg.nic.dev)}")
    print(f"agent on this host: flexpass agent {nic_agent_flags('ebpf', cfg.nic.dev, os.path.realpath(a.bpffs))} "
          "(the edge polices its credits; the agent paces flows only)")


def cmd_show(a) -> None:
    with EdgeMaps(a.bpffs, device_from_args(a)) as m:
        c = m.counters()
    if a.json:
        print(json.dumps(c))
        return
    print("config: " + ", ".join(f"{k} {v}" for k, v in c["config"].items()))
    for name, v in c["classes"].items():
        print(f"  {name:24} {v['packets']:>12} packets {v['ip_bytes']:>14} IPv4 bytes")
    print("events: " + ", ".join(f"{k} {v}" for k, v in c["events"].items()))
    for f in c["flow_credits"][:20]:
        print(f"  credits {f['src']} -> {f['dst']} flow {f['flow_id']}: {f['credits']}")


def cmd_clear(a) -> None:
    clear(device_from_args(a), a.bpffs, a.netns)


def cmd_build(a) -> None:
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    print(f"{find_clang()} -O2 -g -target bpf {SRC.relative_to(NIC_DIR.parent)} -> {compile_program(Path(a.out))}")


def cmd_bench(a) -> None:
    for name, ns in bench(a.repeat).items():
        print(f"{name:32} {ns:6} ns/packet  (BPF_PROG_TEST_RUN, repeat {a.repeat})")


def add_commands(sub) -> None:
    """apply, show, clear, build, bench on an argparse subparsers object (this tool's own,
    or `flexpass_nic.py ebpf`'s); each sets ``func``."""
    p = sub.add_parser("apply", help="attach the edge to a device's egress and configure it")
    flexpass_nic.add_source_args(p, [("--burst-packets", "burst_packets", int,
                                      "token bucket depth in credits (the switch's meter burst; default 2)")])
    p.add_argument("--drop-malformed", action="store_true",
                   help="drop truncated packets and bad FlexPass headers as the PNA program does (default: pass, counted)")
    p.add_argument("--no-htb", action="store_true", help="attach only the program (no htb classes)")
    p.set_defaults(func=cmd_apply)
    show = sub.add_parser("show", help="counters and configuration")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)
    rm = sub.add_parser("clear", help="remove the edge")
    rm.set_defaults(func=cmd_clear)
    for q in (show, rm):
        q.add_argument("--dev", help="the device (or --config FILE --nic NAME: its nics: entry's)")
        q.add_argument("--config", help="a control-plane YAML config")
        q.add_argument("--nic", help="with --config: the entry's name (nics.<name>)")
    for q in (p, show, rm):
        q.add_argument("--bpffs", default="/sys/fs/bpf", help="a mounted bpf filesystem for the pinned maps")
        q.add_argument("--netns", default=None, help="run tc in this network namespace (ip netns)")
    b = sub.add_parser("build", help="compile the program only (no root)")
    b.add_argument("--out", default="build/nic-ebpf/flexpass_edge.bpf.o")
    b.set_defaults(func=cmd_build)
    b = sub.add_parser("bench", help="ns/packet per path (BPF_PROG_TEST_RUN on a scratch edge)")
    b.add_argument("--repeat", type=int, default=1_000_000)
    b.set_defaults(func=cmd_bench)
    for q in sub.choices.values():
        q.set_defaults(tool="flexpass_nic ebpf")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flexpass_nic.py ebpf", description=__doc__.split("\n\n")[0])
    add_commands(ap.add_subparsers(dest="cmd", required=True))
    return ap


def main(argv=None) -> int:
    return flexpass_nic.run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

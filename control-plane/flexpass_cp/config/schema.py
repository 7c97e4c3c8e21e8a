"""Reading a config: YAML -> validated :class:`~.model.Config`.

:func:`load_config` / :func:`parse_config` raise :class:`~.model.ConfigError`
with the path of the offending field
(``switches.s1.ports.3.link_rate: must be > 0, got -1``).  Units: :mod:`.units`.
"""

from __future__ import annotations

import ipaddress
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .. import frames
from ..dscp import PRIORITY_LEVELS, DscpPlan, TrafficClass
from ..p4_program import ECMP_MAX_GROUP_SIZE, MAX_PORTS, QUEUES_PER_PORT
from .model import (
    Config,
    ConfigError,
    NIC_EDGES,
    FlashPassParams,
    HostNicConfig,
    NextHop,
    PortConfig,
    PptParams,
    QueueParams,
    Route,
    SwitchConfig,
)
from .profiles import (DEFAULT_BMV2_PRIORITY, FLASHPASS, LOGICAL_QUEUES, MODEL_ONLY, PFABRIC, PPT, PROFILE_TARGETS,
                       PROFILES, RENAMED)
from .targets import (EBPF_EDGE_MAX_CREDIT_BYTES_PER_S, TARGETS, TOFINO_CHIPS, TOFINO_SPEEDS,
                      WIRE_OVERHEAD_NOT_SEEN_BY_BMV2)
from .topology import with_down_links
from .units import is_number, parse_mac, parse_rate, parse_size


def _mapping(value: Any, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
    return value


def _check_keys(m: Mapping, path: str, allowed: Sequence[str], required: Sequence[str] = ()) -> None:
    for k in m:
        if k not in allowed:
            raise ConfigError(_join(path, k), f"unknown field (allowed: {', '.join(allowed)})")
    for k in required:
        if k not in m:
            raise ConfigError(_join(path, k), "required field is missing")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _int(value: Any, path: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"must be an integer, got {value!r}")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ConfigError(path, f"must be in {lo}..{hi}, got {value}")
    return value


_QUEUE_FIELDS = ("w_q", "ecn_threshold", "red_threshold", "legacy_ecn_threshold",
                 "buffer", "credit_queue_packets", "credit_meter_burst_packets", "credit_shaper_burst_packets")


#: FlexPass queue fields a PPT or FlashPass switch does not use; a port of those
#: profiles may omit them (the FlexPass testbed values fill them, unused).  A PPT port
#: uses ``buffer`` only, a FlashPass port ``buffer`` and ``credit_queue_packets``.
_PPT_UNUSED_DEFAULTS = {"w_q": 0.5, "ecn_threshold": "60KB", "red_threshold": "100KB"}


def _profile(value: Any, path: str) -> str:
    """A profile name of the model's vocabulary (profiles.PROFILES)."""
    if value in PROFILES:
        return value
    if value in RENAMED:
        raise ConfigError(path, f"profile {value!r} is now called {RENAMED[value]!r}, the model's name: "
                                f"write profile: {RENAMED[value]}")
    if value in MODEL_ONLY:
        raise ConfigError(path, f"profile {value!r} exists in the model only ({MODEL_ONLY[value]}); "
                                f"a switch takes one of {', '.join(PROFILES)}")
    raise ConfigError(path, f"unknown profile {value!r} (profiles: {', '.join(PROFILES)})")


def _queue_params(raw: Mapping, path: str, flexpass_fields_unused: bool = False) -> QueueParams:
    if flexpass_fields_unused:
        raw = {**_PPT_UNUSED_DEFAULTS, **raw}
    _check_keys(raw, path, _QUEUE_FIELDS, required=("w_q", "ecn_threshold", "red_threshold"))
    w_q = raw["w_q"]
    if not is_number(w_q) or not 0 < float(w_q) < 1:
        raise ConfigError(_join(path, "w_q"), f"must be a number in the open interval (0, 1), got {w_q!r}")
    k = parse_size(raw["ecn_threshold"], _join(path, "ecn_threshold"))
    red = parse_size(raw["red_threshold"], _join(path, "red_threshold"))
    if red <= k:
        raise ConfigError(_join(path, "red_threshold"),
                          f"must be greater than ecn_threshold ({k} B), got {red} B "
                          "(FlexPass §5: the selective-drop threshold is above K)")
    legacy_k = raw.get("legacy_ecn_threshold")
    legacy_k = None if legacy_k is None else parse_size(legacy_k, _join(path, "legacy_ecn_threshold"))
    buf = parse_size(raw.get("buffer", "300KB"), _join(path, "buffer"))
    if buf < red and not flexpass_fields_unused:
        raise ConfigError(_join(path, "buffer"),
                          f"must be at least red_threshold ({red} B), got {buf} B")
    cq = _int(raw.get("credit_queue_packets", 8), _join(path, "credit_queue_packets"), 1, 1024)
    cb = _int(raw.get("credit_meter_burst_packets", 2), _join(path, "credit_meter_burst_packets"), 1, 64)
    sb = _int(raw.get("credit_shaper_burst_packets", 2), _join(path, "credit_shaper_burst_packets"), 1, 64)
    return QueueParams(float(w_q), k, red, legacy_k, buf, cq, cb, sb)


def _ppt_params(raw: Any) -> PptParams:
    raw = _mapping(raw, "ppt")
    _check_keys(raw, "ppt", ("base_rtt_us", "lambda_hcp", "lambda_lcp", "ecn_threshold_hcp", "ecn_threshold_lcp"))
    d = PptParams()
    rtt = raw.get("base_rtt_us", d.base_rtt_us)
    if not is_number(rtt) or not math.isfinite(rtt) or rtt <= 0:
        raise ConfigError("ppt.base_rtt_us", f"must be a number of µs > 0, got {rtt!r}")
    lam = {}
    for k in ("lambda_hcp", "lambda_lcp"):
        v = raw.get(k, getattr(d, k))
        if not is_number(v) or not 0 < float(v) <= 1:
            raise ConfigError(_join("ppt", k), f"must be a number in (0, 1] (PPT Eq. 3: K = λ·C·RTT), got {v!r}")
        lam[k] = float(v)
    ks = {k: None if raw.get(k) is None else parse_size(raw[k], _join("ppt", k))
          for k in ("ecn_threshold_hcp", "ecn_threshold_lcp")}
    return PptParams(float(rtt), lam["lambda_hcp"], lam["lambda_lcp"], ks["ecn_threshold_hcp"], ks["ecn_threshold_lcp"])


def _flashpass_params(raw: Any) -> FlashPassParams:
    raw = _mapping(raw, "flashpass")
    keys = ("emulation_threshold_packets", "unscheduled_threshold_packets")
    _check_keys(raw, "flashpass", keys)
    d = FlashPassParams()
    return FlashPassParams(*(_int(raw.get(k, getattr(d, k)), _join("flashpass", k), 1, 1024) for k in keys))


def parse_config(raw: Any, source: str = "<config>") -> Config:
    """Validate a config already loaded from YAML/JSON into Python objects."""
    raw = _mapping(raw, "")
    _check_keys(raw, "", ("credit", "dscp", "bmv2", "port_defaults", "switches", "down_links", "ppt",
                          "flashpass", "nics"),
                required=("switches",))

    credit = _mapping(raw.get("credit", {}), "credit")
    _check_keys(credit, "credit", ("wire_bytes", "max_frame_bytes", "mtu"))
    cw = parse_size(credit.get("wire_bytes", 84), "credit.wire_bytes")
    if not 84 <= cw <= 92:
        raise ConfigError("credit.wire_bytes", f"must be 84..92 (a CREDIT frame on the wire), got {cw}")
    # The maximum frame comes from the links' MTU (docs/protocol.md §9): mtu + 38. An
    # explicit max_frame_bytes must agree with it; without an MTU it stands alone.
    mtu: Optional[int] = None
    if "mtu" in credit or "max_frame_bytes" not in credit:
        mtu = _int(credit.get("mtu", frames.DEFAULT_MTU), "credit.mtu", frames.MIN_MTU, frames.MAX_MTU)
    if "max_frame_bytes" in credit:
        mf = parse_size(credit["max_frame_bytes"], "credit.max_frame_bytes")
        if mf < 84:
            raise ConfigError("credit.max_frame_bytes", f"must be at least 84, got {mf}")
        if mtu is not None and mf != frames.max_frame_wire(mtu):
            raise ConfigError("credit.max_frame_bytes",
                              f"must be the maximum frame of credit.mtu {mtu}: "
                              f"{frames.max_frame_wire(mtu)} (mtu + 38), got {mf}")
        if mtu is None and frames.MIN_MTU <= mf - frames.ETHERNET_WIRE_OVERHEAD <= frames.MAX_MTU:
            mtu = mf - frames.ETHERNET_WIRE_OVERHEAD
    else:
        mf = frames.max_frame_wire(mtu)

    dscp_raw = _mapping(raw.get("dscp", {}), "dscp")
    names = [c.value for c in TrafficClass]
    for k in dscp_raw:
        if k not in names + ["priority"]:
            raise ConfigError(_join("dscp", k), f"unknown DSCP class (classes: {', '.join(names)})")
    seen: Dict[int, str] = {}
    values = {}
    for cls in TrafficClass:
        v = dscp_raw.get(cls.value, getattr(DscpPlan(), cls.value))
        _int(v, _join("dscp", cls.value), 0, 63)
        if v in seen:
            raise ConfigError(_join("dscp", cls.value),
                              f"DSCP {v} is already used by {seen[v]}; values must be distinct")
        seen[v] = cls.value
        values[cls.value] = v
    prio_dscp = dscp_raw.get("priority", list(DscpPlan().priority))
    if not isinstance(prio_dscp, list) or len(prio_dscp) != PRIORITY_LEVELS:
        raise ConfigError("dscp.priority", f"must list {PRIORITY_LEVELS} DSCPs (P0..P7), got {prio_dscp!r}")
    for i, v in enumerate(prio_dscp):
        _int(v, f"dscp.priority[{i}]", 0, 63)
        if v in seen:
            raise ConfigError(f"dscp.priority[{i}]", f"DSCP {v} is already used by {seen[v]}; values must be distinct")
        seen[v] = f"priority P{i}"
    plan = DscpPlan(**values, priority=tuple(prio_dscp))
    plan.validate()
    ppt = _ppt_params(raw.get("ppt", {}))
    flashpass = _flashpass_params(raw.get("flashpass", {}))

    bmv2 = _mapping(raw.get("bmv2", {}), "bmv2")
    _check_keys(bmv2, "bmv2", ("priority",))
    prio_raw = _mapping(bmv2.get("priority", {}), "bmv2.priority")
    _check_keys(prio_raw, "bmv2.priority", LOGICAL_QUEUES)
    prio = dict(DEFAULT_BMV2_PRIORITY)
    for q, v in prio_raw.items():
        prio[q] = _int(v, _join("bmv2.priority", q), 0, QUEUES_PER_PORT - 1)
    if len(set(prio.values())) != len(prio):
        raise ConfigError("bmv2.priority", f"queues must use distinct priorities, got {prio}")

    defaults = _mapping(raw.get("port_defaults", {}), "port_defaults")
    _check_keys(defaults, "port_defaults", _QUEUE_FIELDS)

    switches_raw = _mapping(raw["switches"], "switches")
    if not switches_raw:
        raise ConfigError("switches", "at least one switch is required")
    switches = {}
    for sname, sraw in switches_raw.items():
        switches[str(sname)] = _parse_switch(str(sname), sraw, defaults)
    nics_raw = _mapping(raw.get("nics", {}), "nics")
    nics = {str(n): _parse_nic(str(n), nraw, defaults, mtu, cw) for n, nraw in nics_raw.items()}
    cfg = Config(cw, mf, plan, prio, switches, source, mtu=mtu, ppt=ppt, flashpass=flashpass, nics=nics)
    down = raw.get("down_links", [])
    if not isinstance(down, list):
        raise ConfigError("down_links", "must be a list of links like 'leaf1:3' or 'leaf1:spine1'")
    return with_down_links(cfg, down, "down_links")


def _parse_switch(name: str, raw: Any, defaults: Mapping) -> SwitchConfig:
    path = f"switches.{name}"
    raw = _mapping(raw, path)
    _check_keys(raw, path, ("device_id", "grpc_addr", "thrift_port", "profile", "ports",
                            "next_hops", "ecmp_groups", "routes", "target", "tm_port"),
                required=("ports",))
    device_id = _int(raw.get("device_id", 0), _join(path, "device_id"), 0, 2**64 - 1)
    target = raw.get("target", "simple_switch")
    if target not in TARGETS:
        raise ConfigError(_join(path, "target"), f"unknown target {target!r} (targets: {', '.join(TARGETS)})")
    # P4Runtime (BMv2) listens on 9559, the BfRt gRPC server of bf_switchd on 50052.
    grpc_addr = raw.get("grpc_addr", "127.0.0.1:50052" if target in TOFINO_CHIPS else "127.0.0.1:9559")
    if not isinstance(grpc_addr, str) or ":" not in grpc_addr:
        raise ConfigError(_join(path, "grpc_addr"), f"must be 'host:port', got {grpc_addr!r}")
    thrift_port = _int(raw.get("thrift_port", 9090), _join(path, "thrift_port"), 1, 65535)
    profile = _profile(raw.get("profile", "flexpass"), _join(path, "profile"))
    if profile in PROFILE_TARGETS and target not in PROFILE_TARGETS[profile]:
        raise ConfigError(_join(path, "profile"),
                          f"profile {profile!r} needs target {' or '.join(PROFILE_TARGETS[profile])} "
                          f"(its traffic manager's {profile} queue), got target {target!r}")
    tm_port = _int(raw.get("tm_port", 9191), _join(path, "tm_port"), 1, 65535)

    ports_raw = _mapping(raw["ports"], _join(path, "ports"))
    if not ports_raw:
        raise ConfigError(_join(path, "ports"), "at least one port is required")
    ports: Dict[int, PortConfig] = {}
    for pkey, praw in ports_raw.items():
        ppath = _join(_join(path, "ports"), pkey)
        port = _int(pkey, ppath, 0, MAX_PORTS - 1) if not isinstance(pkey, str) or not pkey.isdigit() \
            else _int(int(pkey), ppath, 0, MAX_PORTS - 1)
        praw = _mapping(praw, ppath)
        _check_keys(praw, ppath, ("name", "link_rate", "mac") + _QUEUE_FIELDS,
                    required=("link_rate", "mac"))
        rate = parse_rate(praw["link_rate"], _join(ppath, "link_rate"))
        if target in TOFINO_CHIPS and rate > TOFINO_SPEEDS[target][-1][0]:
            raise ConfigError(_join(ppath, "link_rate"),
                              f"{target} ports run at most {TOFINO_SPEEDS[target][-1][1][9:]}bps, "
                              f"got {praw['link_rate']!r}")
        mac = parse_mac(praw["mac"], _join(ppath, "mac"))
        qraw = dict(defaults)
        qraw.update({k: v for k, v in praw.items() if k in _QUEUE_FIELDS})
        # Errors in inherited fields point at the port (the effective value).
        qp = _queue_params(qraw, ppath, flexpass_fields_unused=profile in (PPT, FLASHPASS, PFABRIC))
        pname = praw.get("name", f"port{port}")
        if not isinstance(pname, str):
            raise ConfigError(_join(ppath, "name"), f"must be a string, got {pname!r}")
        if port in ports:
            raise ConfigError(ppath, "duplicate port")
        ports[port] = PortConfig(port, pname, rate, mac, qp)

    nh_raw = _mapping(raw.get("next_hops", {}), _join(path, "next_hops"))
    next_hops: Dict[str, NextHop] = {}
    for nname, nraw in nh_raw.items():
        npath = _join(_join(path, "next_hops"), nname)
        nraw = _mapping(nraw, npath)
        _check_keys(nraw, npath, ("ip", "port", "dmac"), required=("ip", "port", "dmac"))
        try:
            ip = ipaddress.IPv4Address(nraw["ip"])
        except (ipaddress.AddressValueError, ValueError):
            raise ConfigError(_join(npath, "ip"), f"must be an IPv4 address, got {nraw['ip']!r}") from None
        nport = _int(nraw["port"], _join(npath, "port"), 0, MAX_PORTS - 1)
        if nport not in ports:
            raise ConfigError(_join(npath, "port"),
                              f"port {nport} is not configured on {name} (ports: {sorted(ports)})")
        next_hops[str(nname)] = NextHop(str(nname), ip, nport, parse_mac(nraw["dmac"], _join(npath, "dmac")))
    seen_nh: Dict[Tuple, str] = {}
    for nh in next_hops.values():
        k = (nh.port, nh.dmac)
        if k in seen_nh:
            raise ConfigError(_join(_join(path, "next_hops"), nh.name),
                              f"same port and dmac as next hop {seen_nh[k]!r}")
        seen_nh[k] = nh.name

    g_raw = _mapping(raw.get("ecmp_groups", {}), _join(path, "ecmp_groups"))
    groups: Dict[str, Tuple[str, ...]] = {}
    for gname, members in g_raw.items():
        gpath = _join(_join(path, "ecmp_groups"), gname)
        if not isinstance(members, list) or not members:
            raise ConfigError(gpath, "must be a non-empty list of next-hop names")
        if len(members) > ECMP_MAX_GROUP_SIZE:
            raise ConfigError(gpath, f"at most {ECMP_MAX_GROUP_SIZE} members (@max_group_size), got {len(members)}")
        for i, m in enumerate(members):
            if m not in next_hops:
                raise ConfigError(f"{gpath}[{i}]", f"unknown next hop {m!r} (next hops: {', '.join(sorted(next_hops)) or 'none'})")
        if len(set(members)) != len(members):
            raise ConfigError(gpath, "duplicate member")
        # Deterministic member order: sorted by next hop (address).
        groups[str(gname)] = tuple(sorted(members, key=lambda m: next_hops[m].sort_key))

    r_raw = raw.get("routes", [])
    if not isinstance(r_raw, list):
        raise ConfigError(_join(path, "routes"), "must be a list")
    routes: List[Route] = []
    seen_prefix: Dict[ipaddress.IPv4Network, int] = {}
    for i, rraw in enumerate(r_raw):
        rpath = f"{path}.routes[{i}]"
        rraw = _mapping(rraw, rpath)
        _check_keys(rraw, rpath, ("prefix", "next_hop", "ecmp_group", "port"), required=("prefix",))
        try:
            prefix = ipaddress.IPv4Network(rraw["prefix"], strict=True)
        except ValueError as e:
            raise ConfigError(_join(rpath, "prefix"), f"must be an IPv4 prefix like 10.0.0.0/24: {e}") from None
        targets = [k for k in ("next_hop", "ecmp_group", "port") if k in rraw]
        if len(targets) != 1:
            raise ConfigError(rpath, "needs exactly one of next_hop, ecmp_group")
        if "port" in rraw:
            raise ConfigError(_join(rpath, "port"),
                              f"routes point to a next_hop (which names port and dmac), not a port; "
                              f"port {rraw['port']!r} " + ("is not configured" if rraw['port'] not in ports else "needs a next_hop"))
        if "next_hop" in rraw and rraw["next_hop"] not in next_hops:
            raise ConfigError(_join(rpath, "next_hop"), f"unknown next hop {rraw['next_hop']!r}")
        if "ecmp_group" in rraw and rraw["ecmp_group"] not in groups:
            raise ConfigError(_join(rpath, "ecmp_group"), f"unknown ECMP group {rraw['ecmp_group']!r}")
        if prefix in seen_prefix:
            raise ConfigError(_join(rpath, "prefix"), f"duplicate of routes[{seen_prefix[prefix]}]")
        seen_prefix[prefix] = i
        routes.append(Route(prefix, rraw.get("next_hop"), rraw.get("ecmp_group")))

    return SwitchConfig(name, device_id, grpc_addr, thrift_port, profile, ports, next_hops,
                        groups, tuple(routes), target, tm_port)


_NIC_FIELDS = ("device", "link_rate", "mtu", "w_q", "credit_share", "credit_meter_burst_packets", "edge",
               "host_port", "network_port")
IFNAMSIZ = 16  # Linux: a netdev name is at most 15 bytes


def _parse_nic(name: str, raw: Any, defaults: Mapping, mtu: Optional[int], credit_wire: int) -> HostNicConfig:
    """``nics.<name>``: a host's NIC edge.  w_q and credit_meter_burst_packets default from
    port_defaults (as a switch port's), mtu from credit.mtu."""
    path = f"nics.{name}"
    raw = _mapping(raw, path)
    _check_keys(raw, path, _NIC_FIELDS, required=("device", "link_rate", "edge"))
    dev = raw["device"]
    if not isinstance(dev, str) or not 0 < len(dev.encode()) < IFNAMSIZ or any(c in dev for c in "/: \t\n"):
        raise ConfigError(_join(path, "device"),
                          f"must be a network device name of 1..{IFNAMSIZ - 1} bytes without '/', ':' or "
                          f"spaces, got {dev!r}")
    edge = raw["edge"]
    if edge not in NIC_EDGES:
        raise ConfigError(_join(path, "edge"), f"unknown edge {edge!r} (edges: {', '.join(NIC_EDGES)})")
    rate = parse_rate(raw["link_rate"], _join(path, "link_rate"))
    if "mtu" in raw or mtu is None:
        if "mtu" not in raw:
            raise ConfigError(_join(path, "mtu"), "required field is missing (credit.mtu is not given)")
        mtu = _int(raw["mtu"], _join(path, "mtu"), frames.MIN_MTU, frames.MAX_MTU)
    w_q = raw.get("w_q", defaults.get("w_q", 0.5))
    if not is_number(w_q) or not 0 < float(w_q) < 1:
        raise ConfigError(_join(path, "w_q"), f"must be a number in the open interval (0, 1), got {w_q!r}")
    share = raw.get("credit_share")
    if share is not None and (not is_number(share) or not 0 < float(share) <= 1):
        raise ConfigError(_join(path, "credit_share"),
                          f"must be a number in (0, 1] (1.0 for ExpressPass; omit: w_q), got {share!r}")
    burst = _int(raw.get("credit_meter_burst_packets", defaults.get("credit_meter_burst_packets", 2)),
                 _join(path, "credit_meter_burst_packets"), 1, 64)
    ports = {k: _int(raw.get(k, d), _join(path, k), 0, MAX_PORTS - 1)
             for k, d in (("host_port", 0), ("network_port", 1))}
    if ports["host_port"] == ports["network_port"]:
        raise ConfigError(_join(path, "network_port"),
                          f"must differ from host_port ({ports['host_port']}): nic_port sends host <-> network")
    nic = HostNicConfig(name, dev, rate, mtu, float(w_q), None if share is None else float(share), burst, edge,
                        **ports)
    # An impossible rate: below one credit per second the meter and htb have nothing to pass.
    cps = frames.credit_queue_bps(rate, nic.share, mtu, credit_wire) / (8 * credit_wire)
    if cps < 1:
        raise ConfigError(_join(path, "link_rate"),
                          f"gives {cps:.3g} credits/s (share·C·84/(84+F) with share {nic.share}, F = {mtu} + 38): "
                          f"below one credit per second, got {raw['link_rate']!r}")
    if edge == "ebpf" and cps * (credit_wire - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2) > EBPF_EDGE_MAX_CREDIT_BYTES_PER_S:
        raise ConfigError(_join(path, "link_rate"),
                          f"gives a credit rate above the eBPF edge's {EBPF_EDGE_MAX_CREDIT_BYTES_PER_S} B/s, "
                          f"got {raw['link_rate']!r}")
    return nic


def load_config(path: Union[str, Path]) -> Config:
    """Read and validate a YAML config file."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError("", f"cannot read config {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError("", f"{p}: not valid YAML: {e}") from None
    try:
        return parse_config(raw, str(p))
    except ConfigError as e:
        raise ConfigError(e.path, f"{e.message} (in {p})") from None

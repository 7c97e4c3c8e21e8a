"""``flexpass-ctl``: configure a FlexPass switch (BMv2, flexpass_switch or
Tofino) from a YAML config.

    flexpass-ctl show     --config C --switch S [--json] # offline: derived values + entries
    flexpass-ctl diff     --config C --switch S [...]    # what apply would change
    flexpass-ctl apply    --config C --switch S [...]    # pipeline + entries + meters + queues
    flexpass-ctl counters --config C --switch S [...]    # per port/queue counters
    flexpass-ctl tm-stats --config C --switch S [...]    # flexpass_switch TM: depths, drops
    flexpass-ctl link-down --config C --link leaf1:spine1 # take a link out of service (every switch)
    flexpass-ctl link-up   --config C --link leaf1:spine1 # and back
    flexpass-ctl run      --config C [...]               # resident controller: mastership,
                                                         # link changes, restarted switches

Links out of service are recorded in a state file next to the config
(``<config stem>.links.yaml``, or ``--links FILE``) that every command reads
with the config (flexpass_cp.links): a switch restarted while a link is down
is reconciled without it.  ``link-down``/``link-up`` apply the change to every
switch at once unless a running controller (``flexpass-ctl run``) holds them,
which then applies it itself within its ``--interval``.

Tofino targets (``target: tofino`` / ``tofino2``) go over BfRt gRPC with the
SDE's bfrt_grpc client (flexpass_cp.bfrt_client); ``show`` lists the BfRt
operations (``--json``: as JSON) without a switch.

Exit codes: 0 ok, 1 config error, 2 switch/transport error, 3 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

from .config import (
    INGRESS_EVENT_NAMES,
    INGRESS_EVENTS,
    LOGICAL_QUEUES,
    FLASHPASS_PROFILE,
    PPT_PROFILE,
    ppt_qid,
    PORT_QUEUE_COUNTERS,
    TOFINO_CHIPS,
    Config,
    ConfigError,
    Derived,
    describe_link,
    load_config,
    resolve_link,
    switch_entries,
    tm_settings,
)

_REPO = Path(__file__).resolve().parents[2]
_BUILD = Path(os.environ.get("FLEXPASS_P4_BUILD", _REPO / "build" / "p4"))
_TOFINO_BUILD = Path(os.environ.get("FLEXPASS_TOFINO_BUILD", _REPO / "build" / "p4-tofino"))


def _add_common(p: argparse.ArgumentParser, switch_access: bool, one_switch: bool = True) -> None:
    p.add_argument("--config", required=True, help="YAML topology config")
    if one_switch:
        p.add_argument("--switch", required=True, help="switch name in the config")
    p.add_argument("--links", type=Path,
                   help="link state file (default: <config stem>.links.yaml next to the config)")
    if switch_access:
        if one_switch:
            p.add_argument("--grpc-addr", help="P4Runtime address (default: from the config)")
            p.add_argument("--device-id", type=int, help="P4Runtime device id (default: from the config)")
        p.add_argument("--election-id", type=int, default=1, help="election id (low 64 bits; default 1)")
        p.add_argument("--takeover", action="store_true",
                       help="if another live controller is primary (or holds our election id), bid "
                            "one above it and become primary (it becomes a backup)")
        p.add_argument("--p4info", type=Path, default=_BUILD / "flexpass.p4info.txtpb")
        p.add_argument("--bmv2-json", type=Path, default=_BUILD / "flexpass.json")
        p.add_argument("--timeout", type=float, default=5.0, help="connect/RPC timeout in seconds")
        p.add_argument("--p4-name", default="flexpass", help="tofino: P4 program name on the switch")
        p.add_argument("--tofino-build", type=Path,
                       help="tofino: p4c output directory, pushed when the switch does not run the "
                            "program (default: build/p4-tofino/<target>)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flexpass-ctl", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("show", help="derived values and the entries apply would write (no switch)")
    _add_common(p, False)
    p.add_argument("--json", action="store_true", help="tofino: print the BfRt operations as JSON")
    p = sub.add_parser("diff", help="entries apply would change on the switch")
    _add_common(p, True)
    p = sub.add_parser("apply", help="push pipeline (if needed), entries, meters and queue settings")
    _add_common(p, True)
    p.add_argument("--thrift-port", type=int, help="BMv2 thrift port for queue settings (default: from the config)")
    p.add_argument("--thrift-ip", default="127.0.0.1")
    p.add_argument("--tm-port", type=int, help="flexpass_switch TM API port (default: from the config)")
    p.add_argument("--no-queues", action="store_true",
                   help="skip the queue settings (BMv2 queue depth/rate, or the flexpass_switch TM)")
    p.add_argument("--force-pipeline", action="store_true", help="push the pipeline even if already loaded")
    p.add_argument("--json", action="store_true",
                   help="P4Runtime switches: end with one JSON line (pipeline pushed, writes by operation)")
    p = sub.add_parser("counters", help="per port/queue counters and ingress events")
    _add_common(p, True)
    p.add_argument("--all", action="store_true", help="also print all-zero rows")
    p = sub.add_parser("tm-stats", help="flexpass_switch traffic manager: depth, watermarks, drops per queue")
    _add_common(p, False)
    p.add_argument("--tm-addr", default="127.0.0.1", help="TM API host (default 127.0.0.1)")
    p.add_argument("--tm-port", type=int, help="TM API port (default: from the config)")
    p.add_argument("--clear", action="store_true", help="reset the watermarks after reading")
    for name, verb in (("link-down", "take a link out of service"), ("link-up", "put a link back in service")):
        p = sub.add_parser(name, help=f"{verb}: record it and rewrite the ECMP groups and routes of every switch")
        _add_common(p, True, one_switch=False)
        p.add_argument("--link", action="append", required=True,
                       help="switch:port (number or name, e.g. leaf1:3 or leaf1:spine1); repeatable")
        p.add_argument("--no-apply", action="store_true",
                       help="only record the link state (a running controller applies it)")
        p.add_argument("--json", action="store_true", help="end with one JSON line per switch")
    p = sub.add_parser("run", help="resident controller: holds mastership, applies link changes, "
                                   "reconciles restarted switches (JSON line per event)")
    _add_common(p, True, one_switch=False)
    p.add_argument("--switch", action="append",
                   help="a switch to control (repeatable; default: every P4Runtime switch of the config)")
    p.add_argument("--interval", type=float, default=0.02,
                   help="seconds between checks of the link state, streams and pending work (default 0.02)")
    p.add_argument("--resync", type=float, default=5.0,
                   help="seconds between read-backs that repair divergence (default 5)")
    p.add_argument("--no-queues", action="store_true",
                   help="do not apply queue / TM settings to restarted switches")
    p.add_argument("--once", action="store_true",
                   help="reconcile every switch once and exit (exit 2 if one stays unreachable for --timeout)")
    p.add_argument("--detect", choices=["none", "probe"], default="none",
                   help="failure detection: 'probe' sends liveness probes over every link between two switches "
                        "and records a dead one as link-down would (software switches whose ports are "
                        "interfaces of this host; needs CAP_NET_RAW). Default: none (told by link-down)")
    p.add_argument("--probe-interval-ms", type=float, default=20.0, help="--detect probe: probe period (20)")
    p.add_argument("--probe-dead-ms", type=float, default=100.0,
                   help="--detect probe: a direction that heard no probe for this long (and >= 3 probes) "
                        "takes its link down (100)")
    p.add_argument("--probe-up-ms", type=float, default=300.0,
                   help="--detect probe: both directions heard again for this long bring it up (300)")
    p.add_argument("--probe-interface", default="{switch}-eth{port}",
                   help="--detect probe: a port's interface name, from {switch} and {port} "
                        "(default {switch}-eth{port}, Mininet's)")
    return ap


def _fmt_rate(bps: float) -> str:
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= div:
            return f"{bps / div:.4g} {unit}"
    return f"{bps:.4g} bit/s"


def cmd_show(cfg: Config, switch: str, as_json: bool = False) -> int:
    from .bmv2_queues import queue_commands

    sw = cfg.switch(switch)
    if sw.target in TOFINO_CHIPS:
        return cmd_show_tofino(cfg, switch, as_json)
    print(f"switch {sw.name}: profile {sw.profile}, P4Runtime {sw.grpc_addr} device {sw.device_id}, "
          f"thrift {sw.thrift_port}")
    if sw.profile == PPT_PROFILE:
        print("queues (BMv2 priority, highest served first): " +
              ", ".join(f"P{p}={ppt_qid(p)}" for p in range(8)) + "; other DSCPs with P3")
    elif sw.profile == FLASHPASS_PROFILE:
        fp = cfg.flashpass
        print(f"queues (BMv2 priority, highest served first): emulation={cfg.bmv2_priority['credit']} "
              f"(EMULATION + CREDIT; Not-ECT red, dropped at {fp.emulation_threshold_packets} queued), "
              f"data={cfg.bmv2_priority['flexpass']} (every data class; unscheduled red, dropped at "
              f"{fp.unscheduled_threshold_packets} queued)")
    else:
        print("queues (BMv2 priority, highest served first): " +
              ", ".join(f"{q}={cfg.bmv2_priority[q]}" for q in LOGICAL_QUEUES))
    print()
    print(f"{'port':>4} {'name':10} {'link':>11} {'w_q':>5} {'credit limit':>13} {'meter cir':>12} "
          f"{'burst':>6} {'K pkts':>6} {'red pkts':>8} {'legacy K':>8}")
    for port in sorted(sw.ports):
        d = Derived(cfg, sw, sw.ports[port])
        lk = d.legacy_ecn_threshold_qdepth
        print(f"{port:>4} {sw.ports[port].name:10} {_fmt_rate(sw.ports[port].link_rate_bps):>11} "
              f"{d.effective_w_q:>5.2f} {_fmt_rate(d.credit_rate_bps):>13} "
              f"{d.meter_cir_bytes_per_s:>8} B/s {d.meter_burst_bytes:>4} B "
              f"{d.ecn_threshold_qdepth:>6} {d.red_threshold_qdepth:>8} {'-' if lk is None else lk:>8}")
    print()
    print("P4Runtime entities:")
    for e in switch_entries(cfg, switch):
        print(f"  {e.describe()}")
    print()
    if sw.target == "flexpass_switch":
        print(f"traffic manager (flexpass_switch, TM API port {sw.tm_port}):")
        for tp in tm_settings(cfg, switch):
            print(f"  port {tp.port}: link {_fmt_rate(tp.link_rate_bps)}, wire overhead {tp.wire_overhead_bytes} B"
                  + (f", shared buffer {tp.shared_buffer_bytes} B" if tp.shared_buffer_bytes else ""))
            for q in tp.queues:
                shaper = (f", shaper {_fmt_rate(q.shaper_rate_bps)} burst {q.shaper_burst_bytes} B"
                          if q.shaper_rate_bps else "")
                print(f"    queue {q.queue}: level {q.priority} weight {q.weight:.3g} buffer {q.buffer_bytes} B"
                      f" red {q.red_threshold or '-'} K {q.ecn_threshold or '-'}{shaper}")
        return 0
    print("BMv2 queue settings (simple_switch_CLI):")
    for c in queue_commands(cfg, switch):
        print(f"  {c.line():40} # {c.why}")
    return 0


def cmd_show_tofino(cfg: Config, switch: str, as_json: bool) -> int:
    from .bfrt_ops import ops_to_json, switch_ops
    from .config import tofino_settings

    sw = cfg.switch(switch)
    ops = switch_ops(cfg, switch)
    if as_json:
        sys.stdout.write(ops_to_json(ops))
        return 0
    cell = TOFINO_CHIPS[sw.target][1]
    if sw.profile == PPT_PROFILE:
        print(f"switch {sw.name}: {sw.target}, profile ppt, BfRt gRPC {sw.grpc_addr} device "
              f"{sw.device_id}; P<p> in queue 7-p at strict priority 7-p; thresholds in {cell}-byte cells")
        print()
        print(f"{'port':>4} {'link':>11} {'buffer':>7} " + " ".join(f"{'K P' + str(p):>6}" for p in range(8)))
        for tp in tofino_settings(cfg, switch):
            d = Derived(cfg, sw, sw.ports[tp.port])
            print(f"{tp.port:>4} {_fmt_rate(sw.ports[tp.port].link_rate_bps):>11} {tp.buffer_cells:>7} "
                  + " ".join(f"{d.qdepth(d.ppt_ecn_threshold_bytes(p)):>6}" for p in range(8)))
    elif sw.profile == FLASHPASS_PROFILE:
        print(f"switch {sw.name}: {sw.target}, profile flashpass, BfRt gRPC {sw.grpc_addr} device "
              f"{sw.device_id}; emulation queue {cfg.bmv2_priority['credit']} (strict priority 7), "
              f"data queue {cfg.bmv2_priority['flexpass']}; thresholds in {cell}-byte cells")
        print()
        print(f"{'port':>4} {'link':>11} {'emulation rate':>15} {'emu cells':>9} {'red drop':>8} "
              f"{'data cells':>10} {'red data >':>10}")
        for tp in tofino_settings(cfg, switch):
            d = Derived(cfg, sw, sw.ports[tp.port])
            emu, data = tp.queues
            red_data = d.flashpass_thresholds()[data.qid][1]
            print(f"{tp.port:>4} {_fmt_rate(sw.ports[tp.port].link_rate_bps):>11} "
                  f"{_fmt_rate(d.credit_rate_bps):>15} {emu.guaranteed_cells:>9} {emu.red_limit_percent:>7g}% "
                  f"{data.guaranteed_cells:>10} {red_data:>10}")
    else:
        _show_tofino_flexpass(cfg, sw, cell)
    print()
    print("BfRt operations (apply order):")
    for op in ops:
        print(f"  {op.describe()}" + (f"   # {op.why}" if op.why else ""))
    return 0


def _show_tofino_flexpass(cfg: Config, sw, cell: int) -> None:
    from .config import tofino_settings

    print(f"switch {sw.name}: {sw.target}, profile {sw.profile}, BfRt gRPC {sw.grpc_addr} device "
          f"{sw.device_id}; queue ids: " + ", ".join(f"{q}={cfg.bmv2_priority[q]}" for q in LOGICAL_QUEUES))
    print(f"thresholds in {cell}-byte cells; meter in the bytes Tofino counts (frame + FCS)")
    print()
    print(f"{'port':>4} {'link':>11} {'w_q':>5} {'credit limit':>13} {'meter cir':>14} {'burst':>7} "
          f"{'K cells':>7} {'red':>16} {'Q1 cells':>8} {'legacy K':>8}")
    for tp in tofino_settings(cfg, sw.name):
        d = Derived(cfg, sw, sw.ports[tp.port])
        q1 = next(q for q in tp.queues if q.role == "flexpass")
        red = (f"{d.cells(sw.ports[tp.port].queues.red_threshold_bytes)} ({q1.red_limit_percent:g}%)"
               if q1.red_limit_percent is not None else "-")
        lk = d.legacy_ecn_threshold_qdepth
        print(f"{tp.port:>4} {_fmt_rate(sw.ports[tp.port].link_rate_bps):>11} {d.effective_w_q:>5.2f} "
              f"{_fmt_rate(d.credit_rate_bps):>13} {d.meter_cir_kbps:>9} kb/s {d.meter_burst_kbits:>3} kb "
              f"{d.ecn_threshold_qdepth:>7} {red:>16} {q1.guaranteed_cells:>8} {'-' if lk is None else lk:>8}")


def apply_tm_settings(cfg: Config, switch: str, host: str, port: int) -> list:
    """Push :func:`tm_settings` to a flexpass_switch over its TM API (docs/tm-api.md)."""
    from .tm_client import TmClient

    ports = tm_settings(cfg, switch)
    with TmClient(host, port) as tm:
        for tp in ports:
            tm.set_port(tp.port, link_rate_bps=int(tp.link_rate_bps),
                        wire_overhead_bytes=tp.wire_overhead_bytes,
                        shared_buffer_bytes=tp.shared_buffer_bytes)
            for q in tp.queues:
                tm.set_queue(tp.port, q.queue, priority=q.priority, weight=q.weight,
                             buffer_bytes=q.buffer_bytes, red_threshold=q.red_threshold,
                             ecn_threshold=q.ecn_threshold,
                             shaper_rate_bps=None if q.shaper_rate_bps is None else int(round(q.shaper_rate_bps)),
                             shaper_burst_bytes=q.shaper_burst_bytes)
    return ports


def _connect(args, cfg: Config, arbitrate: bool = True, switch: Optional[str] = None):
    """A P4Runtime session: primary (``arbitrate``, for writes) or read-only (no
    stream: diff and counters never disturb the primary controller)."""
    from .p4runtime_client import P4RuntimeClient

    sw = cfg.switch(switch or args.switch)
    addr = getattr(args, "grpc_addr", None) or sw.grpc_addr
    dev = args.device_id if getattr(args, "device_id", None) is not None else sw.device_id
    return P4RuntimeClient(addr, dev, (0, args.election_id), timeout=args.timeout, arbitrate=arbitrate,
                           takeover=getattr(args, "takeover", False))


def _check_build(args) -> None:
    for p in (args.p4info, args.bmv2_json):
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p} not found: build the P4 program first (make p4)")


def _bfrt_connect(args, cfg: Config):
    from .bfrt_client import BfrtClient
    from .bfrt_ops import tm_prefix

    sw = cfg.switch(args.switch)
    return BfrtClient(args.grpc_addr or sw.grpc_addr,
                      args.device_id if args.device_id is not None else sw.device_id,
                      p4_name=args.p4_name, tm_prefix=tm_prefix(cfg, args.switch), timeout=args.timeout)


def _tofino_build(args, cfg: Config) -> Path:
    return args.tofino_build or _TOFINO_BUILD / cfg.switch(args.switch).target


def _print_updates(updates, desired_count: int) -> None:
    counts: dict = {}
    for u in updates:
        counts[u.op] = counts.get(u.op, 0) + 1
        print(f"  {u.describe()}")
    print(f"operations: {desired_count} desired; " +
          (", ".join(f"{n} {op.lower()}" for op, n in sorted(counts.items())) or "no change"))


def cmd_diff_tofino(args, cfg: Config) -> int:
    from .bfrt_ops import switch_ops

    desired = switch_ops(cfg, args.switch)
    with _bfrt_connect(args, cfg) as c:
        c.bind()
        updates = c.plan(desired)
    if not updates:
        print(f"{args.switch}: in sync ({len(desired)} operations)")
    for u in updates:
        print(f"  {u.describe()}")
    return 0


def cmd_apply_tofino(args, cfg: Config) -> int:
    from .bfrt_ops import switch_ops
    from .config import tofino_settings

    sw = cfg.switch(args.switch)
    desired = switch_ops(cfg, args.switch)
    build = _tofino_build(args, cfg)
    with _bfrt_connect(args, cfg) as c:
        pushed = c.set_pipeline(build if build.is_dir() else None, force=args.force_pipeline)
        print(f"pipeline: {'pushed ' + str(build) if pushed else 'bound to ' + args.p4_name + ' (running)'}")
        c.check_tm(TOFINO_CHIPS[sw.target][1],
                   sum(q.guaranteed_cells for tp in tofino_settings(cfg, args.switch) for q in tp.queues))
        if args.no_queues:
            desired = [op for op in desired if ".tm." not in op.table]
        updates = c.apply(desired)
    _print_updates(updates, len(desired))
    return 0


def cmd_counters_tofino(args, cfg: Config) -> int:
    sw = cfg.switch(args.switch)
    qname = {v: k for k, v in cfg.bmv2_priority.items()}
    with _bfrt_connect(args, cfg) as c:
        c.bind()
        data = {name: c.read_counter(name) for name in PORT_QUEUE_COUNTERS}
        events = c.read_counter(INGRESS_EVENTS)
        print(f"{'port':>4} {'queue':>14} " + " ".join(f"{n:>15}" for n in PORT_QUEUE_COUNTERS)
              + f" {'TM drops':>9} {'TM max cells':>12}")
        for port in sorted(sw.ports):
            for q in sorted(set(cfg.bmv2_priority.values())):
                row = [data[n].get(port * 8 + q, (0, 0))[0] for n in PORT_QUEUE_COUNTERS]
                tm = c.queue_counters(port, q)
                if not args.all and not any(row) and not tm["drop_count_packets"]:
                    continue
                label = f"{q} ({qname.get(q, '-')})"
                print(f"{port:>4} {label:>14} " + " ".join(f"{v:>15}" for v in row)
                      + f" {tm['drop_count_packets']:>9} {tm['watermark_cells']:>12}")
    print("ingress events (one per packet on Tofino):")
    for idx, name in sorted(INGRESS_EVENT_NAMES.items()):
        print(f"  {name:30} {events.get(idx, (0, 0))[0]}")
    return 0


def cmd_diff(args, cfg: Config) -> int:
    if cfg.switch(args.switch).target in TOFINO_CHIPS:
        return cmd_diff_tofino(args, cfg)
    # Only for BMv2: p4runtime's generated modules need protobuf's pure-Python
    # implementation, chosen when protobuf first loads; the SDE client loaded it.
    from .p4runtime_client import pipeline_cookie

    _check_build(args)
    desired = switch_entries(cfg, args.switch)
    with _connect(args, cfg, arbitrate=False) as c:
        cookie = pipeline_cookie(Path(args.p4info).read_bytes(), Path(args.bmv2_json).read_bytes())
        c.load_p4info(args.p4info)
        if c.current_cookie() != cookie:
            print("pipeline: the switch does not run this build; apply would push it "
                  "(clearing all state) and INSERT every entity:")
            for e in desired:
                print(f"  INSERT {e.describe()}")
            return 0
        updates = c.plan(desired)
    if not updates:
        print(f"{args.switch}: in sync ({len(desired)} entities)")
    for u in updates:
        print(f"  {u.describe()}")
    return 0


def cmd_apply(args, cfg: Config) -> int:
    from .bmv2_queues import apply_queue_settings

    if cfg.switch(args.switch).target in TOFINO_CHIPS:
        return cmd_apply_tofino(args, cfg)
    _check_build(args)
    desired = switch_entries(cfg, args.switch)
    _print_down_links(cfg)
    with _connect(args, cfg) as c:
        pushed = c.set_pipeline(args.p4info, args.bmv2_json, force=args.force_pipeline)
        print(f"pipeline: {'pushed' if pushed else 'already loaded (unchanged)'}")
        updates = c.apply(desired)
        election_id = c.election_id
    counts = {}
    for u in updates:
        counts[u.op] = counts.get(u.op, 0) + 1
        print(f"  {u.describe()}")
    print(f"entities: {len(desired)} desired; " +
          (", ".join(f"{n} {op.lower()}" for op, n in sorted(counts.items())) or "no change"))
    summary = {"switch": args.switch, "pipeline_pushed": pushed, "desired": len(desired),
               "writes": len(updates), "updates": counts, "election_id": election_id[1], "queues": None}
    sw = cfg.switch(args.switch)
    if not args.no_queues:
        if sw.target == "flexpass_switch":
            ports = apply_tm_settings(cfg, args.switch, args.thrift_ip, args.tm_port or sw.tm_port)
            print(f"traffic manager: {len(ports)} ports configured")
            summary["queues"] = len(ports)
        else:
            cmds = apply_queue_settings(cfg, args.switch, args.thrift_port or sw.thrift_port, args.thrift_ip)
            print(f"queues: {len(cmds)} settings applied over thrift")
            summary["queues"] = len(cmds)
    if args.json:
        print(json.dumps(summary))
    return 0


def _print_down_links(cfg: Config) -> None:
    from .config import link_peer

    if cfg.down_ports:
        ends = {tuple(sorted({(s, p)} | ({link_peer(cfg, s, p)} if link_peer(cfg, s, p) else set())))
                for s, p in cfg.down_ports}
        print("links out of service: " + "; ".join(describe_link(cfg, e) for e in sorted(ends)))


def cmd_link(args, cfg: Config) -> int:
    """link-down / link-up: record, then apply to every switch that no running
    controller holds."""
    from . import links as links_mod

    down = args.cmd == "link-down"
    path = links_mod.state_path(args.config, args.links)
    for spec in args.link:
        changed, ends, now_down = links_mod.set_link(args.config, spec, down, args.links)
        print(f"{'down' if down else 'up'}: {describe_link(cfg, ends)}"
              + ("" if changed else " (already " + ("down" if down else "up") + ")"))
    print(f"link state: {path} ({len(now_down)} link(s) down)")
    if args.no_apply:
        return 0
    cfg = links_mod.load(args.config, args.links)
    status = 0
    results = []
    for name in sorted(cfg.switches):
        sw = cfg.switches[name]
        if sw.target in TOFINO_CHIPS:
            print(f"  {name}: {sw.target}: run flexpass-ctl apply --switch {name}")
            results.append({"switch": name, "skipped": "tofino"})
            continue
        res = _apply_forwarding(args, cfg, name)
        results.append(res)
        if "error" in res:
            status = 2
    if args.json:
        for r in results:
            print(json.dumps(r))
    return status


def _apply_forwarding(args, cfg: Config, name: str) -> dict:
    """Entities only (no pipeline push, no queue settings) on one switch."""
    from .p4runtime_client import NotPrimary, P4RuntimeError, pipeline_cookie

    desired = switch_entries(cfg, name)
    try:
        with _connect(args, cfg, switch=name) as c:
            cookie = pipeline_cookie(Path(args.p4info).read_bytes(), Path(args.bmv2_json).read_bytes())
            c.load_p4info(args.p4info)
            if c.current_cookie() != cookie:
                print(f"  {name}: does not run this pipeline build: run flexpass-ctl apply --switch {name}")
                return {"switch": name, "error": "pipeline not loaded"}
            updates = c.apply(desired)
    except NotPrimary as e:
        print(f"  {name}: held by a running controller, which applies the change ({e})")
        return {"switch": name, "deferred": True}
    except P4RuntimeError as e:
        print(f"  {name}: {e}")
        return {"switch": name, "error": str(e)}
    counts: dict = {}
    for u in updates:
        counts[u.op] = counts.get(u.op, 0) + 1
        print(f"  {name}: {u.describe()}")
    print(f"  {name}: " + (", ".join(f"{n} {op.lower()}" for op, n in sorted(counts.items())) or "no change"))
    return {"switch": name, "writes": len(updates), "updates": counts}


def cmd_run(args) -> int:
    from .controller import Controller

    def emit(ev: dict) -> None:
        ev = {"t": round(time.time(), 6), **ev}
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()

    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        monitor = None
        if args.detect == "probe" and not args.once:
            from .linkprobe import LinkMonitor
            from .links import load as load_links

            if not (args.probe_interval_ms > 0 and args.probe_dead_ms > 0 and args.probe_up_ms >= 0):
                raise ConfigError("--probe-*-ms", "probe interval and dead time must be > 0")
            try:
                monitor = LinkMonitor(load_links(args.config, args.links), interval_s=args.probe_interval_ms / 1e3,
                                      dead_s=args.probe_dead_ms / 1e3, up_s=args.probe_up_ms / 1e3,
                                      interface=args.probe_interface)
            except (OSError, KeyError, IndexError) as e:
                raise ConfigError("--detect", f"cannot start link probes: {e}") from None
        ctl = Controller(Path(args.config), args.p4info, args.bmv2_json, links=args.links, switches=args.switch,
                         election_id=(0, args.election_id), takeover=args.takeover, resync_s=args.resync,
                         connect_timeout_s=min(args.timeout, 0.5), rpc_timeout_s=args.timeout,
                         queues=not args.no_queues, emit=emit, monitor=monitor)
        ok = ctl.run(args.interval, stop, once_within_s=args.timeout if args.once else None)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 0 if ok or not args.once else 2


def cmd_counters(args, cfg: Config) -> int:
    if cfg.switch(args.switch).target in TOFINO_CHIPS:
        return cmd_counters_tofino(args, cfg)
    _check_build(args)
    sw = cfg.switch(args.switch)
    with _connect(args, cfg, arbitrate=False) as c:
        c.load_p4info(args.p4info)
        data = {name: c.read_counter(name) for name in PORT_QUEUE_COUNTERS}
        events = c.read_counter(INGRESS_EVENTS)
    qname = {v: k for k, v in cfg.bmv2_priority.items()}
    print(f"{'port':>4} {'queue':>14} " + " ".join(f"{n:>15}" for n in PORT_QUEUE_COUNTERS))
    for port in sorted(sw.ports):
        for q in range(8):
            row = [data[n].get(port * 8 + q, (0, 0))[0] for n in PORT_QUEUE_COUNTERS]
            if not args.all and not any(row):
                continue
            label = f"{q} ({qname.get(q, '-')})"
            print(f"{port:>4} {label:>14} " + " ".join(f"{v:>15}" for v in row))
    print("ingress events:")
    for idx, name in sorted(INGRESS_EVENT_NAMES.items()):
        print(f"  {name:30} {events.get(idx, (0, 0))[0]}")
    return 0


def cmd_tm_stats(args, cfg: Config) -> int:
    from .tm_client import TmClient

    sw = cfg.switch(args.switch)
    if sw.target != "flexpass_switch":
        print(f"flexpass-ctl: {sw.name} is a {sw.target} (no traffic manager API); see `counters`",
              file=sys.stderr)
        return 3
    qname = {v: k for k, v in cfg.bmv2_priority.items()}
    with TmClient(args.tm_addr, args.tm_port or sw.tm_port) as tm:
        print(f"{'port':>4} {'queue':>12} {'depth B':>9} {'max B':>9} {'dequeued':>10} "
              f"{'ECN':>7} drops (red / yellow / full / port)")
        for port in sorted(sw.ports):
            st = tm.get_stats(port)
            for q in st["queues"]:
                if not q["enqueued_pkts"] and not q["depth_bytes"]:
                    continue
                d = q["dropped_pkts"]
                label = f"{q['queue']} ({qname.get(q['queue'], '-')})"
                print(f"{port:>4} {label:>12} {q['depth_bytes']:>9} {q['max_depth_bytes']:>9} "
                      f"{q['dequeued_pkts']:>10} {q['ecn_marked_pkts']:>7} "
                      f"{d['red']} / {d['yellow']} / {d['queue_full']} / {d['port_full']}")
        if args.clear:
            tm.clear_watermarks()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    from . import links as links_mod

    args = build_parser().parse_args(argv)
    try:
        cfg = links_mod.load(args.config, args.links)
        if getattr(args, "switch", None) and isinstance(args.switch, str):
            cfg.switch(args.switch)
        if args.cmd in ("link-down", "link-up", "run"):
            if args.cmd != "run":
                for spec in args.link:
                    resolve_link(cfg, spec, "--link")
            if not getattr(args, "no_apply", False):
                _check_build(args)
            if args.cmd == "run":
                return cmd_run(args)
            return cmd_link(args, cfg)
    except ConfigError as e:
        print(f"flexpass-ctl: config error: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"flexpass-ctl: {e}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "show":
            if not args.json:
                _print_down_links(cfg)
            return cmd_show(cfg, args.switch, args.json)
        from .bfrt_client import BfrtError, BfrtUnavailable
        from .bmv2_queues import QueueConfigError
        from .tm_client import TmError

        if cfg.switch(args.switch).target in TOFINO_CHIPS:
            errors: tuple = (BfrtError, BfrtUnavailable, TmError)
        else:
            from .p4runtime_client import P4RuntimeError
            errors = (P4RuntimeError, QueueConfigError, TmError)
        try:
            return {"diff": cmd_diff, "apply": cmd_apply, "counters": cmd_counters,
                    "tm-stats": cmd_tm_stats}[args.cmd](args, cfg)
        except errors as e:
            print(f"flexpass-ctl: {e}", file=sys.stderr)
            return 2
    except FileNotFoundError as e:
        print(f"flexpass-ctl: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

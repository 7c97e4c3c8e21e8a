"""``flexpass-ctl``: configure a FlexPass switch (BMv2, flexpass_switch or
Tofino) from a YAML config.

    flexpass-ctl show     --config C --switch S [--json] # offline: derived values + entries
    flexpass-ctl diff     --config C --switch S [...]    # what apply would change
    flexpass-ctl apply    --config C --switch S [...]    # pipeline + entries + meters + queues
    flexpass-ctl counters --config C --switch S [...]    # per port/queue counters
    flexpass-ctl tm-stats --config C --switch S [...]    # flexpass_switch TM: depths, drops
    flexpass-ctl nic      --config C --nic N [--json]    # offline: a host NIC edge (nics:), its
                                                         # credit meter and PNA entries
    flexpass-ctl nic      --config C --nic N --apply --swx-cli HOST:PORT [--spec S]
                                                         # edge pna: write them to a running
                                                         # DPDK SWX pipeline (its CLI socket)
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

A command runs through the switch's backend (flexpass_cp.backends), chosen
from its ``target``: P4Runtime for BMv2 (queues over Thrift) and
flexpass_switch (its TM API); Tofino (``target: tofino`` / ``tofino2``) over
BfRt gRPC with the SDE's bfrt_grpc client (flexpass_cp.bfrt_client), where
``show`` lists the BfRt operations (``--json``: as JSON) without a switch.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional

from . import links as links_mod
from .backends import backend_for
from .backends.base import print_down_links
from .backends.p4runtime import check_build
from .config import Config, ConfigError
from .config.topology import describe_link, resolve_link

_REPO = Path(__file__).resolve().parents[2]
_BUILD = Path(os.environ.get("FLEXPASS_P4_BUILD", _REPO / "build" / "p4"))


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
    p = sub.add_parser("nic", help="a host NIC edge of the config's nics: section: its credit meter, the "
                                   "PNA program's entries and how to apply it (no NIC)")
    _add_common(p, False, one_switch=False)
    p.add_argument("--nic", required=True, help="NIC name in the config (nics:)")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.add_argument("--apply", action="store_true",
                   help="edge pna: write the entries and the credit meter to the PNA program running on "
                        "DPDK's SWX pipeline, over its CLI socket (--swx-cli)")
    p.add_argument("--swx-cli", metavar="HOST:PORT",
                   help="with --apply: the pipeline application's CLI address (its -h and -p); the "
                        "application must run on this host (it reads the table files this writes)")
    p.add_argument("--spec", default=str(_REPO / "build" / "p4-nic" / "dpdk" / "flexpass_nic.spec"),
                   help="the .spec the pipeline runs (context.json beside it; default: make p4-nic's)")
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


def cmd_nic(args, cfg: Config) -> int:
    """What a ``nics:`` entry configures: the same numbers for every edge kind."""
    from .config.derive import nic_credits_per_second, nic_meter
    from .config.entries import nic_entries
    from .config.targets import nic_agent_flags
    nic = cfg.nic(args.nic)
    if args.swx_cli:
        print("flexpass-ctl: --swx-cli goes with --apply (without it, nic only prints)", file=sys.stderr)
        return 2
    cir, burst = nic_meter(cfg, nic)
    entries = nic_entries(cfg, args.nic)
    apply_cmd = {"qdisc": "nic/flexpass_nic.py apply", "ebpf": "nic/flexpass_nic.py ebpf apply",
                 "pna": None}[nic.edge]
    out = {"nic": nic.name, "device": nic.device, "edge": nic.edge, "link_rate_bps": nic.link_rate_bps,
           "mtu": nic.mtu, "w_q": nic.w_q, "credit_share": nic.share,
           "credits_per_second": nic_credits_per_second(cfg, nic),
           "credit_meter": {"cir_bytes_per_s": cir, "burst_bytes": burst},
           "pna_entries": [e.describe() for e in entries],
           "apply": f"{apply_cmd} --config {args.config} --nic {nic.name}" if apply_cmd else None,
           "agent": f"flexpass agent {nic_agent_flags(nic.edge, nic.device)}"}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"nic {nic.name}: device {nic.device}, edge {nic.edge}, C {nic.link_rate_bps / 1e6:g} Mbit/s, "
          f"mtu {nic.mtu}, w_q {nic.w_q}, credit share {nic.share}")
    print(f"  credits <= {out['credits_per_second']:.1f}/s: meter cir = pir {cir} B/s, burst {burst} B "
          f"({nic.credit_meter_burst_packets} credits)")
    print("  PNA entries (p4src/pna; P4Runtime on pna_nic, the same for DPDK SWX):")
    for e in out["pna_entries"]:
        print(f"    {e}")
    if apply_cmd:
        print(f"  apply: {out['apply']}")
    print(f"  agent: {out['agent']} (the edge polices the host's credits; the agent paces flows only)")
    return 0


def cmd_nic_apply(args, cfg: Config) -> int:
    """``nic --apply``: the PNA entries of ``nics.<name>`` (``entries.nic_entries``, the
    config validated first) written to a running DPDK SWX pipeline over its CLI socket
    (flexpass_cp.swx: table files, the meter profile, commit); a refused command is named."""
    import tempfile
    from .config.entries import nic_entries
    from .swx import Cli, SpecNames, SwxError, entry_files, parse_address
    nic = cfg.nic(args.nic)
    try:
        if nic.edge != "pna":
            tool = {"qdisc": "nic/flexpass_nic.py apply", "ebpf": "nic/flexpass_nic.py ebpf apply"}[nic.edge]
            raise SwxError(f"nics.{nic.name}.edge is {nic.edge!r}: --apply writes a PNA edge; apply this one "
                           f"on its host with {tool} --config {args.config} --nic {nic.name}")
        if not args.swx_cli:
            raise SwxError("--apply needs --swx-cli HOST:PORT (the SWX pipeline's CLI; P4Runtime to pna_nic "
                           "is not written: pna_nic cannot run the program, p4src/README.md)")
        parse_address(args.swx_cli)
        spec = Path(args.spec)
        context = spec.with_name("context.json")
        for f in (spec, context):
            if not f.is_file():
                raise SwxError(f"{f}: not found (make p4-nic builds it; --spec names another)")
        names = SpecNames.load(spec, context)
        entries = nic_entries(cfg, nic.name)
        work = Path(tempfile.mkdtemp(prefix="flexpass-nic-"))  # the table files the pipeline reads
        lines = entry_files(entries, names, work)
        cli = Cli.connect(args.swx_cli)
        try:
            cli.write_entries(lines)
        finally:
            cli.close()
    except SwxError as e:
        print(f"flexpass-ctl: nic {nic.name}: {e}", file=sys.stderr)
        return 2
    result = {"nic": nic.name, "swx_cli": args.swx_cli, "commands": len(lines), "entries": len(entries),
              "files": str(work)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"nic {nic.name}: wrote {len(entries)} entries ({len(lines)} CLI commands, committed) to the SWX "
              f"pipeline at {args.swx_cli}; table files in {work}")
    return 0


def cmd_link(args, cfg: Config) -> int:
    """link-down / link-up: record, then apply to every switch that no running
    controller holds."""
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
    # Every switch at once: until the last is rewritten, flows routed over the link are lost
    # (each switch is its own connection; results in the order of the names).
    with ThreadPoolExecutor(max_workers=len(cfg.switches) or 1) as pool:
        results = list(pool.map(lambda name: backend_for(cfg, name).apply_forwarding(args), sorted(cfg.switches)))
    if args.json:
        for r in results:
            print(json.dumps(r))
    return 2 if any("error" in r for r in results) else 0


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

            if not (args.probe_interval_ms > 0 and args.probe_dead_ms > 0 and args.probe_up_ms >= 0):
                raise ConfigError("--probe-*-ms", "probe interval and dead time must be > 0")
            try:
                monitor = LinkMonitor(links_mod.load(args.config, args.links),
                                      interval_s=args.probe_interval_ms / 1e3,
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


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = links_mod.load(args.config, args.links)
        if getattr(args, "switch", None) and isinstance(args.switch, str):
            cfg.switch(args.switch)
        if args.cmd == "nic":
            return cmd_nic_apply(args, cfg) if args.apply else cmd_nic(args, cfg)
        if args.cmd in ("link-down", "link-up", "run"):
            if args.cmd != "run":
                for spec in args.link:
                    resolve_link(cfg, spec, "--link")
            if not getattr(args, "no_apply", False):
                check_build(args)
            if args.cmd == "run":
                return cmd_run(args)
            return cmd_link(args, cfg)
    except ConfigError as e:
        print(f"flexpass-ctl: config error: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"flexpass-ctl: {e}", file=sys.stderr)
        return 2
    backend = backend_for(cfg, args.switch)
    try:
        if args.cmd == "show":
            if not args.json:
                print_down_links(cfg)
            backend.show(args.json)
            return 0
        errors = backend.transport_errors()
        try:
            if args.cmd == "tm-stats":
                return backend.tm_stats(args)
            {"diff": backend.diff, "apply": backend.apply, "counters": backend.counters}[args.cmd](args)
            return 0
        except errors as e:
            print(f"flexpass-ctl: {e}", file=sys.stderr)
            return 2
    except FileNotFoundError as e:
        print(f"flexpass-ctl: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""P4Runtime switches (p4src/v1model on BMv2 or flexpass_switch): entries over
P4Runtime, queue settings by the subclass (:mod:`.bmv2`, :mod:`.flexpass_switch`).

p4runtime_client is imported only when used: its generated modules need
protobuf's pure-Python implementation, chosen when protobuf first loads (a
Tofino command loads the SDE's client instead).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Tuple

from ..config.derive import Derived
from ..config.entries import switch_entries
from ..config.profiles import FLASHPASS, LOGICAL_QUEUES, PPT, ppt_qid
from ..p4_program import INGRESS_EVENT_NAMES, INGRESS_EVENTS, PORT_QUEUE_COUNTERS, QUEUES_PER_PORT, port_queue_index
from .base import Backend, count_ops, describe_counts, fmt_rate, print_down_links


def check_build(args: argparse.Namespace) -> None:
    """The P4 build that --p4info / --bmv2-json name exists."""
    for p in (args.p4info, args.bmv2_json):
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p} not found: build the P4 program first (make p4)")


class P4RuntimeBackend(Backend):
    resident = True

    def transport_errors(self) -> Tuple[type, ...]:
        from ..bmv2_queues import QueueConfigError
        from ..p4runtime_client import P4RuntimeError
        from ..tm_client import TmError

        return (P4RuntimeError, QueueConfigError, TmError)

    def connect(self, args: argparse.Namespace, arbitrate: bool = True):
        """A P4Runtime session: primary (``arbitrate``, for writes) or read-only (no
        stream: diff and counters never disturb the primary controller)."""
        from ..p4runtime_client import P4RuntimeClient

        addr = getattr(args, "grpc_addr", None) or self.sw.grpc_addr
        dev = args.device_id if getattr(args, "device_id", None) is not None else self.sw.device_id
        return P4RuntimeClient(addr, dev, (0, args.election_id), timeout=args.timeout, arbitrate=arbitrate,
                               takeover=getattr(args, "takeover", False))

    def _runs_build(self, client, args: argparse.Namespace) -> bool:
        """The switch runs the pipeline of --p4info / --bmv2-json (P4Info loaded)."""
        from ..p4runtime_client import pipeline_cookie

        cookie = pipeline_cookie(Path(args.p4info).read_bytes(), Path(args.bmv2_json).read_bytes())
        client.load_p4info(args.p4info)
        return client.current_cookie() == cookie

    # -- show ------------------------------------------------------------------------

    def show(self, as_json: bool) -> None:
        cfg, sw = self.cfg, self.sw
        print(f"switch {sw.name}: profile {sw.profile}, P4Runtime {sw.grpc_addr} device {sw.device_id}, "
              f"thrift {sw.thrift_port}")
        if sw.profile == PPT:
            print("queues (BMv2 priority, highest served first): " +
                  ", ".join(f"P{p}={ppt_qid(p)}" for p in range(8)) + "; other DSCPs with P3")
        elif sw.profile == FLASHPASS:
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
            print(f"{port:>4} {sw.ports[port].name:10} {fmt_rate(sw.ports[port].link_rate_bps):>11} "
                  f"{d.effective_w_q:>5.2f} {fmt_rate(d.credit_rate_bps):>13} "
                  f"{d.meter_cir_bytes_per_s:>8} B/s {d.meter_burst_bytes:>4} B "
                  f"{d.ecn_threshold_qdepth:>6} {d.red_threshold_qdepth:>8} {'-' if lk is None else lk:>8}")
        print()
        print("P4Runtime entities:")
        for e in switch_entries(cfg, sw.name):
            print(f"  {e.describe()}")
        print()
        self.show_queues()

    def show_queues(self) -> None:
        raise NotImplementedError

    # -- switch access ---------------------------------------------------------------

    def diff(self, args: argparse.Namespace) -> None:
        check_build(args)
        desired = switch_entries(self.cfg, self.name)
        with self.connect(args, arbitrate=False) as c:
            if not self._runs_build(c, args):
                print("pipeline: the switch does not run this build; apply would push it "
                      "(clearing all state) and INSERT every entity:")
                for e in desired:
                    print(f"  INSERT {e.describe()}")
                return
            updates = c.plan(desired)
        if not updates:
            print(f"{self.name}: in sync ({len(desired)} entities)")
        for u in updates:
            print(f"  {u.describe()}")

    def apply(self, args: argparse.Namespace) -> None:
        check_build(args)
        desired = switch_entries(self.cfg, self.name)
        print_down_links(self.cfg)
        with self.connect(args) as c:
            pushed = c.set_pipeline(args.p4info, args.bmv2_json, force=args.force_pipeline)
            print(f"pipeline: {'pushed' if pushed else 'already loaded (unchanged)'}")
            updates = c.apply(desired)
            election_id = c.election_id
        for u in updates:
            print(f"  {u.describe()}")
        counts = count_ops(updates)
        print(f"entities: {len(desired)} desired; " + describe_counts(counts))
        summary = {"switch": self.name, "pipeline_pushed": pushed, "desired": len(desired),
                   "writes": len(updates), "updates": counts, "election_id": election_id[1], "queues": None}
        if not args.no_queues:
            summary["queues"] = self.apply_queues_as_told(args)
        if args.json:
            print(json.dumps(summary))

    def apply_queues_as_told(self, args: argparse.Namespace) -> int:
        """apply's queue step with the command's address options; prints what it did."""
        raise NotImplementedError

    def apply_forwarding(self, args: argparse.Namespace) -> dict:
        from ..p4runtime_client import NotPrimary, P4RuntimeError

        name = self.name
        desired = switch_entries(self.cfg, name)
        try:
            with self.connect(args) as c:
                if not self._runs_build(c, args):
                    print(f"  {name}: does not run this pipeline build: run flexpass-ctl apply --switch {name}")
                    return {"switch": name, "error": "pipeline not loaded"}
                updates = c.apply(desired)
        except NotPrimary as e:
            print(f"  {name}: held by a running controller, which applies the change ({e})")
            return {"switch": name, "deferred": True}
        except P4RuntimeError as e:
            print(f"  {name}: {e}")
            return {"switch": name, "error": str(e)}
        for u in updates:
            print(f"  {name}: {u.describe()}")
        counts = count_ops(updates)
        print(f"  {name}: " + describe_counts(counts))
        return {"switch": name, "writes": len(updates), "updates": counts}

    def counters(self, args: argparse.Namespace) -> None:
        check_build(args)
        with self.connect(args, arbitrate=False) as c:
            c.load_p4info(args.p4info)
            data = {name: c.read_counter(name) for name in PORT_QUEUE_COUNTERS}
            events = c.read_counter(INGRESS_EVENTS)
        qname = {v: k for k, v in self.cfg.bmv2_priority.items()}
        print(f"{'port':>4} {'queue':>14} " + " ".join(f"{n:>15}" for n in PORT_QUEUE_COUNTERS))
        for port in sorted(self.sw.ports):
            for q in range(QUEUES_PER_PORT):
                row = [data[n].get(port_queue_index(port, q), (0, 0))[0] for n in PORT_QUEUE_COUNTERS]
                if not args.all and not any(row):
                    continue
                label = f"{q} ({qname.get(q, '-')})"
                print(f"{port:>4} {label:>14} " + " ".join(f"{v:>15}" for v in row))
        print("ingress events:")
        for idx, name in sorted(INGRESS_EVENT_NAMES.items()):
            print(f"  {name:30} {events.get(idx, (0, 0))[0]}")

    def session(self, election_id: Tuple[int, int], connect_timeout_s: float, rpc_timeout_s: float,
                takeover: bool):
        """A primary P4Runtime session for the resident controller."""
        from ..p4runtime_client import P4RuntimeClient

        c = P4RuntimeClient(self.sw.grpc_addr, self.sw.device_id, election_id, timeout=connect_timeout_s,
                            takeover=takeover)
        c.timeout = rpc_timeout_s
        return c

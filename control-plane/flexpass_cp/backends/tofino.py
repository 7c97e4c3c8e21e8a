"""Tofino / Tofino2 (``target: tofino`` / ``tofino2``, p4src/tna): P4 entries
and the traffic manager as BfRt operations (:mod:`flexpass_cp.bfrt_ops`) over
the SDE's gRPC client (:mod:`flexpass_cp.bfrt_client`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Tuple

from ..bfrt_ops import ops_to_json, switch_ops, tm_prefix
from ..config.derive import Derived
from ..config.profiles import FLASHPASS, LOGICAL_QUEUES, PPT
from ..config.queues import tofino_settings
from ..config.targets import TOFINO_CHIPS
from ..p4_program import INGRESS_EVENT_NAMES, INGRESS_EVENTS, PORT_QUEUE_COUNTERS, port_queue_index
from .base import Backend, count_ops, describe_counts, fmt_rate

_REPO = Path(__file__).resolve().parents[3]
TOFINO_BUILD = Path(os.environ.get("FLEXPASS_TOFINO_BUILD", _REPO / "build" / "p4-tofino"))


class TofinoBackend(Backend):
    """Its traffic manager is part of apply's BfRt operations (no apply_queues)."""

    def transport_errors(self) -> Tuple[type, ...]:
        from ..bfrt_client import BfrtError, BfrtUnavailable
        from ..tm_client import TmError

        return (BfrtError, BfrtUnavailable, TmError)

    def connect(self, args: argparse.Namespace):
        from ..bfrt_client import BfrtClient

        return BfrtClient(args.grpc_addr or self.sw.grpc_addr,
                          args.device_id if args.device_id is not None else self.sw.device_id,
                          p4_name=args.p4_name, tm_prefix=tm_prefix(self.cfg, self.name), timeout=args.timeout)

    @property
    def cell_bytes(self) -> int:
        return TOFINO_CHIPS[self.sw.target][1]

    # -- show ------------------------------------------------------------------------

    def show(self, as_json: bool) -> None:
        ops = switch_ops(self.cfg, self.name)
        if as_json:
            sys.stdout.write(ops_to_json(ops))
            return
        {PPT: self._show_ppt, FLASHPASS: self._show_flashpass}.get(self.sw.profile, self._show_three_queues)()
        print()
        print("BfRt operations (apply order):")
        for op in ops:
            print(f"  {op.describe()}" + (f"   # {op.why}" if op.why else ""))

    def _show_ppt(self) -> None:
        cfg, sw = self.cfg, self.sw
        print(f"switch {sw.name}: {sw.target}, profile ppt, BfRt gRPC {sw.grpc_addr} device "
              f"{sw.device_id}; P<p> in queue 7-p at strict priority 7-p; thresholds in {self.cell_bytes}-byte cells")
        print()
        print(f"{'port':>4} {'link':>11} {'buffer':>7} " + " ".join(f"{'K P' + str(p):>6}" for p in range(8)))
        for tp in tofino_settings(cfg, sw.name):
            d = Derived(cfg, sw, sw.ports[tp.port])
            print(f"{tp.port:>4} {fmt_rate(sw.ports[tp.port].link_rate_bps):>11} {tp.buffer_cells:>7} "
                  + " ".join(f"{d.qdepth(d.ppt_ecn_threshold_bytes(p)):>6}" for p in range(8)))

    def _show_flashpass(self) -> None:
        cfg, sw = self.cfg, self.sw
        print(f"switch {sw.name}: {sw.target}, profile flashpass, BfRt gRPC {sw.grpc_addr} device "
              f"{sw.device_id}; emulation queue {cfg.bmv2_priority['credit']} (strict priority 7), "
              f"data queue {cfg.bmv2_priority['flexpass']}; thresholds in {self.cell_bytes}-byte cells")
        print()
        print(f"{'port':>4} {'link':>11} {'emulation rate':>15} {'emu cells':>9} {'red drop':>8} "
              f"{'data cells':>10} {'red data >':>10}")
        for tp in tofino_settings(cfg, sw.name):
            d = Derived(cfg, sw, sw.ports[tp.port])
            emu, data = tp.queues
            red_data = d.flashpass_thresholds()[data.qid][1]
            print(f"{tp.port:>4} {fmt_rate(sw.ports[tp.port].link_rate_bps):>11} "
                  f"{fmt_rate(d.credit_rate_bps):>15} {emu.guaranteed_cells:>9} {emu.red_limit_percent:>7g}% "
                  f"{data.guaranteed_cells:>10} {red_data:>10}")

    def _show_three_queues(self) -> None:
        cfg, sw = self.cfg, self.sw
        print(f"switch {sw.name}: {sw.target}, profile {sw.profile}, BfRt gRPC {sw.grpc_addr} device "
              f"{sw.device_id}; queue ids: " + ", ".join(f"{q}={cfg.bmv2_priority[q]}" for q in LOGICAL_QUEUES))
        print(f"thresholds in {self.cell_bytes}-byte cells; meter in the bytes Tofino counts (frame + FCS)")
        print()
        print(f"{'port':>4} {'link':>11} {'w_q':>5} {'credit limit':>13} {'meter cir':>14} {'burst':>7} "
              f"{'K cells':>7} {'red':>16} {'Q1 cells':>8} {'legacy K':>8}")
        for tp in tofino_settings(cfg, sw.name):
            d = Derived(cfg, sw, sw.ports[tp.port])
            q1 = next(q for q in tp.queues if q.role == "flexpass")
            red = (f"{d.cells(sw.ports[tp.port].queues.red_threshold_bytes)} ({q1.red_limit_percent:g}%)"
                   if q1.red_limit_percent is not None else "-")
            lk = d.legacy_ecn_threshold_qdepth
            print(f"{tp.port:>4} {fmt_rate(sw.ports[tp.port].link_rate_bps):>11} {d.effective_w_q:>5.2f} "
                  f"{fmt_rate(d.credit_rate_bps):>13} {d.meter_cir_kbps:>9} kb/s {d.meter_burst_kbits:>3} kb "
                  f"{d.ecn_threshold_qdepth:>7} {red:>16} {q1.guaranteed_cells:>8} {'-' if lk is None else lk:>8}")

    # -- switch access ---------------------------------------------------------------

    def apply_forwarding(self, args: argparse.Namespace) -> dict:
        print(f"  {self.name}: {self.sw.target}: run flexpass-ctl apply --switch {self.name}")
        return {"switch": self.name, "skipped": "tofino"}

    def diff(self, args: argparse.Namespace) -> None:
        desired = switch_ops(self.cfg, self.name)
        with self.connect(args) as c:
            c.bind()
            updates = c.plan(desired)
        if not updates:
            print(f"{self.name}: in sync ({len(desired)} operations)")
        for u in updates:
            print(f"  {u.describe()}")

    def apply(self, args: argparse.Namespace) -> None:
        desired = switch_ops(self.cfg, self.name)
        build = args.tofino_build or TOFINO_BUILD / self.sw.target
        with self.connect(args) as c:
            pushed = c.set_pipeline(build if build.is_dir() else None, force=args.force_pipeline)
            print(f"pipeline: {'pushed ' + str(build) if pushed else 'bound to ' + args.p4_name + ' (running)'}")
            c.check_tm(self.cell_bytes,
                       sum(q.guaranteed_cells for tp in tofino_settings(self.cfg, self.name) for q in tp.queues))
            if args.no_queues:
                desired = [op for op in desired if ".tm." not in op.table]
            updates = c.apply(desired)
        for u in updates:
            print(f"  {u.describe()}")
        print(f"operations: {len(desired)} desired; " + describe_counts(count_ops(updates)))

    def counters(self, args: argparse.Namespace) -> None:
        qname = {v: k for k, v in self.cfg.bmv2_priority.items()}
        with self.connect(args) as c:
            c.bind()
            data = {name: c.read_counter(name) for name in PORT_QUEUE_COUNTERS}
            events = c.read_counter(INGRESS_EVENTS)
            print(f"{'port':>4} {'queue':>14} " + " ".join(f"{n:>15}" for n in PORT_QUEUE_COUNTERS)
                  + f" {'TM drops':>9} {'TM max cells':>12}")
            for port in sorted(self.sw.ports):
                for q in sorted(set(self.cfg.bmv2_priority.values())):
                    row = [data[n].get(port_queue_index(port, q), (0, 0))[0] for n in PORT_QUEUE_COUNTERS]
                    tm = c.queue_counters(port, q)
                    if not args.all and not any(row) and not tm["drop_count_packets"]:
                        continue
                    label = f"{q} ({qname.get(q, '-')})"
                    print(f"{port:>4} {label:>14} " + " ".join(f"{v:>15}" for v in row)
                          + f" {tm['drop_count_packets']:>9} {tm['watermark_cells']:>12}")
        print("ingress events (one per packet on Tofino):")
        for idx, name in sorted(INGRESS_EVENT_NAMES.items()):
            print(f"  {name:30} {events.get(idx, (0, 0))[0]}")

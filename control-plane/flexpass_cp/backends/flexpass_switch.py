"""The project's switch (``target: flexpass_switch``, switch-target/): entries
over P4Runtime, its traffic manager over the TM API (docs/tm-api.md)."""

from __future__ import annotations

import argparse
from typing import List, Optional

from ..config import Config
from ..config.queues import TmPort, tm_settings
from .base import fmt_rate
from .p4runtime import P4RuntimeBackend


def apply_tm_settings(cfg: Config, switch: str, host: str, port: int) -> List[TmPort]:
    """Push :func:`~flexpass_cp.config.queues.tm_settings` to a flexpass_switch over its TM API."""
    from ..tm_client import TmClient

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
                             shaper_burst_bytes=q.shaper_burst_bytes, discipline=q.discipline)
    return ports


class FlexpassSwitchBackend(P4RuntimeBackend):
    def show_queues(self) -> None:
        print(f"traffic manager (flexpass_switch, TM API port {self.sw.tm_port}):")
        for tp in tm_settings(self.cfg, self.name):
            print(f"  port {tp.port}: link {fmt_rate(tp.link_rate_bps)}, wire overhead {tp.wire_overhead_bytes} B"
                  + (f", shared buffer {tp.shared_buffer_bytes} B" if tp.shared_buffer_bytes else ""))
            for q in tp.queues:
                shaper = (f", shaper {fmt_rate(q.shaper_rate_bps)} burst {q.shaper_burst_bytes} B"
                          if q.shaper_rate_bps else "")
                print(f"    queue {q.queue}: level {q.priority} weight {q.weight:.3g} buffer {q.buffer_bytes} B"
                      f" red {q.red_threshold or '-'} K {q.ecn_threshold or '-'}{shaper}"
                      + (f" discipline {q.discipline}" if q.discipline != "fifo" else ""))

    def apply_queues(self, host: str = "127.0.0.1", port: Optional[int] = None) -> int:
        return len(apply_tm_settings(self.cfg, self.name, host, port or self.sw.tm_port))

    def apply_queues_as_told(self, args: argparse.Namespace) -> int:
        n = self.apply_queues(args.thrift_ip, args.tm_port)
        print(f"traffic manager: {n} ports configured")
        return n

    def tm_stats(self, args: argparse.Namespace) -> int:
        from ..tm_client import TmClient

        sw = self.sw
        qname = {v: k for k, v in self.cfg.bmv2_priority.items()}
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

"""Stock BMv2 (``target: simple_switch``): entries over P4Runtime, queue depth
and rate over the Thrift CLI (:mod:`flexpass_cp.bmv2_queues`)."""

from __future__ import annotations

import argparse
from typing import Optional

from ..config.queues import bmv2_queue_commands
from .p4runtime import P4RuntimeBackend


class Bmv2Backend(P4RuntimeBackend):
    def show_queues(self) -> None:
        print("BMv2 queue settings (simple_switch_CLI):")
        for c in bmv2_queue_commands(self.cfg, self.name):
            print(f"  {c.line():40} # {c.why}")

    def apply_queues(self, host: str = "127.0.0.1", port: Optional[int] = None) -> int:
        from ..bmv2_queues import apply_queue_settings

        return len(apply_queue_settings(self.cfg, self.name, port or self.sw.thrift_port, host))

    def apply_queues_as_told(self, args: argparse.Namespace) -> int:
        n = self.apply_queues(args.thrift_ip, args.thrift_port)
        print(f"queues: {n} settings applied over thrift")
        return n

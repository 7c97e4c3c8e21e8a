"""What ``flexpass-ctl`` needs from a switch target: one :class:`Backend` per
target (:func:`flexpass_cp.backends.backend_for`), chosen once per switch.

A command method gets the command's parsed options (``args``, see
:func:`flexpass_cp.cli.build_parser`) and prints what it did.
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, Iterable, Optional, Tuple

from ..config import Config
from ..config.topology import down_links


class Backend:
    """One switch of a config, reached the way its target is."""

    #: Held by ``flexpass-ctl run`` and rewritten by link-down / link-up (P4Runtime).
    resident = False

    def __init__(self, cfg: Config, switch: str):
        self.cfg = cfg
        self.sw = cfg.switch(switch)

    @property
    def name(self) -> str:
        return self.sw.name

    def transport_errors(self) -> Tuple[type, ...]:
        """Errors of a switch that is unreachable or refuses (exit 2)."""
        raise NotImplementedError

    def show(self, as_json: bool) -> None:
        """Offline: derived values, the entries apply writes, the queue settings."""
        raise NotImplementedError

    def diff(self, args: argparse.Namespace) -> None:
        """What apply would change on the switch."""
        raise NotImplementedError

    def apply(self, args: argparse.Namespace) -> None:
        """Pipeline (if needed), entries, meters and queue settings."""
        raise NotImplementedError

    def counters(self, args: argparse.Namespace) -> None:
        """Per port/queue counters and ingress events."""
        raise NotImplementedError

    def apply_forwarding(self, args: argparse.Namespace) -> dict:
        """Entries only (link-down / link-up); a result line for ``--json``."""
        raise NotImplementedError

    def apply_queues(self, host: str = "127.0.0.1", port: Optional[int] = None) -> int:
        """Queue / traffic-manager settings (a restarted switch lost them), at `host`
        and `port` (default: the config's); how many were written."""
        raise NotImplementedError

    def tm_stats(self, args: argparse.Namespace) -> int:
        """flexpass-ctl tm-stats; an exit code."""
        print(f"flexpass-ctl: {self.name} is a {self.sw.target} (no traffic manager API); see `counters`",
              file=sys.stderr)
        return 3


def fmt_rate(bps: float) -> str:
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= div:
            return f"{bps / div:.4g} {unit}"
    return f"{bps:.4g} bit/s"


def count_ops(updates: Iterable) -> Dict[str, int]:
    """Updates by operation (INSERT / MODIFY / DELETE)."""
    counts: Dict[str, int] = {}
    for u in updates:
        counts[u.op] = counts.get(u.op, 0) + 1
    return counts


def describe_counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{n} {op.lower()}" for op, n in sorted(counts.items())) or "no change"


def print_down_links(cfg: Config) -> None:
    names = down_links(cfg)
    if names:
        print("links out of service: " + "; ".join(names))

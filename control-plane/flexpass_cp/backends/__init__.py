"""One :class:`~.base.Backend` per switch target, chosen once per switch:

* ``simple_switch`` -- :class:`~.bmv2.Bmv2Backend`: P4Runtime, stock BMv2 queues;
* ``flexpass_switch`` -- :class:`~.flexpass_switch.FlexpassSwitchBackend`:
  P4Runtime, its traffic manager;
* ``tofino`` / ``tofino2`` -- :class:`~.tofino.TofinoBackend`: BfRt.
"""

from __future__ import annotations

from typing import Dict, Type

from ..config import Config, ConfigError
from .base import Backend
from .bmv2 import Bmv2Backend
from .flexpass_switch import FlexpassSwitchBackend
from .tofino import TofinoBackend

BACKENDS: Dict[str, Type[Backend]] = {
    "simple_switch": Bmv2Backend,
    "flexpass_switch": FlexpassSwitchBackend,
    "tofino": TofinoBackend,
    "tofino2": TofinoBackend,
}


def backend_for(cfg: Config, switch: str) -> Backend:
    """The backend of `switch` (its ``target``)."""
    sw = cfg.switch(switch)
    if sw.target not in BACKENDS:  # schema.TARGETS and BACKENDS agree (test_cli)
        raise ConfigError(f"switches.{switch}.target", f"no backend for target {sw.target!r}")
    return BACKENDS[sw.target](cfg, switch)


__all__ = ["BACKENDS", "Backend", "backend_for"]

"""Declarative FlexPass switch configuration (YAML) and what it compiles to.

One module per job, each depending only on those above it:

* :mod:`.model` -- the typed config and :class:`ConfigError`;
* :mod:`.units` -- rates, sizes, MAC addresses;
* :mod:`.targets` -- the switch programs and the units they count in;
* :mod:`.profiles` -- switch profiles (the model's names) and their queues;
* :mod:`.topology` -- links between switches, links out of service;
* :mod:`.schema` -- YAML -> validated config (:func:`load_config`);
* :mod:`.forwarding` -- routes and ECMP groups given the links out of service;
* :mod:`.derive` -- :class:`~.derive.Derived`: rates, meter, thresholds in the
  target's units (the one place that does unit arithmetic);
* :mod:`.queues` -- the queues of a port per target × profile;
* :mod:`.entries` -- :func:`~.entries.switch_entries`: the P4 table entries.

The entry points are importable from here.
"""

from .model import Config, ConfigError
from .schema import load_config, parse_config

__all__ = ["Config", "ConfigError", "load_config", "parse_config"]

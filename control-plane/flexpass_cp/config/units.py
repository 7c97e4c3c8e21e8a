"""Rates, sizes and MAC addresses as a config writes them.

* Rates: an int/float is **bits per second**; strings take a unit:
  ``"10Gbps"``, ``"100Mbps"``, ``"1.5Gbps"``, ``"800kbps"``, ``"42bps"``.
* Sizes: an int is **bytes**; strings take a unit: ``"65KB"`` (1 KB = 1000 B),
  ``"64KiB"`` (1024 B), ``"1MB"``, ``"1538B"``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .model import ConfigError

_RATE_UNITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
_NUM_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_rate(value: Any, path: str) -> float:
    """Rate in bits/s from a number (bits/s) or a string with a unit."""
    if is_number(value):
        rate = float(value)
    elif isinstance(value, str):
        m = _NUM_UNIT.match(value)
        if not m or m.group(2).lower() not in _RATE_UNITS:
            if value.strip().startswith("-"):
                raise ConfigError(path, f"must be > 0, got {value!r}")
            raise ConfigError(
                path, f"cannot parse rate {value!r}: use bits/s or a unit like '10Gbps' "
                f"(units: {', '.join(_RATE_UNITS)})")
        rate = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    else:
        raise ConfigError(path, f"must be a rate (number of bits/s or '10Gbps'), got {value!r}")
    if not math.isfinite(rate) or rate <= 0:
        raise ConfigError(path, f"must be > 0, got {value!r}")
    return rate


def parse_size(value: Any, path: str) -> int:
    """Size in bytes from an int (bytes) or a string with a unit."""
    if is_number(value):
        if float(value) != int(value):
            raise ConfigError(path, f"must be a whole number of bytes, got {value!r}")
        size = int(value)
    elif isinstance(value, str):
        m = _NUM_UNIT.match(value)
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            if value.strip().startswith("-"):
                raise ConfigError(path, f"must be > 0, got {value!r}")
            raise ConfigError(
                path, f"cannot parse size {value!r}: use bytes or a unit like '65KB' "
                f"(units: B, KB, KiB, MB, MiB)")
        size = int(math.ceil(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]))
    else:
        raise ConfigError(path, f"must be a size (bytes or '65KB'), got {value!r}")
    if size <= 0:
        raise ConfigError(path, f"must be > 0, got {value!r}")
    return size


def parse_mac(value: Any, path: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}", value):
        raise ConfigError(path, f"must be a MAC address like '02:00:00:00:00:01', got {value!r}")
    return value.lower()


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


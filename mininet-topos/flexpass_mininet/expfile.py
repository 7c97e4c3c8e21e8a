"""Experiment files of the file-driven Mininet runners (faults, soak): where a name
is looked up, how the TOML is read, the one error type, the typed key reader, and the
settings every runner shares (switch, scaled link rate and RTT, leaf-spine size).

Every error names the file and the key: ``faults.flow[2].transport: one of …``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from . import env

EXPERIMENTS = env.REPO / "mininet-topos" / "experiments"


class ExperimentError(ValueError):
    pass


def take(d: dict, key: str, typ, path: str, default=None):
    """Remove ``key`` from ``d`` and return it checked against ``typ`` (an int is
    accepted for a float; a bool is never a number); ``default`` when absent."""
    if key not in d:
        return default
    v = d.pop(key)
    if typ is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        raise ExperimentError(f"{path}.{key}: expected {typ.__name__}, got {v!r}")
    return v


def read(path, overrides: Optional[dict] = None) -> Tuple[dict, str]:
    """The file's keys (a copy the parser may consume) with ``overrides`` on top, and
    its name.  A path that is not a file is looked up in mininet-topos/experiments/,
    with and without ``.toml``."""
    p = Path(path)
    for cand in (p, EXPERIMENTS / p, EXPERIMENTS / f"{p}.toml"):
        if cand.is_file():
            p = cand
            break
    try:
        raw = tomllib.loads(p.read_text())
    except OSError as e:
        raise ExperimentError(f"cannot read {p}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{p}: {e}") from None
    raw.update(overrides or {})
    return json.loads(json.dumps(raw)), p.stem


@dataclass
class Run:
    """What every file-driven run has: its name and the scaled network (scaling.py)."""
    name: str
    description: str = ""
    switch: str = "flexpass_switch"
    link_mbps: float = 20.0
    rtt_us: float = 1000.0


@dataclass
class LeafSpineRun(Run):
    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2


def take_run(raw: dict, run: Run, extra=()) -> None:
    """Fill ``run`` from the top-level keys of ``raw``: the shared ones, ``extra``
    ((key, type) pairs of the runner's own scalars), and, for a leaf-spine run, the
    ``[topology]`` table."""
    name = run.name
    for key, typ in (("description", str), ("switch", str), ("link_mbps", float), ("rtt_us", float), *extra):
        v = take(raw, key, typ, name)
        if v is not None:
            setattr(run, key, v)
    if run.switch not in env.SWITCH_BINARIES:
        raise ExperimentError(f"{name}.switch: one of {', '.join(env.SWITCH_BINARIES)}, got {run.switch!r}")
    for key in ("link_mbps", "rtt_us"):
        if not getattr(run, key) > 0:
            raise ExperimentError(f"{name}.{key}: must be > 0, got {getattr(run, key)}")
    if isinstance(run, LeafSpineRun):
        topo = raw.pop("topology", {})
        for key in ("spines", "leaves", "hosts_per_leaf"):
            v = take(topo, key, int, f"{name}.topology")
            if v is not None:
                if v < 1:
                    raise ExperimentError(f"{name}.topology.{key}: must be >= 1, got {v}")
                setattr(run, key, v)
        if topo:
            raise ExperimentError(f"{name}.topology: unknown keys {sorted(topo)}")


def loader(parse):
    """A runner's ``load_experiment(path, overrides)`` from its ``parse(raw, name)``."""
    def load_experiment(path, overrides: Optional[dict] = None):
        raw, name = read(path, overrides)
        return parse(raw, name)
    return load_experiment


def no_leftovers(raw: dict, path: str) -> None:
    if raw:
        raise ExperimentError(f"{path}: unknown keys {sorted(raw)}")

"""Link state: which links are out of service, kept next to the config.

``flexpass-ctl link-down --link leaf1:spine1`` records the link in a small YAML
state file (by default ``<config stem>.links.yaml`` next to the config, or
``--links FILE``); ``link-up`` removes it.  Every command that computes what a
switch should hold (show, diff, apply, run, link-down/up) reads that file
together with the config's own ``down_links``, so a switch that restarts while a
link is down is reconciled WITHOUT the dead member, and ``flexpass-ctl run``
(the resident controller) reacts to the file changing.

The file is replaced atomically (write + rename), so a reader never sees half
of it::

    # Links out of service (flexpass-ctl link-down / link-up).
    down_links:
    - leaf1:3
    changed_at: 1700000000.123
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import yaml

from .config import Config, ConfigError, load_config
from .config.topology import resolve_link, with_down_links

HEADER = "# Links out of service (flexpass-ctl link-down / link-up); read with the config by\n" \
         "# flexpass-ctl show / diff / apply / run.\n"


def default_state_path(config_path: Union[str, Path]) -> Path:
    p = Path(config_path)
    return p.with_name(p.stem + ".links.yaml")


def state_path(config_path: Union[str, Path], links: Optional[Union[str, Path]] = None) -> Path:
    return Path(links) if links else default_state_path(config_path)


def read_state(path: Union[str, Path]) -> Tuple[List[str], Optional[float]]:
    """(links out of service, time of the last change) from a state file; a
    missing file is an empty state."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        return [], None
    except OSError as e:
        raise ConfigError("", f"cannot read link state {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError("", f"{p}: not valid YAML: {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("down_links", []), list):
        raise ConfigError("down_links", f"{p}: expected a mapping with a list 'down_links'")
    links = [str(x) for x in raw.get("down_links", []) or []]
    changed = raw.get("changed_at")
    return links, float(changed) if isinstance(changed, (int, float)) else None


def write_state(path: Union[str, Path], links: Sequence[str]) -> float:
    """Replace the state file atomically; returns the recorded change time."""
    p = Path(path)
    now = time.time()
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(HEADER + yaml.safe_dump({"down_links": list(links), "changed_at": round(now, 6)},
                                           sort_keys=False))
    os.replace(tmp, p)
    return now


def load(config_path: Union[str, Path], links: Optional[Union[str, Path]] = None) -> Config:
    """The config with the recorded link state applied."""
    cfg = load_config(config_path)
    down, _ = read_state(state_path(config_path, links))
    try:
        return with_down_links(cfg, down, "down_links")
    except ConfigError as e:
        raise ConfigError(e.path, f"{e.message} (in {state_path(config_path, links)})") from None


def set_link(config_path: Union[str, Path], spec: str, down: bool,
             links: Optional[Union[str, Path]] = None) -> Tuple[bool, Tuple[Tuple[str, int], ...], List[str]]:
    """Record `spec` down (or up).  Returns (changed, the link's ends, the links
    down afterwards).  A link may be named from either end."""
    cfg = load_config(config_path)
    ends = resolve_link(cfg, spec)
    path = state_path(config_path, links)
    current, _ = read_state(path)
    present = [resolve_link(cfg, s, str(path)) == ends for s in current]
    if down:
        new = current if any(present) else current + [f"{ends[0][0]}:{ends[0][1]}"]
    else:
        new = [s for s, same in zip(current, present) if not same]
    changed = new != current
    if changed:
        write_state(path, new)
    return changed, ends, new

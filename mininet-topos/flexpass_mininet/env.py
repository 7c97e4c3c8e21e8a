"""Environment checks and imports shared by the topologies and runners.

Mininet comes from Debian (``apt install mininet``) and lives in
/usr/lib/python3/dist-packages; the runners run under the interpreter that has
the control plane (``flexpass_cp``), so that directory is appended to sys.path
(after the interpreter's own packages) when ``import mininet`` fails.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[2]
P4_BUILD = Path(os.environ.get("FLEXPASS_P4_BUILD", REPO / "build" / "p4"))
FLEXPASS_BIN = Path(os.environ.get("FLEXPASS_BIN", REPO / "host-agent" / "target" / "release" / "flexpass"))
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


class ExperimentError(ValueError):
    """An experiment this backend cannot run as written; the message names the key."""

#: Switch programs the Mininet switch class can start (SWITCH=...).
SWITCH_BINARIES = {
    # The project's target with the traffic manager (switch-target/).
    "flexpass_switch": os.environ.get(
        "FLEXPASS_SWITCH_BIN",
        str(REPO / "build" / "switch-target" / "flexpass_switch")),
    # Stock BMv2 (P4Runtime flavour of simple_switch).
    "simple_switch": "simple_switch_grpc",
}


# The control plane (flexpass_cp) is used in-process (TM telemetry, P4Runtime
# counters) and by `python -m flexpass_cp.cli`; it is importable from the repo
# whether or not `pip install -e control-plane` ran.
if str(REPO / "control-plane") not in sys.path:
    sys.path.insert(0, str(REPO / "control-plane"))


class EnvironmentProblem(RuntimeError):
    """Something this machine lacks; the message says what and how to get it."""


def import_mininet():
    try:
        import mininet  # noqa: F401
    except ImportError:
        if DEBIAN_DIST_PACKAGES not in sys.path and Path(DEBIAN_DIST_PACKAGES, "mininet").is_dir():
            sys.path.append(DEBIAN_DIST_PACKAGES)
        try:
            import mininet  # noqa: F401
        except ImportError:
            raise EnvironmentProblem("Mininet is not installed (Debian: apt install mininet)") from None
    import mininet.net
    return mininet


def switch_binary(switch: str) -> str:
    if switch not in SWITCH_BINARIES:
        raise EnvironmentProblem(f"unknown switch {switch!r} (choose {', '.join(SWITCH_BINARIES)})")
    b = SWITCH_BINARIES[switch]
    path = b if os.path.isabs(b) else shutil.which(b)
    if not path or not os.access(path, os.X_OK):
        how = ("build it: cmake -S switch-target -B build/switch-target && cmake --build build/switch-target"
               if switch == "flexpass_switch" else "install BMv2 with P4Runtime (README: P4 toolchain)")
        raise EnvironmentProblem(f"{switch}: {b} not found ({how})")
    return path


def problems(switch: str) -> List[str]:
    """Everything missing to run a Mininet experiment with `switch` (empty: ready)."""
    out: List[str] = []
    if os.geteuid() != 0:
        out.append("needs root (Mininet creates namespaces, veth pairs and processes); run with sudo")
    try:
        import_mininet()
    except EnvironmentProblem as e:
        out.append(str(e))
    try:
        switch_binary(switch)
    except EnvironmentProblem as e:
        out.append(str(e))
    for f in ("flexpass.json", "flexpass.p4info.txtpb"):
        if not (P4_BUILD / f).is_file():
            out.append(f"{P4_BUILD / f} missing (make p4; needs p4c-bm2-ss)")
    if not FLEXPASS_BIN.is_file():
        out.append(f"{FLEXPASS_BIN} missing (make build)")
    for tool in ("ip", "ethtool"):
        if not shutil.which(tool):
            out.append(f"{tool} not found (Debian: apt install {'iproute2' if tool == 'ip' else tool})")
    # The Python modules of the control plane and the plots; stock BMv2's queues go through
    # its Thrift CLI (flexpass_switch's through the TM API).
    from flexpass_cp import env_check
    groups = ["control-plane", "mininet"] + (["bmv2"] if switch == "simple_switch" else [])
    out.extend(env_check.problems(groups))
    return out


def require(switch: str) -> None:
    p = problems(switch)
    if p:
        raise EnvironmentProblem("; ".join(p))


def first_line(text: Optional[str]) -> str:
    return (text or "").strip().splitlines()[-1] if (text or "").strip() else ""


#: The UDP port every runner's agents listen on.
AGENT_PORT = 7890


def agent_command(*args: str) -> List[str]:
    """``flexpass ARGS…`` as the runners start it (warnings only on stderr)."""
    return [str(FLEXPASS_BIN), *args, "--log-level", "warn"]


def json_record(line: str) -> Optional[dict]:
    """One line of an agent's output as its JSON record; None for any other line (log text,
    a torn last line)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def read_json_lines(path: Path) -> List[dict]:
    """The JSON records of an agent's output; other lines (and a torn last line) skipped."""
    if not path.exists():
        return []
    records = (json_record(line) for line in path.read_text(errors="replace").splitlines())
    return [r for r in records if r is not None]

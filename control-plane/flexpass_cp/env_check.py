"""What each test tier and runner needs from the Python interpreter that runs it, and how
to get what is missing.

The P4 (PTF), c++ (flexpass_switch integration) and Mininet tiers drive BMv2 through this
package: P4Runtime (grpcio, protobuf, p4runtime), and for BMv2's queue settings the Thrift
runtime CLI ``simple_switch_CLI``, a Python script that needs the ``thrift`` module (PyPI)
and BMv2's own generated package ``bm_runtime``, which BMv2's ``make install`` puts in a
site-packages directory of its prefix that the script appends to ``sys.path`` itself.
Every check names the interpreter and the command that fixes it; ``make deps`` installs
the PyPI part (``pip install './control-plane[dev,ptf,bmv2]'``).

    python3 -m flexpass_cp.env_check bmv2 ptf     # one line per problem; exit 1 if any
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

#: Per group: (module to import, distribution that provides it, extra of this package).
MODULES: Dict[str, List[Tuple[str, str, str]]] = {
    "control-plane": [
        ("yaml", "pyyaml", ""),
        ("scapy", "scapy", ""),
        ("grpc", "grpcio", ""),
        ("google.protobuf", "protobuf", ""),
        ("p4.v1.p4runtime_pb2", "p4runtime", ""),
    ],
    "bmv2": [("thrift", "thrift", "bmv2")],
    "ptf": [("ptf", "ptf", "ptf"), ("pytest", "pytest", "dev")],
    "mininet": [("matplotlib", "matplotlib", "")],
}

GROUPS = ("control-plane", "bmv2", "ptf", "mininet")


def _importable(module: str) -> Optional[str]:
    """None if `module` imports, else why not."""
    try:
        if importlib.util.find_spec(module.split(".")[0]) is None:
            return "not installed"
        importlib.import_module(module)
        return None
    except Exception as e:  # noqa: BLE001 - any import failure is the answer
        return f"{type(e).__name__}: {e}"


def pip_command(dist: str, extra: str) -> str:
    py = sys.executable or "python3"
    if extra:
        return f"{py} -m pip install './control-plane[{extra}]' (or: make deps)"
    return f"{py} -m pip install {dist} (or: make deps)"


def simple_switch_cli() -> Optional[str]:
    return shutil.which("simple_switch_CLI")


def bmv2_python_dirs(cli: Optional[str] = None) -> List[Path]:
    """Directories BMv2's CLI adds to sys.path (where ``make install`` put bm_runtime)."""
    cli = cli or simple_switch_cli()
    if not cli:
        return []
    try:
        text = Path(cli).read_text(errors="replace")
    except OSError:
        return []
    return [Path(d) for d in re.findall(r"sys\.path\.(?:append|insert)\([^\"']*[\"']([^\"']+)[\"']\)", text)]


def cli_command(cli: Optional[str] = None) -> List[str]:
    """How to run ``simple_switch_CLI``: with this interpreter (which has ``thrift``) when it
    is a Python script — its shebang's ``python3`` may be another one."""
    path = cli or simple_switch_cli()
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return [path]
    if first.startswith(b"#!") and b"python" in first:
        return [sys.executable, path]
    return [path]


def bm_runtime_problem(cli: Optional[str] = None) -> Optional[str]:
    """Why BMv2's generated Python package is not usable by simple_switch_CLI, if it is not."""
    cli = cli or simple_switch_cli()
    if not cli:
        return "simple_switch_CLI not found in PATH (it is installed with BMv2: README, P4 toolchain)"
    dirs = bmv2_python_dirs(cli)
    candidates = dirs + [Path(p) for p in sys.path if p]
    if any((d / "bm_runtime" / "__init__.py").is_file() for d in candidates):
        return None
    where = ", ".join(str(d) for d in dirs) or "no directory named in the script"
    return (f"BMv2's Python package bm_runtime is not where {cli} looks for it ({where}): "
            "reinstall BMv2 (make install in behavioral-model), or put its site-packages "
            "directory on PYTHONPATH")


def _module_problems(group: str) -> List[str]:
    out = []
    for module, dist, extra in MODULES[group]:
        why = _importable(module)
        if why:
            out.append(f"python module {module!r} missing for {sys.executable} ({why}): "
                       f"{pip_command(dist, extra)}")
    return out


def bmv2_problems(cli: Optional[str] = None) -> List[str]:
    """What running BMv2's ``simple_switch_CLI`` (the one in PATH, or `cli`) with this
    interpreter lacks."""
    out = _module_problems("bmv2")
    p = bm_runtime_problem(cli)
    if p:
        out.append(p)
    return out


def problems(groups: Sequence[str]) -> List[str]:
    """Everything the groups need that this interpreter lacks, as actionable sentences."""
    out: List[str] = []
    for g in groups:
        if g not in MODULES:
            raise ValueError(f"unknown group {g!r} (known: {', '.join(GROUPS)})")
        out.extend(bmv2_problems() if g == "bmv2" else _module_problems(g))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    groups = list(argv if argv is not None else sys.argv[1:]) or list(GROUPS)
    try:
        found = problems(groups)
    except ValueError as e:
        print(f"env_check: {e}", file=sys.stderr)
        return 2
    for p in found:
        print(p)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

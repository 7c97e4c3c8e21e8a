"""Layering of the control plane.

* No import cycles inside flexpass_cp.  Every module is parsed with ast; every
  import counts, also those inside functions (a lazy import hides a cycle, it
  does not remove it).  A package's ``__init__`` is an edge only where it is
  imported by name, not as the implicit parent of a submodule.
* Layers (as import-linter's "layers" contract): a module imports only from
  its own layer or those below it (LAYERS); inside flexpass_cp.config, a
  module imports only those listed before it (CONFIG_ORDER).
* No source file of the repository (Python, Rust, P4, C/C++, Tcl) over MAX_LINES
  lines without a note in its header saying why it is one piece ("one piece: <why>").
"""

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set

CONTROL_PLANE = Path(__file__).resolve().parents[1]
PKG_DIR = CONTROL_PLANE / "flexpass_cp"
PKG = "flexpass_cp"
MAX_LINES = 1000

#: Top to bottom; a submodule is in its package's layer; a new module gets a place here.
LAYERS = [
    ["cli"],
    ["controller"],
    ["backends"],
    ["bfrt_client", "bfrt_ops", "bmv2_queues", "p4runtime_client", "tm_client", "links", "linkprobe", "env_check",
     "swx"],
    ["config"],
    ["entities", "p4_program", "dscp", "frames", "scapy_flexpass"],
]
CONFIG_ORDER = ["model", "units", "targets", "profiles", "topology", "schema", "forwarding", "derive", "queues",
                "entries"]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG_DIR.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, name: Optional[str]) -> str:
    if level == 0:
        return name or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(name: str, source: str, is_package: bool, known: Set[str]) -> Set[str]:
    """Modules of the package that module `name` imports (anywhere in its source)."""
    out = set()
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module)
            # `from pkg import sub` imports the submodule sub; `from mod import x` the module.
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `import flexpass_cp.x.y` names x.y; an attribute is not a module
                t = t.rpartition(".")[0]
            if t.startswith(PKG) and t != name:
                out.add(t)
    return out


def graph() -> Dict[str, Set[str]]:
    mods = modules()
    return {m: imports_of(m, p.read_text(), p.name == "__init__.py", set(mods)) for m, p in mods.items()}


def find_cycle(g: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle (first module repeated at the end), or None."""
    state: Dict[str, int] = {}  # 1 on the stack, 2 done
    stack: List[str] = []

    def visit(m: str) -> Optional[List[str]]:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycle_in_flexpass_cp():
    g = graph()
    assert len(g) > 10 and f"{PKG}.cli" in g
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module}: not in LAYERS (test_layering.py)")


def test_modules_import_only_their_layer_and_below():
    bad = [f"{m} -> {n}" for m, deps in graph().items() if m != PKG
           for n in deps if n != PKG and _layer(n) < _layer(m)]
    assert not bad, "imports from a higher layer: " + ", ".join(sorted(bad))


def test_config_modules_import_only_those_before_them():
    order = {f"{PKG}.config.{n}": i for i, n in enumerate(CONFIG_ORDER)}
    g = graph()
    assert set(order) == {m for m in g if m.startswith(f"{PKG}.config.")}
    bad = [f"{m} -> {n}" for m in order for n in g[m] if n in order and order[n] >= order[m]]
    assert not bad, "config modules out of order: " + ", ".join(sorted(bad))


def test_the_checker_sees_function_level_and_relative_imports():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    known = {PKG, f"{PKG}.cli", f"{PKG}.controller", f"{PKG}.config", f"{PKG}.config.schema"}
    src = "def f():\n    from .controller import Controller\n"
    assert imports_of(f"{PKG}.cli", src, False, known) == {f"{PKG}.controller"}
    src = "from . import schema\nfrom ..controller import x\nimport flexpass_cp.cli\n"
    assert imports_of(f"{PKG}.config", src, True, known) == {f"{PKG}.config.schema", f"{PKG}.controller",
                                                              f"{PKG}.cli"}


#: Source files of the whole repository (#25: one rule for every language), and what is not ours.
SOURCES = ("*.py", "*.rs", "*.p4", "*.c", "*.cpp", "*.h", "*.tcl")
NOT_SOURCE = {"target", "build", "results", ".git", "corpus", "artifacts", "node_modules"}


def test_long_files_say_why_they_are_one_piece():
    repo = CONTROL_PLANE.parent
    long = []
    for pattern in SOURCES:
        for p in sorted(repo.rglob(pattern)):
            if NOT_SOURCE & set(p.relative_to(repo).parts):
                continue
            lines = p.read_text(errors="replace").splitlines()
            if len(lines) > MAX_LINES and not re.search(r"one piece", "\n".join(lines[:40]), re.I):
                long.append(f"{p.relative_to(repo)} ({len(lines)} lines)")
    assert not long, "split these, or say in the header why each is one piece: " + ", ".join(long)


def test_pyproject_ships_every_subpackage():
    text = (CONTROL_PLANE / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(flexpass_cp[\w.]*)"', re.search(r"^packages = \[(.*)\]", text, re.M).group(1)))
    packages = {module_name(p) for p in PKG_DIR.rglob("__init__.py")}
    assert listed == packages

#!/usr/bin/env python3
"""Print the resource use p4c's Tofino backend reports for one compile.

    python3 p4src/tna/report_resources.py build/p4-tofino/tofino

Reads what bf-p4c writes under its output directory (any of them may be
absent, depending on the compiler version and flags):
  <pipe>/logs/table_summary.log   "Number of stages in table allocation: N"
  <pipe>/logs/metrics.json        mau.srams / tcams / logical_tables totals
  <pipe>/logs/resources.json      resources.mau.mau_stages[*]: per-stage SRAM/TCAM
  <pipe>/logs/mau.resources.log   the compiler's full per-stage table (path printed)
and prints stages and SRAM/TCAM use.  The logs exist when p4c runs with -g and
--verbose 1 (make p4-tofino does).  Never fails the build: a missing or
unreadable report is reported as such.
"""

import json
import sys
from pathlib import Path


def _used(items):
    return sum(1 for i in items or [] if i.get("usages"))


def stage_usage(resources: dict):
    """(stage, srams, tcams, logical tables) for every stage with something in it."""
    out = []
    for st in resources.get("resources", {}).get("mau", {}).get("mau_stages", []):
        srams = _used(st.get("rams", {}).get("srams"))
        tcams = _used(st.get("tcams", {}).get("tcams"))
        lt = st.get("logical_tables", {})
        tables = len(lt.get("ids") or lt.get("tables") or [])
        if srams or tcams or tables:
            out.append((st.get("stage_number"), srams, tcams, tables))
    return out


def report(out_dir: Path) -> str:
    lines = []
    for log in sorted(out_dir.rglob("table_summary.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "Number of stages" in line:
                lines.append(f"{log.relative_to(out_dir)}: {line.strip()}")
    for path in sorted(out_dir.rglob("metrics.json")):
        try:
            mau = json.loads(path.read_text()).get("mau", {})
            lines.append(f"{path.relative_to(out_dir)}: SRAMs {mau.get('srams')}, TCAMs {mau.get('tcams')}, "
                         f"map RAMs {mau.get('map_rams')}, logical tables {mau.get('logical_tables')}")
        except (OSError, ValueError) as e:
            lines.append(f"{path}: unreadable ({e})")
    for path in sorted(out_dir.rglob("resources.json")):
        try:
            stages = stage_usage(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            lines.append(f"{path}: unreadable ({e})")
            continue
        if stages:
            lines.append(f"{path.relative_to(out_dir)}: {len(stages)} stages used; SRAMs "
                         f"{sum(s[1] for s in stages)}, TCAMs {sum(s[2] for s in stages)}")
            lines += [f"  stage {n:>2}: SRAM {s:>3}  TCAM {t:>3}  logical tables {lt}"
                      for n, s, t, lt in stages]
    for path in sorted(out_dir.rglob("mau.resources.log")):
        lines.append(f"per-stage and per-table detail (crossbar, hash bits, VLIW, ALUs): "
                     f"{path.relative_to(out_dir)}")
    if not lines:
        files = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())
        lines.append(f"no resource report under {out_dir} (files: {', '.join(files[:20]) or 'none'})")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(report(Path(sys.argv[1])))

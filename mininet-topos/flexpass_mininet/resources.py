"""The memory and CPU of processes over time, from /proc (issue #14's soak): every
switch, host agent and the controller of an emulation (``flexpass emulate``, emulate.py),
and ``flexpass sim`` itself for a soak on the model (``python -m flexpass_mininet soak
--model``). A leak shows as a steady positive RSS slope over the second half of a run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from . import env

#: Every emulation's processes are sampled this often; runs print progress this often.
RESOURCE_SAMPLE_S, PROGRESS_S = 2.0, 30.0

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_usage(pid: int):
    """(VmRSS kB, CPU seconds utime + stime) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss = next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if l.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    if stat[0] in "ZX" or Path(f"/proc/{pid}/comm").read_text().strip() == "mnexec":
        return None  # exiting, or mnexec not yet exec'd into the program
    return rss, (int(stat[11]) + int(stat[12])) / CLK_TCK


class ResourceSampler:
    """RSS and CPU share of named processes; a name may be re-bound to a new PID (a
    restarted workload), its series continues."""

    def __init__(self):
        self.procs: Dict[str, tuple] = {}  # name -> (role, pid)
        self.last: Dict[tuple, tuple] = {}  # (name, pid) -> (t, cpu_s)
        self.rows: List[dict] = []

    def watch(self, name: str, role: str, pid: int) -> None:
        self.procs[name] = (role, pid)

    def sample(self, t_rel: float) -> None:
        now = time.monotonic()
        for name, (role, pid) in self.procs.items():
            u = proc_usage(pid)
            if u is None:
                continue
            rss, cpu = u
            prev = self.last.get((name, pid))
            self.last[(name, pid)] = (now, cpu)
            pct = None if prev is None or now <= prev[0] else 100.0 * (cpu - prev[1]) / (now - prev[0])
            self.rows.append({"t_s": round(t_rel, 2), "process": name, "role": role, "pid": pid,
                              "rss_kb": rss, "cpu_pct": None if pct is None else round(pct, 1),
                              "cpu_s": round(cpu, 2)})

    def series(self, name: str) -> List[dict]:
        return [r for r in self.rows if r["process"] == name]

    def summaries(self) -> Dict[str, dict]:
        """Per process: its role and memory_summary."""
        return {name: {"role": role, **memory_summary(self.series(name))} for name, (role, _) in self.procs.items()}


def memory_summary(rows: List[dict]) -> dict:
    """First, last, peak RSS and the trend over the second half (least squares, kB/min):
    a leak shows as a steady positive slope; a plateau as ~0."""
    if not rows:
        return {"samples": 0}
    half = [r for r in rows if r["t_s"] >= rows[0]["t_s"] + (rows[-1]["t_s"] - rows[0]["t_s"]) / 2]
    slope = None
    if len(half) >= 3:
        ts = [r["t_s"] / 60 for r in half]
        ms = [r["rss_kb"] for r in half]
        mt, mm = sum(ts) / len(ts), sum(ms) / len(ms)
        den = sum((t - mt) ** 2 for t in ts)
        slope = round(sum((t - mt) * (m - mm) for t, m in zip(ts, ms)) / den, 2) if den else None
    cpu = [r["cpu_pct"] for r in rows if r["cpu_pct"] is not None]
    return {"samples": len(rows), "rss_first_kb": rows[0]["rss_kb"], "rss_last_kb": rows[-1]["rss_kb"],
            "rss_peak_kb": max(r["rss_kb"] for r in rows), "rss_slope_second_half_kb_per_min": slope,
            "cpu_mean_pct": round(sum(cpu) / len(cpu), 1) if cpu else None,
            "cpu_max_pct": max(cpu) if cpu else None, "cpu_s_total": rows[-1]["cpu_s"],
            "pids": sorted({r["pid"] for r in rows})}


def write_csv(rows: List[dict], path: Path) -> None:
    with open(path, "w") as f:
        f.write("t_s,process,role,pid,rss_kb,cpu_pct,cpu_s\n")
        for r in rows:
            f.write(f"{r['t_s']},{r['process']},{r['role']},{r['pid']},{r['rss_kb']},"
                    f"{'' if r['cpu_pct'] is None else r['cpu_pct']},{r['cpu_s']}\n")


def summary_lines(processes: Dict[str, dict]) -> List[str]:
    """One line per process: RSS first -> last (peak), the second half's trend, CPU."""
    lines = ["  process                         RSS first -> last (peak) MB   trend 2nd half kB/min   CPU mean/max %"]
    for name, p in sorted(processes.items(), key=lambda kv: (kv[1]["role"], kv[0])):
        if not p["samples"]:
            continue
        lines.append(f"    {name:28} {p['rss_first_kb'] / 1024:6.1f} -> {p['rss_last_kb'] / 1024:6.1f} "
                     f"({p['rss_peak_kb'] / 1024:6.1f})   {p['rss_slope_second_half_kb_per_min']!s:>10}   "
                     f"{p['cpu_mean_pct']!s:>6}/{p['cpu_max_pct']!s}")
    return lines


class RunMonitor:
    """An emulation's processes: memory and CPU every RESOURCE_SAMPLE_S while the run waits
    (emulate.wait_until calls `sample`), a progress line every PROGRESS_S in runs longer
    than two of them, and the files at the end."""

    def __init__(self, sampler, duration_s: float, progress):
        self.sampler, self.duration_s, self.progress = sampler, duration_s, progress
        self.t0 = time.monotonic()
        self.next_sample = self.next_progress = 0.0

    def sample(self, force: bool = False) -> None:
        t = time.monotonic() - self.t0
        if force or t >= self.next_sample:
            self.sampler.sample(t)
            self.next_sample = t + RESOURCE_SAMPLE_S
        if self.duration_s > 2 * PROGRESS_S and t >= self.next_progress:
            if self.next_progress > 0:
                last = {r["process"]: r["rss_kb"] for r in self.sampler.rows[-2 * len(self.sampler.procs):]}
                self.progress(f"[emulate] {t:6.0f}/{self.duration_s:.0f} s: {len(self.sampler.procs)} processes, "
                              f"RSS {sum(last.values()) / 1024:.0f} MB in all (largest {max(last.values(), default=0) / 1024:.1f} MB)")
            self.next_progress = t + PROGRESS_S

    def write(self, out: Path, result: dict, title: str) -> None:
        from .plots import plot_soak_resources

        write_csv(self.sampler.rows, out / "resources.csv")
        done = [{"kind": "flow", "t_s": (x["start_us"] + x["fct_us"]) / 1e6} for x in result["flows"] if x["fct_us"] is not None]
        if self.sampler.rows:
            plot_soak_resources(self.sampler.rows, done, max(1, round(30 / RESOURCE_SAMPLE_S)), title, out / "resources.png")


# -- the soak on the model ------------------------------------------------------------------

MODEL_EXPERIMENT = env.REPO / "host-agent" / "experiments" / "soak.toml"


def run_model(experiment: Path, out: Path, sample_s: float = 1.0, progress_s: float = 30.0,
              sets: Optional[List[str]] = None, progress=print) -> dict:
    """The soak on the model (no root): ``flexpass sim EXPERIMENT`` (a long mixed workload),
    its RSS and CPU sampled from /proc while it runs, and its report's flows, corrupted
    bytes (the model checks every delivered byte) and timeouts."""
    run_dir = out / f"{Path(experiment).stem}-model"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)
    sim_dir = run_dir / "sim"
    cmd = [str(env.FLEXPASS_BIN), "sim", str(experiment), "--out", str(sim_dir)]
    for kv in sets or []:
        cmd += ["--set", kv]
    sampler = ResourceSampler()
    err_path = run_dir / "sim.err"
    with open(err_path, "w") as err, open(run_dir / "sim.out", "w") as so:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=so, stderr=err, start_new_session=True)
        sampler.watch("flexpass sim", "model", p.pid)
        progress(f"[soak] model: {' '.join(cmd)}")
        next_progress = t0 + progress_s
        try:
            while p.poll() is None:
                sampler.sample(time.time() - t0)
                if time.time() >= next_progress:
                    tail = err_path.read_text(errors="replace").replace("\x1b[K", "\r").split("\r")
                    last = next((x.strip() for x in reversed(tail) if x.strip()), "")
                    rss = sampler.rows[-1]["rss_kb"] / 1024 if sampler.rows else 0
                    progress(f"[soak] model {time.time() - t0:6.0f} s: RSS {rss:.1f} MB; {last}")
                    next_progress += progress_s
                time.sleep(sample_s)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait()
        elapsed = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"flexpass sim exited with {p.returncode}: {env.first_line(err_path.read_text()[-2000:])}")
    sim = json.loads((sim_dir / "result.json").read_text())
    fct = sim["fct"]
    result = {
        "experiment": Path(experiment).stem, "switch": "model", "command": " ".join(cmd),
        "elapsed_s": round(elapsed, 1), "simulated_ms": sim["duration_us"] / 1e3, "events": sim["events"],
        "summary": {
            "flows": fct["overall"]["flows"], "flows_completed": fct["overall"]["completed"],
            "incomplete": fct["overall"]["incomplete"], "corrupted_bytes": sim["corrupted_bytes"],
            "timeouts": sim["timeouts"], "recovery_timeouts": sim["recovery_timeouts"],
            "path_mismatches": sim["paths"].get("mismatches"),
            "legacy_flows": fct["legacy"]["completed"], "new_flows": fct["new"]["completed"]},
        "processes": {"flexpass sim": {"role": "model", **memory_summary(sampler.rows)}},
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    write_csv(sampler.rows, run_dir / "resources.csv")
    from .plots import plot_soak_resources

    plot_soak_resources(sampler.rows, [], max(1, round(10 / sample_s)),
                        f"model soak: {Path(experiment).name}, {result['simulated_ms']:.0f} ms simulated, "
                        f"{elapsed / 60:.1f} min", run_dir / "resources.png")
    return result


def model_summary(r: dict) -> str:
    s, p = r["summary"], r["processes"]["flexpass sim"]
    return "\n".join([
        f"== soak on the model: {r['experiment']}, {r['simulated_ms']:.0f} ms simulated, {r['events']} events, "
        f"{r['elapsed_s']:.0f} s ==",
        f"  flows completed {s['flows_completed']}/{s['flows']} (FlexPass {s['new_flows']}, DCTCP {s['legacy_flows']}), "
        f"corrupted bytes {s['corrupted_bytes']}, timeouts {s['timeouts']}, recovery timeouts "
        f"{s['recovery_timeouts']}, credit/data path mismatches {s['path_mismatches']}",
        f"  flexpass sim: RSS {p.get('rss_first_kb', 0) / 1024:.1f} -> {p.get('rss_last_kb', 0) / 1024:.1f} MB "
        f"(peak {p.get('rss_peak_kb', 0) / 1024:.1f}), trend over the second half "
        f"{p.get('rss_slope_second_half_kb_per_min')} kB/min, CPU mean {p.get('cpu_mean_pct')} %"])

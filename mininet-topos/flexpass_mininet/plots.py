"""PNG plots of the Mininet runs (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def save(fig, path: Path) -> None:
    """Lay out, write as a PNG and free the figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(series: Dict[str, List[dict]], link_bps: float, title: str, path: Path) -> None:
    """Per flow and per sub-flow throughput over time, in Mbit/s."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for key, rows in sorted(series.items()):
        if not rows:
            continue
        t = [r["t_s"] for r in rows]
        total = [(r["proactive_bps"] + r["reactive_bps"]) / 1e6 for r in rows]
        line, = ax.plot(t, total, label=f"{key} total", linewidth=1.6)
        if key.startswith("flexpass"):  # the only transport with two sub-flows
            ax.plot(t, [r["proactive_bps"] / 1e6 for r in rows], linestyle="--", color=line.get_color(),
                    linewidth=1, label=f"{key} proactive")
            ax.plot(t, [r["reactive_bps"] / 1e6 for r in rows], linestyle=":", color=line.get_color(),
                    linewidth=1, label=f"{key} reactive")
    ax.axhline(link_bps / 1e6, color="grey", linewidth=0.8, linestyle="-.", label="link rate")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_ylim(0, link_bps / 1e6 * 1.15)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    save(fig, path)


def plot_starvation(results: Dict[str, dict], path: Path) -> None:
    """FlexPass Fig. 9c: fraction of time each transport gets < 20 % of the link."""
    labels, values = [], []
    for exp, r in results.items():
        for key, f in r["flows"].items():
            labels.append(f"{exp}\n{key.split()[0]}")
            values.append(100 * f["starvation_fraction"])
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.bar(range(len(values)), values, color=["tab:blue", "tab:orange"] * (len(values) // 2 + 1))
    ax.set_xticks(range(len(values)), labels, fontsize=8)
    ax.set_ylabel("starvation time (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Fig. 9c: time with < 20 % of the link", fontsize=10)
    save(fig, path)


def plot_incast(rows: List[dict], title: str, path: Path, size: int, link_bps: float) -> None:
    """FlexPass Fig. 8: max FCT against the number of synchronized flows, with the
    line-rate bound (every response back to back at the link rate)."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    counts = sorted({r["flows"] for r in rows})
    ax.plot(counts, [n * size * 8 / link_bps * 1e3 for n in counts], color="grey", linestyle=":",
            label="line rate bound")
    for t in sorted({r["transport"] for r in rows}):
        pts = [(r["flows"], r["avg_max_fct_us"] / 1e3) for r in rows
               if r["transport"] == t and r["avg_max_fct_us"] is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=t)
    ax.set_xlabel("number of flows")
    ax.set_ylabel("max FCT (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    save(fig, path)


def plot_path_symmetry(rows: List[dict], spines: List[str], title: str, path: Path) -> None:
    """Per flow: data packets (FlexPass queue, towards the receiver's leaf) and credits
    (credit queue, towards the sender's leaf) counted on each spine."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=False)
    width = 0.8 / max(1, len(spines))
    for ax, kind, label in ((axes[0], "data_pkts", "data packets"), (axes[1], "credit_pkts", "credits")):
        for j, s in enumerate(spines):
            ax.bar([i + j * width for i in range(len(rows))], [r[s][kind] for r in rows], width, label=s)
        ax.set_xticks([i + width * (len(spines) - 1) / 2 for i in range(len(rows))],
                      [f"{r['src']}→{r['dst']}" for r in rows], fontsize=7, rotation=30)
        ax.set_ylabel(f"{label} per spine")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    save(fig, path)


def plot_fault_timeline(series: Dict[str, List[tuple]], timeline: List[dict], link_bps: float, title: str,
                        path: Path, smooth: int = 4, sample_ms: float = 50) -> None:
    """Per-flow throughput (Mbit/s, moving average over `smooth` samples) over time, one
    panel per spine the flows are pinned to, with the faults marked: shaded while a
    link is down, a switch is being restarted and reconciled, or the controller is gone."""
    faults = [e for e in timeline if "fault" in e]
    t_ref = faults[0]["t"] if faults else min((r[0][0] for r in series.values() if r), default=0.0)
    groups: Dict[str, List[str]] = {}
    for key in sorted(series):
        groups.setdefault(key.rsplit(" via ", 1)[-1], []).append(key)
    fig, axes = plt.subplots(len(groups) or 1, 1, figsize=(10, 2.6 * max(1, len(groups)) + 0.8), sharex=True,
                             squeeze=False)
    styles = {"flexpass": "-", "expresspass": "--", "dctcp": ":"}
    colours = {"link down": "tab:red", "link up": "tab:green", "killed": "tab:purple", "controller": "tab:orange"}
    top = link_bps / 1e6 * 1.05
    for ax, (via, keys) in zip(axes[:, 0], sorted(groups.items())):
        for key in keys:
            rows = series[key]
            if not rows:
                continue
            transport = key.split()[1] if len(key.split()) > 1 else ""
            mbps = [b * 8 / dt / 1e6 for _, dt, b, *_ in rows]
            avg = [sum(mbps[max(0, i - smooth + 1):i + 1]) / len(mbps[max(0, i - smooth + 1):i + 1])
                   for i in range(len(mbps))]
            ax.plot([t - t_ref for t, *_ in rows], avg, linestyle=styles.get(transport, "-"), linewidth=1.3,
                    label=key.split(" via ")[0])
        down_at = None
        for e in faults:
            x = e["t"] - t_ref
            kind = next((k for k in colours if k in e["event"]), "link down")
            ax.axvline(x, color=colours[kind], linewidth=1, alpha=0.8)
            if e["event"] == "link down":
                down_at = x
            elif e["event"] == "link up" and down_at is not None:
                ax.axvspan(down_at, x, color="tab:red", alpha=0.08)
                down_at = None
            elif "reconciled_s" in e:
                ax.axvspan(x, x + e["reconciled_s"], color="tab:purple", alpha=0.12)
            elif "absent_s" in e:
                ax.axvspan(x, x + (e.get("absent_s") or 0), color="tab:orange", alpha=0.08)
        ax.set_ylim(0, top)
        ax.set_ylabel("Mbit/s")
        ax.set_title(f"flows via {via}", fontsize=9, loc="left")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for e in faults:
        axes[0, 0].text(e["t"] - t_ref, top, " " + e["event"], rotation=30, va="bottom", fontsize=7,
                        color=colours[next((k for k in colours if k in e["event"]), "link down")])
    axes[-1, 0].set_xlabel(f"time since the first fault (s); {smooth * sample_ms:g} ms moving average")
    fig.suptitle(title, fontsize=10)
    save(fig, path)


def plot_soak_resources(rows: List[dict], received: List[dict], smooth: int, title: str, path: Path) -> None:
    """Soak: resident memory and CPU share (mean over `smooth` samples) of every
    long-lived process over time (switches solid, host agents dashed, the controller
    dotted; the short incast clients are left out), and flows completed."""
    fig, (ax_m, ax_c, ax_f) = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True,
                                            gridspec_kw={"height_ratios": [3, 3, 1.4]})
    style = {"switch": "-", "agent": "--", "controller": ":"}
    names = sorted({r["process"] for r in rows if "incast" not in r["process"]},
                   key=lambda n: (n.startswith("h"), n))
    for name in names:
        rs = [r for r in rows if r["process"] == name]
        ls = style.get(rs[0]["role"], "-")
        t = [r["t_s"] / 60 for r in rs]
        line, = ax_m.plot(t, [r["rss_kb"] / 1024 for r in rs], linestyle=ls, linewidth=1.2, label=name)
        cpu = [(r["t_s"] / 60, r["cpu_pct"]) for r in rs if r["cpu_pct"] is not None]
        if cpu:
            avg = [sum(c[1] for c in cpu[max(0, i - smooth + 1):i + 1]) / len(cpu[max(0, i - smooth + 1):i + 1])
                   for i in range(len(cpu))]
            ax_c.plot([c[0] for c in cpu], avg, linestyle=ls, linewidth=1.0, color=line.get_color())
    ax_m.set_ylabel("resident memory (MB)")
    ax_m.set_ylim(bottom=0)
    ax_m.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax_m.set_title(title, fontsize=10)
    ax_c.set_ylabel(f"CPU (% of a core,\nmean of {smooth} samples)")
    ax_c.set_ylim(bottom=0)
    done = sorted(r["t_s"] / 60 for r in received if r["kind"] == "flow")
    ax_f.step(done, range(1, len(done) + 1), where="post", color="black", linewidth=1.2)
    ax_f.set_ylabel("flows done")
    ax_f.set_xlabel("time (min)")
    for ax in (ax_m, ax_c, ax_f):
        ax.grid(alpha=0.3)
    save(fig, path)


def plot_queue_depths(rows: List[tuple], names: List[str], queues: List[int], window: tuple, buffer: int,
                      title: str, path: Path) -> None:
    """The bottleneck port's queues over time (kB), the measured window shaded."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    t = [r[0] for r in rows]
    for name, q in zip(names, queues):
        ax.plot(t, [r[1].get(q, 0) / 1e3 for r in rows], label=name, lw=1)
    ax.axvspan(window[0], window[1], color="tab:green", alpha=0.08, label="measured window")
    ax.axhline(buffer / 1e3, color="grey", ls="--", lw=0.8, label="data buffer")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queue depth (kB)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    save(fig, path)

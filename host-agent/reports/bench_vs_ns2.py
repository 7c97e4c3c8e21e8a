"""The model's speed against the FlexPass authors' ns-2 on the same run (make bench-model):
the artifact's large-scale case — its 10 000 web-search flows at load 0.5 on the 192-host
Clos, FlexPass fully deployed (host-agent/experiments/fidelity/ns2-large-scale.toml) — on
the model and, side by side on this machine, on ns-2 through host-agent/fidelity/ns2/clos.tcl
(NS2=path/to/ns). The goal (#24): the model at least 10x faster in wall-clock time. Without
NS2 the ns-2 side is skipped, loudly, and the wall time recorded with the fidelity
reference is printed for orientation only. The model binary is FLEXPASS_BIN (make bench-model:
the Cargo profile sim-fast's, fat LTO; otherwise the release build)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fidelity"))
import fidelity  # noqa: E402

POINT = ["deployment.fraction=1.0", 'switch.profile="flexpass"']
GOAL = 10.0


def run_model(out, extra):
    """One model run of the point; its wall-clock seconds and its flows."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(fidelity.FLEXPASS), "sim", str(fidelity.EXPERIMENTS / "ns2-large-scale.toml"), "--no-sweep", "--out", str(out), "-j", "1"]
    for s in POINT + extra:
        cmd += ["--set", s]
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - t0
    point, flows, _ = fidelity.read_model_run("large-scale", out)
    return wall, point, flows


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="bench-vs-ns2-"))
    out.mkdir(parents=True, exist_ok=True)
    ns2 = os.environ.get("NS2")
    # The flows of the point, from a short model run that stops at once (the model writes
    # its flow list before it runs), are what ns-2 replays.
    _, point, flows = run_model(out / "flows", ["duration_ms=0.001"])
    # Side by side: ns-2 runs on one core while the model runs on the other, so both see the
    # same machine (and the same background load, if any).
    ns2_thread, ns2_wall = None, {}
    if ns2:
        shutil.rmtree(out / "ns2", ignore_errors=True)

        def run_ns2():
            t0 = time.time()
            fidelity.run_ns2_clos(ns2, "large-scale", point, flows, out / "ns2", 1)
            ns2_wall["s"] = time.time() - t0

        ns2_thread = threading.Thread(target=run_ns2)
        ns2_thread.start()
    # The compat run has ns-2's dynamics (one path per destination, the same queues and
    # simulated time), so its ratio is the like-for-like one and the goal is judged on it.
    default_wall, _, model_flows = run_model(out / "model", [])
    compat_wall, _, _ = run_model(out / "model-compat", [f'compat="{fidelity.COMPAT}"'])
    print(f"ns2-large-scale (FlexPass 100 %, {len(model_flows)} flows): model {default_wall:.1f} s wall, "
          f"compat = \"{fidelity.COMPAT}\" {compat_wall:.1f} s wall ({fidelity.FLEXPASS})")
    if not ns2:
        ref = json.loads(fidelity.REFERENCE.read_text()) if fidelity.REFERENCE.exists() else {}
        rec = ref.get("cases", {}).get("large-scale", {})
        walls = [v.get("wall_seconds") for v in rec.values() if v.get("wall_seconds")]
        note = f" (recorded with the reference: {min(walls):.0f}-{max(walls):.0f} s per run, another machine state)" if walls else ""
        print(f"SKIPPED ns-2 side: NS2 not set (the artifact's ns binary, built by hand: docs/fidelity.md){note}")
        return 0
    print("  ns-2 still running on the same flows ...", flush=True)
    ns2_thread.join()
    if "s" not in ns2_wall:
        print("  ns-2 failed (see its output under the bench folder)")
        return 1
    ratio = ns2_wall["s"] / compat_wall
    print(f"  ns-2 {ns2_wall['s']:.1f} s wall on the same flows: the model is {ratio:.1f}x faster in compat mode "
          f"({ns2_wall['s'] / default_wall:.1f}x in the default mode; goal >= {GOAL:.0f}x)")
    result = {"flows": len(model_flows), "model_wall_s": default_wall, "compat_wall_s": compat_wall,
              "ns2_wall_s": ns2_wall["s"], "ratio_compat": ratio, "ratio_default": ns2_wall["s"] / default_wall,
              "goal": GOAL, "load_average": os.getloadavg(), "model_binary": str(fidelity.FLEXPASS)}
    (out / "bench_vs_ns2.json").write_text(json.dumps(result, indent=1) + "\n")
    print("  goal met" if ratio >= GOAL else "  GOAL MISSED")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())

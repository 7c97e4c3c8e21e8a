"""``python -m flexpass_mininet <experiment> [options]`` (root).

Experiments: fig7 (a/b/c), fig8 (incast), fig9 (a/b + starvation), leafspine
(path symmetry), all.  Results go to <out>/<experiment>-<switch>/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flexpass_mininet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["fig7", "fig8", "fig9", "leafspine", "all"])
    ap.add_argument("--switch", default="flexpass_switch", choices=sorted(env.SWITCH_BINARIES),
                    help="flexpass_switch (traffic manager, switch-target/) or stock simple_switch")
    ap.add_argument("--link-mbps", type=float, default=20.0, help="scaled link rate C' (Mbit/s)")
    ap.add_argument("--rtt-us", type=float, default=1000.0,
                    help="base RTT of the emulated path, for the threshold scaling rule (scaling.py)")
    ap.add_argument("--duration", type=float, default=12.0, help="measured seconds of each long-flow run")
    ap.add_argument("--flows", default="8,16,32,48,64", help="fig8: flow counts")
    ap.add_argument("--out", type=Path, default=env.REPO / "results" / "mininet")
    ap.add_argument("--pcap", action="store_true", help="BMv2 writes per-port pcaps into the run directory")
    a = ap.parse_args(argv)
    problems = env.problems(a.switch)
    if problems:
        print("flexpass_mininet: cannot run:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    from . import experiments as ex

    opts = ex.Options(switch=a.switch, link_rate_bps=a.link_mbps * 1e6, base_rtt_s=a.rtt_us / 1e6,
                      duration_s=a.duration, out=a.out, pcap=a.pcap)
    names = ["fig7", "fig9", "fig8", "leafspine"] if a.experiment == "all" else [a.experiment]
    results = {}
    for n in names:
        if n == "fig8":
            results[n] = ex.fig8(opts, flow_counts=tuple(int(x) for x in a.flows.split(",")))
        else:
            results[n] = ex.RUNNERS[n](opts)
        print(f"== {n} ({a.switch}) ==")
        print(json.dumps(results[n], indent=1)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print the model benchmark (make bench-model): the run's speed and peak memory against the
issue's goals (≤ 3 minutes on one core, ≤ 2 GB) and against the authors' ns-2 simulator
(FlexPass artifact appendix: 20 compute-CPU-hours for the 20 runs of Fig. 10, about an hour
per run)."""

import json
import sys

report = json.load(open(sys.argv[1]))
wall, rss_kb = open(sys.argv[2]).read().split()
wall, rss_mb = float(wall), int(rss_kb) / 1024
ns2_seconds = 20 * 3600 / 20
fct = report["fct"]["overall"]
print(f"clos-websearch: {fct['flows']} flows ({fct['incomplete']} incomplete), "
      f"{report['duration_us'] / 1e3:.1f} ms simulated")
print(f"  wall {wall:.1f} s (goal <= 180 s), peak memory {rss_mb:.0f} MB (goal <= 2048 MB)")
print(f"  {report['events']} events, {report['events_per_second'] / 1e6:.2f} M events/s, "
      f"{report['speed'] * 1e3:.2f} simulated ms per wall second")
print(f"  ns-2 (the authors' artifact, ~{ns2_seconds:.0f} s per run) / this run: "
      f"{ns2_seconds / wall:.0f}x")
ok = wall <= 180 and rss_mb <= 2048
print("  goal met" if ok else "  GOAL MISSED")
sys.exit(0 if ok else 1)

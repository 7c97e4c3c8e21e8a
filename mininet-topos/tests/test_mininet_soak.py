"""The soak runner, short (issue #14): root, Mininet, flexpass_switch, P4 build, agent.

Runs experiments/soak.toml (web search over FlexPass, ExpressPass, DCTCP and kernel
TCP, incast bursts, on the leaf-spine) for 20 s of traffic and checks what the
runner reports, the way the 30-minute run is read:

* flows completed (> 0, every transport among them) and every one byte-exact:
  0 corrupted bytes, no flow a sender completed missing at its receiver;
* incast bursts answered;
* a memory and CPU series for every switch, every host's agent and the controller,
  sampled over the whole run, and the files (JSON, CSV, PNG) written.

Skipped with the reason when something is missing (like test_mininet_e2e.py).
"""

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import env  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)


def test_short_soak_reports_byte_exact_flows_and_resource_series(tmp_path):
    from flexpass_mininet import soak

    exp = soak.load_soak("soak", {"duration_s": 20.0, "drain_s": 10.0, "progress_s": 10.0})
    lines = []
    r = soak.run(exp, tmp_path, progress=lines.append)
    print("\n".join(lines))
    print(soak.summary(r))
    s = r["summary"]
    assert s["flows_completed"] > 0
    assert s["byte_exact"] == s["flows_completed"] and s["corrupted_bytes"] == 0, r["corrupted"]
    assert s["lost_flows"] == 0, r["lost"]
    assert set(r["by_transport"]) == {"flexpass", "expresspass", "dctcp", "tcp"}, r["by_transport"]
    assert all(b["flows_received"] > 0 for b in r["by_transport"].values()), r["by_transport"]
    assert s["incast_responses_completed"] > 0 and s["incast_requests_received"] > 0, s
    # A series for every long-lived process, over the whole run (sampled every 2 s).
    need = ["leaf1", "leaf2", "spine1", "spine2", "controller"] + [f"h{i} serve" for i in range(1, 5)]
    for name in need:
        p = r["processes"][name]
        assert p["samples"] >= 0.6 * exp.duration_s / exp.sample_s, (name, p)
        assert p["rss_peak_kb"] > 1000 and p["cpu_s_total"] > 0, (name, p)
    assert any("/20 s: flows received" in l for l in lines), lines  # progress lines
    run_dir = tmp_path / f"{exp.name}-{exp.switch}"
    with open(run_dir / "resources.csv") as f:
        rows = list(csv.DictReader(f))
    assert {row["process"] for row in rows} >= set(need)
    assert (run_dir / "resources.png").stat().st_size > 10_000
    assert (run_dir / "result.json").is_file() and (run_dir / "flows.csv").is_file()

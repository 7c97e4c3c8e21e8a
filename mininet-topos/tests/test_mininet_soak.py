"""The soak, short (issue #14): root, Mininet, flexpass_switch, P4 build, agent.

Runs experiments/soak.toml — the model's schema: web search over FlexPass, ExpressPass,
DCTCP and kernel TCP, incast bursts cycling the transports, on the leaf-spine — through
`flexpass emulate` with the resident controller, for 20 s of arrivals (duration_ms = 800),
and checks what a 30-minute run is read for:

* flows of every transport completed, every one byte-exact (the receiver's SHA-256 is
  the sender's), none lost or failed;
* the incast bursts answered;
* a memory and CPU series for every switch, every host's agent and the controller over
  the whole run, and the files (JSON, CSV, PNG) written.

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

SOAK = str(env.REPO / "mininet-topos" / "experiments" / "soak.toml")


def test_short_soak_reports_byte_exact_flows_and_resource_series(tmp_path):
    from flexpass_mininet import emulate as em
    from flexpass_mininet.resources import RESOURCE_SAMPLE_S, summary_lines

    r = em.resolve(SOAK, ["duration_ms=800"])
    (plan,) = [em.make_plan(r, p, 20.0, 1000.0) for p in r["points"]]
    res = em.run(plan, "flexpass_switch", tmp_path, controller=True)
    print("\n".join(summary_lines(res["processes"])))
    bt = res["by_transport"]
    print(bt)
    assert set(bt) == {"flexpass", "expresspass", "dctcp", "tcp"}, bt
    for t, b in bt.items():
        assert b["completed"] > 0 and b["failed"] == 0, (t, b, [x for x in res["flows"] if x["error"]][:5])
    # Byte-exact: a completed flow's receiver reported the sender's size and SHA-256.
    assert not [x for x in res["flows"] if x["error"] and "SHA-256" in x["error"]]
    incast = [x for x in res["flows"] if x["kind"] == "incast"]
    assert incast and all(x["fct_us"] is not None for x in incast), incast
    assert res["checks"], "the resident controller's final checks"
    # A series for every long-lived process, over the whole run (sampled every 2 s).
    need = ["leaf0", "leaf1", "spine0", "spine1", "controller"] + [f"h{i} serve" for i in range(4)]
    span = res["wall_seconds"]
    for name in need:
        p = res["processes"][name]
        assert p["samples"] >= 0.4 * span / RESOURCE_SAMPLE_S, (name, p, span)
        assert p["rss_peak_kb"] > 1000 and p["cpu_s_total"] > 0, (name, p)
    with open(tmp_path / "resources.csv") as f:
        rows = list(csv.DictReader(f))
    assert {row["process"] for row in rows} >= set(need)
    assert (tmp_path / "resources.png").stat().st_size > 10_000
    assert (tmp_path / "result.json").is_file() and (tmp_path / "flows.csv").is_file()

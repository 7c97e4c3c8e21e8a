"""PASE's testbed (SIGCOMM'14 Fig. 13(b)) through flexpass_switch, short (issue #26): root,
Mininet, flexpass_switch, P4 build, agent.

Runs mininet-topos/experiments/pase-testbed-quick.toml (host-agent/experiments/pase/
pase-testbed.toml at one load): 9 clients send flows of uniform 100–500 kB (model size) to
1 server through one switch with eight strict priorities and ECN per queue (profile ppt),
at load 0.5 of the server's link,
once with DCTCP and once with PASE, the same flows (the model draws them). PASE's agents ask
the rack arbitrator, a `flexpass arbitrator` process the runner starts on a host of its own
on the switch (flexpass_mininet/pase.py).
Checks, on real packets:

* every flow of both transports completed byte-exact (each flow's SHA-256 at both ends);
* PASE's arbitration ran: the hosts (delegation's children) reported their demand and the
  arbitrator answered with shares; at the bottleneck DCTCP's data used one queue and
  PASE's several priority queues (the switch's per-queue counters).

Not asserted: any AFCT relation. The paper's "PASE's AFCT 50–60 % below DCTCP's" does not
hold reliably here: in fifteen runs on the shared 2-core VM PASE's AFCT was 0.02–1.91 ×
DCTCP's (below it in eleven), and once PASE collapsed (99 ×: its lower queues' flows timing
out and backing off). docs/results-pase.md, "The testbed of Fig. 13(b)", has the runs; the
model's gain at this load is 18 %. The AFCTs are printed.

Skipped with the reason when something is missing (like test_mininet_e2e.py).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexpass_mininet import emulate as em  # noqa: E402
from flexpass_mininet import env  # noqa: E402

_problems = env.problems("flexpass_switch")
SKIP = "; ".join(_problems)
pytestmark = pytest.mark.skipif(bool(SKIP), reason=SKIP)

QUICK = env.REPO / "mininet-topos" / "experiments" / "pase-testbed-quick.toml"


def test_pase_and_dctcp_on_the_testbed_are_byte_exact_and_pase_uses_its_queues(tmp_path):
    r = em.resolve(str(QUICK), [])
    # At the file's [emulation] scale (C' 50 Mbit/s: pase-testbed.toml says why).
    plans = [em.make_plan(r, p) for p in r["points"]]
    assert plans[0].scaled.link_rate_bps == 50e6
    runs = {}
    for i, plan in enumerate(plans):
        res = em.run(plan, "flexpass_switch", tmp_path / str(i))
        (t,) = {f["transport"] for f in res["flows"]}
        runs[t] = res
        b = res["by_transport"][t]
        print(t, b, res.get("pase"))
        # Byte-exact and nothing lost: every flow's receiver reported its size and SHA-256.
        assert b["flows"] == 300 and (b["completed"], b["failed"]) == (300, 0), \
            [x for x in res["flows"] if x["error"]][:5]
    assert set(runs) == {"dctcp", "pase"}
    arb = runs["pase"]["pase"]["arbitrator"]
    # Delegation: the hosts (children) reported their demand and got shares of the link.
    assert arb and arb["reports"] > 0 and arb["responses"] > 0 and arb["children_peak"] > 1, arb
    # At the bottleneck (the server's port) DCTCP's data is in one queue, PASE's in several:
    # the arbitrator's queues on the wire (DSCP) and in the switch.
    used = {t: [q["queue"] for q in runs[t]["bottleneck"]["queues"] if q["dequeued_pkts"] > 0] for t in runs}
    assert len(used["dctcp"]) == 1 and len(used["pase"]) > 1, used
    d, p = (runs[t]["by_transport"][t]["avg_fct_us"] for t in ("dctcp", "pase"))
    print(f"AFCT: PASE {p / 1e3:.2f} ms, DCTCP {d / 1e3:.2f} ms ({p / d:.2f})")

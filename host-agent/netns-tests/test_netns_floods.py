"""The host agent under floods, in network namespaces (issue 14, "Agent under floods").

Topology and helpers: floodnet.py. The flood generator (flood_gen.py) sends prebuilt frames
from a raw socket (PACKET_TX_RING): spoofed HELLOs and CREDIT_REQUESTs from random sources
of 198.18.0.0/15 towards `flexpass agent` on h3, or forged CREDITs towards a sender on h1
(from the router, which sees the sender's HELLO and so its flow id).

Asserted: legitimate flows complete byte-exact during the flood, the half-open table and the
credits of half-open flows stay within their bounds, no spoofed flow reaches the
application, the agent's resident memory stays bounded; a credit flood cannot make a sender
send faster than its link. Reported: the flood rate achieved and received, the FCT penalty.
Short by design (about 30 s); bench_floods.py is the longer measurement (docs/reliability.md).

Needs root; skips loudly otherwise.
"""

import json
import os
import time

import pytest

import floodnet as fn

SKIP = fn.skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"SKIPPED netns flood tier: {SKIP}")

TRANSPORTS = ["flexpass", "expresspass", "dctcp"]
SIZE = 200_000
MESSAGES = 4
FLOOD_RATE = int(os.environ.get("FLOOD_RATE", 100_000))


@pytest.fixture
def net():
    n = fn.Net()
    try:
        n.up()
        yield n
    finally:
        n.down()


def run_legit(net, sha):
    """The legitimate flows (every transport, MESSAGES flows of SIZE each) through the agent,
    checked byte-exact on the accepting side; returns the send records."""
    acc = fn.Acceptor(net.sock, len(TRANSPORTS) * MESSAGES)
    acc.start()
    time.sleep(0.1)
    sent = fn.legit_flows(net, TRANSPORTS, SIZE, MESSAGES)
    acc.join(timeout=60)
    assert not acc.is_alive(), f"accepting side still waiting: {len(acc.flows)} flows"
    assert acc.error is None, acc.error
    assert len(acc.flows) == len(sent) == len(TRANSPORTS) * MESSAGES
    for f in acc.flows:
        assert f["bytes"] == SIZE and f["sha256"] == sha, f
        assert f["peer"].startswith(net.ip["h1"] + ":"), f"a spoofed flow was handed over: {f}"
    assert all(r["sha256"] == sha and r["bytes"] == SIZE for r in sent)
    return sent


def fct_summary(recs):
    out = {}
    for t in TRANSPORTS:
        xs = [r["fct_us"] / 1000 for r in recs if r["transport"] == t]
        out[t] = (fn.percentile(xs, 0.5), max(xs))
    return out


def test_spoofed_hello_and_credit_request_flood(net):
    sha = fn.pattern_sha(SIZE)
    agent = net.agent()
    rss = fn.Sampler(agent.pid)
    rss.start()
    time.sleep(0.2)
    rss0 = fn.rss_kb(agent.pid)
    base = run_legit(net, sha)
    st0 = net.status()["endpoint"]
    drops0 = fn.udp_rcvbuf_errors(net, "h3")

    gen, _ = net.flood("hello", FLOOD_RATE, 9)
    t0 = time.time()
    time.sleep(1.5)  # the half-open table fills, cookies take over
    flood = run_legit(net, sha)
    out, err = gen.communicate(timeout=60)
    elapsed = time.time() - t0
    done = [json.loads(line) for line in out.splitlines() if '"done"' in line]
    assert done, f"generator: {out} {err}"
    g = done[0]
    st = net.status()
    rss.stop.set()
    ep = st["endpoint"]
    received = ep["datagrams_in"] - st0["datagrams_in"]
    drops = fn.udp_rcvbuf_errors(net, "h3") - drops0

    # Bounded state: the half-open table, the flows, no spoofed flow handed over (checked in
    # run_legit), memory.
    max_half_open = 256
    assert ep["half_open_peak"] <= max_half_open, ep
    assert ep["cookies_sent"] > 0, ep
    assert st["flows"]["receivers"] <= max_half_open + len(flood), st["flows"]
    assert st["tables"]["unclaimed"] == 0, st["tables"]
    peak = rss.max()
    assert peak - rss0 < 32 * 1024, f"agent RSS {rss0} → {peak} kB"
    # Bounded credits for half-open flows: 1/8 of the credit rate (0.2 Gbit/s link), plus
    # the bucket's depth.
    credit_rate = fn.RATE_MBIT * 1e6 / (8 * 1622)
    sent_half_open = ep["half_open_credits_sent"] - st0["half_open_credits_sent"]
    assert sent_half_open <= 0.125 * credit_rate * elapsed * 1.2 + 50, ep

    b, f = fct_summary(base), fct_summary(flood)
    report = {
        "flood": {"offered_per_s": g["rate"], "target_per_s": FLOOD_RATE, "sent": g["sent"],
                  "agent_received": received, "agent_received_per_s": round(received / elapsed),
                  "kernel_dropped_rcvbuf": drops},
        "agent": {"rss_kb_before": rss0, "rss_kb_peak": peak, "half_open_peak": ep["half_open_peak"],
                  "cookies_sent": ep["cookies_sent"], "cookies_valid": ep["cookies_valid"],
                  "half_open_expired": ep["half_open_expired"],
                  "half_open_credits_sent": sent_half_open, "unknown_flow": ep["unknown_flow"]},
        "fct_ms_p50_max": {t: {"no_flood": b[t], "flood": f[t]} for t in TRANSPORTS},
    }
    print("\nFLOOD REPORT " + json.dumps(report))
    # The flood must have been one: on the loaded 2-core test machine the generator offers
    # 50–80 k datagrams/s of the 100 k asked (report); at least 100 000 reached the agent.
    assert received >= 100_000, report


def test_credit_flood_against_a_sender_stays_within_its_link(net):
    size = 40_000_000
    sha = fn.pattern_sha(size)
    net.agent()
    acc = fn.Acceptor(net.sock, 1)
    acc.start()
    gen, _ = net.flood("credit", FLOOD_RATE, 6)
    dev = f"{net.p}h1a"
    tx0, t0 = fn.link_tx_bytes(net, "h1", dev), time.time()
    p = net.spawn("h1", "send", "--to", f"{net.ip['h3']}:{fn.PORT}", "--transport", "expresspass",
                  "--size", str(size), "--timeout-s", "60", *fn.NET_ARGS)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    tx1, t1 = fn.link_tx_bytes(net, "h1", dev), time.time()
    gout, _ = gen.communicate(timeout=60)
    acc.join(timeout=60)
    assert acc.error is None and acc.flows and acc.flows[0]["sha256"] == sha, (acc.error, acc.flows)
    rec = fn.records(out)[0]
    assert rec["sha256"] == sha
    stats = json.loads(err.strip().splitlines()[-1].split("flexpass send: ", 1)[1])
    g = [json.loads(line) for line in gout.splitlines() if line.startswith("{")]
    assert any(e.get("event") == "hello" for e in g), g
    done = [e for e in g if e.get("event") == "done"][0]
    # Wire rate of everything h1 sent while the flow ran (data frames: +38 B Ethernet
    # overhead on top of what the veth counts, 14 of which it does count).
    secs = t1 - t0
    rate = (tx1 - tx0) * (1538 / 1514) * 8 / secs
    report = {"forged_credits_per_s": done["rate"], "forged_sent": done["sent"],
              "credits_in_rate_limited": stats["credits_in_rate_limited"],
              "sender_wire_mbit_s": round(rate / 1e6, 1), "link_mbit_s": fn.RATE_MBIT,
              "fct_ms": round(rec["fct_us"] / 1000, 1)}
    print("\nCREDIT FLOOD REPORT " + json.dumps(report))
    assert stats["credits_in_rate_limited"] > 0, stats
    assert rate <= fn.RATE_MBIT * 1e6 * 1.05, report

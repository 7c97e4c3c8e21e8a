"""The eBPF edge's credit limit on a real veth pair (root; namespaces this test creates).

`flexpass_nic.py ebpf apply` puts the edge on the sender's veth; the sender offers real
FlexPass CREDITs over UDP at 3x the credit rate for 1 s, with FlexPass data beside them.
The credits that reach the other namespace must be share·C·84/(84+F) (the control plane's
meter, derive.nic_credit_meter) within 3 %, and no data packet may be dropped by the edge.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from edge_env import REPO, sh

import flexpass_ebpf as E
import flexpass_nic as N

TRAFFIC = Path(__file__).resolve().parent / "edge_traffic.py"
NIC = REPO / "nic" / "flexpass_nic.py"


WINDOW_S = 0.5


def busiest(times, window):
    """The most arrivals in (t, t + window] over every arrival t whose window ends in the run."""
    best, j = 0, 0
    for i, t in enumerate(times):
        if t + window > times[-1]:
            break
        while j + 1 < len(times) and times[j + 1] <= t + window:
            j += 1
        best = max(best, j - i)
    return best


@pytest.mark.parametrize("link_mbit, w_q", [(40, 0.5), (100, 0.25)])
def test_credits_leave_at_the_configured_rate_and_data_is_never_dropped(veth_pair, link_mbit, w_q):
    a, b, bpffs = veth_pair
    r = sh(sys.executable, str(NIC), "ebpf", "apply", "--dev", "va", "--link-mbit", str(link_mbit), "--w-q", str(w_q),
           "--no-htb", "--bpffs", bpffs, "--netns", a, check=False)
    assert r.returncode == 0, r.stderr
    cfg = E.EdgeConfig(N.NicConfig(dev="va", link_mbit=link_mbit, w_q=w_q))
    rate_bytes, burst_bytes = cfg.meter()
    credits_per_s = rate_bytes / E.MIN_FRAME_BYTES  # an 18-byte credit is a 60-byte frame here
    seconds, data_per_s = 1.5, 1000
    recv = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, str(TRAFFIC), "recv", "10.9.0.2", "0.5"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "ready"
        sent = json.loads(sh("ip", "netns", "exec", a, sys.executable, str(TRAFFIC), "send", "10.9.0.2",
                             str(seconds), str(3 * credits_per_s), str(data_per_s)).stdout)
        got = json.loads(recv.communicate(timeout=30)[0].strip().splitlines()[-1])
    finally:
        if recv.poll() is None:
            recv.kill()
    with E.EdgeMaps(bpffs, "va") as m:
        c = m.counters()
    times = sorted(got["times"])
    assert len(times) == got["credits"]
    measured = busiest(times, WINDOW_S) / WINDOW_S
    mean = (len(times) - 1) / (times[-1] - times[0])
    print(f"\nC={link_mbit} Mbit/s w_q={w_q}: configured {credits_per_s:.0f} credits/s "
          f"(share·C·84/(84+F)), offered {sent['credits'] / sent['seconds']:.0f}/s, measured {measured:.0f}/s "
          f"({100 * (measured / credits_per_s - 1):+.2f} %) over the busiest {WINDOW_S} s, "
          f"{mean:.0f}/s over the run; data sent {sent['data']}, received {got['data']}; "
          f"edge: {c['events']['credit_dropped']} credits dropped")
    assert sent["credits"] / sent["seconds"] > 2 * credits_per_s  # the edge was loaded
    assert abs(measured / credits_per_s - 1) < 0.03
    assert len(times) <= credits_per_s * (times[-1] - times[0]) + burst_bytes / E.MIN_FRAME_BYTES + 1
    if sent["sched_fifo"]:  # a sender that was not descheduled keeps the whole run at the limit
        assert abs(mean / credits_per_s - 1) < 0.03
    assert got["data"] == sent["data"] == c["classes"]["proactive_data/green"]["packets"]
    assert c["classes"]["credit/green"]["packets"] == got["credits"]
    assert c["events"]["credit_dropped"] == sent["credits"] - got["credits"]
    assert sh(sys.executable, str(NIC), "ebpf", "clear", "--dev", "va", "--bpffs", bpffs, "--netns", a).returncode == 0
    assert "clsact" not in sh("tc", "-n", a, "qdisc", "show", "dev", "va").stdout


def htb_class_packets(ns, dev):
    """classid -> packets sent, from `tc -s class show` (its -j prints no JSON for htb)."""
    out = sh("tc", "-n", ns, "-s", "class", "show", "dev", dev).stdout
    return {m[0]: int(m[1]) for m in re.findall(r"^class htb (\S+) .*\n Sent \d+ bytes (\d+) pkt", out, re.M)}


def test_edge_classifies_into_the_htb_classes_without_u32(veth_pair):
    """`ebpf apply` without --no-htb: flexpass_nic.py's htb port, no u32 filter, and the
    program's skb->priority puts credits in 1:10 and FlexPass data in 1:20."""
    a, b, bpffs = veth_pair
    r = sh(sys.executable, str(NIC), "ebpf", "apply", "--dev", "va", "--link-mbit", "1000", "--bpffs", bpffs,
           "--netns", a, check=False)
    assert r.returncode == 0, r.stderr
    assert "u32" not in sh("tc", "-n", a, "filter", "show", "dev", "va").stdout
    with E.EdgeMaps(bpffs, "va") as m:
        not_ipv4 = m.counters()["events"]["not_ipv4"]
    before = htb_class_packets(a, "va")
    sent = json.loads(sh("ip", "netns", "exec", a, sys.executable, str(TRAFFIC), "send", "10.9.0.2",
                         "0.2", "500", "200").stdout)
    after = htb_class_packets(a, "va")
    grew = {k: after[k] - before.get(k, 0) for k in ("1:10", "1:20", "1:30")}
    with E.EdgeMaps(bpffs, "va") as m:
        not_ipv4 = m.counters()["events"]["not_ipv4"] - not_ipv4
    # Legacy: only what is not IPv4 (the kernel's own neighbour traffic), none of ours.
    assert grew == {"1:10": sent["credits"], "1:20": sent["data"], "1:30": not_ipv4}
    assert sh(sys.executable, str(NIC), "ebpf", "clear", "--dev", "va", "--bpffs", bpffs, "--netns", a).returncode == 0
    assert "htb" not in sh("tc", "-n", a, "qdisc", "show", "dev", "va").stdout


def test_edge_applied_from_the_config_holds_the_control_planes_meter(veth_pair, tmp_path):
    """`ebpf apply --config FILE --nic NAME`: the maps the program reads hold the rate and
    burst the control plane derives for that nics: entry (derive.nic_meter)."""
    import yaml
    from flexpass_cp.config import load_config
    from flexpass_cp.config.derive import nic_meter
    a, b, bpffs = veth_pair
    raw = yaml.safe_load((REPO / "control-plane" / "configs" / "dumbbell.yaml").read_text())
    raw["nics"] = {"sender": {"device": "va", "link_rate": "40Mbps", "w_q": 0.3, "credit_meter_burst_packets": 3,
                              "edge": "ebpf"}}
    path = tmp_path / "nics.yaml"
    path.write_text(yaml.safe_dump(raw))
    r = sh(sys.executable, str(NIC), "ebpf", "apply", "--config", str(path), "--nic", "sender", "--no-htb",
           "--bpffs", bpffs, "--netns", a, check=False)
    assert r.returncode == 0, r.stderr
    cfg = load_config(path)
    with E.EdgeMaps(bpffs, "va") as m:
        got = m.counters()["config"]
    assert (got["credit_rate_bytes_per_s"], got["credit_burst_bytes"]) == nic_meter(cfg, cfg.nic("sender"))
    assert got["credit_burst_bytes"] == 3 * 60 and got["configured"]
    assert sh(sys.executable, str(NIC), "ebpf", "clear", "--dev", "va", "--bpffs", bpffs, "--netns", a).returncode == 0

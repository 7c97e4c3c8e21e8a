"""The eBPF NIC edge (nic/ebpf/flexpass_edge.bpf.c) under BPF_PROG_TEST_RUN.

The program runs in the kernel on crafted frames built from docs/protocol-vectors.json:
the class each message type lands in (the switch's classifier for the FlexPass profile),
the token bucket against the control plane's credit meter (test clock: the program reads
the clock from its config map), and bad input passed untouched and counted (or dropped
as the PNA program does). Root and clang: skipped loudly without them.
"""

import json
import os

import pytest
from edge_env import REPO, ebpf_skip_reason, require_ebpf

import flexpass_ebpf as E
import flexpass_nic as N
from flexpass_cp import frames
from flexpass_cp.config import load_config
from flexpass_cp.config.derive import Derived, nic_credit_meter
from flexpass_cp.config.targets import is_tofino

VECTORS = json.loads((REPO / "docs" / "protocol-vectors.json").read_text())
DSCP = N.DEFAULT_DSCP
# docs/protocol.md §4: the traffic class of each message type.
TYPE_CLASS = {"CREDIT": "credit", "EMULATION": "credit", "PROACTIVE_DATA": "proactive_data",
              "REACTIVE_DATA": "reactive_data"}
# What the switch's classifier gives each class in the FlexPass profile (kind, colour, htb class).
EXPECT = {"credit": ("credit", "green", "1:10"), "proactive_data": ("proactive_data", "green", "1:20"),
          "reactive_data": ("reactive_data", "red", "1:20"), "control": ("control", "green", "1:20"),
          "legacy": ("legacy", "green", "1:30")}
S = 10**9

needs_root = pytest.mark.skipif(ebpf_skip_reason() is not None, reason=f"SKIPPED eBPF edge: {ebpf_skip_reason()}")


def test_edge_meter_is_the_switch_meter():
    """One formula: a BMv2 switch port's credit meter (Derived) and the edge's bucket agree,
    and both are share·C·84/(84+F) in 60-byte minimum credits."""
    cfg = load_config(REPO / "control-plane" / "configs" / "dumbbell.yaml")
    seen = 0
    for sw in cfg.switches.values():
        if is_tofino(sw.target):
            continue
        for port in sw.ports.values():
            d = Derived(cfg, sw, port)
            nic = nic_credit_meter(port.link_rate_bps, d.effective_w_q, cfg.mtu,
                                   port.queues.credit_meter_burst_packets)
            assert nic == (d.meter_cir_bytes_per_s, d.meter_burst_bytes)
            seen += 1
    assert seen
    edge = E.EdgeConfig(N.NicConfig(dev="x", link_mbit=10_000, w_q=0.5, mtu=9000))
    rate, burst = edge.meter()
    assert rate == round(frames.credits_per_second(10e9, 0.5, 9000) * 60) and burst == 120


@pytest.mark.parametrize("bad, field", [(dict(link_mbit=-1), "link-mbit"), (dict(mtu=100), "mtu"),
                                        (dict(dscp={**DSCP, "credit": 99}), "DSCP"),
                                        (dict(link_mbit=1e9), "link-mbit: credit rate")])
def test_bad_edge_config_is_refused_naming_the_key(bad, field):
    with pytest.raises(ValueError, match=field):
        E.EdgeConfig(N.NicConfig(**{"dev": "x", "link_mbit": 1000, **bad})).validate()


def test_program_compiles(tmp_path):
    """clang -O2 -g -target bpf accepts the program with -Wall -Werror (no root needed)."""
    try:
        E.find_clang()
    except E.EdgeError as e:
        pytest.skip(f"SKIPPED eBPF edge compile: {e}")
    obj = E.compile_program(tmp_path / "edge.o")
    assert obj.read_bytes()[:4] == b"\x7fELF"


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("FLEXPASS_BPF_CLANG", raising=False)
    with pytest.raises(E.EdgeError, match="clang not found"):
        E.find_clang()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(E.EdgeError, match="needs root"):
        E.apply(E.EdgeConfig(N.NicConfig(dev="x", link_mbit=1000)))
    with pytest.raises(E.EdgeError, match="no bpf filesystem mounted at /nonexistent"):
        E.pin_dir("/nonexistent", "x")


@pytest.fixture(scope="module")
def edge():
    require_ebpf("eBPF edge")
    cfg = E.EdgeConfig(N.NicConfig(dev="lo", link_mbit=100))
    with E.scratch_edge(cfg, test_clock_ns=S) as (fd, maps):
        yield fd, maps, cfg


def configure(edge, test_clock_ns=S, **kw):
    fd, maps, cfg = edge
    c = E.EdgeConfig(cfg.nic, **kw)
    maps.write(c, test_clock_ns)
    maps.clear_counters()
    return fd, maps


def run(fd, pkt):
    r = E.prog_test_run(fd, pkt)
    return r


@needs_root
@pytest.mark.parametrize("vec", VECTORS["valid"], ids=lambda v: v["name"])
def test_each_message_type_lands_in_its_class(edge, vec):
    fd, maps = configure(edge)
    msg = bytes.fromhex(vec["hex"])
    cls = TYPE_CLASS.get(vec["header"]["type_name"], "control")
    pkt = E.frame(DSCP[cls] << 2 | 2, msg)
    r = run(fd, pkt)
    kind, color, htb = EXPECT[cls]
    assert (r.retval, r.priority, r.data) == (E.TC_ACT_OK, E.htb_priority(htb), pkt)
    c = maps.counters()
    assert c["classes"] == {f"{kind}/{color}": {"packets": 1, "ip_bytes": len(pkt) - 14}}
    assert c["events"]["flexpass_seen"] == 1 and c["events"]["bad_flexpass"] == 0


@needs_root
def test_dscp_decides_as_at_the_switch(edge):
    """The classifier keys on DSCP only: a FlexPass message in DSCP 0 is legacy, any UDP in
    the proactive DSCP is FlexPass data, unassigned DSCPs are legacy, ARP passes as legacy."""
    fd, maps = configure(edge)
    data = bytes.fromhex(next(v["hex"] for v in VECTORS["valid"] if v["header"]["type_name"] == "PROACTIVE_DATA"))
    cases = [(E.frame(0, data), "legacy"), (E.frame(DSCP["proactive_data"] << 2, b"dns?", 5353, 53), "proactive_data"),
             (E.frame(17 << 2, bytes(20), proto=6), "legacy"), (E.frame(DSCP["control"] << 2, bytes(20), proto=6), "control")]
    for pkt, cls in cases:
        r = run(fd, pkt)
        assert (r.retval, r.priority) == (E.TC_ACT_OK, E.htb_priority(EXPECT[cls][2])), cls
    arp = bytes(6 * [255]) + bytes(6 * [4]) + b"\x08\x06" + bytes(28)
    r = run(fd, arp)
    assert (r.retval, r.priority, r.data) == (E.TC_ACT_OK, E.htb_priority("1:30"), arp)
    c = maps.counters()
    assert c["events"]["not_ipv4"] == 1
    assert c["classes"]["legacy/green"]["packets"] == 3 and c["classes"]["control/green"]["packets"] == 1


def pna_verdict(msg: bytes):
    """What the PNA parser and main control make of a FlexPass message in a UDP datagram
    whose length is right: the event, or None."""
    if len(msg) < 8:
        return "parser_error"
    version, mtype, length = msg[0] >> 4, msg[0] & 15, int.from_bytes(msg[2:4], "big")
    if version == 1 and mtype == 1 and len(msg) < 12:
        return "parser_error"
    if version != 1 or length != len(msg):
        return "bad_flexpass"
    return None


@needs_root
@pytest.mark.parametrize("drop", [False, True], ids=["pass", "drop_malformed"])
def test_bad_input_is_counted_and_passed_untouched_or_dropped(edge, drop):
    fd, maps = configure(edge, drop_malformed=drop)
    want = {"parser_error": 0, "bad_flexpass": 0}
    flagged_kinds = set()
    for vec in VECTORS["invalid"]:
        msg = bytes.fromhex(vec["hex"])
        pkt = E.frame(DSCP["control"] << 2, msg)
        verdict = pna_verdict(msg)
        r = run(fd, pkt)
        if verdict:
            want[verdict] += 1
            flagged_kinds.add(vec["error"])
            assert r.retval == (E.TC_ACT_SHOT if drop else E.TC_ACT_OK), vec["name"]
        else:
            assert r.retval == E.TC_ACT_OK, vec["name"]
        assert r.data == pkt  # never rewritten
    # Frames cut short: in the UDP header, in the FlexPass header, in a CREDIT's body, in a
    # TCP header (BPF_PROG_TEST_RUN refuses IPv4 frames shorter than Ethernet + IPv4).
    full = E.frame(DSCP["control"] << 2, bytes.fromhex(VECTORS["valid"][0]["hex"]))
    tcp = E.frame(0, bytes(20), proto=6)
    for short in (full[:36], full[:45], full[:53], tcp[:40]):
        r = run(fd, short)
        assert (r.retval, r.data) == ((E.TC_ACT_SHOT if drop else E.TC_ACT_OK), short)
        want["parser_error"] += 1
    assert {"UnsupportedVersion", "LengthMismatch", "Truncated"} <= flagged_kinds
    ev = maps.counters()["events"]
    assert {k: ev[k] for k in want} == want
    assert ev["malformed_dropped"] == (sum(want.values()) if drop else 0)


@needs_root
@pytest.mark.parametrize("how", ["forged version", "cut in its body"])
def test_bad_credit_cannot_bypass_the_bucket(edge, how):
    """A bad FlexPass header or a truncated CREDIT in the credit DSCP, passed, is still policed."""
    fd, maps = configure(edge)
    good = E.frame(DSCP["credit"] << 2, bytes.fromhex("110000120102030400000001000000000000"))
    bad = (E.frame(DSCP["credit"] << 2, bytes.fromhex("210000120102030400000001000000000000"))
           if how == "forged version" else good[:53])
    verdicts = [run(fd, bad).retval for _ in range(5)]
    assert verdicts == [E.TC_ACT_OK] * 2 + [E.TC_ACT_SHOT] * 3  # burst of 2 credits, no time passes
    ev = maps.counters()["events"]
    assert ev["bad_flexpass" if how == "forged version" else "parser_error"] == 5
    assert ev["credit_dropped"] == 3


@needs_root
def test_emulation_packets_are_left_to_the_agent(edge):
    """FlashPass EMULATION packets in the credit DSCP pass without the bucket (the agent's
    emulation queue limits them: one limiter), in the credit class; credits beside them
    are still policed at the burst, and a forged EMULATION header (wrong length) is policed."""
    fd, maps = configure(edge)
    emu = E.frame(DSCP["credit"] << 2, bytes.fromhex("1a0000120000001600000007075bcd150000"))
    credit = E.frame(DSCP["credit"] << 2, bytes.fromhex("110000120102030400000001000000000000"))
    forged = E.frame(DSCP["credit"] << 2, bytes.fromhex("1a0000130000001600000007075bcd150000"))
    assert [run(fd, emu).retval for _ in range(20)] == [E.TC_ACT_OK] * 20  # no time passes
    assert [run(fd, credit).retval for _ in range(4)] == [E.TC_ACT_OK] * 2 + [E.TC_ACT_SHOT] * 2
    assert run(fd, forged).retval == E.TC_ACT_SHOT
    c = maps.counters()
    assert c["events"]["credit_dropped"] == 3
    assert c["classes"]["credit/green"]["packets"] == 20 + 2


@needs_root
@pytest.mark.parametrize("padding", [6, 14])
def test_bucket_passes_the_configured_rate_and_never_drops_data(edge, padding):
    """Credits offered at 3x the rate for 1 s of the test clock: the bucket passes rate·T +
    burst bytes' worth (a credit costs its frame, 60 or 68 bytes), every data packet passes."""
    fd, maps = configure(edge)
    rate, burst = edge[2].meter()
    msg = bytes([0x11, 0, 0, 12 + padding]) + bytes(4) + (5).to_bytes(4, "big") + bytes(padding)
    credit = E.frame(DSCP["credit"] << 2, msg)
    data = E.frame(DSCP["proactive_data"] << 2, bytes.fromhex(
        next(v["hex"] for v in VECTORS["valid"] if v["header"]["type_name"] == "PROACTIVE_DATA")))
    cost = max(len(credit), 60)
    offered = 3 * rate // cost  # credits per second
    passed = data_ok = 0
    for i in range(offered):
        maps.set_clock(S + i * S // offered)
        passed += run(fd, credit).retval == E.TC_ACT_OK
        if i % 4 == 0:
            data_ok += run(fd, data).retval == E.TC_ACT_OK
    expected = (rate * (offered - 1) / offered + burst) / cost
    assert abs(passed - expected) <= 1.5, (passed, expected)
    c = maps.counters()
    assert c["events"]["credit_dropped"] == offered - passed
    assert data_ok == c["classes"]["proactive_data/green"]["packets"] == (offered + 3) // 4


@needs_root
def test_per_packet_cost_is_measured(edge):
    """BPF_PROG_TEST_RUN repeat: a mean in ns per packet the kernel reports (a sanity bound:
    the program is a few map lookups, far below a microsecond)."""
    fd, _maps = configure(edge, test_clock_ns=0)
    data = E.frame(DSCP["proactive_data"] << 2, bytes.fromhex("12000034") + bytes(48))
    r = E.prog_test_run(fd, data, repeat=100_000)
    assert r.retval == E.TC_ACT_OK and 0 < r.duration_ns < 5_000
    print(f"eBPF edge, proactive data: {r.duration_ns} ns/packet")


@needs_root
def test_random_frames_pass_unchanged_or_are_policed(edge):
    """Random bytes behind an Ethernet/IPv4/UDP header to the FlexPass port (a fuzz pass in
    the kernel): the program returns OK or, for the credit DSCP, SHOT; it never rewrites."""
    import random
    rng = random.Random(27)
    fd, maps = configure(edge)
    shot = 0
    for _ in range(2000):
        tos = rng.choice([DSCP["credit"] << 2, DSCP["proactive_data"] << 2, rng.randrange(256)])
        pkt = E.frame(tos, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))))
        pkt = pkt[:rng.randrange(34, len(pkt) + 1)]
        r = run(fd, pkt)
        assert r.data == pkt and r.retval in (E.TC_ACT_OK, E.TC_ACT_SHOT)
        if r.retval == E.TC_ACT_SHOT:
            assert tos >> 2 == DSCP["credit"]
            shot += 1
    assert maps.counters()["events"]["credit_dropped"] == shot


@needs_root
def test_credits_are_counted_per_flow(edge):
    """Passed credits per (source, destination, flow_id), the PNA program's flow_credits;
    dropped credits and other kinds are not counted."""
    fd, maps = configure(edge)
    def credit(flow_id, src):
        pkt = bytearray(E.frame(DSCP["credit"] << 2, bytes([0x11, 0, 0, 18]) + flow_id.to_bytes(4, "big") + bytes(10)))
        pkt[26:30] = bytes(src)
        return bytes(pkt)
    sent = {(1, (10, 0, 0, 1)): 5, (2, (10, 0, 0, 1)): 3, (1, (10, 0, 0, 9)): 2}
    now = S
    for (flow_id, src), n in sent.items():
        for _ in range(n):
            now += S  # a full bucket each time: every credit passes
            maps.set_clock(now)
            assert run(fd, credit(flow_id, src)).retval == E.TC_ACT_OK
    maps.set_clock(now + S)
    for _ in range(4):  # a full bucket and no time passing: 2 pass (the burst), 2 are dropped
        run(fd, credit(7, (10, 0, 0, 1)))
    run(fd, E.frame(DSCP["proactive_data"] << 2, bytes.fromhex("12000024") + (9).to_bytes(4, "big") + bytes(28)))
    want = {(".".join(map(str, src)), "10.0.0.2", f): n for (f, src), n in sent.items()}
    want[("10.0.0.1", "10.0.0.2", 7)] = 2
    assert maps.flows() == want
    assert maps.counters()["events"]["credit_dropped"] == 2

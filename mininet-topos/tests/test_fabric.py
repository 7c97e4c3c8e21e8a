"""Topologies → control-plane configs, and the scaling rule (no root, no Mininet)."""

import ipaddress
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "control-plane"))

from flexpass_cp.config import parse_config  # noqa: E402
from flexpass_cp.config.entries import switch_entries  # noqa: E402
from flexpass_cp.config.queues import tm_settings  # noqa: E402
from flexpass_mininet.fabric import dumbbell, incast, leaf_spine  # noqa: E402
from flexpass_mininet.scaling import FRAME, Scaled  # noqa: E402

SC = Scaled(20e6, 1e-3)


def _route(cfg, sw, host_ip):
    for r in cfg["switches"][sw]["routes"]:
        if ipaddress.ip_network(r["prefix"]) == ipaddress.ip_network(f"{host_ip}/32"):
            return r
    raise AssertionError(f"no route to {host_ip} on {sw}")


@pytest.mark.parametrize("fab", [dumbbell(2), incast(8), leaf_spine()], ids=lambda f: f.name)
@pytest.mark.parametrize("target", ["flexpass_switch", "simple_switch"])
def test_every_switch_config_validates_and_routes_every_host(fab, target):
    raw = fab.control_plane_config(SC, target)
    cfg = parse_config(raw)  # raises ConfigError with the field path if anything is off
    for sname in fab.switches:
        assert switch_entries(cfg, sname)
        for h in fab.hosts.values():
            _route(raw, sname, h.ip)
        if target == "flexpass_switch":
            assert len(tm_settings(cfg, sname)) == len(cfg.switch(sname).ports)


def test_dumbbell_ports_and_next_hop_macs():
    f = dumbbell(2)
    raw = f.control_plane_config(SC, "flexpass_switch")
    s1 = raw["switches"]["s1"]
    assert sorted(s1["ports"]) == [1, 2, 3]
    nh = s1["next_hops"]["h3"]
    assert nh["port"] == 3 and nh["dmac"] == f.hosts["h3"].mac
    # A host sends every frame to its switch port's MAC (static ARP).
    assert f.first_hop_mac("h1") == f.switches["s1"].port_mac(1)


def test_leaf_spine_uses_ecmp_across_spines_with_the_same_member_order_on_every_leaf():
    f = leaf_spine(spines=2, leaves=2, hosts_per_leaf=2)
    raw = f.control_plane_config(SC, "flexpass_switch")
    # leaf1 reaches h3 (on leaf2) over both spines; leaf2 reaches h1 over both spines.
    g1 = raw["switches"]["leaf1"]["ecmp_groups"][_route(raw, "leaf1", f.hosts["h3"].ip)["ecmp_group"]]
    g2 = raw["switches"]["leaf2"]["ecmp_groups"][_route(raw, "leaf2", f.hosts["h1"].ip)["ecmp_group"]]
    assert len(g1) == len(g2) == 2
    cfg = parse_config(raw)
    # Symmetric ECMP needs member i of both leaves' groups to be the same spine, so the
    # symmetric hash picks the same spine for a flow and its reverse (ExpressPass §3.1).
    spines_of = lambda leaf, group: [f.neighbours(leaf)[[p for p, _, _ in f.neighbours(leaf)].index(  # noqa: E731
        cfg.switch(leaf).next_hops[m].port)][1] for m in cfg.switch(leaf).ecmp_groups[group]]
    assert spines_of("leaf1", _route(raw, "leaf1", f.hosts["h3"].ip)["ecmp_group"]) == \
        spines_of("leaf2", _route(raw, "leaf2", f.hosts["h1"].ip)["ecmp_group"]) == ["spine1", "spine2"]
    # Same-leaf hosts are one hop: no group.
    assert "next_hop" in _route(raw, "leaf1", f.hosts["h2"].ip)


def test_scaling_keeps_threshold_order_and_floors():
    for rate, rtt in [(20e6, 1e-3), (1e9, 50e-6), (10e9, 50e-6), (5e6, 2e-3)]:
        s = Scaled(rate, rtt)
        assert s.ecn_threshold >= 4 * FRAME
        assert s.red_threshold >= s.ecn_threshold + 3 * FRAME
        assert s.buffer >= s.red_threshold + 8 * FRAME
    paper = Scaled(10e9, 50e-6)
    assert (paper.ecn_threshold, paper.red_threshold) == (60_000, 100_000)  # the testbed values
    big = Scaled(1e9, 1e-3)  # BDP twice the testbed's: thresholds scale with it
    assert big.ecn_threshold == 120_000 and big.red_threshold == 200_000


def test_scaled_config_reaches_the_tm_in_bytes():
    f = dumbbell(2)
    cfg = parse_config(f.control_plane_config(SC, "flexpass_switch"))
    (port3,) = [p for p in tm_settings(cfg, "s1") if p.port == 3]
    q = {x.queue: x for x in port3.queues}
    assert q[5].red_threshold == SC.red_threshold and q[5].ecn_threshold == SC.ecn_threshold
    assert q[5].weight == q[6].weight == 0.5
    assert q[7].shaper_rate_bps == pytest.approx(0.5 * 20e6 * 84 / (84 + 1538))


# -- network faults (issue #14): hashing, symmetry check, experiment files ------------------

def test_crc16_is_bmv2s_and_the_selector_hash_is_symmetric():
    from flexpass_mininet.fabric import crc16, ecmp_member_index

    assert crc16(b"123456789") == 0xBB3D  # CRC-16/ARC check value (BMv2 "crc16")
    for port in range(20000, 20064):
        fwd = ecmp_member_index("10.0.0.1", "10.0.0.3", port, 7890, 2)
        assert fwd == ecmp_member_index("10.0.0.3", "10.0.0.1", 7890, port, 2)
    assert {ecmp_member_index("10.0.0.1", "10.0.0.3", p, 7890, 2) for p in range(20000, 20016)} == {0, 1}


def test_asymmetric_pairs_spots_a_one_sided_group():
    from flexpass_cp.config.forwarding import member_ids
    from flexpass_mininet.fabric import asymmetric_pairs, ecmp_paths

    f = leaf_spine()
    cfg = parse_config(f.control_plane_config(SC, "flexpass_switch"))
    groups, routes = {}, {}
    for s, k in (("leaf1", 1), ("leaf2", 2)):  # leafk is port k of every spine
        mids = member_ids(cfg.switch(s))
        groups[s] = {1: (mids[f"spine1-p{k}"], mids[f"spine2-p{k}"])}
        routes[s] = {h.ip: ("member", mids[h.name]) if h.name in mids else ("group", 1) for h in f.hosts.values()}
    paths = ecmp_paths(f, cfg, groups, routes)
    assert paths["leaf1"]["h3"] == paths["leaf2"]["h1"] == ["spine1", "spine2"]
    assert asymmetric_pairs(f, paths) == []
    groups["leaf2"][1] = groups["leaf2"][1][1:]  # leaf2 dropped spine1, leaf1 did not
    bad = asymmetric_pairs(f, ecmp_paths(f, cfg, groups, routes))
    assert bad and "h1->h3 via ['spine1', 'spine2'] but h3->h1 via ['spine2']" in bad


def test_recovery_is_the_longest_empty_run_after_the_fault():
    from flexpass_mininet.faults import gap

    rows = [(10.0 + 0.05 * i, 0.05, 0 if 4 <= i < 12 else 1000) for i in range(40)]
    assert gap(rows, 10.1, 11.6) == pytest.approx(0.4)
    assert gap(rows, 10.1, 10.32) == pytest.approx(0.2)  # only intervals starting in the window (4 of 8)
    assert gap(rows, 12.0, 12.5) == 0

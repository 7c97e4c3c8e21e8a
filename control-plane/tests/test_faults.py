"""Network faults in the control plane (issue #14), without BMv2.

* Links out of service: which entities change on EVERY switch (groups shrink
  by a MODIFY keeping the deterministic member order on every leaf, routes with
  no usable next hop are withdrawn, member ids never change), and back.
* The link state file (link-down / link-up, either end's name, idempotent).
* Over real gRPC against a P4Runtime server with PI's semantics
  (fake_p4runtime.py): apply is idempotent and reconciles a restarted switch;
  mastership after a controller restart, a live holder of our election id, a
  lower id, and takeover; link-down/up through the CLI; the resident controller
  (flexpass-ctl run): link changes, a switch restart, its own restart.
"""

import json
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from flexpass_cp.config import ConfigError, parse_config
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.config.forwarding import member_ids, usable_next_hops
from flexpass_cp.config.topology import resolve_link, with_down_links
from flexpass_cp.entities import DELETE, INSERT, MODIFY, ActionProfileGroup, TableEntry, Update, plan_updates

from test_apply_diff import FakeSwitch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "mininet-topos"))
from flexpass_mininet.fabric import leaf_spine  # noqa: E402
from flexpass_mininet.scaling import Scaled  # noqa: E402

SC = Scaled(20e6, 1e-3)


def fabric_config(spines=2, leaves=2, hosts_per_leaf=2, **addrs):
    f = leaf_spine(spines, leaves, hosts_per_leaf)
    raw = f.control_plane_config(SC, "flexpass_switch")
    for name, addr in addrs.items():
        raw["switches"][name]["grpc_addr"] = addr
    return f, raw


def ip(f, h):
    return f"{f.hosts[h].ip}/32"


def spines_of(cfg, f, switch, prefix):
    """The spines a switch's usable next hops for `prefix` lead to, in group order."""
    sw = cfg.switch(switch)
    out = []
    for name in usable_next_hops(cfg, switch, prefix):
        port = sw.next_hops[name].port
        out.append(next(nb for p, nb, _ in f.neighbours(switch) if p == port))
    return out


# ---------------------------------------------------------------- pure: links and entities

def test_link_names_resolve_to_both_ends():
    f, raw = fabric_config()
    cfg = parse_config(raw)
    assert resolve_link(cfg, "leaf1:spine1") == resolve_link(cfg, "spine1:1") == \
        resolve_link(cfg, "leaf1:3") == (("leaf1", 3), ("spine1", 1))
    assert resolve_link(cfg, "leaf1:1") == (("leaf1", 1),)  # a host link: one switch end
    for bad, msg in (("leaf9:1", "no switch"), ("leaf1:9", "no port 9"), ("leaf1:nope", "no port named"),
                     ("leaf1", "switch:port")):
        with pytest.raises(ConfigError, match=msg):
            resolve_link(cfg, bad)
    raw["down_links"] = ["leaf1:spine7"]
    with pytest.raises(ConfigError, match=r"down_links\[0\].*no port named 'spine7'"):
        parse_config(raw)


def test_spine_link_down_shrinks_the_groups_of_every_leaf_and_nothing_else():
    f, raw = fabric_config()
    up = parse_config(raw)
    down = with_down_links(up, ["leaf1:spine1"])
    writes = {s: plan_updates(switch_entries(down, s), switch_entries(up, s)) for s in up.switches}
    # Minimal: one group MODIFY per leaf (members stay), the two routes of spine1 that
    # lost their only next hop withdrawn; spine2 untouched.
    assert [(u.op, u.entity.kind) for u in writes["leaf1"]] == [(MODIFY, "group")]
    assert [(u.op, u.entity.kind) for u in writes["leaf2"]] == [(MODIFY, "group")]
    assert sorted((u.op, u.entity.kind) for u in writes["spine1"]) == [(DELETE, "table_entry")] * 2
    assert writes["spine2"] == []
    withdrawn = {dict(u.entity.match)["dst_addr"] for u in writes["spine1"]}
    assert withdrawn == {(int.from_bytes(bytes(map(int, f.hosts[h].ip.split("."))), "big"), 32)
                         for h in ("h1", "h2")}
    # Symmetry: both directions of a leaf1<->leaf2 flow now hash over the same spines.
    assert spines_of(down, f, "leaf1", ip(f, "h3")) == spines_of(down, f, "leaf2", ip(f, "h1")) == ["spine2"]
    # Member ids (and so BMv2 member handles, the selector's order) never change.
    mids = lambda c, s: [e for e in switch_entries(c, s) if e.kind == "member"]  # noqa: E731
    assert all(mids(up, s) == mids(down, s) for s in up.switches)
    # And back: the exact original entities.
    for s in up.switches:
        sw = FakeSwitch()
        sw.write(plan_updates(switch_entries(up, s), sw.read()))
        sw.write(plan_updates(switch_entries(down, s), sw.read()))  # reference-safe order
        back = plan_updates(switch_entries(up, s), sw.read())
        sw.write(back)
        assert plan_updates(switch_entries(up, s), sw.read()) == []
        assert len(back) == len(writes[s])


def test_three_spines_keep_the_same_member_order_on_every_leaf():
    f, raw = fabric_config(spines=3)
    cfg = with_down_links(parse_config(raw), ["leaf2:spine2"])
    a = spines_of(cfg, f, "leaf1", ip(f, "h3"))
    b = spines_of(cfg, f, "leaf2", ip(f, "h1"))
    assert a == b == ["spine1", "spine3"]
    # The group's members are in next-hop order, the same spine at every index.
    g1 = next(e for e in switch_entries(cfg, "leaf1") if isinstance(e, ActionProfileGroup))
    assert list(g1.members) == sorted(g1.members)


def test_routes_sharing_a_group_with_different_survivors_get_their_own_group():
    f, raw = fabric_config(spines=2, leaves=3, hosts_per_leaf=1)
    up = parse_config(raw)
    cfg = with_down_links(up, ["leaf2:spine1"])
    # leaf1 reaches h2 (leaf2) only over spine2 now, h3 (leaf3) still over both.
    assert spines_of(cfg, f, "leaf1", ip(f, "h2")) == ["spine2"]
    assert spines_of(cfg, f, "leaf1", ip(f, "h3")) == ["spine1", "spine2"]
    ents = switch_entries(cfg, "leaf1")
    groups = {e.group_id: e.members for e in ents if isinstance(e, ActionProfileGroup)}
    routes = {dict(e.match)["dst_addr"][0] & 0xFF: e.group_id for e in ents
              if isinstance(e, TableEntry) and e.table == "routing" and e.group_id}
    full = member_ids(cfg.switch("leaf1"))
    assert groups[routes[3]] == (full["spine1-p1"], full["spine2-p1"])  # configured id, untouched
    assert groups[routes[2]] == (full["spine2-p1"],) and routes[2] > routes[3]  # an extra group
    ups = plan_updates(ents, switch_entries(up, "leaf1"))
    assert sorted(u.op for u in ups) == [INSERT, MODIFY]  # the extra group, then h2's route


def test_a_leaf_cut_off_withdraws_its_routes_everywhere_and_empties_no_group():
    f, raw = fabric_config()
    up = parse_config(raw)
    cfg = with_down_links(up, ["leaf1:spine1", "leaf1:spine2"])
    for s in ("leaf2", "spine1", "spine2"):
        assert usable_next_hops(cfg, s, ip(f, "h1")) == ()
    sw = FakeSwitch()
    sw.write(plan_updates(switch_entries(up, "leaf2"), sw.read()))
    ups = plan_updates(switch_entries(cfg, "leaf2"), sw.read())
    # Routes first, then the group nobody uses any more (never an empty group).
    assert [(u.op, u.entity.kind) for u in ups] == [(DELETE, "table_entry")] * 2 + [(DELETE, "group")]
    sw.write(ups)
    assert all(len(g.members) > 0 for g in switch_entries(cfg, "leaf2") if isinstance(g, ActionProfileGroup))


def test_a_host_link_down_withdraws_that_host_only():
    f, raw = fabric_config()
    cfg = with_down_links(parse_config(raw), ["leaf1:1"])
    assert usable_next_hops(cfg, "leaf2", ip(f, "h1")) == ()
    assert len(usable_next_hops(cfg, "leaf2", ip(f, "h2"))) == 2


def test_nothing_down_changes_nothing():
    _, raw = fabric_config()
    cfg = parse_config(raw)
    assert cfg.down_ports == frozenset()
    raw["down_links"] = []
    assert all(switch_entries(parse_config(raw), s) == switch_entries(cfg, s) for s in cfg.switches)


# ---------------------------------------------------------------- link state file

def test_link_state_file_records_links_from_either_end(tmp_path):
    from flexpass_cp import links

    _, raw = fabric_config()
    conf = tmp_path / "fabric.yaml"
    conf.write_text(yaml.safe_dump(raw))
    assert links.default_state_path(conf) == tmp_path / "fabric.links.yaml"
    changed, ends, down = links.set_link(conf, "leaf1:spine1", True)
    assert changed and ends == (("leaf1", 3), ("spine1", 1)) and down == ["leaf1:3"]
    assert links.set_link(conf, "spine1:1", True)[0] is False  # the same link, already down
    assert links.load(conf).down_ports == {("leaf1", 3), ("spine1", 1)}
    changed, _, down = links.set_link(conf, "spine1:leaf1", False)
    assert changed and down == [] and links.load(conf).down_ports == frozenset()
    assert links.set_link(conf, "leaf1:3", False)[0] is False


# ---------------------------------------------------------------- over gRPC (PI semantics)

p4rt = pytest.importorskip("flexpass_cp.p4runtime_client", reason="p4runtime/grpcio not installed")
from fake_p4runtime import FakeP4RuntimeSwitch, write_build  # noqa: E402


@pytest.fixture
def build(tmp_path):
    return write_build(tmp_path / "build")


@pytest.fixture
def switches():
    started = []

    def start(port=0, device_id=0):
        s = FakeP4RuntimeSwitch(port, device_id)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def _client(sw, eid=1, **kw):
    return p4rt.P4RuntimeClient(sw.addr, 0, (0, eid), timeout=2, **kw)


def test_mastership_restart_live_holder_lower_id_and_takeover(switches):
    sw = switches()
    a = _client(sw)
    assert a.is_primary and a.election_id == (0, 1) and a.alive
    # The same election id while A's stream lives: refused, nothing disturbed.
    with pytest.raises(p4rt.NotPrimary, match="held by another live controller"):
        _client(sw)
    assert a.is_primary
    # Controller restart: A's process is gone (stream closed) -> the same id is primary again.
    a.close()
    deadline = time.monotonic() + 2
    while sw.primary_election_id() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    b = _client(sw)
    assert b.is_primary and b.election_id == (0, 1)
    # A lower id while B is primary: a backup; the error names the primary's id.
    with pytest.raises(p4rt.NotPrimary) as e:
        p4rt.P4RuntimeClient(sw.addr, 0, (0, 0), timeout=2)
    assert e.value.primary_election_id == (0, 1)
    # A hung B still holds id 1: take over bids 2; B is told it is a backup now.
    c = _client(sw, takeover=True)
    assert c.is_primary and c.election_id == (0, 2)
    deadline = time.monotonic() + 2
    while b.is_primary and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not b.is_primary and b.alive
    # When C goes, B (the highest left) is primary again, and told so.
    c.close()
    deadline = time.monotonic() + 2
    while not b.is_primary and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b.is_primary
    b.close()


def test_read_only_session_does_not_disturb_the_primary(switches, build):
    sw = switches()
    with _client(sw) as a:
        a.set_pipeline(*build)
        with _client(sw, arbitrate=False) as r:
            r.load_p4info(build[0])
            assert r.plan([]) == []
        assert a.is_primary and a.alive


def test_apply_is_idempotent_and_reconciles_a_restarted_switch(switches, build):
    _, raw = fabric_config()
    cfg = parse_config(raw)
    desired = switch_entries(cfg, "leaf1")
    sw = switches()
    with _client(sw) as c:
        assert c.set_pipeline(*build) is True
        first = c.apply(desired)
        assert first and all(u.op in (INSERT, MODIFY) for u in first)
        assert c.set_pipeline(*build) is False and c.apply(desired) == []
    port = sw.port
    sw.stop()  # killed ...
    sw2 = switches(port)  # ... and restarted: no pipeline, empty tables
    with _client(sw2) as c:
        assert c.set_pipeline(*build) is True
        assert len(c.apply(desired)) == len(first)
        assert c.apply(desired) == []  # second apply: 0 writes
    # A diverged switch (an entry lost) is repaired by exactly one write.
    with _client(sw2) as c:
        c.set_pipeline(*build)
        route = next(e for e in desired if isinstance(e, TableEntry) and e.table == "routing")
        c.write([Update(DELETE, route)])
        ups = c.apply(desired)
        assert [(u.op, u.entity) for u in ups] == [(INSERT, route)]


def _fabric_on_fakes(tmp_path, switches, spines=2):
    fakes = {}
    f = leaf_spine(spines, 2, 2)
    names = sorted(f.switches)
    for n in names:
        fakes[n] = switches(0, f.switches[n].index - 1)
    _, raw = fabric_config(spines=spines, **{n: fakes[n].addr for n in names})
    conf = tmp_path / "fabric.yaml"
    conf.write_text(yaml.safe_dump(raw, sort_keys=False))
    return f, conf, fakes


def _spine_of_member(f, raw_sw, mid, cfg, switch):
    mids = {v: k for k, v in member_ids(cfg.switch(switch)).items()}
    port = cfg.switch(switch).next_hops[mids[mid]].port
    return next(nb for p, nb, _ in f.neighbours(switch) if p == port)


def test_cli_link_down_and_up_rewrite_every_switch(tmp_path, switches, build, capsys):
    from flexpass_cp import cli
    from flexpass_cp.config import load_config

    f, conf, fakes = _fabric_on_fakes(tmp_path, switches)
    common = ["--config", str(conf), "--p4info", str(build[0]), "--bmv2-json", str(build[1]), "--timeout", "2"]
    for n in fakes:
        assert cli.main(["apply", "--switch", n, "--no-queues", "--json", *common]) == 0
    capsys.readouterr()
    for n in fakes:
        assert cli.main(["apply", "--switch", n, "--no-queues", "--json", *common]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1])["writes"] == 0  # idempotent
    before = {n: s.writes for n, s in fakes.items()}
    assert cli.main(["link-down", "--link", "leaf1:spine1", "--json", *common]) == 0
    out = capsys.readouterr().out
    res = {r["switch"]: r for r in map(json.loads, [l for l in out.splitlines() if l.startswith("{")])}
    assert {n: r["writes"] for n, r in res.items()} == {"leaf1": 1, "leaf2": 1, "spine1": 2, "spine2": 0}
    assert {n: s.writes - before[n] for n, s in fakes.items()} == {"leaf1": 1, "leaf2": 1, "spine1": 2, "spine2": 0}
    cfg = load_config(conf)
    for leaf in ("leaf1", "leaf2"):
        (members,) = fakes[leaf].groups().values()
        assert [_spine_of_member(f, None, m, cfg, leaf) for m in members] == ["spine2"]
    # A switch restarted while the link is down is reconciled without it.
    port = fakes["leaf2"].port
    fakes["leaf2"].stop()
    fakes["leaf2"] = switches(port, fakes["leaf2"].device_id)
    assert cli.main(["apply", "--switch", "leaf2", "--no-queues", "--json", *common]) == 0
    assert "links out of service: leaf1:3 (spine1) <-> spine1:1 (leaf1)" in capsys.readouterr().out
    (members,) = fakes["leaf2"].groups().values()
    assert [_spine_of_member(f, None, m, cfg, "leaf2") for m in members] == ["spine2"]
    assert cli.main(["link-up", "--link", "spine1:leaf1", "--json", *common]) == 0
    capsys.readouterr()
    for leaf in ("leaf1", "leaf2"):
        (members,) = fakes[leaf].groups().values()
        assert [_spine_of_member(f, None, m, cfg, leaf) for m in members] == ["spine1", "spine2"]
    for n in fakes:
        assert cli.main(["diff", "--switch", n, *common]) == 0
        assert "in sync" in capsys.readouterr().out
    # The resident controller, once: primary everywhere, nothing to write.
    assert cli.main(["run", "--once", "--no-queues", *common]) == 0
    evs = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in evs][0] == "start" and evs[-1]["event"] == "stop"
    rec = [e for e in evs if e["event"] == "reconciled"]
    assert sorted(e["switch"] for e in rec) == sorted(fakes) and all(e["writes"] == 0 for e in rec)


class _Events(list):
    def __call__(self, ev):
        self.append(ev)

    def of(self, kind, **match):
        return [e for e in self if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def _wait(pred, timeout=5.0, step=0.02, tick=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tick:
            tick()
        if pred():
            return True
        time.sleep(step)
    return False


def test_resident_controller_links_switch_restart_and_its_own_restart(tmp_path, switches, build):
    from flexpass_cp import links
    from flexpass_cp.config import load_config
    from flexpass_cp.controller import Controller

    f, conf, fakes = _fabric_on_fakes(tmp_path, switches)
    queued = []
    ev = _Events()
    mk = lambda **kw: Controller(conf, build[0], build[1], emit=ev,  # noqa: E731
                                 apply_queues=lambda cfg, n: queued.append(n) or 3, retry_s=0.02, **kw)
    ctl = mk()
    assert _wait(ctl.in_sync, tick=ctl.tick)
    assert {e["switch"] for e in ev.of("primary")} == set(fakes)
    assert all(e["pipeline_pushed"] and e["writes"] > 0 for e in ev.of("reconciled"))
    assert sorted(queued) == sorted(fakes)  # fresh switches got their queue settings
    # Link down: the state file changes, the next tick rewrites exactly the affected entries.
    ev.clear()
    links.set_link(conf, "leaf1:spine1", True)
    ctl.tick()
    rec = {e["switch"]: e for e in ev.of("reconciled")}
    assert {n: e["writes"] for n, e in rec.items()} == {"leaf1": 1, "leaf2": 1, "spine1": 2, "spine2": 0}
    assert all(e["reason"] == "links" and not e["pipeline_pushed"] for e in rec.values())
    cfg = load_config(conf)
    for leaf in ("leaf1", "leaf2"):
        (members,) = fakes[leaf].groups().values()
        assert [_spine_of_member(f, None, m, cfg, leaf) for m in members] == ["spine2"]
    # A switch killed and restarted: lost, reconnected, pipeline + entries + queues, without the dead link.
    ev.clear()
    queued.clear()
    port = fakes["leaf2"].port
    fakes["leaf2"].stop()
    assert _wait(lambda: ev.of("lost", switch="leaf2"), tick=ctl.tick)
    fakes["leaf2"] = switches(port, fakes["leaf2"].device_id)
    # Its queue API is not up yet the first time: the settings are retried, not forgotten.
    ctl.apply_queues = lambda cfg, n: (_ for _ in ()).throw(ConnectionRefusedError("TM API not up"))
    assert _wait(lambda: ev.of("error", switch="leaf2"), tick=ctl.tick)
    ctl.apply_queues = lambda cfg, n: queued.append(n) or 3
    assert _wait(lambda: ev.of("reconciled", switch="leaf2"), tick=ctl.tick)
    (r,) = ev.of("reconciled", switch="leaf2")
    assert r["pipeline_pushed"] and r["queues"] == 3 and queued == ["leaf2"] and r["reason"] == "reconnect"
    # The entries went in the first time (reported with the attempt that finished).
    assert fakes["leaf2"].pipeline_pushes == 1 and r["writes"] == fakes["leaf2"].writes > 0
    (members,) = fakes["leaf2"].groups().values()
    assert [_spine_of_member(f, None, m, cfg, "leaf2") for m in members] == ["spine2"]
    # Link back up.
    ev.clear()
    links.set_link(conf, "leaf1:spine1", False)
    ctl.tick()
    assert {e["switch"]: e["writes"] for e in ev.of("reconciled")} == {"leaf1": 1, "leaf2": 1, "spine1": 2, "spine2": 0}
    state = {n: dict(s.state) for n, s in fakes.items()}
    # Controller restart: gone, the switches keep everything, the new one is primary
    # with the same election id and writes nothing.
    ctl.close()
    ev.clear()
    ctl2 = mk()
    assert _wait(ctl2.in_sync, tick=ctl2.tick)
    assert all(e["election_id"] == 1 and not e["took_over"] for e in ev.of("primary"))
    assert all(e["writes"] == 0 and not e["pipeline_pushed"] for e in ev.of("reconciled"))
    assert {n: dict(s.state) for n, s in fakes.items()} == state
    # A second controller while ctl2 lives (hung): refused with the same id; with
    # takeover it becomes primary (id 2), ctl2 sees it lost mastership.
    ev.clear()
    ctl3 = mk()
    ctl3.tick()
    assert len(ev.of("unreachable")) == len(fakes) and not ev.of("primary")
    ctl3.close()
    ev.clear()
    ctl4 = mk(takeover=True)
    assert _wait(ctl4.in_sync, tick=ctl4.tick)
    assert all(e["election_id"] == 2 and e["took_over"] for e in ev.of("primary"))
    assert all(e["writes"] == 0 for e in ev.of("reconciled"))
    # ctl2 stays connected as a backup (no write), and is primary again when ctl4 goes.
    writes = {n: s.writes for n, s in fakes.items()}
    assert _wait(lambda: len(ev.of("backup")) == len(fakes), tick=ctl2.tick)
    assert not ev.of("lost") and {n: s.writes for n, s in fakes.items()} == writes
    ev.clear()
    ctl4.close()
    assert _wait(lambda: len(ev.of("reconciled")) == len(fakes), tick=ctl2.tick)
    assert all(e["regained"] for e in ev.of("primary")) and len(ev.of("primary")) == len(fakes)
    assert all(e["writes"] == 0 and e["reason"] == "primary regained" for e in ev.of("reconciled"))
    ctl2.close()


def test_cli_link_down_defers_to_a_running_controller(tmp_path, switches, build, capsys):
    from flexpass_cp import cli
    from flexpass_cp.controller import Controller

    f, conf, fakes = _fabric_on_fakes(tmp_path, switches)
    ev = _Events()
    ctl = Controller(conf, build[0], build[1], emit=ev, queues=False)
    stop = threading.Event()
    t = threading.Thread(target=ctl.run, args=(0.01, stop), daemon=True)
    t.start()
    try:
        assert _wait(lambda: len(ev.of("reconciled")) == len(fakes))
        common = ["--config", str(conf), "--p4info", str(build[0]), "--bmv2-json", str(build[1]), "--timeout", "2"]
        t0 = time.monotonic()
        assert cli.main(["link-down", "--link", "leaf2:spine2", "--json", *common]) == 0
        out = capsys.readouterr().out
        assert all(json.loads(l).get("deferred") for l in out.splitlines() if l.startswith("{"))
        assert _wait(lambda: len([e for e in ev.of("reconciled") if e["reason"] == "links"]) == len(fakes))
        assert time.monotonic() - t0 < 5
        for leaf in ("leaf1", "leaf2"):
            (members,) = fakes[leaf].groups().values()
            assert len(members) == 1
    finally:
        stop.set()
        t.join(5)


# ---------------------------------------------------------------- failure detection (link probes)

class _FakeWire:
    """The switches' interfaces joined pairwise like the fabric's links; a frame sent
    on an interface in `cut` is lost (one direction of a link, as tc drop does)."""

    def __init__(self, cfg, template="{switch}-eth{port}"):
        from flexpass_cp.linkprobe import switch_links

        self.peer = {}
        for a, b in switch_links(cfg):
            ia, ib = (template.format(switch=s, port=p) for s, p in (a, b))
            self.peer[ia], self.peer[ib] = ib, ia
        self.cut = set()
        self.queue = []
        self.sent = 0
        self.lock = threading.Lock()

    def send(self, intf, frame):
        with self.lock:
            self.sent += 1
            if intf not in self.cut:
                self.queue.append((self.peer[intf], frame))

    def receive(self):
        with self.lock:
            out, self.queue = self.queue, []
        return out

    def close(self):
        pass


def test_link_probes_detect_a_cut_direction_and_its_repair_and_ignore_own_pauses():
    from flexpass_cp.linkprobe import LinkMonitor, probe_frame

    f, raw = fabric_config()
    cfg = parse_config(raw)
    wire = _FakeWire(cfg)
    mon = LinkMonitor(cfg, io=wire, interval_s=0.02, dead_s=0.1, up_s=0.3)
    assert len(mon.links) == 4 and mon.dead_rounds == 5  # leaf x spine
    t, changes = 0.0, []

    def run_for(seconds):
        nonlocal t
        end = t + seconds
        while t < end - 1e-9:
            t = round(t + 0.02, 6)
            changes.extend((round(t, 3), c) for c in mon.poll(t))

    run_for(2.0)
    assert changes == [] and wire.sent == 100 * 8  # both ends of 4 links, every 20 ms
    # A pause of the monitor itself (descheduled for 1 s): no probe sent, none missed.
    t += 1.0
    run_for(0.5)
    assert changes == []
    # One direction of leaf1-spine1 cut: down after 5 unanswered probes (100 ms).
    t_cut = t
    wire.cut.add("leaf1-eth3")
    run_for(1.0)
    (at, c), = changes
    assert c["link"] == (("leaf1", 3), ("spine1", 1)) and c["down"] and c["directions"] == ["leaf1:3->spine1:1"]
    assert 0.1 <= at - t_cut <= 0.14 and 0.08 <= c["silent_s"] <= 0.12, (at - t_cut, c)
    # A probe from elsewhere on that interface (another port's name) does not revive it.
    wire.queue.append(("spine1-eth1", probe_frame(("leaf2", 3), 1)))
    run_for(0.5)
    assert len(changes) == 1
    # Repaired: up once both directions were heard for up_s (300 ms), not before.
    changes.clear()
    t_fix = t
    wire.cut.clear()
    run_for(1.0)
    (at, c), = changes
    assert not c["down"] and 0.3 <= at - t_fix <= 0.36, (at - t_fix, c)


def test_resident_controller_detects_a_failed_link_and_rewrites_every_switch(tmp_path, switches, build):
    """flexpass-ctl run --detect probe, with the probes on a fake wire: the cut link is
    recorded in the link state file as link-down would, and the same writes follow (a
    group MODIFY per leaf keeping the order, spine1's routes withdrawn), symmetric; the
    repaired link comes back the same way."""
    from flexpass_cp import links
    from flexpass_cp.config import load_config
    from flexpass_cp.controller import Controller
    from flexpass_cp.linkprobe import LinkMonitor

    f, conf, fakes = _fabric_on_fakes(tmp_path, switches)
    cfg = load_config(conf)
    wire = _FakeWire(cfg)
    ev = _Events()
    mon = LinkMonitor(cfg, io=wire, interval_s=0.01, dead_s=0.05, up_s=0.1)
    ctl = Controller(conf, build[0], build[1], emit=ev, queues=False, monitor=mon)
    stop = threading.Event()
    th = threading.Thread(target=ctl.run, args=(0.01, stop), daemon=True)
    th.start()
    try:
        assert _wait(lambda: len(ev.of("reconciled")) == len(fakes))
        time.sleep(0.3)
        assert not ev.of("detected")  # healthy links stay up
        ev.clear()
        t_cut = time.monotonic()
        wire.cut.update({"spine1-eth1", "leaf1-eth3"})  # both directions
        assert _wait(lambda: len([e for e in ev.of("reconciled") if e["reason"] == "links"]) == len(fakes))
        t_done = time.monotonic()
        (d,) = ev.of("detected")
        assert d["state"] == "down" and d["recorded"] and d["link"] == "leaf1:3 (spine1) <-> spine1:1 (leaf1)"
        assert links.read_state(links.default_state_path(conf))[0] == ["leaf1:3"]
        assert 50 <= d["silent_ms"] < 1000 and t_done - t_cut < 2.0, (d, t_done - t_cut)
        rec = {e["switch"]: e["writes"] for e in ev.of("reconciled")}
        assert rec == {"leaf1": 1, "leaf2": 1, "spine1": 2, "spine2": 0}
        for leaf in ("leaf1", "leaf2"):
            (members,) = fakes[leaf].groups().values()
            assert [_spine_of_member(f, None, m, cfg, leaf) for m in members] == ["spine2"]
        ev.clear()
        wire.cut.clear()
        assert _wait(lambda: len([e for e in ev.of("reconciled") if e["reason"] == "links"]) == len(fakes))
        (u,) = ev.of("detected")
        assert u["state"] == "up" and u["down_links"] == []
        for leaf in ("leaf1", "leaf2"):
            (members,) = fakes[leaf].groups().values()
            assert [_spine_of_member(f, None, m, cfg, leaf) for m in members] == ["spine1", "spine2"]
    finally:
        stop.set()
        th.join(5)
    assert not th.is_alive()

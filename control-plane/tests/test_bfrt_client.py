"""The BfRt adapter and `flexpass-ctl apply|diff|counters` against a Tofino
target, with an in-memory stand-in for the SDE's bfrt_grpc client
(tests/fake_bfrt_grpc.py).  The real client is exercised by the Tofino-model
tier (ptf-tests/run_tofino_model.sh) where the SDE is installed."""

import sys
import types
from pathlib import Path

import pytest

import fake_bfrt_grpc as fake
from flexpass_cp import bfrt_ops as B
from flexpass_cp import cli
from flexpass_cp.bfrt_client import BfrtClient, BfrtError
from flexpass_cp.config import load_config

CFG = Path(__file__).resolve().parent / "data" / "tofino-golden.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def switch(monkeypatch):
    sw = fake.FakeSwitch()
    pkg = types.ModuleType("bfrt_grpc")
    mod = fake.make_module(sw)
    pkg.client = mod
    monkeypatch.setitem(sys.modules, "bfrt_grpc", pkg)
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", mod)
    return sw


def ctl(*args):
    return cli.main([args[0], "--config", str(CFG), "--switch", "s1", *args[1:]])


def test_apply_writes_every_op_then_is_idempotent(switch, capsys):
    assert ctl("apply") == 0
    out = capsys.readouterr().out
    ops = B.switch_ops(load_config(CFG), "s1")
    assert f"operations: {len(ops)} desired" in out and "bound to flexpass" in out
    # Members before groups before routes; ports first; TM last.
    order = [t for _, t in switch.log]
    assert order.index("ecmp_profile") < order.index("ecmp_selector") < order.index("routing")
    assert order[0] == "$PORT" and order[-1].startswith("tf1.tm.")
    # TM queue keys resolved through tf1.tm.port.cfg: port 2 -> pg 0, queues 16..23.
    color = switch.tables["tf1.tm.queue.color"].entries
    assert (("pg_id", 0, None), ("pg_queue", 16 + 5, None)) in color
    assert color[(("pg_id", 0, None), ("pg_queue", 21, None))][1].fields["drop_limit_red"] == "12.5%"
    switch.log.clear()
    assert ctl("apply") == 0
    assert "no change" in capsys.readouterr().out and switch.log == []
    assert ctl("diff") == 0
    assert "in sync" in capsys.readouterr().out


def test_diff_shows_drift_and_apply_repairs_it(switch, capsys):
    assert ctl("apply") == 0
    capsys.readouterr()
    cls = switch.tables["classifier"]
    k = next(k for k in cls.entries if k == (("dscp", 30, None),))
    cls.entries[k][1].fields["color"] = 0  # someone made reactive data green
    stale = fake._Key([fake.KeyTuple("dst_addr", 10 << 24, prefix_len=8)])
    switch.tables["routing"].entries[stale.ident()] = (stale, fake._Data([fake.DataTuple("$ACTION_MEMBER_ID", 1)]))
    assert ctl("diff") == 0
    out = capsys.readouterr().out
    assert "MODIFY classifier[dscp=30]" in out and "(was: color=0)" in out
    assert "DELETE routing[dst_addr=10.0.0.0/8]" in out
    assert ctl("apply") == 0
    assert cls.entries[k][1].fields["color"] == 2 and stale.ident() not in switch.tables["routing"].entries


def test_counters_read_p4_and_tm_counters(switch, capsys):
    assert ctl("apply") == 0
    switch.counters = {"forwarded": {2 * 8 + 5: (7, 700)}, "ingress_events": {3: (2, 0)}}
    capsys.readouterr()
    assert ctl("counters") == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "5 (flexpass)" in line)
    assert row.split()[:4] == ["2", "5", "(flexpass)", "7"]
    ttl = next(line for line in out.splitlines() if "TTL expired" in line)
    assert ttl.split()[-1] == "2"


def test_wrong_cell_size_is_refused(monkeypatch, capsys):
    sw = fake.FakeSwitch(cell_bytes=176)  # a Tofino2 behind a `target: tofino` config
    mod = fake.make_module(sw)
    monkeypatch.setitem(sys.modules, "bfrt_grpc", types.ModuleType("bfrt_grpc"))
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", mod)
    assert ctl("apply") == 2
    assert "cell_size_bytes is 176" in capsys.readouterr().err


def test_program_not_running_and_unreachable(monkeypatch, capsys, tmp_path):
    sw = fake.FakeSwitch(programs=("other",))
    monkeypatch.setitem(sys.modules, "bfrt_grpc", types.ModuleType("bfrt_grpc"))
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", fake.make_module(sw))
    assert ctl("apply", "--tofino-build", str(tmp_path / "none")) == 2
    assert "runs ['other'], not 'flexpass'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", fake.make_module(sw, reachable=False))
    assert ctl("diff", "--grpc-addr", "127.0.0.1:1") == 2
    assert "switch not reachable" in capsys.readouterr().err


def test_unknown_table_names_the_mismatch(switch):
    c = BfrtClient("x:1", gc=sys.modules["bfrt_grpc.client"])
    c.info = types.SimpleNamespace(table_get=lambda n: (_ for _ in ()).throw(KeyError(n)))
    with pytest.raises(BfrtError, match="no BfRt table 'routing'"):
        c.read_counter("routing")

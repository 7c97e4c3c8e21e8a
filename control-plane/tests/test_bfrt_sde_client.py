"""flexpass-ctl against a Tofino target through the SDE's *real* BfRt client.

test_bfrt_client.py checks the adapter against an in-memory stand-in for
``bfrt_grpc.client``; this file runs the installed SDE's own client, its
protobufs and its schema checks (field names, types, sizes, choices) over real
gRPC to a BfRuntime server that stores entries (tests/fake_bfruntime.py), so
every golden operation is encoded, sent, read back and decoded as it would be
against bf_switchd.  It needs the SDE's Python client (SDE_INSTALL or SDE set,
as for a Tofino switch); the P4 tables also need the program compiled by p4c's
Tofino backend (make p4-tofino).  Each test skips and says why otherwise.
"""

import os
from pathlib import Path

import pytest

from flexpass_cp import bfrt_ops as B
from flexpass_cp import cli
from flexpass_cp.bfrt_client import BfrtClient, BfrtUnavailable, load_bfrt_grpc, sde_python_dirs
from flexpass_cp.config import load_config

REPO = Path(__file__).resolve().parents[2]
CFG = Path(__file__).resolve().parent / "data" / "tofino-golden.yaml"
BFRT_JSON = REPO / "build" / "p4-tofino" / "tofino" / "bfrt.json"
EMPTY_PROGRAM = b'{"schema_version": "1.0.0", "tables": [], "learn_filters": []}'


def _sde():
    try:
        gc = load_bfrt_grpc()
    except BfrtUnavailable as e:
        pytest.skip(f"SDE BfRt client: {e}")
    shared = [d.parents[3] / "share" / "bf_rt_shared" for d in sde_python_dirs()]
    shared = [d for d in shared if (d / "bf_rt_tm_tf1.json").is_file()]
    if not shared:
        pytest.skip("SDE BfRt client found, but no share/bf_rt_shared/bf_rt_tm_tf1.json next to it "
                    f"(SDE_INSTALL={os.environ.get('SDE_INSTALL')!r})")
    return gc, shared[0]


@pytest.fixture
def server_for():
    import fake_bfruntime

    started = []

    def start(p4_json: bytes):
        gc, shared = _sde()
        srv = fake_bfruntime.FakeBfRuntime(gc, "flexpass", p4_json,
                                           fake_bfruntime.non_p4_schema(shared))
        started.append(srv)
        return gc, srv

    yield start
    for s in started:
        s.stop()


@pytest.mark.parametrize("switch, priorities", [("s1", {"7", "0"}), ("s3", {str(p) for p in range(8)})])
def test_tm_and_port_ops_round_trip_through_the_sde_client(server_for, monkeypatch, switch, priorities):
    """Every fixed-function op of the golden config (ports, TM queues, shaping,
    colour drop limits) passes the real client's schema checks, reaches the
    switch with the intended values, reads back equal: a second plan is empty.
    Runs without a compiled program: the switch serves one without P4 tables."""
    from flexpass_cp import bfrt_client

    monkeypatch.setattr(bfrt_client, "MANAGED_P4_TABLES", ())
    gc, srv = server_for(EMPTY_PROGRAM)
    cfg = load_config(CFG)
    ops = [op for op in B.switch_ops(cfg, switch) if op.table == "$PORT" or ".tm." in op.table]
    assert {op.table for op in ops} >= {"$PORT", "tf1.tm.queue.sched_cfg", "tf1.tm.queue.color",
                                        "tf1.tm.queue.sched_shaping" if switch == "s1" else "tf1.tm.port.buffer"}
    with BfrtClient(srv.addr, gc=gc) as c:
        c.set_pipeline(None)
        c.check_tm(80, 0)
        updates = c.apply(ops)
        assert len(updates) == len(ops) and all(u.op in ("INSERT", "MODIFY") for u in updates)
        assert c.plan(ops) == [], "what was written does not read back equal"
    # Every op's values as the switch stored them, decoded from the protobufs: TM
    # queue keys resolved as Tofino maps them (4 ports per port group, 8 queues each).
    checked = 0
    for op in ops:
        if not op.key:
            continue
        want = {}
        for k in op.key:
            v = k.value
            if isinstance(v, B.PortQueue):
                local = v.dev_port & 0x7F
                v = local // 4 if v.field == "pg_id" else (local % 4) * 8 + v.qid
            want[k.name] = v
        rows = [r for r in srv.entries_of(op.table) if all(r.get(n) == v for n, v in want.items())]
        assert len(rows) == 1, f"{op.describe()}: {len(rows)} stored entries"
        for name, v in op.data:
            assert rows[0][name] == v, f"{op.describe()}: stored {name}={rows[0][name]!r}"
        checked += 1
    assert checked >= len(ops) - 2
    # FlexPass (s1): the credit queue at strict priority 7 over the DWRR pair; PPT (s3):
    # one queue per priority level.
    prios = {dict(op.data)["max_priority"] for op in ops if op.table == "tf1.tm.queue.sched_cfg"}
    assert prios == priorities, prios


def test_flexpass_ctl_apply_diff_against_the_compiled_program(server_for, monkeypatch, capsys):
    """The whole config (P4 tables of the compiled TNA program + TM) through
    `flexpass-ctl apply`, then apply again and diff: nothing left to write."""
    if not BFRT_JSON.is_file():
        pytest.skip(f"{BFRT_JSON} missing: make p4-tofino (needs p4c's Tofino backend)")
    gc, srv = server_for(BFRT_JSON.read_bytes())
    args = ["--config", str(CFG), "--switch", "s1", "--grpc-addr", srv.addr]
    assert cli.main(["apply", *args]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    n = len(B.switch_ops(load_config(CFG), "s1"))
    assert f"operations: {n} desired" in out
    tables = {t for _, t in srv.writes}
    assert {"classifier", "routing", "ecmp_selector", "credit_meter", "queue_thresholds"} <= {
        t.split(".")[-1] for t in tables}
    srv.writes.clear()
    assert cli.main(["apply", *args]) == 0
    assert "no change" in capsys.readouterr().out and srv.writes == []
    assert cli.main(["diff", *args]) == 0
    assert "in sync" in capsys.readouterr().out

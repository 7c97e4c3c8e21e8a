"""TmClient against a fake line-delimited JSON server (docs/tm-api.md)."""

import json
import socket
import threading

import pytest

from flexpass_cp.tm_client import TmClient, TmError


class FakeTm:
    """Records requests; replies with a canned reply per op."""

    def __init__(self, replies):
        self.replies = replies
        self.requests = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.sock.accept()
        f = conn.makefile("rw")
        for line in f:
            req = json.loads(line)
            self.requests.append(req)
            reply = self.replies.get(req["op"], {"ok": False, "error": f"unknown op '{req['op']}'"})
            if reply == "garbage":
                f.write("not json\n")
            elif reply == "close":
                break
            else:
                f.write(json.dumps(reply) + "\n")
            f.flush()
        conn.close()


def test_requests_and_replies():
    fake = FakeTm({
        "list_ports": {"ok": True, "ports": [1, 3]},
        "set_port": {"ok": True, "config": {"port": 3, "link_rate_bps": 20000000}},
        "set_queue": {"ok": True, "config": {"queue": 0, "shaper_rate_bps": 1000000}},
        "get_stats": {"ok": True, "stats": {"port": 3, "queues": [], "totals": {"tx_pkts": 5}}},
        "clear_watermarks": {"ok": True},
    })
    with TmClient("127.0.0.1", fake.port) as tm:
        assert tm.list_ports() == [1, 3]
        assert tm.set_port(3, link_rate_bps=20_000_000, shared_buffer_bytes=None)["link_rate_bps"] == 20000000
        tm.set_queue(3, 0, priority=1, weight=1.0, buffer_bytes=672, shaper_rate_bps=1_000_000,
                     shaper_burst_bytes=168)
        assert tm.get_stats(3)["totals"]["tx_pkts"] == 5
        tm.clear_watermarks()
        tm.clear_watermarks(3)
    ops = [r["op"] for r in fake.requests]
    assert ops == ["list_ports", "set_port", "set_queue", "get_stats", "clear_watermarks", "clear_watermarks"]
    assert fake.requests[1] == {"op": "set_port", "port": 3, "link_rate_bps": 20000000, "shared_buffer_bytes": None}
    q = fake.requests[2]
    assert (q["priority"], q["buffer_bytes"], q["shaper_burst_bytes"], q["red_threshold"]) == (1, 672, 168, None)
    assert "port" not in fake.requests[4] and fake.requests[5]["port"] == 3


def test_error_reply_raises_tm_error_with_message():
    fake = FakeTm({"set_queue": {"ok": False, "error": "invalid queue config: weight must be > 0"}})
    with TmClient("127.0.0.1", fake.port) as tm, pytest.raises(TmError, match="set_queue: invalid queue config: weight"):
        tm.set_queue(3, 1, priority=0, weight=0, buffer_bytes=None)


def test_non_json_reply_and_closed_connection():
    fake = FakeTm({"list_ports": "garbage", "get_config": "close"})
    with TmClient("127.0.0.1", fake.port) as tm:
        with pytest.raises(TmError, match="not JSON"):
            tm.list_ports()
        with pytest.raises(TmError, match="closed the connection"):
            tm.get_config(1)


def test_connection_refused_is_a_tm_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(TmError, match="cannot connect to the TM API"):
        TmClient("127.0.0.1", port, timeout=1).list_ports()


def _tm_config(tmp_path, tm_port):
    p = tmp_path / "tm.yaml"
    p.write_text(f"""
port_defaults: {{w_q: 0.5, ecn_threshold: 6KB, red_threshold: 10KB, buffer: 30KB}}
switches:
  s1:
    target: flexpass_switch
    tm_port: {tm_port}
    ports:
      1: {{link_rate: 20Mbps, mac: "02:00:00:00:01:01"}}
""")
    return str(p)


def test_show_and_tm_settings_for_flexpass_switch(tmp_path, capsys):
    from flexpass_cp import cli

    assert cli.main(["show", "--config", _tm_config(tmp_path, 9191), "--switch", "s1"]) == 0
    out = capsys.readouterr().out
    # Thresholds are bytes on flexpass_switch; the TM does the red admission (P4 red off).
    assert "set_thresholds(ecn_threshold=6000, red_threshold=524287)" in out
    assert "queue 5: level 0 weight 0.5 buffer 30000 B red 10000 K 6000" in out
    assert "queue 7: level 1 weight 1 buffer 544 B" in out and "burst 168 B" in out
    assert "credit_meter" not in out  # credits are shaped by the TM, not metered


def test_apply_tm_settings_sends_every_queue(tmp_path):
    from flexpass_cp.backends.flexpass_switch import apply_tm_settings
    from flexpass_cp.config import load_config

    fake = FakeTm({"set_port": {"ok": True, "config": {}}, "set_queue": {"ok": True, "config": {}}})
    cfg = load_config(_tm_config(tmp_path, fake.port))
    apply_tm_settings(cfg, "s1", "127.0.0.1", fake.port)
    port, *queues = fake.requests
    assert port == {"op": "set_port", "port": 1, "link_rate_bps": 20_000_000, "wire_overhead_bytes": 24,
                        "shared_buffer_bytes": None}  # FlexPass: no port limit (reset after a PPT profile)
    by_q = {q["queue"]: q for q in queues}
    assert set(by_q) == {5, 6, 7}
    assert by_q[7]["priority"] == 1 and by_q[7]["shaper_rate_bps"] == round(0.5 * 20e6 * 84 / 1622)
    assert by_q[5]["weight"] == by_q[6]["weight"] == 0.5 and by_q[5]["red_threshold"] == 10_000
    assert by_q[6]["red_threshold"] is None


def test_tm_stats_on_a_stock_switch_is_a_usage_error(capsys):
    from pathlib import Path

    from flexpass_cp import cli

    dumbbell = str(Path(__file__).resolve().parents[2] / "control-plane" / "configs" / "dumbbell.yaml")
    assert cli.main(["tm-stats", "--config", dumbbell, "--switch", "s1"]) == 3
    assert "no traffic manager API" in capsys.readouterr().err

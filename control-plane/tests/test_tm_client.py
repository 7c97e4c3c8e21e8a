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

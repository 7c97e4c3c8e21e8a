"""Client of the flexpass_switch traffic-manager API (docs/tm-api.md).

Line-delimited JSON over TCP (default 127.0.0.1:9191): one request object per
line, one reply per line.  Every method returns the reply's payload and raises
:class:`TmError` with the switch's message when the reply is
``{"ok": false, "error": ...}`` or the connection fails.

    with TmClient("127.0.0.1", 9191) as tm:
        tm.set_port(3, link_rate_bps=20_000_000)
        tm.set_queue(3, 5, priority=0, weight=0.5, buffer_bytes=200_000, red_threshold=100_000)
        print(tm.get_stats(3)["queues"][5]["dequeued_bytes"])
"""

from __future__ import annotations

import json
import socket
from typing import Any, Dict, List, Optional

DEFAULT_PORT = 9191


class TmError(RuntimeError):
    """A TM API request failed; the message says which and why."""


class TmClient:
    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, timeout: float = 5.0):
        self.host, self.port, self.timeout = host, port, timeout
        self._sock: Optional[socket.socket] = None
        self._buf = b""

    # --- connection ----------------------------------------------------------

    def connect(self) -> "TmClient":
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port), self.timeout)
            except OSError as e:
                raise TmError(f"cannot connect to the TM API at {self.host}:{self.port}: {e} "
                              "(is flexpass_switch running with --tm-port?)") from None
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

    def __enter__(self) -> "TmClient":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Send one request; return the reply (with "ok": true) or raise TmError."""
        self.connect()
        assert self._sock is not None
        line = json.dumps({"op": op, **fields}, separators=(",", ":")) + "\n"
        try:
            self._sock.sendall(line.encode())
            while b"\n" not in self._buf:
                chunk = self._sock.recv(65536)
                if not chunk:
                    raise TmError(f"TM API {self.host}:{self.port} closed the connection during {op!r}")
                self._buf += chunk
        except OSError as e:
            self.close()
            raise TmError(f"TM API {self.host}:{self.port}: {op!r} failed: {e}") from None
        raw, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(raw)
        except ValueError:
            raise TmError(f"TM API sent a reply that is not JSON: {raw[:200]!r}") from None
        if not isinstance(reply, dict) or "ok" not in reply:
            raise TmError(f"TM API sent an unexpected reply: {raw[:200]!r}")
        if not reply["ok"]:
            raise TmError(f"TM API {op}: {reply.get('error', 'unknown error')}")
        return reply

    # --- operations ----------------------------------------------------------

    def list_ports(self) -> List[int]:
        return self.request("list_ports")["ports"]

    def set_port(self, port: int, link_rate_bps: Optional[int] = None, **optional: Any) -> Dict[str, Any]:
        """Port settings; optional: shared_buffer_bytes (None = unlimited),
        wire_overhead_bytes, dwrr_quantum_bytes.  Returns the port config."""
        fields: Dict[str, Any] = {"port": port, **optional}
        if link_rate_bps is not None:
            fields["link_rate_bps"] = link_rate_bps
        return self.request("set_port", **fields)["config"]

    def set_queue(self, port: int, queue: int, *, priority: int, weight: float,
                  buffer_bytes: Optional[int], red_threshold: Optional[int] = None,
                  yellow_threshold: Optional[int] = None, ecn_threshold: Optional[int] = None,
                  shaper_rate_bps: Optional[int] = None, shaper_burst_bytes: Optional[int] = None,
                  per_color_depth: bool = False, discipline: str = "fifo") -> Dict[str, Any]:
        """Replace a queue's config; None = unlimited / no shaper; discipline "fifo" or
        "pfabric" (docs/tm-api.md; "fifo" is sent as its absence, the switch's default, so
        the request also suits a switch without pFabric).  Returns the queue config."""
        extra = {} if discipline == "fifo" else {"discipline": discipline}
        return self.request("set_queue", port=port, queue=queue, priority=priority, weight=weight,
                            buffer_bytes=buffer_bytes, red_threshold=red_threshold,
                            yellow_threshold=yellow_threshold, ecn_threshold=ecn_threshold,
                            shaper_rate_bps=shaper_rate_bps, shaper_burst_bytes=shaper_burst_bytes,
                            per_color_depth=per_color_depth, **extra)["config"]

    def get_config(self, port: int) -> Dict[str, Any]:
        return self.request("get_config", port=port)["config"]

    def get_stats(self, port: int) -> Dict[str, Any]:
        return self.request("get_stats", port=port)["stats"]

    def clear_watermarks(self, port: Optional[int] = None) -> None:
        if port is None:
            self.request("clear_watermarks")
        else:
            self.request("clear_watermarks", port=port)

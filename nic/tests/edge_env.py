"""Helpers of the NIC edge tests (the eBPF edge's: test_ebpf_edge.py, test_ebpf_rate.py,
test_ebpf_agent.py; the veth fixture is in conftest.py): the tools' path, the loud skip without
root or clang, and one `status` of an agent on loopback."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENT = Path(os.environ.get("FLEXPASS_BIN", REPO / "host-agent" / "target" / "release" / "flexpass"))
sys.path.insert(0, str(REPO / "nic"))
import flexpass_ebpf as E  # noqa: E402


def ebpf_skip_reason():
    """Why the eBPF edge cannot be loaded here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (bpf(2), tc, netns)"
    try:
        E.find_clang()
    except E.EdgeError as e:
        return str(e)
    return None


def require_ebpf(what):
    """Skip the calling test or fixture loudly unless the edge can be loaded."""
    reason = ebpf_skip_reason()
    if reason:
        pytest.skip(f"SKIPPED {what}: {reason}")


def sh(*cmd, check=True):
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True)


A_IP, B_IP = "10.9.0.1", "10.9.0.2"


def agent_status(tmp_path, *flags, link_gbps=10):
    """(`status`, seconds it took) of a `flexpass agent` on loopback started with ``flags``
    on a link of ``link_gbps`` (no root)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sock = str(tmp_path / f"agent{port}.sock")
    agent = subprocess.Popen([str(AGENT), "agent", "--listen", f"127.0.0.1:{port}", "--socket", sock,
                              "--link-gbps", str(link_gbps), "--datapath", "udp", *flags],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if os.path.exists(sock) or agent.poll() is not None:
                break
            time.sleep(0.05)
        assert os.path.exists(sock), agent.stderr.read() if agent.poll() is not None else "no API socket"
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(sock)
            t0 = time.monotonic()
            s.sendall(b'{"op":"status"}\n')
            return json.loads(s.makefile("rb").readline()), time.monotonic() - t0
    finally:
        agent.terminate()
        agent.wait(10)

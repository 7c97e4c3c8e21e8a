"""Helpers of the eBPF edge tests (test_ebpf_edge.py, test_ebpf_rate.py, test_ebpf_agent.py;
the veth fixture is in conftest.py): the tools' path and the loud skip without root or clang."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
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

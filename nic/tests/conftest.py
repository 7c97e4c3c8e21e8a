"""Shared set-up of the eBPF edge tests: a veth pair between two namespaces of this test
with a private bpf filesystem for the edge's pins (flexpass_ebpf.private_bpffs, netns:
removed after, also on failure). Helpers: edge_env.py."""

import contextlib
import json
import os

import pytest
from edge_env import A_IP, B_IP, E, require_ebpf, sh


@pytest.fixture
def veth_pair():
    """(namespace a, namespace b, bpffs): veth va (10.9.0.1, in a) -- vb (10.9.0.2, in b),
    a's neighbour entry for b static (no ARP in a count)."""
    require_ebpf("eBPF edge on a veth pair")
    tag = os.getpid()
    with contextlib.ExitStack() as stack:
        bpffs = stack.enter_context(E.private_bpffs())
        a = stack.enter_context(E.netns(f"fpea{tag}"))
        b = stack.enter_context(E.netns(f"fpeb{tag}"))
        sh("ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "vb", "netns", b)
        for ns, dev, ip in ((a, "va", f"{A_IP}/24"), (b, "vb", f"{B_IP}/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        mac_b = json.loads(sh("ip", "-n", b, "-j", "link", "show", "vb").stdout)[0]["address"]
        sh("ip", "-n", a, "neigh", "replace", B_IP, "lladdr", mac_b, "dev", "va")
        yield a, b, bpffs

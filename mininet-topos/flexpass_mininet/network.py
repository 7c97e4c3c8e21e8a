"""A Mininet network of BMv2 switches running the FlexPass P4 program.

:class:`P4RuntimeSwitch` is a Mininet switch that starts ``flexpass_switch``
(switch-target/, the traffic manager of issue #5) or stock
``simple_switch_grpc`` with the compiled program, waits until its P4Runtime
server answers, and applies the control-plane config with ``flexpass-ctl
apply`` (pipeline, entries, and the TM or BMv2 queue settings).  Each switch
logs to ``<run dir>/<switch>.log``; with ``pcap=True`` BMv2 writes per-port
pcaps there too.

:func:`start_network` builds a :class:`~flexpass_mininet.fabric.Fabric`,
turns checksum/segmentation offloads off on every veth (BMv2 forwards frames
as they are, so offloaded checksums would reach the receiver unfilled and TCP
would silently fail), installs static ARP entries (the P4 program routes IPv4
only), and returns a :class:`Network` that stops everything it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import yaml

from . import env
from .fabric import Fabric
from .scaling import Scaled

env.import_mininet()
from mininet.link import Link  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.node import Host, Switch  # noqa: E402


def _offloads_off(node, intf: str) -> None:
    """BMv2 forwards frames as they are: offloaded checksums would arrive unfilled."""
    node.cmd(f"ethtool -K {intf} rx off tx off sg off tso off gso off gro off >/dev/null 2>&1")


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}:\n{tail}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s (log: {log})")


class P4RuntimeSwitch(Switch):
    """BMv2 switch process in the root namespace, attached to its veths by name."""

    def __init__(self, name, *, switch_kind: str, device_id: int, grpc_port: int, thrift_port: int,
                 tm_port: int, config_path: Path, run_dir: Path, pcap: bool = False, **kw):
        kw.setdefault("inNamespace", False)
        super().__init__(name, **kw)
        self.switch_kind = switch_kind
        self.binary = env.switch_binary(switch_kind)
        self.device_id, self.grpc_port, self.thrift_port, self.tm_port = device_id, grpc_port, thrift_port, tm_port
        self.config_path, self.run_dir, self.pcap = config_path, run_dir, pcap
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = run_dir / f"{name}.log"

    def command(self) -> List[str]:
        args = [self.binary, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port),
                "--log-file", str(self.run_dir / f"{self.name}-bmv2"), "--log-level", "warn"]
        for port, intf in sorted(self.intfs.items()):
            if intf.name != "lo":
                args += ["-i", f"{port}@{intf.name}"]
        if self.pcap:
            args += ["--pcap", str(self.run_dir)]
        args += ["--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        if self.switch_kind == "flexpass_switch":
            args += ["--tm-port", str(self.tm_port)]
        else:
            args += ["--priority-queues", "8"]
        return args

    def start(self, controllers) -> None:  # noqa: ARG002 (no OpenFlow controller)
        for intf in self.intfList():
            if intf.name != "lo":
                _offloads_off(self, intf.name)
        self.log_path.write_text("")
        self.launch()
        self.apply(self.run_dir / f"{self.name}-apply.txt")

    def launch(self) -> None:
        """Start the switch process (no pipeline, empty tables) and wait for its APIs."""
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        _wait_port(self.grpc_port, self.proc, f"{self.switch_kind} {self.name}", self.log_path)
        if self.switch_kind == "flexpass_switch":
            _wait_port(self.tm_port, self.proc, f"{self.name} TM API", self.log_path)

    def apply(self, out: Path, *extra: str) -> subprocess.CompletedProcess:
        """``flexpass-ctl apply`` for this switch (pipeline, entries, queue/TM settings)."""
        ctl = [sys.executable, "-m", "flexpass_cp.cli", "apply", "--config", str(self.config_path),
               "--switch", self.name, "--p4info", str(env.P4_BUILD / "flexpass.p4info.txtpb"),
               "--bmv2-json", str(env.P4_BUILD / "flexpass.json"), "--timeout", "20", *extra]
        r = subprocess.run(ctl, capture_output=True, text=True, env=ctl_env())
        out.write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"flexpass-ctl apply for {self.name} failed: {env.first_line(r.stderr or r.stdout)}")
        return r

    def kill(self) -> None:
        """The switch process dies (SIGKILL): its tables, pipeline and TM state are gone;
        the veths stay, so :meth:`launch` brings the same switch back empty."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, deleteIntfs=True) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        super().stop(deleteIntfs)


def ctl_env() -> Dict[str, str]:
    e = dict(os.environ)
    e.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
    cp = str(env.REPO / "control-plane")
    e["PYTHONPATH"] = cp + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


class Network:
    """A started fabric: Mininet hosts, BMv2 switches, and the processes run in hosts."""

    def __init__(self, fabric: Fabric, net: Mininet, config: dict, run_dir: Path):
        self.fabric, self.net, self.config, self.run_dir = fabric, net, config, run_dir
        self.procs: List[subprocess.Popen] = []

    def host(self, name: str) -> Host:
        return self.net.get(name)

    def switch(self, name: str) -> P4RuntimeSwitch:
        return self.net.get(name)

    def popen(self, host: str, args: List[str], out: Path, err: Optional[Path] = None) -> subprocess.Popen:
        """Start a process in a host's namespace; stopped (by PID) in :meth:`stop`."""
        fo = open(out, "w")
        fe = open(err, "w") if err else subprocess.STDOUT
        # mnexec -a joins the host's namespaces and execs in place (no -d: the PID we
        # hold is the program's, so stop() can end exactly what was started).
        p = subprocess.Popen(["mnexec", "-a", str(self.host(host).pid), *args], stdout=fo, stderr=fe,
                             start_new_session=True)
        fo.close()
        if err:
            fe.close()
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(3)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        self.net.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_network(fabric: Fabric, scaled: Scaled, switch_kind: str, run_dir: Path,
                  profile: str = "flexpass", pcap: bool = False,
                  config_extra: Optional[dict] = None,
                  config_edit: Optional[Callable[[dict], None]] = None) -> Network:
    """Build and start `fabric`; on any failure everything started is stopped.
    `config_extra`: top-level keys of the flexpass-ctl config to set (e.g. ``ppt``,
    ``port_defaults``); `config_edit`: called with the whole config before it is written
    (e.g. per-port link rates)."""
    env.require(switch_kind)
    run_dir.mkdir(parents=True, exist_ok=True)
    target = "flexpass_switch" if switch_kind == "flexpass_switch" else "simple_switch"
    config = fabric.control_plane_config(scaled, target, profile)
    config.update(config_extra or {})
    if config_edit is not None:
        config_edit(config)
    config_path = run_dir / "switch-config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    from flexpass_cp.links import default_state_path

    # Links recorded down by an earlier run in this directory (flexpass-ctl link-down).
    default_state_path(config_path).unlink(missing_ok=True)

    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, autoStaticArp=False,
                  waitConnected=False)
    try:
        for h in fabric.hosts.values():
            net.addHost(h.name, ip=f"{h.ip}/8", mac=h.mac)
        for s in fabric.switches.values():
            net.addSwitch(s.name, cls=P4RuntimeSwitch, switch_kind=switch_kind, device_id=s.index - 1,
                          grpc_port=s.grpc_port, thrift_port=s.thrift_port, tm_port=s.tm_port,
                          config_path=config_path, run_dir=run_dir, pcap=pcap,
                          dpid=f"{s.index:016x}")
        for l in fabric.links:
            kw = {}
            if l.a in fabric.switches:
                kw["port1"] = l.a_port
            if l.b in fabric.switches:
                kw["port2"] = l.b_port
            net.addLink(l.a, l.b, cls=Link, **kw)
        net.build()
        for h in fabric.hosts.values():
            node = net.get(h.name)
            intf = node.defaultIntf()
            _offloads_off(node, intf.name)
            for d in fabric.hosts.values():
                if d.name != h.name:
                    node.cmd(f"ip neigh replace {d.ip} lladdr {fabric.first_hop_mac(h.name)} dev {intf.name}")
        for s in fabric.switches.values():
            net.get(s.name).start([])
    except BaseException:
        for s in fabric.switches.values():
            try:
                net.get(s.name).stop()
            except Exception:  # noqa: BLE001 (best effort while unwinding)
                pass
        net.stop()
        raise
    return Network(fabric, net, config, run_dir)

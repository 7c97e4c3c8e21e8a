"""BMv2 egress queue settings (simple_switch / simple_switch_grpc) over the
Thrift runtime CLI, ``simple_switch_CLI``.

P4Runtime has no queue configuration, so queue depth and rate go through the
Thrift port:

* ``set_queue_depth <nb_pkts> <port> <priority>``: capacity in PACKETS,
* ``set_queue_rate <rate_pps> <port> <priority>``: service rate in PACKETS/s.

BMv2 serves the highest-index non-empty priority queue whose rate allows it
(strict priority); it has no DWRR and no aggregate port shaper, see
p4src/README.md.  :func:`queue_commands` is pure (unit-tested);
:func:`apply_queue_settings` runs the CLI.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import List, Optional

from . import env_check
from .config import FLASHPASS_PROFILE, PPT_PROFILE, Config, Derived, ppt_qid
from .dscp import PRIORITY_LEVELS


class QueueConfigError(RuntimeError):
    pass


@dataclass(frozen=True)
class QueueCommand:
    verb: str  # set_queue_depth | set_queue_rate
    value: int
    port: int
    priority: int
    why: str

    def line(self) -> str:
        return f"{self.verb} {self.value} {self.port} {self.priority}"


def queue_commands(cfg: Config, switch: str) -> List[QueueCommand]:
    sw = cfg.switch(switch)
    out: List[QueueCommand] = []
    for port in sorted(sw.ports):
        d = Derived(cfg, sw, sw.ports[port])
        q = sw.ports[port].queues
        if sw.profile == PPT_PROFILE:
            # Stock BMv2 has no shared port buffer and no port shaper: each priority queue
            # gets the whole buffer and the line rate (strict priority between them).
            for p in range(PRIORITY_LEVELS):
                out.append(QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, ppt_qid(p),
                                        f"PPT P{p} buffer"))
                out.append(QueueCommand("set_queue_rate", d.line_rate_pps, port, ppt_qid(p),
                                        f"PPT P{p}: line rate"))
            continue
        cq, fq, lq = d.qid("credit"), d.qid("flexpass"), d.qid("legacy")
        if sw.profile == FLASHPASS_PROFILE:
            # FlashPass §III-B, §IV-A: the emulation queue drains at C·84/(84 + max frame)
            # (one emulation packet per maximum frame), a few packets deep; one data queue.
            out.append(QueueCommand("set_queue_depth", q.credit_queue_packets, port, cq,
                                    "emulation queue: a few packets (FlashPass: 8)"))
            out.append(QueueCommand("set_queue_rate", d.emulation_pps, port, cq,
                                    "emulation queue: C·84/(84 + max frame)"))
            out.append(QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, fq,
                                    "data queue buffer"))
            out.append(QueueCommand("set_queue_rate", d.line_rate_pps, port, fq,
                                    "data queue: line rate"))
            continue
        out.append(QueueCommand("set_queue_depth", q.credit_queue_packets, port, cq,
                                "credit queue: a few credits (ExpressPass: 8)"))
        out.append(QueueCommand("set_queue_rate", d.line_rate_pps, port, cq,
                                "credit queue: line rate (the P4 meter limits credits)"))
        out.append(QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, fq,
                                "FlexPass queue buffer"))
        out.append(QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, lq,
                                "legacy queue buffer"))
        out.append(QueueCommand("set_queue_rate", d.line_rate_pps, port, fq,
                                "FlexPass queue: line rate (work-conserving below legacy)"))
        legacy_rate = d.legacy_rate_pps if d.legacy_rate_pps is not None else d.line_rate_pps
        out.append(QueueCommand("set_queue_rate", legacy_rate, port, lq,
                                "legacy queue: (1 - w_q)·C" if d.legacy_rate_pps is not None
                                else "shared data queue: line rate"))
    return out


def find_cli(cli: Optional[str] = None) -> str:
    path = cli or shutil.which("simple_switch_CLI")
    if not path:
        raise QueueConfigError("simple_switch_CLI not found in PATH (it is installed with BMv2); "
                               "queue depth/rate cannot be configured")
    return path


def run_cli(lines: List[str], thrift_port: int, thrift_ip: str = "127.0.0.1",
            cli: Optional[str] = None, timeout: float = 30.0) -> str:
    """Feed commands to simple_switch_CLI (run by this interpreter, which has thrift);
    raise on missing modules, connection or command errors."""
    path = find_cli(cli)
    missing = env_check.bmv2_problems(path)
    if missing:
        raise QueueConfigError("simple_switch_CLI cannot run: " + "; ".join(missing))
    cmd = env_check.cli_command(path) + ["--thrift-port", str(thrift_port), "--thrift-ip", thrift_ip]
    try:
        proc = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise QueueConfigError(f"simple_switch_CLI on thrift port {thrift_port} timed out") from None
    out = proc.stdout + proc.stderr
    if "ModuleNotFoundError" in out or "ImportError" in out:
        raise QueueConfigError(f"simple_switch_CLI ({' '.join(cmd[:2])}) failed to import a module: "
                               f"{out.strip().splitlines()[-1]}; see python3 -m flexpass_cp.env_check bmv2")
    if proc.returncode != 0 or "Could not connect" in out or "TTransportException" in out:
        raise QueueConfigError(f"switch not reachable on thrift {thrift_ip}:{thrift_port}: "
                               f"{out.strip().splitlines()[-1] if out.strip() else 'exit ' + str(proc.returncode)}")
    for bad in ("Invalid", "Error", "error"):
        if bad in out:
            raise QueueConfigError(f"simple_switch_CLI rejected a command: {out.strip()}")
    return out


def apply_queue_settings(cfg: Config, switch: str, thrift_port: Optional[int] = None,
                         thrift_ip: str = "127.0.0.1", cli: Optional[str] = None) -> List[QueueCommand]:
    cmds = queue_commands(cfg, switch)
    port = thrift_port if thrift_port is not None else cfg.switch(switch).thrift_port
    run_cli([c.line() for c in cmds], port, thrift_ip, cli)
    return cmds

"""BMv2 egress queue settings (simple_switch / simple_switch_grpc) over the
Thrift runtime CLI, ``simple_switch_CLI``.

P4Runtime has no queue configuration, so queue depth and rate go through the
Thrift port:

* ``set_queue_depth <nb_pkts> <port> <priority>``: capacity in PACKETS,
* ``set_queue_rate <rate_pps> <port> <priority>``: service rate in PACKETS/s.

BMv2 serves the highest-index non-empty priority queue whose rate allows it
(strict priority); it has no DWRR and no aggregate port shaper, see
p4src/README.md.  The commands come from
:func:`flexpass_cp.config.queues.bmv2_queue_commands` (pure); :func:`apply_queue_settings`
runs the CLI.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import List, Optional

from . import env_check
from .config import Config
from .config.queues import QueueCommand, bmv2_queue_commands


class QueueConfigError(RuntimeError):
    pass


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
    cmds = bmv2_queue_commands(cfg, switch)
    port = thrift_port if thrift_port is not None else cfg.switch(switch).thrift_port
    run_cli([c.line() for c in cmds], port, thrift_ip, cli)
    return cmds

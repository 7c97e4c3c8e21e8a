"""The NIC edge's PNA program on DPDK's SWX pipeline, through the pipeline application's CLI
socket (DPDK's `pipeline` example, examples/pipeline/conn.c: a line per command, a prompt
after each read's answers): P4Runtime names -> the `.spec`'s, the control plane's entries as
CLI lines and table files, and a client that writes them to a running pipeline
(`flexpass-ctl nic --apply --swx-cli HOST:PORT`) or reads its registers (`regrd`).
nic/dpdk_swx.py runs the application itself for tests and the bench, with the same code.
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

PIPE = "PIPELINE0"
# Registers the tools read (P4 names, p4src/pna/flexpass_nic.p4 and credit_meter.p4) and cells.
REGISTERS = {"nic_events": 16, "class_packets": 32, "class_bytes": 32}


class SwxError(Exception):
    """What is missing or went wrong, in words naming it."""


@dataclass
class SpecNames:
    """P4Runtime names -> the `.spec`'s (p4c-dpdk prefixes and numbers some of them)."""
    tables: dict = field(default_factory=dict)   # P4 table -> spec table
    actions: dict = field(default_factory=dict)  # (P4 table, P4 action) -> spec action
    arrays: dict = field(default_factory=dict)   # P4 register/meter -> spec regarray/metarray
    args: dict = field(default_factory=dict)     # spec action -> its arguments, in order

    @classmethod
    def load(cls, spec: Path, context: Path):
        text = spec.read_text()
        names = cls()
        spec_tables = re.findall(r"^table (\S+) \{", text, re.M)
        spec_arrays = re.findall(r"^(?:regarray|metarray) (\S+) ", text, re.M)
        structs = {m.group(1): re.findall(r"^\s*bit<\d+> (\S+)", m.group(2), re.M)
                   for m in re.finditer(r"^struct (\S+) \{(.*?)^\}", text, re.M | re.S)}
        for m in re.finditer(r"^action (\S+) args (?:instanceof (\S+)|none)", text, re.M):
            names.args[m.group(1)] = structs.get(m.group(2), [])
        ctx = json.loads(context.read_text())
        for t in ctx["tables"]:
            names.tables[t["name"]] = _spec_name(t["name"], spec_tables, spec)
            for a in t.get("actions", []):
                names.actions[(t["name"], a["name"])] = a["target_name"].rsplit(".", 1)[-1]
        for p4 in list(REGISTERS) + ["credit_meter", "credit_dropped", "flow_credits", "flow_credit_id"]:
            names.arrays[p4] = _spec_name(p4, spec_arrays, spec)
        return names


def _spec_name(p4: str, candidates, spec):
    """The spec's name for ``p4``: itself, with leading underscores, or numbered (_0)."""
    found = [c for c in candidates if re.fullmatch(rf"_*{re.escape(p4)}(_\d+)?", c)]
    if len(found) != 1:
        raise SwxError(f"{spec}: {len(found)} objects named like {p4!r} ({found}): rebuild with make p4-nic")
    return found[0]


def hexv(v: int) -> str:
    return f"0x{v:x}"


def entry_files(entries, names: SpecNames, work: Path, pipe: str = PIPE):
    """CLI lines writing ``entries`` (flexpass_cp.entities), with the table files they read,
    written into ``work`` and named relative to it (the application's working directory,
    or absolute when ``work`` is)."""
    from .entities import MeterEntry, TableEntry
    lines, rows, defaults = [], {}, {}
    for e in entries:
        if isinstance(e, TableEntry):
            action = names.actions[(e.table, e.action)]
            order = names.args[action]  # the table file lists them in the action's order
            if sorted(order) != sorted(e.params):
                raise SwxError(f"{e.table}/{e.action}: the .spec's {action} takes {order}, "
                               f"the entry gives {sorted(e.params)}")
            args = " ".join(f"{k} {hexv(e.params[k])}" for k in order)
            line = f"action {action} {args}".rstrip()
            if e.is_default:
                defaults[e.table] = line
            else:
                rows.setdefault(e.table, []).append(
                    "match " + " ".join(hexv(v) for _, v in e.match) + " " + line)
        elif isinstance(e, MeterEntry):
            if (e.cir, e.cburst) != (e.pir, e.pburst):
                raise SwxError(f"meter {e.meter}[{e.index}]: DPDK's SWX meter here needs CIR = PIR "
                               f"and CBS = PBS (p4src/pna/include/control/credit_meter.p4), got {e}")
            prof = f"{e.meter}_{e.index}"
            lines.append(f"pipeline {pipe} meter profile {prof} add cir {e.cir} pir {e.pir} "
                         f"cbs {e.cburst} pbs {e.pburst}")
            lines.append(f"pipeline {pipe} meter {names.arrays[e.meter]} set profile {prof} "
                         f"index from {e.index} to {e.index}")
        else:
            raise SwxError(f"no SWX form for {e!r}")
    for table in sorted(set(rows) | set(defaults)):
        spec_table = names.tables[table]
        if table in rows:
            f = f"{spec_table}.txt"
            (work / f).write_text("\n".join(rows[table]) + "\n")
            f = str(work / f) if work.is_absolute() else f
            lines.append(f"pipeline {pipe} table {spec_table} add {f}")
        if table in defaults:
            f = f"{spec_table}.default.txt"
            (work / f).write_text(defaults[table] + "\n")
            f = str(work / f) if work.is_absolute() else f
            lines.append(f"pipeline {pipe} table {spec_table} default {f}")
    lines.append(f"pipeline {pipe} commit")
    return lines


def parse_address(address: str):
    """"HOST:PORT" of a pipeline CLI -> (host, port); SwxError naming it otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SwxError(f"--swx-cli {address!r}: expected HOST:PORT of the pipeline's CLI (its -h and -p)")
    return host, int(port)


class Cli:
    """The application's CLI socket (conn.c: a prompt after every command's output)."""
    PROMPT = b"pipeline> "

    def __init__(self, port, deadline, proc, host="127.0.0.1"):
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=60)
                break
            except OSError as e:
                if proc is None or proc.poll() is not None:
                    why = f"exited with status {proc.returncode}" if proc else f"not reachable ({e})"
                    raise SwxError(f"the SWX pipeline's CLI at {host}:{port}: {why}") from None
                if time.monotonic() > deadline:
                    raise SwxError(f"the pipeline's CLI on port {port} did not answer")
                time.sleep(0.1)
        self.address = f"{host}:{port}"
        self._until_prompt()

    @classmethod
    def connect(cls, address: str, timeout=5.0):
        """The CLI of a pipeline already running at ``address`` (HOST:PORT)."""
        host, port = parse_address(address)
        return cls(port, time.monotonic() + timeout, None, host)

    def close(self):
        self.sock.close()

    def write_entries(self, lines):
        """Send CLI lines (``entry_files``); an answer other than nothing is refused, named."""
        for line in lines:
            answer = self.cmd(line).strip()
            if answer:
                raise SwxError(f"the SWX pipeline at {self.address} refused {line!r}: {answer}")

    def _until_prompt(self):
        buf = b""
        while not buf.endswith(self.PROMPT):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SwxError(f"the SWX pipeline's CLI at {getattr(self, 'address', '?')} closed")
            buf += chunk
        return buf[: -len(self.PROMPT)].decode(errors="replace")

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\n")
        return self._until_prompt()

    def regrd(self, array, index):
        out = self.cmd(f"pipeline {PIPE} regrd {array} index {index}").strip()
        m = re.search(r"0x[0-9a-fA-F]+", out)
        if not m:
            raise SwxError(f"regrd {array}[{index}]: {out!r}")
        return int(m.group(0), 16)

    def stats(self):
        """(packets read by input port 0, {output port or "DROP": packets handled})."""
        out = self.cmd(f"pipeline {PIPE} stats")
        m = re.search(r"Input ports:\s*Port 0: packets (\d+)", out)
        if not m:
            raise SwxError(f"pipeline stats: no input port 0 in {out!r}")
        # A sink counts what it takes as "dropped": handled = packets + packets dropped.
        outs = {}
        for port, drop, a, b in re.findall(r"(?:Port (\d+)|(DROP)):\s*packets (\d+) bytes \d+ "
                                           r"packets dropped (\d+)", out.split("Output ports:")[-1]):
            outs[int(port) if port else drop] = int(a) + int(b)
        return int(m.group(1)), outs

    def in_packets(self):
        return self.stats()[0]



#!/usr/bin/env python3
"""Run the NIC edge's PNA program (p4src/pna) on DPDK's SWX pipeline with pcap ports.

p4c-dpdk turns p4src/pna/flexpass_nic.p4 into a `.spec` (`make p4-nic`); DPDK's `pipeline`
example application runs it. This tool writes the application's CLI script and I/O spec
for that `.spec`:

* input port 0 (the host side, ``nics.<name>.host_port`` must be 0) reads a pcap once;
* output ports 0 and 1 write a pcap each; SWX counts what the program drops on a DROP
  port of its own (`pipeline stats`), so every input packet is accounted for;
* the PNA entries are the control plane's (``entries.nic_entries``, the same YAML as the
  pna_nic path): the classifier and `nic_port` tables and the credit meter's profile
  (CIR = PIR, CBS = PBS), with P4Runtime names mapped to the `.spec`'s by context.json;

then runs the application (`--no-huge`, no PCI), waits until every packet came out, reads
the program's registers through the application's CLI socket and stops it.

Needs DPDK's `pipeline` example (built per DPDK's docs, outside this repository): the
binary in ``DPDK_PIPELINE`` or ``dpdk-pipeline`` on PATH, and ``RTE_INSTALL_DIR``, a DPDK
source tree of the same version with ``build/rte_build_config.h``, which the example's
`pipeline libbuild` compiles the generated C against (docs/smartnic.md, "DPDK SWX").

    dpdk_swx.py run   --config C --nic N --pcap IN.pcap --out DIR [--spec S] [--json]
    dpdk_swx.py bench --config C --nic N [--pcap IN.pcap] [--seconds 3]  # packets/s, and pna_nic's
"""

import argparse
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "control-plane"))

SPEC = REPO / "build/p4-nic/dpdk/flexpass_nic.spec"
N_OUT = 2  # ports 0 (host) and 1 (network); SWX adds its own DROP port after them
# The CLI client, the .spec's names and the entries' CLI lines: one place, shared with
# flexpass-ctl nic --apply (control-plane/flexpass_cp/swx.py).
from flexpass_cp.swx import PIPE, REGISTERS, Cli, SpecNames, SwxError, entry_files  # noqa: E402,F401


def find_pipeline():
    """(binary, source tree): DPDK's pipeline example and the DPDK source tree its
    `pipeline libbuild` compiles against; SwxError names what is missing."""
    env = os.environ.get("DPDK_PIPELINE")
    binary = env or shutil.which("dpdk-pipeline")
    if not binary:
        raise SwxError("DPDK's pipeline example not found: set DPDK_PIPELINE=path/to/pipeline "
                       "or put dpdk-pipeline on PATH (docs/smartnic.md, DPDK SWX)")
    if not os.access(binary, os.X_OK):
        raise SwxError(f"DPDK_PIPELINE={binary}: not an executable")
    src = os.environ.get("RTE_INSTALL_DIR")
    if src:
        for need in ("lib/pipeline/rte_swx_pipeline_internal.h", "build/rte_build_config.h"):
            if not (Path(src) / need).is_file():
                raise SwxError(f"RTE_INSTALL_DIR={src}: no {need} (a DPDK source tree of the "
                               "installed version, with build/rte_build_config.h)")
    return binary, src


def skip_reason():
    """Why the SWX pipeline cannot run here (None: it can)."""
    if not SPEC.is_file():
        return f"{SPEC.relative_to(REPO)} not built (make p4-nic; needs p4c-dpdk)"
    try:
        find_pipeline()
    except SwxError as e:
        return str(e)
    return None


def scripts(spec: Path, entries, names: SpecNames, in_pcap: Path, work: Path, loops=1, sinks=True,
            enable=True):
    """The CLI script: build the pipeline from ``spec``, write the entries (none when
    ``entries`` is None: `flexpass-ctl nic --apply` writes them), run on thread 1 (not yet
    without ``enable``). The application runs in ``work`` and every file is named relative
    to it (SWX's I/O spec takes tokens of at most 63 characters)."""
    shutil.copyfile(spec, work / "flexpass_nic.spec")
    shutil.copyfile(in_pcap, work / "in.pcap")
    io = ["port in 0 source mempool MEMPOOL0 file in.pcap loop {} packets 0".format(loops)]
    io += [f"port out {p} sink file {f'out{p}.pcap' if sinks else 'none'}" for p in range(N_OUT)]
    (work / "ports.io").write_text("\n".join(io) + "\n")
    cli = ["pipeline codegen flexpass_nic.spec swx.c",
           "pipeline libbuild swx.c swx.so",
           "mempool MEMPOOL0 buffer 2304 pool 8K cache 256 cpu 0",
           f"pipeline {PIPE} build lib ./swx.so io ports.io numa 0"]
    if entries is not None:
        cli += entry_files(entries, names, work)
    if enable:
        cli.append(f"thread 1 pipeline {PIPE} enable")
    (work / "flexpass_nic.cli").write_text("\n".join(cli) + "\n")
    return work / "flexpass_nic.cli"


@contextlib.contextmanager
def pipeline(cli_script: Path, work: Path, timeout=120):
    """Run DPDK's pipeline app, send it ``cli_script`` command by command through its CLI
    socket (an answer other than nothing is an error); yields the CLI; stops the app after."""
    binary, src = find_pipeline()
    with socket.socket() as probe:  # a free port for the application's CLI
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ)
    if src:
        env["RTE_INSTALL_DIR"] = src
    cmd = [binary, "-l", "0,1", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
           "--file-prefix", f"flexpass-swx-{os.getpid()}", "--", "-h", "127.0.0.1", "-p", str(port)]
    log = open(work / "pipeline.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=env)
    try:
        cli = Cli(port, time.monotonic() + timeout, proc)
        # One command at a time through the socket, so that a failing one is named (the
        # application's -s script prints its answers to a buffered stdout).
        for line in cli_script.read_text().splitlines():
            answer = cli.cmd(line).strip()
            if answer and not answer.startswith("Using DPDK source code"):
                raise SwxError(f"{cli_script.name}: {line!r}: {answer}")
        yield cli
    except SwxError as e:
        raise SwxError(f"{e}; {_log_tail(work)}") from None
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _log_tail(work):
    text = (work / "pipeline.log").read_text(errors="replace")
    bad = [ln for ln in text.splitlines() if "rror" in ln or "failed" in ln]
    lib = sorted(work.glob("*.log"))
    extra = [p.read_text(errors="replace")[-800:] for p in lib if p.name != "pipeline.log"]
    return "pipeline log: " + " | ".join(bad[-5:] or text.splitlines()[-5:]) + "".join(extra)


def load_entries(config, nic):
    from flexpass_cp.config import load_config
    from flexpass_cp.config.entries import nic_entries
    cfg = load_config(config)
    n = cfg.nic(nic)
    if n.host_port != 0:
        raise SwxError(f"nics.{nic}.host_port: the SWX runner feeds input port 0, the config says {n.host_port}")
    return nic_entries(cfg, nic)


def pcap_packets(path):
    """The complete records of a classic pcap file being written (none before its header)."""
    try:
        buf = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    if len(buf) < 24:
        return []
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
             b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}.get(buf[:4])
    if order is None:
        raise SwxError(f"{path}: not a pcap file")
    out, at = [], 24
    while at + 16 <= len(buf):
        incl = struct.unpack_from(order + "I", buf, at + 8)[0]
        if at + 16 + incl > len(buf):
            break
        out.append(buf[at + 16: at + 16 + incl])
        at += 16 + incl
    return out


def read_pcap_count(path):
    return len(pcap_packets(path))


@dataclass
class Run:
    outputs: dict      # port -> pcap path
    dropped: int       # packets the program dropped (SWX's DROP port)
    registers: dict    # P4 name -> list of cells
    log: str


def run(entries, in_pcap, work, spec=SPEC, timeout=120):
    """Every packet of ``in_pcap`` through the program once; the output pcaps and registers."""
    spec = Path(spec)
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    names = SpecNames.load(spec, spec.with_name("context.json"))
    n_in = read_pcap_count(in_pcap)
    script = scripts(spec, entries, names, Path(in_pcap).resolve(), work)
    with pipeline(script, work, timeout) as cli:
        deadline = time.monotonic() + timeout
        outs = {p: work / f"out{p}.pcap" for p in range(N_OUT)}
        while sum((handled := cli.stats()[1]).values()) < n_in \
                or sum(read_pcap_count(f) for f in outs.values()) < n_in - handled.get("DROP", 0):
            if time.monotonic() > deadline:
                raise SwxError(f"only {handled} of {n_in} packets came out in {timeout} s")
            time.sleep(0.05)
        if sum(handled.values()) != n_in:
            raise SwxError(f"{n_in} packets in, {handled} out")
        regs = {p4: [cli.regrd(names.arrays[p4], i) for i in range(n)] for p4, n in REGISTERS.items()}
    return Run(outs, handled.get("DROP", 0), regs, (work / "pipeline.log").read_text(errors="replace"))


@dataclass
class Rate:
    offered_per_s: float  # packets read from the pcap (looped) per second, whole run
    passed_per_s: float   # credits the meter passed per second (class_packets), whole run
    busiest_per_s: float  # credits passed per second in the busiest ``window`` seconds
    window: float


CLASS_CREDIT_GREEN = 1 << 2  # CLASS_INDEX(KIND_CREDIT, COLOR_GREEN), p4src/pna/include/metadata.p4


def credit_rate(entries, in_pcap, work, spec=SPEC, seconds=3.0, window=2.0, timeout=120):
    """``in_pcap`` looped through the program, outputs to sinks without files (one worker
    thread): packets/s read and credits/s passed over the run, and credits/s passed in the
    busiest ``window`` s (counters read every 0.25 s)."""
    spec = Path(spec)
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    names = SpecNames.load(spec, spec.with_name("context.json"))
    script = scripts(spec, entries, names, Path(in_pcap).resolve(), work, loops=1_000_000_000, sinks=False)
    cls = names.arrays["class_packets"]
    with pipeline(script, work, timeout) as cli:
        deadline = time.monotonic() + timeout
        while cli.in_packets() == 0:
            if time.monotonic() > deadline:
                raise SwxError("the pipeline did not start reading its input")
            time.sleep(0.1)
        time.sleep(0.5)  # the bucket, full at start, drains
        samples = []
        end = time.monotonic() + seconds
        while not samples or samples[-1][0] < end:
            samples.append((time.monotonic(), cli.in_packets(), cli.regrd(cls, CLASS_CREDIT_GREEN)))
            time.sleep(0.25)
    (t0, n0, c0), (t1, n1, c1) = samples[0], samples[-1]
    busiest = max(((cb - ca) / (tb - ta) for i, (ta, _, ca) in enumerate(samples)
                   for tb, _, cb in samples[i + 1:] if tb - ta >= window), default=0.0)
    return Rate((n1 - n0) / (t1 - t0), (c1 - c0) / (t1 - t0), busiest, window)


def bench_pcap(path):
    """The bench's packets: a mix like a host's egress (credits of 16 flows, proactive and
    reactive data of 1500-byte MTU frames, control, legacy TCP), 64 packets."""
    from flexpass_cp.scapy_flexpass import FlexPass, FlexPassCredit, FlexPassData
    from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    def udp(dscp, body):
        return eth / IP(src="10.0.1.1", dst="10.0.2.1", tos=dscp << 2) / UDP(sport=40000, dport=7890) / body
    pkts = []
    for i in range(16):
        pkts.append(udp(46, FlexPass(flow_id=i) / FlexPassCredit(credit_seq=i)))
        pkts.append(udp(26, FlexPass(type=2, flow_id=i) / FlexPassData(flow_seq=i) / Raw(b"p" * 1440)))
        pkts.append(udp(30 if i % 2 else 24, FlexPass(type=3 if i % 2 else 6, flow_id=i)
                        / (FlexPassData(flow_seq=i) / Raw(b"r" * 1440) if i % 2 else Raw())))
        pkts.append(eth / IP(src="10.0.1.1", dst="10.0.2.1") / TCP(sport=5000, dport=80) / Raw(b"t" * 1400))
    wrpcap(str(path), pkts)


def pna_nic_bench(json_path, in_pcap, work, seconds=5.0):
    """BMv2 pna_nic on the same pcap (--use-files): packets/s, or why it did not run."""
    binary = shutil.which("pna_nic")
    if not binary:
        return None, "pna_nic not installed"
    if not Path(json_path).is_file():
        return None, f"{json_path} not built (make p4-nic; needs p4c-bm2-pna)"
    shutil.copyfile(in_pcap, Path(work) / "p0_in.pcap")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        thrift = probe.getsockname()[1]
    proc = subprocess.Popen([binary, "--thrift-port", str(thrift), "--use-files", "0",
                             "-i", f"0@{work}/p0", "-i", f"1@{work}/p1", str(json_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    try:
        out, _ = proc.communicate(timeout=seconds)
        last = [ln for ln in out.splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
        return None, f"pna_nic refuses the program: {last[0]}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, ("pna_nic loaded the program, but its packets/s needs its entries over "
                      "Thrift, which this bench does not write yet")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "bench"):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True, help="control-plane YAML with a nics: entry")
        p.add_argument("--nic", required=True, help="the nics: entry (edge: pna)")
        p.add_argument("--pcap", required=(name == "run"),
                       help="packets into the host port (0); bench: a built-in mix by default")
        p.add_argument("--spec", default=str(SPEC))
        if name == "run":
            p.add_argument("--out", required=True, help="directory for the output pcaps and scripts")
            p.add_argument("--json", action="store_true")
        else:
            p.add_argument("--seconds", type=float, default=3.0)
            p.add_argument("--skip-missing", action="store_true",
                           help="print SKIPPED and the reason, and succeed, where SWX cannot run")
    a = ap.parse_args(argv)
    if a.cmd == "bench" and a.skip_missing and skip_reason():
        print(f"SKIPPED nic swx bench: {skip_reason()}")
        return 0
    try:
        entries = load_entries(a.config, a.nic)
        if a.cmd == "run":
            r = run(entries, a.pcap, a.out, a.spec)
            counts = {p: read_pcap_count(f) for p, f in r.outputs.items()}
            if a.json:
                print(json.dumps({"outputs": {str(p): str(f) for p, f in r.outputs.items()},
                                  "packets": counts, "dropped": r.dropped, "registers": r.registers}))
            else:
                for p, f in r.outputs.items():
                    print(f"port {p}: {counts[p]} packets in {f}")
                print(f"dropped: {r.dropped}")
                print("nic_events:", r.registers["nic_events"])
        else:
            with tempfile.TemporaryDirectory(prefix="flexpass-swx-") as work:
                pcap = a.pcap or f"{work}/bench.pcap"
                if not a.pcap:
                    bench_pcap(pcap)
                n = read_pcap_count(pcap)
                r = credit_rate(entries, pcap, f"{work}/swx", a.spec, a.seconds)
                print(f"NIC edge, PNA program, {n}-packet pcap looped, one worker thread:")
                print(f"  dpdk swx pipeline: {r.offered_per_s:,.0f} packets/s "
                      f"({r.passed_per_s:,.0f} credits/s passed by the meter)")
                os.makedirs(f"{work}/bmv2")
                pps, why = pna_nic_bench(REPO / "build/p4-nic/bmv2/flexpass_nic.json", pcap, f"{work}/bmv2")
                print(f"  bmv2 pna_nic: {f'{pps:,.0f} packets/s' if pps else 'not run: ' + why}")
    except (SwxError, ValueError) as e:
        print(f"dpdk_swx.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""FlexPass NIC edge on Linux: the host's egress queues configured like a FlexPass switch port.

ExpressPass needs credits rate-limited at the host NIC as well as at switches ("host and
switch perform credit rate-limiting"), and FlexPass treats the NIC as an edge switch (§4.3,
footnote 6). On a Linux host, or a Linux router in a test network, this tool builds that
port from standard qdiscs:

    htb root (link rate C)
    ├── 1:10 credits   rate = ceil = share·C·84/(84+F) in frame bytes (×60/84: htb counts
    │                  skb->len, a credit's frame without preamble/IFG/FCS), priority 0,
    │                  burst 2 credits, pfifo of 8 credits
    ├── 1:20 FlexPass  rate = w_q·C, ceil = C (proactive, reactive, control)
    └── 1:30 legacy    rate = (1−w_q)·C, ceil = C (default class)

F is the maximum frame of the links' MTU on the wire, MTU + 38 (1538 at 1500, 9038 with
jumbo frames: `--mtu 9000`; docs/protocol.md §9, control-plane/flexpass_cp/frames.py).
Packets are classified by DSCP with u32 filters (the FlexPass DSCP plan). htb's guaranteed
rates with borrowing up to the link rate play the role of DWRR weights w_q / 1−w_q; the
credit class is served first and never borrows. `--aqm red` puts a RED qdisc with ECN
marking at K (and a hard limit at the selective-drop threshold) on the FlexPass class for
kernels that have sch_red; the default (pfifo) works everywhere.

Usage: flexpass_nic.py apply --dev eth0 --link-mbit 10000 [--w-q 0.5] [--credit-share W] [--mtu 1500]
       flexpass_nic.py apply --config control-plane/configs/X.yaml --nic h1   (its nics: entry, edge qdisc)
       flexpass_nic.py clear --dev eth0 | show --dev eth0 | print --dev eth0 ...
       flexpass_nic.py ebpf apply|show|clear ...   the same edge as a tc eBPF program
                                                    (nic/flexpass_ebpf.py, docs/smartnic.md)
"""

import argparse
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The frame sizes of an MTU: one definition for the control plane and this tool
# (flexpass_cp.frames, no dependencies; checked against docs/mtu-vectors.json).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "control-plane"))
from flexpass_cp import frames  # noqa: E402

CREDIT_WIRE = frames.CREDIT_WIRE
# htb credit class burst: two of the largest credits, in frame bytes (2 × 68).
CREDIT_BURST = 2 * frames.frame_bytes(frames.MAX_CREDIT_WIRE)
MAX_DATA_WIRE = frames.max_frame_wire(frames.DEFAULT_MTU)

# The htb class of each switch queue (the profile's queue names, flexpass_cp.config.profiles):
# the u32 filters below, or the eBPF edge (nic/flexpass_ebpf.py: skb->priority), pick them.
HTB_CLASS = {"credit": "1:10", "flexpass": "1:20", "legacy": "1:30"}

# FlexPass DSCP plan defaults (docs/protocol.md §10).
DEFAULT_DSCP = {"credit": 46, "proactive_data": 26, "reactive_data": 30, "control": 24, "legacy": 0}


@dataclass
class NicConfig:
    dev: str
    link_mbit: float
    w_q: float = 0.5
    credit_share: float = None  # default: w_q (FlexPass); 1.0 for ExpressPass
    credit_buffer: int = 8
    data_limit_pkts: int = 1000
    aqm: str = "pfifo"
    k_bytes: int = 60_000
    red_bytes: int = 100_000
    dscp: dict = None
    mtu: int = frames.DEFAULT_MTU

    def validate(self):
        if not self.dev:
            raise ValueError("--dev is required")
        if not self.link_mbit > 0:
            raise ValueError(f"--link-mbit must be > 0, got {self.link_mbit}")
        if not 0 < self.w_q < 1:
            raise ValueError(f"--w-q must be in (0, 1), got {self.w_q}")
        share = self.share()
        if not 0 < share <= 1:
            raise ValueError(f"--credit-share must be in (0, 1], got {share}")
        if self.data_limit_pkts < 1:
            raise ValueError("--data-limit-pkts must be >= 1")
        if self.credit_buffer < 1:
            raise ValueError("--credit-buffer must be >= 1 credit")
        try:
            frames.check_mtu(self.mtu)
        except ValueError as e:
            raise ValueError(f"--mtu: {e}") from None
        if self.aqm not in ("pfifo", "red"):
            raise ValueError(f"--aqm must be pfifo or red, got {self.aqm}")
        if not 0 < self.k_bytes < self.red_bytes:
            raise ValueError("need 0 < K < selective-drop threshold")
        dscp = self.dscp or DEFAULT_DSCP
        if sorted(dscp) != sorted(DEFAULT_DSCP):
            raise ValueError(f"DSCP plan needs exactly {sorted(DEFAULT_DSCP)}")
        values = list(dscp.values())
        if any(not 0 <= v < 64 for v in values) or len(set(values)) != len(values):
            raise ValueError(f"DSCP values must be distinct and in 0..63: {dscp}")

    def share(self):
        return self.w_q if self.credit_share is None else self.credit_share

    def max_frame(self):
        """The maximum frame of the MTU on the wire: MTU + 38."""
        return frames.max_frame_wire(self.mtu)

    def credit_kbit(self):
        """The credit rate limit in kbit/s of frames as htb counts them (skb->len: no
        preamble, IFG or FCS): share·C·84/(84+F), F = MTU + 38 (FlexPass §4.1, ExpressPass
        §3.1; docs/protocol.md §9–10), in frame bytes as every edge and the agent count it
        (frames.credit_limit_frame_bytes_per_s: ×60/84)."""
        return frames.credit_limit_frame_bytes_per_s(self.link_mbit * 1e6, self.share(), self.mtu) * 8 / 1000


# What a control-plane config's nics: entry gives in place of the flags (argparse dests).
CONFIG_FLAGS = ("dev", "link_mbit", "w_q", "credit_share", "mtu")


def from_config(path: str, name: str, edge: str):
    """(NicConfig, credit_meter_burst_packets) of ``nics.<name>`` in a control-plane config
    (flexpass_cp.config: validated there, errors name the key), for an edge of kind ``edge``
    (qdisc, ebpf); the DSCP plan is the config's."""
    from flexpass_cp.config import load_config
    from flexpass_cp.dscp import TrafficClass
    cfg = load_config(path)
    nic = cfg.nic(name)
    if nic.edge != edge:
        tool = {"qdisc": "flexpass_nic.py apply", "ebpf": "flexpass_nic.py ebpf apply"}.get(nic.edge)
        how = f"apply it with {tool}" if tool else "the control plane configures it (flexpass-ctl nic)"
        raise ValueError(f"nics.{name}.edge: the config says {nic.edge!r}, this tool builds {edge!r}: {how}")
    dscp = {c.value: cfg.dscp.dscp(c) for c in TrafficClass}
    return NicConfig(dev=nic.device, link_mbit=nic.link_rate_bps / 1e6, w_q=nic.w_q,
                     credit_share=nic.credit_share, mtu=nic.mtu, dscp=dscp), nic.credit_meter_burst_packets


def add_source_args(p: argparse.ArgumentParser, extra=()) -> None:
    """--config FILE --nic NAME, or the flags they replace (CONFIG_FLAGS + ``extra``, given
    as (flag, dest, type, help))."""
    p.add_argument("--config", help="a control-plane YAML config: take the settings from its nics: entry")
    p.add_argument("--nic", help="with --config: the entry's name (nics.<name>)")
    p.add_argument("--dev", help="the device (required without --config)")
    p.add_argument("--link-mbit", type=float, help="C, the link rate (required without --config)")
    p.add_argument("--w-q", "--w_q", dest="w_q", type=float, help="default 0.5")
    p.add_argument("--credit-share", type=float, default=None,
                   help="credits may fill this share of the link (default w_q; 1.0 for ExpressPass)")
    p.add_argument("--mtu", type=int, help=f"IP MTU of the links ({frames.MIN_MTU}..{frames.MAX_MTU}, default "
                   f"{frames.DEFAULT_MTU}; 9000: jumbo frames): credits stand for frames of MTU + 38 B")
    for flag, dest, typ, hlp in extra:
        p.add_argument(flag, dest=dest, type=typ, help=hlp)


def nic_from_args(a, edge: str, extra_dests=()):
    """(NicConfig, credit_meter_burst_packets or None) from --config/--nic or from the flags;
    a flag that the config also gives is refused with --config."""
    if a.config or a.nic:
        if not (a.config and a.nic):
            raise ValueError("--config and --nic go together")
        given = [d for d in CONFIG_FLAGS + tuple(extra_dests) if getattr(a, d) is not None]
        if given:
            flags = ", ".join("--" + d.replace("_", "-") for d in given)
            raise ValueError(f"{flags}: given by nics.{a.nic} in {a.config}; use either --config --nic or flags")
        return from_config(a.config, a.nic, edge)
    if a.dev is None or a.link_mbit is None:
        raise ValueError("--dev and --link-mbit are required (or --config FILE --nic NAME)")
    nic = NicConfig(dev=a.dev, link_mbit=a.link_mbit, w_q=0.5 if a.w_q is None else a.w_q,
                    credit_share=a.credit_share, mtu=frames.DEFAULT_MTU if a.mtu is None else a.mtu)
    return nic, None


def commands(cfg: NicConfig, u32: bool = True):
    """The tc commands that build the port (pure: unit-tested without root); without the
    u32 DSCP filters when ``u32`` is false (the eBPF edge classifies instead)."""
    cfg.validate()
    dscp = cfg.dscp or DEFAULT_DSCP
    dev = cfg.dev
    c = max(1, int(cfg.link_mbit * 1000))
    credit = max(8, int(cfg.credit_kbit()))
    flex = max(8, int(cfg.w_q * c) - credit)
    legacy = max(8, int((1 - cfg.w_q) * c))
    tc = ["tc"]
    cmds = [
        tc + ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "30"],
        tc + ["class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", f"{c}kbit", "ceil", f"{c}kbit"],
        tc + ["class", "replace", "dev", dev, "parent", "1:1", "classid", "1:10", "htb", "rate", f"{credit}kbit",
              "ceil", f"{credit}kbit", "burst", f"{CREDIT_BURST}b", "cburst", f"{CREDIT_BURST}b", "prio", "0"],
        tc + ["class", "replace", "dev", dev, "parent", "1:1", "classid", "1:20", "htb", "rate", f"{flex}kbit",
              "ceil", f"{c}kbit", "prio", "1"],
        tc + ["class", "replace", "dev", dev, "parent", "1:1", "classid", "1:30", "htb", "rate", f"{legacy}kbit",
              "ceil", f"{c}kbit", "prio", "1"],
        tc + ["qdisc", "replace", "dev", dev, "parent", "1:10", "handle", "10:", "pfifo", "limit", str(cfg.credit_buffer)],
    ]
    if cfg.aqm == "red":
        # RED with ECN: marks above K (min = max = K for a step), hard limit at the red threshold.
        pkt = cfg.mtu
        cmds.append(tc + ["qdisc", "replace", "dev", dev, "parent", "1:20", "handle", "20:", "red",
                          "limit", str(cfg.red_bytes * 4), "min", str(cfg.k_bytes), "max", str(cfg.k_bytes + pkt),
                          "avpkt", str(pkt), "burst", str(cfg.k_bytes // pkt + 1), "probability", "1.0", "ecn"])
    else:
        cmds.append(tc + ["qdisc", "replace", "dev", dev, "parent", "1:20", "handle", "20:", "pfifo",
                          "limit", str(cfg.data_limit_pkts)])
    cmds.append(tc + ["qdisc", "replace", "dev", dev, "parent", "1:30", "handle", "30:", "pfifo",
                      "limit", str(cfg.data_limit_pkts)])
    if not u32:
        return cmds
    flows = {"credit": HTB_CLASS["credit"], "proactive_data": HTB_CLASS["flexpass"],
             "reactive_data": HTB_CLASS["flexpass"], "control": HTB_CLASS["flexpass"]}
    for prio, (cls, flowid) in enumerate(flows.items(), start=1):
        cmds.append(tc + ["filter", "replace", "dev", dev, "parent", "1:", "protocol", "ip", "prio", str(prio),
                          "u32", "match", "ip", "tos", hex(dscp[cls] << 2), "0xfc", "flowid", flowid])
    return cmds


def run(cmds, dry):
    for cmd in cmds:
        if dry:
            print(shlex.join(cmd))
            continue
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed: {r.stderr.strip()}")


def cmd_apply(a):
    cfg, _burst = nic_from_args(a, "qdisc")
    cfg.credit_buffer, cfg.data_limit_pkts, cfg.aqm = a.credit_buffer, a.data_limit_pkts, a.aqm
    cfg.k_bytes, cfg.red_bytes = a.k_bytes, a.red_bytes
    run(commands(cfg), dry=a.cmd == "print")
    if a.cmd == "apply":
        from flexpass_cp.config.targets import nic_agent_flags
        print(f"agent on this host: flexpass agent {nic_agent_flags('qdisc', cfg.dev)} "
              "(the htb credit class polices its credits; the agent paces flows only)")


def cmd_clear(a):
    run([["tc", "qdisc", "del", "dev", a.dev, "root"]], dry=False)


def cmd_show(a):
    for what in ("qdisc", "class", "filter"):
        print(subprocess.run(["tc", "-s", what, "show", "dev", a.dev], capture_output=True, text=True).stdout)


def build_parser():
    import flexpass_ebpf  # imports this module: only here, not at the top
    ap = argparse.ArgumentParser(prog="flexpass_nic.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("apply", "print"):
        p = sub.add_parser(name, help="configure the port" if name == "apply" else "print the tc commands")
        add_source_args(p)
        p.add_argument("--credit-buffer", type=int, default=8)
        p.add_argument("--data-limit-pkts", type=int, default=1000, help="pfifo limit of the data classes")
        p.add_argument("--aqm", choices=["pfifo", "red"], default="pfifo")
        p.add_argument("--k-bytes", type=int, default=60_000)
        p.add_argument("--red-bytes", type=int, default=100_000)
        p.set_defaults(func=cmd_apply)
    for name, func in (("clear", cmd_clear), ("show", cmd_show)):
        p = sub.add_parser(name)
        p.add_argument("--dev", required=True)
        p.set_defaults(func=func)
    ebpf = sub.add_parser("ebpf", help="the same edge as a tc eBPF program (nic/flexpass_ebpf.py)")
    flexpass_ebpf.add_commands(ebpf.add_subparsers(dest="ebpf_cmd", required=True))
    return ap


def run_command(a):
    """Run a parsed command (``a.func``); a bad setting or a failed step is one line on
    stderr naming it, exit status 2 (flexpass_ebpf.EdgeError is a RuntimeError)."""
    try:
        a.func(a)
    except (ValueError, RuntimeError) as e:
        print(f"{getattr(a, 'tool', 'flexpass_nic')}: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None):
    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

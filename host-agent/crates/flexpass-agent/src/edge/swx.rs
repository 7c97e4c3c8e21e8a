//! The PNA edge's counters (p4src/pna/flexpass_nic.p4) where it runs on DPDK's SWX pipeline:
//! read with the pipeline application's CLI (DPDK's `pipeline` example, examples/pipeline:
//! one command a line, `pipeline PIPELINE0 regrd ARRAY index I` answers `0x…`, a prompt
//! after each read of the socket), as nic/dpdk_swx.py and `flexpass-ctl nic --apply`
//! (control-plane/flexpass_cp/swx.py) talk to it. `--nic-edge pna --nic-edge-swx HOST:PORT`.

use super::EdgeCounters;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// The pipeline's name in nic/dpdk_swx.py's and flexpass_cp.swx's CLI scripts.
pub const SWX_PIPELINE: &str = "PIPELINE0";
const PROMPT: &[u8] = b"pipeline> ";

/// p4c-dpdk's names, in the `.spec` of p4src/pna/flexpass_nic.p4 (`make p4-nic`), of the
/// registers read here, and their sizes (nic/tests/test_dpdk_swx.py checks them against
/// the built `.spec`).
pub const SWX_REGISTERS: [(&str, u32); 6] = [
    ("nic_events_0", 16),
    ("class_packets_0", 32),
    ("class_bytes_0", 32),
    ("_credit_dropped", 512),
    ("_flow_credits", FLOW_SLOTS),
    ("_flow_credit_id", FLOW_SLOTS),
];
/// `flow_credits` slots (p4src/README.md "NIC edge": 12-bit hash of src ^ dst ^ flow_id).
const FLOW_SLOTS: u32 = 4096;
/// Cells per round trip (a whole `flow_credits` array): the requests (~200 kB) stay below
/// the CLI's 1 MiB read buffer and the answers (~80 kB) below the socket's; each round trip
/// waits for the application's main thread, descheduled for milliseconds on a busy host.
const BATCH: u32 = 4096;

/// `nic_events` cells with a name (p4src/pna/include/metadata.p4, the switch's EVT_* ids),
/// the eBPF edge's names (nic/flexpass_ebpf.py `NIC_EVENTS`).
const EVENTS: [(u32, &str); 5] = [
    (0, "parser_error"),
    (1, "not_ipv4"),
    (5, "flexpass_seen"),
    (7, "bad_flexpass"),
    (8, "no_port"),
];
/// `class_packets` / `class_bytes` cells: kind << 2 | colour (the switch's KIND_*, colours
/// green 0 and red 2), named as the eBPF edge's `show` names them.
const KINDS: [&str; 5] = [
    "legacy",
    "credit",
    "proactive_data",
    "reactive_data",
    "control",
];
const COLOURS: [(u32, &str); 2] = [(0, "green"), (2, "red")];
const CLASS_CREDIT_GREEN: usize = 1 << 2;

/// Packets and IPv4 bytes of one (kind, colour) that left the edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    pub packets: u64,
    pub ip_bytes: u64,
}

/// One `flow_credits` slot that counted credits: the flow id last recorded there
/// (`flow_credit_id`) and the credits that passed the meter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowCredits {
    pub slot: u32,
    pub flow_id: u32,
    pub credits: u64,
    /// The peer (IP:port) of this agent's receiver whose credits the slot counts: its flow
    /// id is the slot's last one and its (host address, peer address, flow id) hash to the
    /// slot (`flow_slot`); absent when no receiver of this agent matches (another host's
    /// flow, a flow that ended, or two flows sharing the slot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<String>,
}

/// The slot of the PNA program's per-flow credit registers (`flow_slot` in
/// p4src/pna/include/control/credit_meter.p4): src ^ dst ^ flow_id folded to 12 bits. XOR
/// is symmetric, so either end's view gives the same slot.
pub fn flow_slot(src: Ipv4Addr, dst: Ipv4Addr, flow_id: u32) -> u32 {
    let x = u32::from(src) ^ u32::from(dst) ^ flow_id;
    (x ^ (x >> 12) ^ (x >> 24)) & (FLOW_SLOTS - 1)
}

/// Name this agent's receivers in the slots that counted their credits. `local` is the
/// address the agent's socket is bound to; when it is unspecified, the source address the
/// host's routes pick towards each peer (the credits' source) is used.
pub fn match_receivers(
    detail: &mut PnaDetail,
    local: Option<IpAddr>,
    receivers: impl Iterator<Item = (SocketAddr, u32)>,
) {
    let mut by_slot: BTreeMap<(u32, u32), SocketAddr> = BTreeMap::new();
    let mut source: BTreeMap<Ipv4Addr, Option<Ipv4Addr>> = BTreeMap::new();
    for (peer, flow_id) in receivers {
        let SocketAddr::V4(p) = peer else { continue };
        let src = match local {
            Some(IpAddr::V4(a)) if !a.is_unspecified() => Some(a),
            _ => *source
                .entry(*p.ip())
                .or_insert_with(|| source_towards(*p.ip())),
        };
        if let Some(src) = src {
            by_slot.insert((flow_slot(src, *p.ip(), flow_id), flow_id), peer);
        }
    }
    for f in &mut detail.flow_credits {
        f.receiver = by_slot.get(&(f.slot, f.flow_id)).map(|p| p.to_string());
    }
}

/// The source address this host's routes use towards `peer` (a connected UDP socket's
/// local address: no packet is sent).
fn source_towards(peer: Ipv4Addr) -> Option<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect((peer, 9)).ok()?;
    match s.local_addr().ok()?.ip() {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    }
}

/// What `status` shows of the PNA edge beyond the common counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PnaDetail {
    /// Per (kind, colour) with packets: "credit/green", "reactive_data/red", …
    pub classes: BTreeMap<String, ClassCount>,
    pub events: BTreeMap<String, u64>,
    /// Slots with credits, by slot.
    pub flow_credits: Vec<FlowCredits>,
}

/// The pipeline's CLI connection.
struct SwxCli {
    addr: String,
    sock: TcpStream,
}

impl SwxCli {
    fn connect(addr: &str) -> Result<Self, String> {
        let err = |e: &dyn std::fmt::Display| {
            format!(
                "the SWX pipeline's CLI at {addr}: {e} (is the PNA edge's pipeline running there? nic/dpdk_swx.py, docs/smartnic.md)"
            )
        };
        let sa = addr
            .to_socket_addrs()
            .map_err(|e| err(&e))?
            .next()
            .ok_or_else(|| err(&"no address"))?;
        let sock =
            TcpStream::connect_timeout(&sa, Duration::from_millis(500)).map_err(|e| err(&e))?;
        sock.set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| err(&e))?;
        let mut cli = SwxCli {
            addr: addr.to_string(),
            sock,
        };
        cli.answer(0)?; // the banner and the first prompt
        Ok(cli)
    }

    /// Read until `n` values (`0x…` lines) have come and the last read ended with the
    /// prompt; the values in order (`regrd_answer`).
    fn answer(&mut self, n: usize) -> Result<Vec<u64>, String> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            let got = self
                .sock
                .read(&mut chunk)
                .map_err(|e| format!("the SWX pipeline's CLI at {}: {e}", self.addr))?;
            if got == 0 {
                return Err(format!(
                    "the SWX pipeline's CLI at {} closed the connection",
                    self.addr
                ));
            }
            buf.extend_from_slice(&chunk[..got]);
            if let Some(values) = regrd_answer(&buf, n)
                .map_err(|e| format!("the SWX pipeline at {}: {e}", self.addr))?
            {
                return Ok(values);
            }
        }
    }

    /// Cells 0..n of register array `array`.
    fn regrd_all(&mut self, array: &str, n: u32) -> Result<Vec<u64>, String> {
        let mut out = Vec::with_capacity(n as usize);
        let mut at = 0;
        while at < n {
            let end = (at + BATCH).min(n);
            let mut req = String::new();
            for i in at..end {
                req.push_str(&format!(
                    "pipeline {SWX_PIPELINE} regrd {array} index {i}\n"
                ));
            }
            self.sock
                .write_all(req.as_bytes())
                .map_err(|e| format!("the SWX pipeline's CLI at {}: {e}", self.addr))?;
            let v = self
                .answer((end - at) as usize)
                .map_err(|e| format!("{e} (reading {array})"))?;
            out.extend_from_slice(&v);
            at = end;
        }
        Ok(out)
    }
}

/// The values the CLI answered in `buf` (everything read since the commands were sent) to
/// `n` `regrd` commands: one `0x…` line each (cli.c: `0x%" PRIx64 "\n"`), a prompt after
/// each read's answers. None while `buf` does not end with the prompt or holds fewer than
/// `n` values. Any other line is an error naming it, and so is a value that is not 1–16
/// significant hex digits (it would not fit the 64-bit cell) and more values than commands
/// (each counter would land in another cell). With `n` 0 (the banner) anything goes.
#[doc(hidden)] // pub for the edge_text fuzz target (host-agent/fuzz), not an API
pub fn regrd_answer(buf: &[u8], n: usize) -> Result<Option<Vec<u64>>, String> {
    if !buf.ends_with(PROMPT) {
        return Ok(None);
    }
    if n == 0 {
        return Ok(Some(Vec::new()));
    }
    let text = String::from_utf8_lossy(buf);
    let mut values = Vec::new();
    let lines = text
        .split('\n')
        .map(|l| l.trim_start_matches("pipeline> ").trim())
        .filter(|l| !l.is_empty() && *l != "pipeline>");
    for (k, line) in lines.enumerate() {
        let bad = |why: &str| format!("regrd answered {line:?} (answer line {}: {why})", k + 1);
        let Some(hex) = line.strip_prefix("0x") else {
            return Err(bad("not a value"));
        };
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("not a hex number"));
        }
        values.push(u64::from_str_radix(hex, 16).map_err(|_| bad("more than 64 bits"))?);
    }
    if values.len() > n {
        return Err(format!(
            "regrd answered {} values to {n} reads (the answers are out of step)",
            values.len()
        ));
    }
    Ok((values.len() == n).then_some(values))
}

/// Read the PNA edge's counters from the SWX pipeline whose CLI listens at `addr`
/// (HOST:PORT): per-class packets and bytes, named events, credits passed and dropped,
/// and the per-flow credit slots that counted credits. Its rate and burst are the meter
/// profile's, which SWX's CLI does not read back: null.
pub fn read_swx_edge(addr: &str) -> Result<EdgeCounters, String> {
    let mut cli = SwxCli::connect(addr)?;
    let mut regs = BTreeMap::new();
    for (name, n) in SWX_REGISTERS {
        regs.insert(name, cli.regrd_all(name, n)?);
    }
    edge_from_registers(addr, &regs)
}

/// The counters in the register cells read from the pipeline at `addr` (every array of
/// `SWX_REGISTERS`, with its size). A count that does not fit its counter (the sum of
/// `credit_dropped` past 2⁶⁴ − 1, a `flow_credits` or `flow_credit_id` cell past its 32
/// bits) is an error naming the register and cell, not a wrapped number.
#[doc(hidden)] // pub for the edge_text fuzz target (host-agent/fuzz), not an API
pub fn edge_from_registers(
    addr: &str,
    regs: &BTreeMap<&str, Vec<u64>>,
) -> Result<EdgeCounters, String> {
    let bad = |what: String| format!("the SWX pipeline at {addr}: {what}");
    for (name, n) in SWX_REGISTERS {
        match regs.get(name) {
            Some(cells) if cells.len() == n as usize => {}
            Some(cells) => {
                return Err(bad(format!(
                    "{name}: {} cells read, it has {n}",
                    cells.len()
                )))
            }
            None => return Err(bad(format!("{name} not read"))),
        }
    }
    let (events, packets, bytes) = (
        &regs["nic_events_0"],
        &regs["class_packets_0"],
        &regs["class_bytes_0"],
    );
    let mut classes = BTreeMap::new();
    for (kind, kname) in KINDS.iter().enumerate() {
        for (colour, cname) in COLOURS {
            let i = (kind as u32) << 2 | colour;
            let p = packets[i as usize];
            if p > 0 {
                classes.insert(
                    format!("{kname}/{cname}"),
                    ClassCount {
                        packets: p,
                        ip_bytes: bytes[i as usize],
                    },
                );
            }
        }
    }
    // bit<32> cells (p4src/pna/include/control/credit_meter.p4).
    let u32_cell = |name: &str, slot: usize, v: u64| {
        u32::try_from(v).map_err(|_| bad(format!("{name}[{slot}] = {v:#x} is past its 32 bits")))
    };
    let mut flow_credits = Vec::new();
    for (slot, (&c, &id)) in regs["_flow_credits"]
        .iter()
        .zip(&regs["_flow_credit_id"])
        .enumerate()
    {
        if c > 0 {
            flow_credits.push(FlowCredits {
                slot: slot as u32,
                flow_id: u32_cell("_flow_credit_id", slot, id)?,
                credits: u32_cell("_flow_credits", slot, c)?.into(),
                receiver: None,
            });
        }
    }
    let mut credits_dropped = 0u64;
    for (cell, &d) in regs["_credit_dropped"].iter().enumerate() {
        credits_dropped = credits_dropped.checked_add(d).ok_or_else(|| {
            bad(format!(
                "_credit_dropped sums past 2^64 - 1 at cell {cell} ({d:#x}): not counters"
            ))
        })?;
    }
    Ok(EdgeCounters {
        maps: None,
        dev: None,
        swx_cli: Some(addr.to_string()),
        credit_rate_bytes_per_s: None,
        credit_burst_bytes: None,
        credits_passed: packets[CLASS_CREDIT_GREEN],
        credits_dropped,
        pna: Some(PnaDetail {
            classes,
            events: EVENTS
                .iter()
                .map(|(i, n)| (n.to_string(), events[*i as usize]))
                .collect(),
            flow_credits,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// The slot function is the P4 program's: values computed by nic/tests/test_dpdk_swx.py's
    /// `flow_slot` (Python), the same fold.
    #[test]
    fn flow_slots_are_the_pna_programs() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(flow_slot(ip("10.0.1.1"), ip("10.0.2.1"), 7), 775);
        assert_eq!(
            flow_slot(ip("10.0.2.1"), ip("10.0.1.1"), 7),
            775,
            "symmetric"
        );
        assert_eq!(
            flow_slot(ip("192.168.7.3"), ip("10.0.0.9"), 0xdead_beef),
            2474
        );
        assert_eq!(flow_slot(ip("127.0.0.1"), ip("127.0.0.1"), 1), 1);
    }

    /// A slot names the agent's receiver whose credits it counts (slot and flow id both
    /// match); another host's flow, or a receiver whose flow id is not the slot's last, is
    /// not named.
    #[test]
    fn slots_name_the_agents_receivers() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let local = ip("10.0.2.1");
        let ours: SocketAddr = "10.0.1.1:7890".parse().unwrap();
        let slot = |peer: &str, id| flow_slot(local, ip(peer), id);
        let mut d = PnaDetail {
            classes: BTreeMap::new(),
            events: BTreeMap::new(),
            flow_credits: vec![
                FlowCredits {
                    slot: slot("10.0.1.1", 7),
                    flow_id: 7,
                    credits: 40,
                    receiver: None,
                },
                // Same slot index as another flow id would give: not ours.
                FlowCredits {
                    slot: slot("10.0.1.1", 8),
                    flow_id: 9,
                    credits: 3,
                    receiver: None,
                },
                FlowCredits {
                    slot: slot("10.0.3.1", 5),
                    flow_id: 5,
                    credits: 2,
                    receiver: None,
                },
            ],
        };
        let receivers = [
            (ours, 7),
            (ours, 8),
            ("10.0.1.1:40000".parse().unwrap(), 11),
        ];
        match_receivers(&mut d, Some(IpAddr::V4(local)), receivers.into_iter());
        let named: Vec<_> = d
            .flow_credits
            .iter()
            .map(|f| f.receiver.as_deref())
            .collect();
        assert_eq!(named, [Some("10.0.1.1:7890"), None, None]);
        // Bound to 0.0.0.0: the route's source address towards the peer (loopback here).
        let lo: SocketAddr = "127.0.0.1:7890".parse().unwrap();
        d.flow_credits = vec![FlowCredits {
            slot: flow_slot(ip("127.0.0.1"), ip("127.0.0.1"), 21),
            flow_id: 21,
            credits: 1,
            receiver: None,
        }];
        match_receivers(
            &mut d,
            Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            [(lo, 21)].into_iter(),
        );
        assert_eq!(
            d.flow_credits[0].receiver.as_deref(),
            Some("127.0.0.1:7890")
        );
    }

    #[test]
    fn a_pipeline_that_is_not_running_is_named_by_its_address() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        }; // closed again: nothing listens
        let addr = format!("127.0.0.1:{port}");
        let e = read_swx_edge(&addr).unwrap_err();
        assert!(
            e.contains(&addr) && e.contains("is the PNA edge's pipeline running"),
            "{e}"
        );
        let e = read_swx_edge("no-such-host.invalid:1").unwrap_err();
        assert!(e.contains("no-such-host.invalid:1"), "{e}");
    }

    /// A fake CLI that answers like conn.c: several commands per read, one prompt after
    /// each read's answers; a refused command is named.
    #[test]
    fn answers_are_read_across_reads_and_a_refusal_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"\nWelcome!\n\npipeline> ").unwrap();
            let mut buf = [0u8; 65536];
            let mut pending = String::new();
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    return;
                }
                pending.push_str(std::str::from_utf8(&buf[..n]).unwrap());
                let mut out = String::new();
                while let Some(at) = pending.find('\n') {
                    let line: String = pending.drain(..=at).collect();
                    let w: Vec<&str> = line.split_whitespace().collect();
                    if w[3] == "bad" {
                        out.push_str("Command \"regrd\" failed.\n");
                    } else {
                        out.push_str(&format!("0x{:x}\n", w[5].parse::<u64>().unwrap() * 3));
                    }
                }
                out.push_str("pipeline> ");
                // Two writes, as two reads of the server would give.
                let (a, b) = out.split_at(out.len() / 2);
                s.write_all(a.as_bytes()).unwrap();
                s.write_all(b.as_bytes()).unwrap();
            }
        });
        let mut cli = SwxCli::connect(&addr).unwrap();
        let v = cli.regrd_all("x", BATCH + 600).unwrap();
        assert_eq!(
            v,
            (0..u64::from(BATCH) + 600)
                .map(|i| i * 3)
                .collect::<Vec<_>>()
        );
        let e = cli.regrd_all("bad", 2).unwrap_err();
        assert!(e.contains("failed") && e.contains(&addr), "{e}");
        drop(cli);
        server.join().unwrap();
    }
    /// Answers that would put counters in the wrong cells are refused, named by their line
    /// (edge_text fuzz target): a value past 64 bits, or an empty or signed one, was
    /// skipped, so the next value took its cell; more values than reads were cut off.
    #[test]
    fn regrd_answers_out_of_range_or_out_of_step_are_named() {
        let ok = regrd_answer(b"0x0\n0x3\npipeline> 0xffffffffffffffff\npipeline> ", 3);
        assert_eq!(ok, Ok(Some(vec![0, 3, u64::MAX])));
        assert_eq!(regrd_answer(b"0x0\n0x3\npipeline> ", 3), Ok(None));
        assert_eq!(regrd_answer(b"0x0\n0x3\n", 2), Ok(None), "no prompt yet");
        assert_eq!(
            regrd_answer(b"\nWelcome!\n\npipeline> ", 0),
            Ok(Some(vec![]))
        );
        for (bad, why) in [
            ("0x10000000000000000", "more than 64 bits"),
            ("0x", "not a hex number"),
            ("0x+5", "not a hex number"),
            ("0x5 7", "not a hex number"),
            ("Command \"regrd\" failed.", "not a value"),
        ] {
            let text = format!("0x1\n{bad}\n0x2\npipeline> ");
            let e = regrd_answer(text.as_bytes(), 3).unwrap_err();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("answer line 2") && e.contains(why),
                "{e}"
            );
        }
        let e = regrd_answer(b"0x1\n0x2\n0x3\npipeline> ", 2).unwrap_err();
        assert!(e.contains("3 values to 2 reads"), "{e}");
    }

    fn registers() -> BTreeMap<&'static str, Vec<u64>> {
        SWX_REGISTERS
            .iter()
            .map(|&(name, n)| (name, vec![0; n as usize]))
            .collect()
    }

    /// Counts that do not fit their counter are an error naming register and cell, not a
    /// wrapped sum (a release build wrapped, a debug build panicked) or a truncated id.
    #[test]
    fn register_cells_past_their_counters_are_named() {
        let mut regs = registers();
        regs.get_mut("_credit_dropped").unwrap()[3] = 5;
        regs.get_mut("_credit_dropped").unwrap()[9] = 7;
        regs.get_mut("_flow_credits").unwrap()[12] = 4;
        regs.get_mut("_flow_credit_id").unwrap()[12] = u32::MAX.into();
        regs.get_mut("class_packets_0").unwrap()[CLASS_CREDIT_GREEN] = 4;
        let c = edge_from_registers("h:1", &regs).unwrap();
        assert_eq!((c.credits_passed, c.credits_dropped), (4, 12));
        let flows = &c.pna.as_ref().unwrap().flow_credits;
        assert_eq!(
            flows,
            &[FlowCredits {
                slot: 12,
                flow_id: u32::MAX,
                credits: 4,
                receiver: None,
            }]
        );

        let mut over = regs.clone();
        over.get_mut("_credit_dropped").unwrap()[9] = u64::MAX - 4;
        let e = edge_from_registers("h:1", &over).unwrap_err();
        assert!(
            e.contains("h:1") && e.contains("_credit_dropped") && e.contains("cell 9"),
            "{e}"
        );
        let mut id = regs.clone();
        id.get_mut("_flow_credit_id").unwrap()[12] = 1 << 32;
        let e = edge_from_registers("h:1", &id).unwrap_err();
        assert!(e.contains("_flow_credit_id[12] = 0x100000000"), "{e}");
        let mut credits = regs.clone();
        credits.get_mut("_flow_credits").unwrap()[12] = 1 << 32;
        let e = edge_from_registers("h:1", &credits).unwrap_err();
        assert!(e.contains("_flow_credits[12]"), "{e}");
        let mut short = regs.clone();
        short.get_mut("class_bytes_0").unwrap().pop();
        let e = edge_from_registers("h:1", &short).unwrap_err();
        assert!(e.contains("class_bytes_0: 31 cells read, it has 32"), "{e}");
        regs.remove("nic_events_0");
        let e = edge_from_registers("h:1", &regs).unwrap_err();
        assert!(e.contains("nic_events_0 not read"), "{e}");
    }
}

//! The PNA edge's counters (p4src/pna/flexpass_nic.p4) where it runs on DPDK's SWX pipeline:
//! read with the pipeline application's CLI (DPDK's `pipeline` example, examples/pipeline:
//! one command a line, `pipeline PIPELINE0 regrd ARRAY index I` answers `0x…`, a prompt
//! after each read of the socket), as nic/dpdk_swx.py and `flexpass-ctl nic --apply`
//! (control-plane/flexpass_cp/swx.py) talk to it. `--nic-edge pna --nic-edge-swx HOST:PORT`.

use super::EdgeCounters;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
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
    /// prompt; the values in order. Anything else in the answers is an error, named.
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
            if !buf.ends_with(PROMPT) {
                continue;
            }
            let text = String::from_utf8_lossy(&buf);
            let lines: Vec<&str> = text
                .split('\n')
                .map(|l| l.trim_start_matches("pipeline> ").trim())
                .filter(|l| !l.is_empty() && *l != "pipeline>")
                .collect();
            if n == 0 {
                return Ok(Vec::new());
            }
            let values: Vec<u64> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("0x"))
                .filter_map(|h| u64::from_str_radix(h, 16).ok())
                .collect();
            if let Some(bad) = lines.iter().find(|l| !l.starts_with("0x")) {
                return Err(format!(
                    "the SWX pipeline at {}: regrd answered {bad:?}",
                    self.addr
                ));
            }
            if values.len() >= n {
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
            out.extend_from_slice(&v[..(end - at) as usize]);
            at = end;
        }
        Ok(out)
    }
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
    let flow_credits = regs["_flow_credits"]
        .iter()
        .zip(&regs["_flow_credit_id"])
        .enumerate()
        .filter(|(_, (c, _))| **c > 0)
        .map(|(slot, (c, id))| FlowCredits {
            slot: slot as u32,
            flow_id: *id as u32,
            credits: *c,
        })
        .collect();
    Ok(EdgeCounters {
        maps: None,
        dev: None,
        swx_cli: Some(addr.to_string()),
        credit_rate_bytes_per_s: None,
        credit_burst_bytes: None,
        credits_passed: packets[CLASS_CREDIT_GREEN],
        credits_dropped: regs["_credit_dropped"].iter().sum(),
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
}

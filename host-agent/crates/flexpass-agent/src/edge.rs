//! Who limits this host's credits: the agent's host credit shaper, or the host's NIC edge
//! (docs/smartnic.md: the control plane's `nics:` entry, `edge: qdisc | ebpf | pna`). The
//! edge polices the host-wide credit rate share·C·84/(84+F), counted in frame bytes like the
//! agent's shaper (docs/protocol.md §9, "Credits in frame bytes"); the agent then does
//! not police it a second time (two token buckets in series on different clocks drop
//! credits that either alone would pass). Per-flow credit pacing stays in the agent in every
//! case: no edge has timers.
//!
//! The agent can also read the edge's counters (`status` → `credit_limit.edge`): the eBPF
//! edge's from its pinned maps (`--nic-edge-maps`, nic/ebpf/flexpass_edge.bpf.c), the qdisc
//! edge's from its htb credit class (`--nic-edge-dev`, `tc -s class show`; nic/flexpass_nic.py),
//! the PNA edge's on DPDK SWX from its registers (`--nic-edge-swx`, the submodule swx).

use aya::maps::{Array, Map, MapData};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod swx;

/// The host's NIC edge, named as in the control plane's `nics.<name>.edge`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NicEdge {
    /// No edge: the agent polices the host's credits.
    #[default]
    None,
    /// Linux qdiscs (nic/flexpass_nic.py apply): htb's credit class, shaped, 8 credits deep.
    Qdisc,
    /// The tc eBPF program (nic/flexpass_ebpf.py apply): a token bucket.
    Ebpf,
    /// The PNA program on a SmartNIC (p4src/pna): its credit meter.
    Pna,
}

impl NicEdge {
    pub fn as_str(self) -> &'static str {
        match self {
            NicEdge::None => "none",
            NicEdge::Qdisc => "qdisc",
            NicEdge::Ebpf => "ebpf",
            NicEdge::Pna => "pna",
        }
    }

    /// Whether the edge, not the agent, limits the host's credits to the link's credit rate.
    pub fn polices_credits(self) -> bool {
        self != NicEdge::None
    }
}

impl std::str::FromStr for NicEdge {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(NicEdge::None),
            "qdisc" => Ok(NicEdge::Qdisc),
            "ebpf" => Ok(NicEdge::Ebpf),
            "pna" => Ok(NicEdge::Pna),
            _ => Err(format!(
                "--nic-edge must be none, qdisc, ebpf or pna (the control plane's nics: edge), got {s:?}"
            )),
        }
    }
}

/// `status` → `credit_limit`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CreditLimitStatus {
    /// "agent" (its host credit shaper) or "edge" (the NIC edge `nic_edge`).
    pub policed_by: &'static str,
    pub nic_edge: NicEdge,
    /// The agent's host-wide credit limit in frame bytes/s, as the edges count (a credit
    /// costs its frame without FCS, 60..=68 B; `credit_limit_frame_bytes_per_s`); null when
    /// the edge polices.
    pub agent_bytes_per_s: Option<f64>,
    /// The edge's settings and counters (`--nic-edge-maps` for eBPF, `--nic-edge-dev` for
    /// qdisc, `--nic-edge-swx` for PNA on DPDK SWX); null without.
    pub edge: Option<EdgeCounters>,
    /// Why the edge's maps could not be read (null when they were, or none were given).
    pub edge_error: Option<String>,
}

/// The edge's credit limit and counters: the eBPF edge's pinned maps (the layouts of
/// nic/ebpf/flexpass_edge.bpf.c), or the qdisc edge's htb credit class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EdgeCounters {
    /// The eBPF edge's map directory (null for the qdisc edge).
    pub maps: Option<PathBuf>,
    /// The qdisc edge's netdev (null for the eBPF edge).
    pub dev: Option<String>,
    /// The PNA edge's SWX pipeline CLI address (HOST:PORT; only for the PNA edge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swx_cli: Option<String>,
    /// The limit's rate and depth, frame bytes (without FCS) per second and bytes: the eBPF
    /// token bucket, or htb class 1:10's rate and burst (as `tc` prints them, 3–4 digits);
    /// null for the PNA edge (SWX's CLI does not read a meter profile back).
    pub credit_rate_bytes_per_s: Option<u64>,
    pub credit_burst_bytes: Option<u64>,
    /// Credits the edge let out (class credit/green; htb: the class's packets sent) and
    /// dropped (eBPF: over its rate; htb: refused by the class's 8-credit queue; PNA: the
    /// meter's drops, `credit_dropped`).
    pub credits_passed: u64,
    pub credits_dropped: u64,
    /// The PNA edge's per-class counters, events and per-flow credit slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pna: Option<swx::PnaDetail>,
}

/// The qdisc edge's credit class (nic/flexpass_nic.py: `HTB_CLASS["credit"]`).
pub const QDISC_CREDIT_CLASS: &str = "1:10";

/// Read the qdisc edge's credit limit and counters on `dev`: `tc -s class show dev DEV
/// classid 1:10` (in the agent's network namespace).
pub fn read_qdisc_edge(dev: &str) -> Result<EdgeCounters, String> {
    let out = Command::new("tc")
        .args([
            "-s",
            "class",
            "show",
            "dev",
            dev,
            "classid",
            QDISC_CREDIT_CLASS,
        ])
        .output()
        .map_err(|e| format!("tc -s class show dev {dev}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tc -s class show dev {dev}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_htb_class(dev, &String::from_utf8_lossy(&out.stdout))
}

/// The counters of htb class 1:10 in `tc -s class show` output (text: iproute2 6.1 prints
/// htb classes as text even with `-j`).
pub fn parse_htb_class(dev: &str, text: &str) -> Result<EdgeCounters, String> {
    let head = format!("class htb {QDISC_CREDIT_CLASS} ");
    let start = text.find(&head).ok_or_else(|| {
        format!("dev {dev}: no htb class {QDISC_CREDIT_CLASS} (is the qdisc edge applied? nic/flexpass_nic.py apply)")
    })?;
    let block = &text[start..];
    let block = &block[..block[head.len()..]
        .find("\nclass ")
        .map_or(block.len(), |i| i + head.len())];
    let words: Vec<&str> = block.split_whitespace().collect();
    let after = |key: &str| -> Result<&str, String> {
        let i = words.iter().position(|w| *w == key).ok_or_else(|| {
            format!("dev {dev}: htb class {QDISC_CREDIT_CLASS}: no {key:?} in {block:?}")
        })?;
        words.get(i + 1).copied().ok_or_else(|| {
            format!("dev {dev}: htb class {QDISC_CREDIT_CLASS}: nothing after {key:?}")
        })
    };
    let bad = |what: &str, v: &str| {
        format!("dev {dev}: htb class {QDISC_CREDIT_CLASS}: bad {what} {v:?}")
    };
    let rate = after("rate")?;
    let burst = after("burst")?;
    let pkts = after("bytes")?; // "Sent B bytes P pkt"
    let dropped = after("(dropped")?.trim_end_matches(',');
    Ok(EdgeCounters {
        maps: None,
        dev: Some(dev.to_string()),
        swx_cli: None,
        credit_rate_bytes_per_s: Some(tc_rate_bits(rate).ok_or_else(|| bad("rate", rate))? / 8),
        credit_burst_bytes: Some(tc_size_bytes(burst).ok_or_else(|| bad("burst", burst))?),
        credits_passed: pkts.parse().map_err(|_| bad("packet count", pkts))?,
        credits_dropped: dropped.parse().map_err(|_| bad("drop count", dropped))?,
        pna: None,
    })
}

/// A rate as `tc` prints it ("2589Kbit", "1.5Mbit", "800bit"): bits/s (units of 1000).
fn tc_rate_bits(s: &str) -> Option<u64> {
    let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(num_end);
    let mult = match unit {
        "bit" => 1e0,
        "Kbit" => 1e3,
        "Mbit" => 1e6,
        "Gbit" => 1e9,
        "Tbit" => 1e12,
        _ => return None,
    };
    tc_number(num, mult)
}

/// A size as `tc` prints it ("183b", "1600b", "15Kb", "1Mb"): bytes (units of 1024).
fn tc_size_bytes(s: &str) -> Option<u64> {
    let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(num_end);
    let mult = match unit {
        "b" => 1.0,
        "Kb" => 1024.0,
        "Mb" => 1024.0 * 1024.0,
        "Gb" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    tc_number(num, mult)
}

/// `num` × `mult`, rounded; None below 0 or past u64 (`as` would saturate to 0 or
/// u64::MAX bytes/s).
fn tc_number(num: &str, mult: f64) -> Option<u64> {
    let v = (num.parse::<f64>().ok()? * mult).round();
    (0.0..18_446_744_073_709_551_616.0)
        .contains(&v)
        .then_some(v as u64) // [0, 2^64)
}

/// The edge counters the agent was told where to find: the eBPF edge's maps, the qdisc
/// edge's netdev, or the PNA edge's SWX pipeline CLI; None when none was given.
pub fn read_counters(
    maps: Option<&Path>,
    dev: Option<&str>,
    swx: Option<&str>,
) -> Option<Result<EdgeCounters, String>> {
    match (maps, dev, swx) {
        (Some(dir), _, _) => Some(read_edge(dir)),
        (None, Some(dev), _) => Some(read_qdisc_edge(dev)),
        (None, None, Some(addr)) => Some(swx::read_swx_edge(addr)),
        (None, None, None) => None,
    }
}

// nic/ebpf/flexpass_edge.bpf.c: struct edge_config (rate, burst, … as u64 first), the
// nic_events cell of a dropped credit, the class_packets cell of (KIND_CREDIT, COLOR_GREEN).
const EDGE_CONFIG_BYTES: usize = 40;
const EVT_CREDIT_DROPPED: u32 = 9;
const CLASS_CREDIT_GREEN: u32 = 1 << 2;

fn array<V: aya::Pod>(dir: &Path, name: &str) -> Result<Array<MapData, V>, String> {
    let path = dir.join(name);
    let data = MapData::from_pin(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let map = Map::from_map_data(data).map_err(|e| format!("{}: {e}", path.display()))?;
    Array::try_from(map).map_err(|e| format!("{}: {e}", path.display()))
}

/// Read the eBPF edge's settings and credit counters from its pinned maps in `dir`
/// (`<bpffs>/flexpass-edge/<dev>/tc/globals`).
pub fn read_edge(dir: &Path) -> Result<EdgeCounters, String> {
    let get = |name: &str, idx: u32| -> Result<u64, String> {
        array::<u64>(dir, name)?
            .get(&idx, 0)
            .map_err(|e| format!("{}/{name}[{idx}]: {e}", dir.display()))
    };
    let cfg: [u8; EDGE_CONFIG_BYTES] = array(dir, "edge_config")?
        .get(&0, 0)
        .map_err(|e| format!("{}/edge_config: {e}", dir.display()))?;
    let u64_at = |at: usize| u64::from_le_bytes(cfg[at..at + 8].try_into().expect("8 bytes"));
    Ok(EdgeCounters {
        maps: Some(dir.to_path_buf()),
        dev: None,
        swx_cli: None,
        credit_rate_bytes_per_s: Some(u64_at(0)),
        credit_burst_bytes: Some(u64_at(8)),
        credits_passed: get("class_packets", CLASS_CREDIT_GREEN)?,
        credits_dropped: get("nic_events", EVT_CREDIT_DROPPED)?,
        pna: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_parse_as_the_control_plane_names_them() {
        for e in [NicEdge::None, NicEdge::Qdisc, NicEdge::Ebpf, NicEdge::Pna] {
            assert_eq!(e.as_str().parse::<NicEdge>(), Ok(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
            assert_eq!(e.polices_credits(), e != NicEdge::None);
        }
        let err = "tc".parse::<NicEdge>().unwrap_err();
        assert!(
            err.contains("--nic-edge") && err.contains("\"tc\""),
            "{err}"
        );
    }

    /// iproute2's text for the class nic/flexpass_nic.py builds (C = 100 Mbit/s, share 1).
    const HTB_SHOW: &str = "class htb 1:10 parent 1:1 leaf 10: prio 0 rate 2589Kbit ceil 2589Kbit burst 183b cburst 183b \n Sent 64260 bytes 1071 pkt (dropped 37, overlimits 412 requeues 0) \n backlog 0b 0p requeues 0\n lended: 1071 borrowed: 0 giants: 0\n tokens: 8875 ctokens: 8875\n\n";

    #[test]
    fn htb_credit_class_counters_are_read() {
        let c = parse_htb_class("va", HTB_SHOW).unwrap();
        assert_eq!(c.dev.as_deref(), Some("va"));
        assert_eq!(c.maps, None);
        assert_eq!(c.credit_rate_bytes_per_s, Some(2_589_000 / 8));
        assert_eq!(c.credit_burst_bytes, Some(183));
        assert_eq!((c.credits_passed, c.credits_dropped), (1071, 37));
        // Several classes: only 1:10's numbers.
        let all = format!(
            "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b \n Sent 9 bytes 5 pkt (dropped 1, overlimits 0 requeues 0) \n\n{HTB_SHOW}class htb 1:20 parent 1:1 leaf 20: prio 1 rate 47411Kbit ceil 100Mbit burst 1588b cburst 1600b \n Sent 7 bytes 3 pkt (dropped 2, overlimits 0 requeues 0) \n"
        );
        assert_eq!(parse_htb_class("va", &all).unwrap(), c);
        assert_eq!(tc_rate_bits("1.5Mbit"), Some(1_500_000));
        assert_eq!(tc_size_bytes("15Kb"), Some(15_360));
    }

    #[test]
    fn a_missing_htb_class_or_field_is_named() {
        let e = parse_htb_class("va", "class htb 1:20 parent 1:1 rate 1Mbit\n").unwrap_err();
        assert!(
            e.contains("no htb class 1:10") && e.contains("dev va"),
            "{e}"
        );
        let e = parse_htb_class("va", &HTB_SHOW.replace("2589Kbit", "2589Kbps")).unwrap_err();
        assert!(e.contains("bad rate \"2589Kbps\""), "{e}");
        // Numbers past 64 bits are refused, not saturated (edge_text fuzz target).
        let e = parse_htb_class("va", &HTB_SHOW.replace("2589Kbit", "18446744073709552Kbit"))
            .unwrap_err();
        assert!(e.contains("bad rate \"18446744073709552Kbit\""), "{e}");
        let e = parse_htb_class("va", &HTB_SHOW.replace("183b", "16777216Tb")).unwrap_err();
        assert!(e.contains("bad burst"), "{e}");
        let e = parse_htb_class(
            "va",
            &HTB_SHOW.replace("1071 pkt", "18446744073709551616 pkt"),
        )
        .unwrap_err();
        assert!(e.contains("bad packet count"), "{e}");
        let e = parse_htb_class("va", &HTB_SHOW.replace("dropped 37", "dropped -1")).unwrap_err();
        assert!(e.contains("bad drop count \"-1\""), "{e}");
        assert!(tc_rate_bits("18446744073Gbit").is_some());
        assert_eq!(tc_rate_bits("18446744074Gbit"), None);
        assert_eq!(tc_rate_bits("-2Kbit"), None, "negative, not 0");
        let e = read_qdisc_edge("fp-no-such-dev0").unwrap_err();
        assert!(e.contains("fp-no-such-dev0"), "{e}");
    }

    #[test]
    fn missing_edge_maps_are_named() {
        let err = read_edge(Path::new("/nonexistent/flexpass-edge")).unwrap_err();
        assert!(
            err.contains("/nonexistent/flexpass-edge/edge_config"),
            "{err}"
        );
    }
}

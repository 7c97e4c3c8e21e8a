//! Who limits this host's credits: the agent's host credit shaper, or the host's NIC edge
//! (docs/smartnic.md: the control plane's `nics:` entry, `edge: qdisc | ebpf | pna`). The
//! edge polices the host-wide credit rate share·C·84/(84+F) on the wire; the agent then does
//! not police it a second time (two token buckets in series on different clocks drop
//! credits that either alone would pass). Per-flow credit pacing stays in the agent in every
//! case: no edge has timers.
//!
//! With the eBPF edge the agent can also read the edge's counters from its pinned maps
//! (`--nic-edge-maps`, nic/ebpf/flexpass_edge.bpf.c; `status` → `credit_limit.edge`).

use aya::maps::{Array, Map, MapData};
use serde::Serialize;
use std::path::{Path, PathBuf};

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
    /// The agent's host-wide credit limit, bytes/s of credits on the wire (84 B each at
    /// least); null when the edge polices.
    pub agent_bytes_per_s: Option<f64>,
    /// The eBPF edge's settings and counters (`--nic-edge-maps`); null without.
    pub edge: Option<EdgeCounters>,
    /// Why the edge's maps could not be read (null when they were, or none were given).
    pub edge_error: Option<String>,
}

/// The eBPF edge as its pinned maps tell it (the layouts of nic/ebpf/flexpass_edge.bpf.c).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EdgeCounters {
    pub maps: PathBuf,
    /// The token bucket's rate and depth, frame bytes (without FCS) per second and bytes.
    pub credit_rate_bytes_per_s: u64,
    pub credit_burst_bytes: u64,
    /// Credits the edge let out (class credit/green) and dropped over its rate.
    pub credits_passed: u64,
    pub credits_dropped: u64,
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
        maps: dir.to_path_buf(),
        credit_rate_bytes_per_s: u64_at(0),
        credit_burst_bytes: u64_at(8),
        credits_passed: get("class_packets", CLASS_CREDIT_GREEN)?,
        credits_dropped: get("nic_events", EVT_CREDIT_DROPPED)?,
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

    #[test]
    fn missing_edge_maps_are_named() {
        let err = read_edge(Path::new("/nonexistent/flexpass-edge")).unwrap_err();
        assert!(
            err.contains("/nonexistent/flexpass-edge/edge_config"),
            "{err}"
        );
    }
}

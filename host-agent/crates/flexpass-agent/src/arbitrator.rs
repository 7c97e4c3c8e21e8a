//! A PASE arbitrator as a real process (Munir et al., SIGCOMM'14 §3.1): it owns one link of
//! capacity C, keeps the flows that cross it as soft state, and answers every
//! ARBITRATION_REQUEST with the flow's queue and reference rate from Algorithm 1
//! (`flexpass_core::pase::arbitrate`, the one implementation the model uses too).
//! `flexpass arbitrator` runs it; docs/protocol.md §11 "PASE arbitration".
//!
//! Delegation (§3.1): a host whose agent runs with delegation is a child arbitrator. It
//! reports its demand (`DELEGATION_FLOW_ID`) once per period instead of asking per flow,
//! and gets a share of this link (`flexpass_core::pase::delegation::delegate`: demands met
//! and the spare split evenly when they fit in C, else C in proportion to demand). The flows
//! that still ask one by one count as one more child: Algorithm 1 runs over their share.

use crate::pase_arbitration::DELEGATION_FLOW_ID;
use flexpass_core::pase::delegation::{delegate, ChildDemand};
use flexpass_core::pase::{arbitrate, Arbitration, FlowDemand};
use flexpass_core::Nanos;
use flexpass_wire::{
    ArbitrationRequest, ArbitrationResponse, DscpPlan, Ecn, Packet, TrafficClass, PRIORITY_LEVELS,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One link's arbitrator settings.
#[derive(Clone, Debug)]
pub struct ArbitratorConfig {
    pub listen: SocketAddr,
    /// C: the capacity of the arbitrated link, bit/s.
    pub capacity_bps: f64,
    /// Priority queues of the link's switch port (1..=8).
    pub queues: u8,
    /// Algorithm 1's rate for a flow that does not fit: one packet per RTT, bit/s.
    pub base_rate_bps: f64,
    /// A flow not heard from for this long is dropped (its sender vanished).
    pub expire: Nanos,
}

impl ArbitratorConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.capacity_bps.is_finite() && self.capacity_bps >= 1.0) {
            return Err(format!(
                "link capacity C must be ≥ 1 bit/s, got {}",
                self.capacity_bps
            ));
        }
        if !(1..=PRIORITY_LEVELS as u8).contains(&self.queues) {
            return Err(format!("queues must be 1..=8, got {}", self.queues));
        }
        if !(self.base_rate_bps.is_finite() && self.base_rate_bps >= 1.0) {
            return Err(format!(
                "base rate must be ≥ 1 bit/s, got {}",
                self.base_rate_bps
            ));
        }
        if self.expire == 0 {
            return Err("flow expiry must be > 0".into());
        }
        Ok(())
    }
}

/// What the arbitrator did.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ArbitratorStats {
    pub requests: u64,
    pub responses: u64,
    /// Requests with `remaining` 0: the flow ended and was released.
    pub releases: u64,
    /// Flows dropped after `expire` without a request.
    pub expired: u64,
    /// Datagrams that were not a valid ARBITRATION_REQUEST.
    pub malformed: u64,
    /// Flows known now and at most so far.
    pub flows: u64,
    pub flows_peak: u64,
    /// Delegation: demand reports answered with a share, and the children (hosts) known
    /// now and at most so far.
    pub reports: u64,
    pub children: u64,
    pub children_peak: u64,
}

/// The division's name for the flows that ask one by one (children are numbered from 0).
const PER_FLOW_GROUP: u32 = u32::MAX;

struct Known {
    remaining: u64,
    demand_bps: f64,
    heard: Nanos,
}

/// The arbitration of one link, sans IO.
pub struct LinkArbitrator {
    cfg: ArbitratorConfig,
    /// Ordered, so that ties of remaining size go the same way every time.
    flows: BTreeMap<(SocketAddr, u32), Known>,
    /// Delegation: the children's last reports (remaining unused: their demand).
    children: BTreeMap<SocketAddr, Known>,
    scratch: Vec<FlowDemand>,
    keys: Vec<(SocketAddr, u32)>,
    out: Vec<(u32, Arbitration)>,
    pub stats: ArbitratorStats,
}

impl LinkArbitrator {
    pub fn new(cfg: ArbitratorConfig) -> Self {
        LinkArbitrator {
            cfg,
            flows: BTreeMap::new(),
            children: BTreeMap::new(),
            scratch: Vec::new(),
            keys: Vec::new(),
            out: Vec::new(),
            stats: ArbitratorStats::default(),
        }
    }

    /// A request from `src` at `now`: the answer (None for a release).
    pub fn on_request(
        &mut self,
        now: Nanos,
        src: SocketAddr,
        r: &ArbitrationRequest,
    ) -> Option<ArbitrationResponse> {
        self.stats.requests += 1;
        let expire = self.cfg.expire;
        let before = self.flows.len();
        self.flows
            .retain(|_, k| now.saturating_sub(k.heard) < expire);
        self.stats.expired += (before - self.flows.len()) as u64;
        self.children
            .retain(|_, k| now.saturating_sub(k.heard) < expire);
        if r.flow_id == DELEGATION_FLOW_ID {
            return self.on_report(now, src, r);
        }
        let key = (src, r.flow_id);
        if r.remaining == 0 {
            self.stats.releases += 1;
            self.flows.remove(&key);
            self.stats.flows = self.flows.len() as u64;
            return None;
        }
        self.flows.insert(
            key,
            Known {
                remaining: r.remaining,
                // A flow cannot use more than the link.
                demand_bps: (r.demand_bps as f64).min(self.cfg.capacity_bps),
                heard: now,
            },
        );
        self.stats.flows = self.flows.len() as u64;
        self.stats.flows_peak = self.stats.flows_peak.max(self.stats.flows);
        // Algorithm 1 names flows by a u32: their index here.
        self.keys.clear();
        self.scratch.clear();
        for (i, (k, f)) in self.flows.iter().enumerate() {
            self.keys.push(*k);
            self.scratch.push(FlowDemand {
                flow: i as u32,
                remaining: f.remaining,
                demand_bps: f.demand_bps,
            });
        }
        // Ties of remaining size go by index: by requester address, then flow id.
        self.out.clear();
        let capacity = if self.children.is_empty() {
            self.cfg.capacity_bps
        } else {
            self.share(PER_FLOW_GROUP)
        };
        arbitrate(
            capacity,
            self.cfg.queues,
            self.cfg.base_rate_bps,
            &mut self.scratch,
            &mut self.out,
        );
        let a = self
            .out
            .iter()
            .find(|(i, _)| self.keys[*i as usize] == key)
            .map(|(_, a)| *a)?;
        self.stats.responses += 1;
        Some(ArbitrationResponse {
            flow_id: r.flow_id,
            arb_seq: r.arb_seq,
            queue: a.queue,
            reference_rate_bps: (a.reference_rate_bps.round() as u64).max(1),
        })
    }

    /// Delegation: a child's demand report, answered with its share (None: it left).
    fn on_report(
        &mut self,
        now: Nanos,
        src: SocketAddr,
        r: &ArbitrationRequest,
    ) -> Option<ArbitrationResponse> {
        if r.remaining == 0 {
            self.stats.releases += 1;
            self.children.remove(&src);
            self.stats.children = self.children.len() as u64;
            return None;
        }
        self.children.insert(
            src,
            Known {
                remaining: r.remaining,
                demand_bps: r.demand_bps as f64,
                heard: now,
            },
        );
        self.stats.reports += 1;
        self.stats.children = self.children.len() as u64;
        self.stats.children_peak = self.stats.children_peak.max(self.stats.children);
        let index = self.children.keys().position(|k| *k == src)? as u32;
        let share = self.share(index);
        self.stats.responses += 1;
        Some(ArbitrationResponse {
            flow_id: DELEGATION_FLOW_ID,
            arb_seq: r.arb_seq,
            queue: 0,
            reference_rate_bps: (share.round() as u64).max(1),
        })
    }

    /// The division of C among the children (by index in address order) and the flows that
    /// ask one by one (`PER_FLOW_GROUP`, their demands summed): `child`'s share.
    fn share(&self, child: u32) -> f64 {
        let mut demands: Vec<ChildDemand> = self
            .children
            .values()
            .enumerate()
            .map(|(i, k)| ChildDemand {
                child: i as u32,
                demand_bps: k.demand_bps,
            })
            .collect();
        let per_flow: f64 = self.flows.values().map(|f| f.demand_bps).sum();
        if per_flow > 0.0 {
            demands.push(ChildDemand {
                child: PER_FLOW_GROUP,
                demand_bps: per_flow,
            });
        }
        delegate(self.cfg.capacity_bps, &demands)
            .into_iter()
            .find(|(c, _)| *c == child)
            .map_or(0.0, |(_, s)| s)
    }
}

/// The arbitrator on a UDP socket.
pub struct Arbitrator {
    sock: UdpSocket,
    epoch: Instant,
    pub link: LinkArbitrator,
}

impl Arbitrator {
    pub fn bind(cfg: ArbitratorConfig) -> io::Result<Self> {
        cfg.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let sock = UdpSocket::bind(cfg.listen)?;
        // Answers go out as PASE's non-data messages: the top priority, Not-ECT (§10).
        let tos = DscpPlan::default().tos(TrafficClass::Priority(0), Ecn::NotEct);
        let _ = nix::sys::socket::setsockopt(
            &sock,
            nix::sys::socket::sockopt::Ipv4Tos,
            &i32::from(tos),
        );
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        Ok(Arbitrator {
            sock,
            epoch: Instant::now(),
            link: LinkArbitrator::new(cfg),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Answer requests until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let (n, src) = match self.sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let Ok(Packet::ArbitrationRequest(r)) = Packet::decode(&buf[..n]) else {
                self.link.stats.malformed += 1;
                continue;
            };
            let now = self.epoch.elapsed().as_nanos() as Nanos;
            if let Some(resp) = self.link.on_request(now, src, &r) {
                // A lost answer is replaced by the next interval's.
                let _ = self
                    .sock
                    .send_to(&Packet::ArbitrationResponse(resp).encode_to_vec(), src);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ArbitratorConfig {
        ArbitratorConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            capacity_bps: 10e9,
            queues: 8,
            base_rate_bps: 1e6,
            expire: 1_000_000,
        }
    }

    fn req(flow_id: u32, remaining: u64, demand_bps: u64) -> ArbitrationRequest {
        ArbitrationRequest {
            flow_id,
            arb_seq: 9,
            remaining,
            demand_bps,
        }
    }

    /// Algorithm 1 over the senders' requests: the smaller flow first at its demand, the
    /// larger behind it gets what is left, a flow C behind a lower queue at the base rate;
    /// releases and silence free the link.
    #[test]
    fn requests_are_arbitrated_by_remaining_size() {
        let mut a = LinkArbitrator::new(cfg());
        let h1: SocketAddr = "10.0.0.1:7890".parse().unwrap();
        let h2: SocketAddr = "10.0.0.2:7890".parse().unwrap();
        let big = a
            .on_request(0, h1, &req(1, 5_000_000, 6_000_000_000))
            .unwrap();
        assert_eq!(
            (big.queue, big.reference_rate_bps, big.arb_seq),
            (0, 6_000_000_000, 9)
        );
        let small = a
            .on_request(1, h2, &req(1, 100_000, 6_000_000_000))
            .unwrap();
        assert_eq!((small.queue, small.reference_rate_bps), (0, 6_000_000_000));
        let big = a
            .on_request(2, h1, &req(1, 5_000_000, 6_000_000_000))
            .unwrap();
        assert_eq!((big.queue, big.reference_rate_bps), (0, 4_000_000_000));
        let third = a
            .on_request(3, h1, &req(2, 9_000_000, 10_000_000_000))
            .unwrap();
        assert_eq!((third.queue, third.reference_rate_bps), (1, 1_000_000));
        // The small flow ends: the big one gets its whole demand back.
        assert_eq!(a.on_request(4, h2, &req(1, 0, 1)), None);
        let big = a
            .on_request(5, h1, &req(1, 4_000_000, 6_000_000_000))
            .unwrap();
        assert_eq!(big.reference_rate_bps, 6_000_000_000);
        // Silence longer than the expiry drops the others.
        let alone = a
            .on_request(5 + 2_000_000, h2, &req(3, 1, 20_000_000_000))
            .unwrap();
        assert_eq!((alone.queue, alone.reference_rate_bps), (0, 10_000_000_000));
        assert_eq!(a.stats.expired, 2);
        assert_eq!((a.stats.releases, a.stats.flows), (1, 1));
    }

    /// Delegation: hosts' demand reports get shares of C (demands met and the spare split
    /// evenly when they fit, else in proportion to demand); flows asking one by one are one
    /// more child; a host that leaves frees its share.
    #[test]
    fn demand_reports_get_shares_of_the_link() {
        let mut a = LinkArbitrator::new(cfg());
        let h1: SocketAddr = "10.0.0.1:7890".parse().unwrap();
        let h2: SocketAddr = "10.0.0.2:7890".parse().unwrap();
        let h3: SocketAddr = "10.0.0.3:7890".parse().unwrap();
        let report = |remaining, demand| req(DELEGATION_FLOW_ID, remaining, demand);
        let s1 = a.on_request(0, h1, &report(1_000, 2_000_000_000)).unwrap();
        assert_eq!(
            (s1.flow_id, s1.queue, s1.reference_rate_bps),
            (0, 0, 10_000_000_000)
        );
        let s2 = a.on_request(1, h2, &report(1_000, 4_000_000_000)).unwrap();
        // 6 of 10 Gbit/s asked: each its demand plus half of the 4 spare.
        assert_eq!(s2.reference_rate_bps, 6_000_000_000);
        let s1 = a.on_request(2, h1, &report(1_000, 2_000_000_000)).unwrap();
        assert_eq!(s1.reference_rate_bps, 4_000_000_000);
        // A flow asking alone is one more child: 2 + 4 + 4 = 10 fits C exactly.
        let f = a.on_request(3, h3, &req(7, 5_000, 4_000_000_000)).unwrap();
        assert_eq!((f.queue, f.reference_rate_bps), (0, 4_000_000_000));
        let s2 = a.on_request(4, h2, &report(1_000, 4_000_000_000)).unwrap();
        assert_eq!(s2.reference_rate_bps, 4_000_000_000);
        // h2 leaves: no answer, and the spare is split again (2 + 4 of 10 asked).
        assert_eq!(a.on_request(5, h2, &report(0, 1)), None);
        let s1 = a.on_request(6, h1, &report(1_000, 2_000_000_000)).unwrap();
        assert_eq!(s1.reference_rate_bps, 4_000_000_000);
        // More asked than C: shares in proportion to demand (16 of 10: 2 → 1.25).
        let f = a.on_request(7, h3, &req(8, 9_000, 10_000_000_000)).unwrap();
        assert_eq!(
            (f.queue, f.reference_rate_bps),
            (0, 4_750_000_000),
            "what the first flow leaves of the flows' share, 10 · 14 / 16 = 8.75 Gbit/s"
        );
        let s1 = a.on_request(8, h1, &report(1_000, 2_000_000_000)).unwrap();
        assert_eq!(s1.reference_rate_bps, 1_250_000_000);
        assert_eq!(
            (a.stats.reports, a.stats.children, a.stats.children_peak),
            (6, 1, 2)
        );
        assert_eq!(a.stats.flows, 2, "the reports are no flows");
    }

    #[test]
    fn bad_settings_are_named() {
        let mut c = cfg();
        c.queues = 9;
        assert!(c.validate().unwrap_err().contains("queues"));
        let mut c = cfg();
        c.capacity_bps = 0.0;
        assert!(c.validate().unwrap_err().contains("capacity C"));
    }
}

//! The endpoint's settings: `EndpointConfig`, its defaults and checks, and the receiver
//! settings derived from it.

use crate::admission::{
    Admission, CookieMode, Limits, DEFAULT_HALF_OPEN_CREDITS, DEFAULT_HALF_OPEN_CREDIT_SHARE,
    DEFAULT_HALF_OPEN_TIMEOUT, DEFAULT_MAX_FLOWS, DEFAULT_MAX_HALF_OPEN,
};
use crate::datapath::DatapathMode;
use crate::edge::NicEdge;
use crate::shaper::{credit_burst_bytes, credit_bytes_per_second, TokenBucket};
use flexpass_core::{CreditConfig, Nanos, ReceiverConfig, SenderConfig, TargetLossRule};
use flexpass_wire::{DscpPlan, TransportKind, DEFAULT_MTU, MAX_MTU, MIN_MTU};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct EndpointConfig {
    pub bind: SocketAddr,
    /// Rate of this host's link (bits/s): sets the credit rate limit and max_rate.
    pub link_bps: f64,
    /// IP MTU of the path (576 ..= 9000; every host of a path must use the same): data
    /// segments fill it (`max_payload_for_mtu`), and a credit stands for one frame of
    /// `max_frame_wire(mtu)` bytes, so the credit rates are `share · C · 84 / (84 + mtu +
    /// 38)` (docs/protocol.md §9, "Frame sizes and MTU").
    pub mtu: usize,
    /// w_q: FlexPass credits may fill this share of the link.
    pub w_q: f64,
    /// Floor of the credit feedback update period (the path's base RTT).
    pub base_rtt: Nanos,
    /// FlashPass T_wait: a granted data packet leaves at T + T_wait, T its emulation
    /// packet's send time (FlashPass §III-B: at least the network's max RTT; a grant that
    /// arrives later is used at once and counted in `late_grants`).
    pub t_wait: Nanos,
    /// FlashPass: the Aeolus pre-credit phase (one host-link BDP of unscheduled, red data in
    /// the first RTT, §III-C); off: plain FlashPass (every data packet scheduled).
    pub flashpass_unscheduled: bool,
    /// DCTCP's tail-loss probe for the flows this endpoint sends with dctcp and ppt (RFC 8985
    /// §7, `DctcpConfig::tlp`): a lost last packet is recovered after 2·SRTT, not RTO_min.
    pub tlp: bool,
    /// Algorithm 1's target-loss rule for the flows this endpoint receives.
    pub target_loss_rule: TargetLossRule,
    pub dscp: DscpPlan,
    /// Accept incoming flows.
    pub accept: bool,
    /// Template for the flows this endpoint opens.
    pub sender: fn(TransportKind) -> SenderConfig,
    pub seed: u64,
    /// Hybrid sleep/spin for credits: when the next deadline is a credit, the loop sleeps in
    /// ppoll(2) (ns timeout, 1 µs timer slack) until a learned lead before it — the running
    /// median of the timer wake-up latency, capped at `spin` — and busy-waits the rest
    /// (leaving early for arriving packets). A wake-up later than the lead spins not at
    /// all, so the CPU cost is well below `spin` per credit. Other deadlines (feedback
    /// updates, retransmission timers) never spin. 0: sleep only.
    pub spin: Nanos,
    /// Poll mode: while datagrams arrive less than half this apart on average, the loop
    /// checks the socket without sleeping for up to this long after the last one (no
    /// wake-up per packet; costs up to this much CPU each time traffic pauses). 0: off.
    pub busy_poll: Nanos,
    /// Credits of a flow paced in batches of this many (`CreditConfig::batch`; 1: one by
    /// one, the papers' pacing). The host credit shaper is two batches deep.
    pub credit_batch: u32,
    /// Send runs of equal-sized datagrams to one peer as one UDP GSO send (UDP_SEGMENT)
    /// when the kernel supports it; falls back to one datagram per message otherwise.
    pub gso: bool,
    /// Incoming flows (receivers, lingering ones included) at most: beyond, a HELLO is a
    /// pressure like a full half-open table (cookies), and a HELLO with a valid cookie is
    /// answered HELLO_ACK refused.
    pub max_flows: usize,
    /// Half-open flows (created by a HELLO without a valid cookie, no proof yet that the
    /// sender's address is real: docs/protocol.md §11, "Half-open flows and cookies") kept
    /// at most. What happens to a HELLO beyond it: `hello_cookies`.
    pub max_half_open: usize,
    /// When the half-open table is full, half-open flows older than this are dropped first
    /// (never otherwise: an idle half-open flow is kept while there is room).
    pub half_open_timeout: Nanos,
    /// Credits a half-open flow may send per HELLO or CREDIT_REQUEST it receives (its
    /// credits then stop until its first data packet, or the sender asks again).
    pub half_open_credits: u32,
    /// Share of the link's credit rate all half-open flows together may use.
    pub half_open_credit_share: f64,
    pub hello_cookies: CookieMode,
    /// Give-up timeout of every sender (`SenderConfig::give_up_timeout`): silence from the
    /// peer this long fails a flow.
    pub give_up_timeout: Nanos,
    /// RTO_min of every sender's window (`DctcpConfig::rto_min`; None: the core's 4 ms). An
    /// emulation scales it with its other times (mininet-topos' scaling rule).
    pub rto_min: Option<Nanos>,
    /// Initial window of every sender's window, packets (`DctcpConfig::init_cwnd`; None: the
    /// core's 10). An emulation scales it with the BDP.
    pub init_cwnd: Option<f64>,
    /// Kernel UDP socket or AF_XDP (docs/datapath.md); `auto` falls back to UDP, logged.
    pub datapath: DatapathMode,
    /// AF_XDP: interface (None: from the bound address or the route to `route_hint`) and
    /// receive queue.
    pub xdp_iface: Option<String>,
    pub xdp_queue: crate::xdp::XdpQueues,
    /// A peer's address, to pick the interface for a wildcard bind.
    pub route_hint: Option<std::net::Ipv4Addr>,
    /// PASE's arbitrator (`flexpass arbitrator`) the flows this endpoint sends with transport
    /// pase ask for their queue and reference rate (docs/protocol.md §11, "PASE
    /// arbitration"); None: local arbitration only (top queue, line rate).
    pub arbitrator: Option<SocketAddr>,
    /// PASE's arbitration interval: each PASE flow sends one ARBITRATION_REQUEST per
    /// interval while it has data.
    pub arbitration_interval: Nanos,
    /// PASE (the model's `host.pase.*`): priority queues the arbitrators map to (1..=8,
    /// `queues`), probing in the lowest of them (`probing`, §3.3), and delegation
    /// (`delegation`, §3.1: this host arbitrates its own flows over the share of the
    /// arbitrator's link the arbitrator delegates to it, `crate::pase_arbitration`).
    pub pase_queues: u8,
    pub pase_probing: bool,
    pub pase_delegation: bool,
    /// The host's NIC edge (crate::edge): any but `None` polices the host-wide credit rate,
    /// and the agent's credit shaper then lets credits out unlimited (per-flow pacing stays).
    pub nic_edge: NicEdge,
    /// The eBPF edge's pinned maps (`<bpffs>/flexpass-edge/<dev>/tc/globals`): `status`
    /// reads its counters there. Only with `nic_edge` Ebpf.
    pub nic_edge_maps: Option<PathBuf>,
    /// The qdisc edge's netdev: `status` reads its htb credit class there. Only with
    /// `nic_edge` Qdisc.
    pub nic_edge_dev: Option<String>,
    /// The PNA edge's DPDK SWX pipeline CLI (HOST:PORT): `status` reads its registers
    /// there (crate::edge::swx). Only with `nic_edge` Pna.
    pub nic_edge_swx: Option<String>,
}

impl EndpointConfig {
    pub fn new(bind: SocketAddr) -> Self {
        EndpointConfig {
            bind,
            link_bps: 10e9,
            mtu: DEFAULT_MTU,
            w_q: 0.5,
            base_rtt: 100_000,
            t_wait: 2_000_000,
            flashpass_unscheduled: true,
            tlp: false,
            target_loss_rule: TargetLossRule::Fixed,
            dscp: DscpPlan::default(),
            accept: true,
            sender: SenderConfig::new,
            seed: 0,
            spin: DEFAULT_SPIN,
            credit_batch: DEFAULT_CREDIT_BATCH,
            gso: true,
            busy_poll: DEFAULT_BUSY_POLL,
            max_flows: DEFAULT_MAX_FLOWS,
            max_half_open: DEFAULT_MAX_HALF_OPEN,
            half_open_timeout: DEFAULT_HALF_OPEN_TIMEOUT,
            half_open_credits: DEFAULT_HALF_OPEN_CREDITS,
            half_open_credit_share: DEFAULT_HALF_OPEN_CREDIT_SHARE,
            hello_cookies: CookieMode::Auto,
            give_up_timeout: flexpass_core::DEFAULT_GIVE_UP_TIMEOUT,
            rto_min: None,
            init_cwnd: None,
            datapath: DatapathMode::Udp,
            xdp_iface: None,
            xdp_queue: crate::xdp::XdpQueues::default(),
            route_hint: None,
            arbitrator: None,
            arbitration_interval: DEFAULT_ARBITRATION_INTERVAL,
            pase_queues: 8,
            pase_probing: false,
            pase_delegation: false,
            nic_edge: NicEdge::None,
            nic_edge_maps: None,
            nic_edge_dev: None,
            nic_edge_swx: None,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.link_bps.is_finite() && self.link_bps > 0.0) {
            return Err(format!(
                "link rate must be > 0 bit/s, got {}",
                self.link_bps
            ));
        }
        if !(self.w_q > 0.0 && self.w_q < 1.0) {
            return Err(format!("w_q must be in (0, 1), got {}", self.w_q));
        }
        if !flexpass_wire::mtu_supported(self.mtu) {
            return Err(format!(
                "MTU must be in {MIN_MTU}..={MAX_MTU} bytes, got {}",
                self.mtu
            ));
        }
        if self.base_rtt == 0 {
            return Err("base RTT must be > 0".into());
        }
        if self.nic_edge_maps.is_some() && self.nic_edge != NicEdge::Ebpf {
            return Err(format!(
                "--nic-edge-maps reads the eBPF edge's maps: it needs --nic-edge ebpf, not {}",
                self.nic_edge.as_str()
            ));
        }
        if self.nic_edge_dev.is_some() && self.nic_edge != NicEdge::Qdisc {
            return Err(format!(
                "--nic-edge-dev reads the qdisc edge's htb class: it needs --nic-edge qdisc, not {}",
                self.nic_edge.as_str()
            ));
        }
        if self.nic_edge_swx.is_some() && self.nic_edge != NicEdge::Pna {
            return Err(format!(
                "--nic-edge-swx reads the PNA edge's registers: it needs --nic-edge pna, not {}",
                self.nic_edge.as_str()
            ));
        }
        if !(1..=8).contains(&self.pase_queues) {
            return Err(format!(
                "PASE queues must be 1..=8, got {}",
                self.pase_queues
            ));
        }
        if self.pase_probing && self.pase_queues < 2 {
            return Err("PASE probing needs at least 2 queues (it runs in the lowest)".into());
        }
        if self.pase_delegation && self.arbitrator.is_none() {
            return Err("PASE delegation needs an arbitrator (--arbitrator) to delegate".into());
        }
        if self.arbitration_interval == 0 {
            return Err("PASE arbitration interval must be > 0".into());
        }
        // T_wait + RTT must stay below the 2^32 ns an EMULATION timestamp spans (§6.9).
        if self.t_wait == 0 || self.t_wait > 1_000_000_000 {
            return Err(format!(
                "FlashPass T_wait must be in (0, 1 s], got {} ns",
                self.t_wait
            ));
        }
        if !(self.half_open_credit_share > 0.0 && self.half_open_credit_share <= 1.0) {
            return Err(format!(
                "half-open credit share must be in (0, 1], got {}",
                self.half_open_credit_share
            ));
        }
        if self.half_open_credits == 0 {
            return Err("half-open credits must be ≥ 1 (credit-based flows need them)".into());
        }
        // The credit settings every receiver will get (the credit batch among them).
        self.receiver_config(TransportKind::ExpressPass)
            .validate()
            .map_err(|e| format!("credit settings: {e}"))?;
        if self.max_flows == 0 {
            return Err("max flows must be ≥ 1".into());
        }
        if self.max_half_open == 0 && self.hello_cookies != CookieMode::Always {
            return Err("max half-open 0 needs cookies always".into());
        }
        self.dscp.validate()
    }

    /// Admission with this endpoint's bounds; its half-open flows' credits share
    /// `half_open_credit_share` of the link's credit rate.
    pub(crate) fn admission(&self) -> Admission {
        let limits = Limits {
            max_flows: self.max_flows,
            max_half_open: self.max_half_open,
            half_open_timeout: self.half_open_timeout,
            half_open_credits: self.half_open_credits,
            cookies: self.hello_cookies,
        };
        let half_open_credits = TokenBucket::new(
            credit_bytes_per_second(self.link_bps, self.mtu) * self.half_open_credit_share,
            credit_burst_bytes(self.credit_batch),
        );
        Admission::new(limits, half_open_credits)
    }

    /// The host's path, which the flows it opens fit their parameters to.
    pub fn host_path(&self) -> flexpass_core::HostPath {
        flexpass_core::HostPath {
            link_bps: self.link_bps,
            base_rtt: self.base_rtt,
            mtu: self.mtu,
            t_wait: self.t_wait,
            flashpass_unscheduled: self.flashpass_unscheduled,
        }
    }

    pub(crate) fn receiver_config(&self, t: TransportKind) -> ReceiverConfig {
        let share = if t == TransportKind::FlexPass {
            self.w_q
        } else {
            1.0
        };
        let mut credit = CreditConfig::for_link_mtu(self.link_bps, share, self.base_rtt, self.mtu);
        credit.target_loss_rule = self.target_loss_rule;
        credit.batch = self.credit_batch;
        let mut c = ReceiverConfig::new(credit);
        c.seed = self.seed;
        // Credits restarted on an idle stream, or for a flow of known size, are windowed by
        // what the sender has to send.
        c.credit_window_segment = flexpass_wire::max_payload_for_mtu(self.mtu) as u64;
        c.feedback_backoff = true;
        c
    }
}

/// Default busy-wait before a credit deadline (see `EndpointConfig::spin`).
pub const DEFAULT_SPIN: Nanos = 30_000;
/// Default `EndpointConfig::arbitration_interval`: 1 ms (a few host RTTs on loopback and
/// in Mininet; the model arbitrates once per base RTT).
pub const DEFAULT_ARBITRATION_INTERVAL: Nanos = 1_000_000;
/// Default `EndpointConfig::credit_batch`.
pub const DEFAULT_CREDIT_BATCH: u32 = 1;
/// Default poll-mode window (see `EndpointConfig::busy_poll`): off — on 2 shared cores a
/// 20 µs window changed one flow's goodput by < 5 % (within run-to-run noise) for a core's
/// worth of spinning.
pub const DEFAULT_BUSY_POLL: Nanos = 0;

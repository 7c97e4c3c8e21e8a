//! The flags every command on the agent shares (`NetArgs`): link rate, MTU, w_q, RTT,
//! datapath, the endpoint's limits — and the endpoint they make.

use flexpass_agent::{Endpoint, EndpointConfig};
use flexpass_core::TargetLossRule;
use std::net::SocketAddr;

#[derive(clap::Args, Clone)]
pub struct NetArgs {
    /// Rate of this host's link, Gbit/s (credit rate limit and max credit rate).
    #[arg(long, default_value_t = 10.0)]
    pub link_gbps: f64,
    /// IP MTU of the path, bytes (576..=9000; 9000: jumbo frames), or `auto`: the route's
    /// MTU towards the peers (`send`, `workload`, `incast`), else the bound interface's.
    /// Data segments fill it and credits stand for frames of MTU + 38 bytes
    /// (docs/protocol.md §9); every host of a path must use the same.
    #[arg(long, default_value = "1500")]
    pub mtu: MtuArg,
    /// w_q: share of the link FlexPass credits may claim.
    #[arg(long, default_value_t = 0.5)]
    pub w_q: f64,
    /// Base RTT of the path, µs (floor of the credit feedback update period).
    #[arg(long, default_value_t = 100.0)]
    pub rtt_us: f64,
    /// FlashPass T_wait, µs: a granted data packet leaves T_wait after its emulation packet
    /// (FlashPass §III-B: at least the network's largest RTT, as the agents see it, their
    /// own scheduling delays included; default 2 × --rtt-us, at least 2 ms).
    #[arg(long)]
    pub t_wait_us: Option<f64>,
    /// FlashPass without the Aeolus pre-credit phase (no unscheduled first-RTT data: every
    /// data packet waits for its emulation's grant).
    #[arg(long)]
    pub flashpass_no_unscheduled: bool,
    /// Tail-loss probe for dctcp and ppt flows (RFC 8985 §7, as Linux's TLP): with no ACK
    /// progress for 2·SRTT, one probe packet, so a lost last packet is recovered in a few
    /// RTTs instead of the retransmission timeout.
    #[arg(long)]
    pub tlp: bool,
    /// Busy-wait the last µs before each credit deadline (0: sleep only; costs up to this
    /// much CPU per credit; worth it with a core to spare).
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_SPIN as f64 / 1e3)]
    pub spin_us: f64,
    /// Pace each flow's credits in batches of this many, sent as one write (1: one by one,
    /// the papers' pacing). Fewer wake-ups and system calls for a busy host; keep it within
    /// the switches' credit queue (ExpressPass: 8 credits), whose rate limiter spaces them.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_CREDIT_BATCH)]
    pub credit_batch: u32,
    /// Poll mode: while packets arrive closely spaced, check the socket without sleeping
    /// for up to this many µs after the last one (0: always sleep).
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_BUSY_POLL as f64 / 1e3)]
    pub busy_poll_us: f64,
    /// Credit feedback: tolerate target_loss_scaling·(1 − rate/max_rate) credit loss, the
    /// rule of the ExpressPass authors' simulator (they use 0.125), instead of the paper's
    /// fixed target_loss = 0.1 (docs/protocol.md §11, "Credit feedback").
    #[arg(long)]
    pub target_loss_scaling: Option<f64>,
    /// Do not use UDP GSO (by default runs of equal-sized datagrams to one peer leave as
    /// one UDP_SEGMENT send where the kernel and device support it).
    #[arg(long)]
    pub no_gso: bool,
    /// Incoming flows at most (lingering ones included; about 2.5 kB each idle, 16 KiB more
    /// while sending credits): beyond, HELLOs get cookies (as with a full half-open table)
    /// and then HELLO_ACK refused.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Half-open flows (created by a HELLO without a cookie, no data yet) kept at most;
    /// beyond, see --hello-cookies (docs/protocol.md §11, "Half-open flows and cookies").
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_MAX_HALF_OPEN)]
    pub max_half_open: usize,
    /// When the half-open table is full, half-open flows older than this are dropped first.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_TIMEOUT / 1_000_000)]
    pub half_open_timeout_ms: u64,
    /// Credits a half-open flow may send per HELLO / CREDIT_REQUEST before its first data.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_CREDITS)]
    pub half_open_credits: u32,
    /// Share of the link's credit rate all half-open flows together may use.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_CREDIT_SHARE)]
    pub half_open_credit_share: f64,
    /// HELLO_ACK retry with a cookie, no state kept: `auto` while the half-open table is
    /// full (SYN-cookie style), `always`, or `off` (evict the oldest half-open flow).
    #[arg(long, default_value = "auto")]
    pub hello_cookies: flexpass_agent::endpoint::CookieMode,
    /// Give-up timeout, seconds: a FlexPass / ExpressPass flow fails when nothing (no credit,
    /// no ACK) has come from its peer for this long; shorter outages of the path are survived
    /// (its recovery timer keeps re-requesting credits, backed off).
    #[arg(long, default_value_t = flexpass_core::DEFAULT_GIVE_UP_TIMEOUT as f64 / 1e9)]
    pub give_up_s: f64,
    /// RTO_min of the senders' windows, ms (default: the core's, 4 ms, the FlexPass
    /// testbed's); an emulation passes the model's scaled by RTT'/RTT.
    #[arg(long, value_name = "MS")]
    pub rto_min_ms: Option<f64>,
    /// Initial window of the senders' windows, packets (default: the core's, 10); an
    /// emulation passes the model's scaled with the BDP.
    #[arg(long, value_name = "PACKETS")]
    pub init_cwnd: Option<f64>,
    /// `auto`: AF_XDP where it can be set up (root, an XDP-capable interface, not loopback)
    /// and is the faster path (zero-copy; or copy mode with MTU ≤ 3826 and credits one by
    /// one), else the kernel UDP socket, logged with the reason; `xdp`: AF_XDP or fail;
    /// `udp`: the kernel UDP socket (docs/datapath.md, "`auto`: the faster path").
    #[arg(long, default_value = "auto")]
    pub datapath: flexpass_agent::datapath::DatapathMode,
    /// AF_XDP: interface to attach to (default: the one holding the bound address, or for
    /// 0.0.0.0 the one routing to the peer, or the only one up).
    #[arg(long)]
    pub xdp_iface: Option<String>,
    /// AF_XDP: receive queues to bind, `0`, `0,1,…` or `all` (every receive queue, at most
    /// 64; one AF_XDP socket each). FlexPass datagrams on other queues reach the kernel UDP
    /// socket; on a multi-queue NIC bind `all`, or steer the port to one queue (ethtool -N).
    #[arg(long, default_value = "0")]
    pub xdp_queue: flexpass_agent::xdp::XdpQueues,
    /// PASE: the arbitrator (`flexpass arbitrator`, ADDR:PORT) pase flows ask for their
    /// queue and reference rate (docs/protocol.md §11, "PASE arbitration"); without it pase
    /// flows use local arbitration only (top queue, line rate).
    #[arg(long, value_name = "ADDR")]
    pub arbitrator: Option<SocketAddr>,
    /// PASE: arbitration interval, µs: one ARBITRATION_REQUEST per pase flow per interval.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_ARBITRATION_INTERVAL as f64 / 1e3)]
    pub arbitration_interval_us: f64,
    /// PASE: priority queues the arbitrators map to (1–8; as the arbitrator's --queues and
    /// the model's host.pase.queues).
    #[arg(long, default_value_t = 8)]
    pub pase_queues: u8,
    /// PASE probing (§3.3, the model's host.pase.probing): a pase flow in the lowest queue
    /// sends a header-only probe per RTT instead of data until an answer shows room.
    #[arg(long)]
    pub pase_probing: bool,
    /// PASE delegation (§3.1, the model's host.pase.delegation): this host arbitrates its
    /// own pase flows over the share of the --arbitrator's link delegated to it, reporting
    /// its demand every ten arbitration intervals instead of asking per flow.
    #[arg(long)]
    pub pase_delegation: bool,
    /// The host's NIC edge, as the control plane's `nics:` entry names it (`flexpass-ctl nic`
    /// prints this flag): `qdisc`, `ebpf` or `pna` police the host's credit rate on the wire,
    /// and the agent then does not police it again (its per-flow credit pacing stays: the
    /// edge has no timers); `none`: the agent polices (docs/smartnic.md). `status` →
    /// `credit_limit` says which side does.
    #[arg(long, default_value = "none")]
    pub nic_edge: flexpass_agent::edge::NicEdge,
    /// With `--nic-edge ebpf`: the edge's pinned maps (`<bpffs>/flexpass-edge/<dev>/tc/globals`,
    /// as `nic/flexpass_ebpf.py apply` prints): `status` → `credit_limit.edge` reads its
    /// rate and credit counters there.
    #[arg(long, value_name = "DIR")]
    pub nic_edge_maps: Option<std::path::PathBuf>,
    /// With `--nic-edge qdisc`: the netdev the edge is on (`nic/flexpass_nic.py apply --dev`):
    /// `status` → `credit_limit.edge` reads its htb credit class there (`tc -s class show`).
    #[arg(long, value_name = "DEV")]
    pub nic_edge_dev: Option<String>,
    /// With `--nic-edge pna`, the PNA program on DPDK's SWX pipeline: its CLI address (the
    /// pipeline application's `-h HOST -p PORT`): `status` → `credit_limit.edge` reads the
    /// edge's per-class and per-flow credit counters there (`regrd`).
    #[arg(long, value_name = "HOST:PORT")]
    pub nic_edge_swx: Option<String>,
}

/// `--mtu`: a number of bytes or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuArg {
    Auto,
    Bytes(usize),
}

impl std::str::FromStr for MtuArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(MtuArg::Auto);
        }
        let m: usize = s
            .parse()
            .map_err(|_| format!("--mtu takes bytes or auto, got {s:?}"))?;
        if !flexpass_wire::mtu_supported(m) {
            return Err(format!(
                "--mtu must be in {}..={} bytes, got {m}",
                flexpass_wire::MIN_MTU,
                flexpass_wire::MAX_MTU
            ));
        }
        Ok(MtuArg::Bytes(m))
    }
}

impl NetArgs {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.link_gbps.is_finite() && self.link_gbps > 0.0) {
            return Err(format!("--link-gbps must be > 0, got {}", self.link_gbps));
        }
        if !(self.w_q > 0.0 && self.w_q < 1.0) {
            return Err(format!("--w-q must be in (0, 1), got {}", self.w_q));
        }
        if !(self.rtt_us.is_finite() && self.rtt_us >= 0.001) {
            return Err(format!(
                "--rtt-us must be at least 0.001, got {}",
                self.rtt_us
            ));
        }
        if let Some(t) = self.t_wait_us {
            if !(1.0..=1e6).contains(&t) {
                return Err(format!("--t-wait-us must be in 1..=1000000, got {t}"));
            }
        }
        if let Some(s) = self.target_loss_scaling {
            TargetLossRule::from_scaling(Some(s))
                .map_err(|_| format!("--target-loss-scaling must be in [0, 1), got {s}"))?;
        }
        let batches = 1..=flexpass_core::config::MAX_CREDIT_BATCH;
        if !batches.contains(&self.credit_batch) {
            return Err(format!(
                "--credit-batch must be in {}..={} credits, got {}",
                batches.start(),
                batches.end(),
                self.credit_batch
            ));
        }
        if self.spin_us.is_nan() {
            return Err("--spin-us must be a number".into());
        }
        if !(self.arbitration_interval_us.is_finite() && self.arbitration_interval_us >= 1.0) {
            return Err(format!(
                "--arbitration-interval-us must be at least 1, got {}",
                self.arbitration_interval_us
            ));
        }
        if self.nic_edge_maps.is_some() && self.nic_edge != flexpass_agent::edge::NicEdge::Ebpf {
            return Err(format!(
                "--nic-edge-maps reads the eBPF edge's maps: it needs --nic-edge ebpf, not {}",
                self.nic_edge.as_str()
            ));
        }
        if self.nic_edge_dev.is_some() && self.nic_edge != flexpass_agent::edge::NicEdge::Qdisc {
            return Err(format!(
                "--nic-edge-dev reads the qdisc edge's htb class: it needs --nic-edge qdisc, not {}",
                self.nic_edge.as_str()
            ));
        }
        if self.nic_edge_swx.is_some() && self.nic_edge != flexpass_agent::edge::NicEdge::Pna {
            return Err(format!(
                "--nic-edge-swx reads the PNA edge's registers: it needs --nic-edge pna, not {}",
                self.nic_edge.as_str()
            ));
        }
        if self.busy_poll_us.is_nan() {
            return Err("--busy-poll-us must be a number".into());
        }
        if let Some(w) = self.init_cwnd {
            if !(w.is_finite() && (1.0..=1000.0).contains(&w)) {
                return Err(format!("--init-cwnd must be in 1..=1000 packets, got {w}"));
            }
        }
        if let Some(ms) = self.rto_min_ms {
            if !(ms.is_finite() && (0.01..=60_000.0).contains(&ms)) {
                return Err(format!("--rto-min-ms must be in 0.01..=60000, got {ms}"));
            }
        }
        if !(self.give_up_s.is_finite() && self.give_up_s >= 0.001) {
            return Err(format!(
                "--give-up-s must be at least 0.001, got {}",
                self.give_up_s
            ));
        }
        Ok(())
    }

    pub fn endpoint(&self, bind: SocketAddr, accept: bool) -> Result<Endpoint, String> {
        self.endpoint_towards(bind, accept, &[])
    }

    /// The endpoint, with `--mtu auto` resolved towards `peers` (logged).
    pub fn endpoint_towards(
        &self,
        bind: SocketAddr,
        accept: bool,
        peers: &[SocketAddr],
    ) -> Result<Endpoint, String> {
        self.validate()?;
        let mut c = EndpointConfig::new(bind);
        c.accept = accept;
        c.link_bps = self.link_gbps * 1e9;
        c.mtu = match self.mtu {
            MtuArg::Bytes(m) => m,
            MtuArg::Auto => {
                let (m, how) = flexpass_agent::mtu::detect(bind, peers);
                log::info!("flexpass: MTU {m} ({how})");
                m
            }
        };
        c.w_q = self.w_q;
        c.base_rtt = (self.rtt_us * 1e3) as u64;
        c.t_wait = (self.t_wait_us.unwrap_or((2.0 * self.rtt_us).max(2000.0)) * 1e3) as u64;
        c.flashpass_unscheduled = !self.flashpass_no_unscheduled;
        c.tlp = self.tlp;
        c.target_loss_rule = TargetLossRule::from_scaling(self.target_loss_scaling)?;
        c.spin = (self.spin_us.max(0.0) * 1e3) as u64;
        c.gso = !self.no_gso;
        c.credit_batch = self.credit_batch;
        c.busy_poll = (self.busy_poll_us.max(0.0) * 1e3) as u64;
        c.max_flows = self.max_flows;
        c.max_half_open = self.max_half_open;
        c.half_open_timeout = self.half_open_timeout_ms.saturating_mul(1_000_000);
        c.half_open_credits = self.half_open_credits;
        c.half_open_credit_share = self.half_open_credit_share;
        c.hello_cookies = self.hello_cookies;
        c.give_up_timeout = (self.give_up_s * 1e9) as u64;
        c.rto_min = self.rto_min_ms.map(|ms| (ms * 1e6) as u64);
        c.init_cwnd = self.init_cwnd;
        c.datapath = self.datapath;
        c.xdp_iface = self.xdp_iface.clone();
        c.xdp_queue = self.xdp_queue.clone();
        c.arbitrator = self.arbitrator;
        c.arbitration_interval = (self.arbitration_interval_us * 1e3) as u64;
        c.pase_queues = self.pase_queues;
        c.pase_probing = self.pase_probing;
        c.pase_delegation = self.pase_delegation;
        c.nic_edge = self.nic_edge;
        c.nic_edge_maps = self.nic_edge_maps.clone();
        c.nic_edge_dev = self.nic_edge_dev.clone();
        c.nic_edge_swx = self.nic_edge_swx.clone();
        if c.nic_edge.polices_credits() {
            log::info!(
                "flexpass: the NIC edge ({}) polices this host's credits; the agent paces flows only",
                c.nic_edge.as_str()
            );
        }
        c.route_hint = peers.iter().find_map(|p| match p {
            SocketAddr::V4(a) => Some(*a.ip()),
            SocketAddr::V6(_) => None,
        });
        Endpoint::bind(c).map_err(|e| format!("cannot open UDP {bind}: {e}"))
    }
}

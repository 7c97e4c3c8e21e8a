//! Parameters of every mechanism, with the papers' names and defaults.

use crate::{Nanos, MICROS, MILLIS};
use flexpass_wire::{
    max_frame_wire, TransportKind, DEFAULT_MTU, MAX_PAYLOAD_1500, MIN_ETHERNET_WIRE,
    WIRE_BYTES_NOT_IN_FRAME,
};
use serde::{Deserialize, Serialize};

/// Maximum Ethernet frame on the wire for a 1500 B MTU, incl. preamble and IFG (ExpressPass
/// §3.1): `max_frame_wire(1500)`; other MTUs: [`flexpass_wire::max_frame_wire`].
pub const MAX_DATA_WIRE: usize = max_frame_wire(DEFAULT_MTU);

/// Credits per second that make the returning data fill `share` of a `link_bps` link:
/// every credit (84 B on the wire) triggers at most one maximum-size data frame (1538 B at
/// a 1500 B MTU), so the credit rate limit is `share · C · 84 / (84 + 1538)` in bits/s
/// (FlexPass §4.1 with share = w_q; ExpressPass §3.1 with share = 1), i.e.
/// `share · C / (8 · (84 + 1538))` credits/s. Other MTUs: [`credit_rate_for_link_mtu`].
pub fn credit_rate_for_link(link_bps: f64, share: f64) -> f64 {
    credit_rate_for_link_mtu(link_bps, share, DEFAULT_MTU)
}

/// [`credit_rate_for_link`] on a path of IP MTU `mtu`: `share · C / (8 · (84 +
/// max_frame_wire(mtu)))` credits/s (docs/protocol.md §9–10).
pub fn credit_rate_for_link_mtu(link_bps: f64, share: f64, mtu: usize) -> f64 {
    share * link_bps / (8.0 * (MIN_ETHERNET_WIRE + max_frame_wire(mtu)) as f64)
}

/// Bits per second that the credit queue (Q0) of a port must be shaped to.
pub fn credit_queue_bps(link_bps: f64, share: f64) -> f64 {
    credit_queue_bps_mtu(link_bps, share, DEFAULT_MTU)
}

/// [`credit_queue_bps`] on a path of IP MTU `mtu`: `share · C · 84 / (84 +
/// max_frame_wire(mtu))` bits/s.
pub fn credit_queue_bps_mtu(link_bps: f64, share: f64, mtu: usize) -> f64 {
    share * link_bps * MIN_ETHERNET_WIRE as f64 / (MIN_ETHERNET_WIRE + max_frame_wire(mtu)) as f64
}

/// The host's credit limit as every NIC edge and the agent's credit shaper count it
/// (docs/protocol.md §9, "Credits in frame bytes"): [`credit_queue_bps_mtu`] in bytes/s of
/// frames without preamble, IFG and FCS, `share · C · 60 / (8 · (84 + max_frame_wire(mtu)))`.
/// A credit is charged its frame (`Packet::frame_len`, 60..=68 B), so minimum credits pass
/// at exactly [`credit_rate_for_link_mtu`] and a credit with 8 B of options at 60/68 of it.
/// The control plane's `flexpass_cp.frames.credit_limit_frame_bytes_per_s` is the same
/// number (docs/mtu-vectors.json).
pub fn credit_limit_frame_bytes_per_s(link_bps: f64, share: f64, mtu: usize) -> f64 {
    credit_rate_for_link_mtu(link_bps, share, mtu)
        * (MIN_ETHERNET_WIRE - WIRE_BYTES_NOT_IN_FRAME) as f64
}

/// Which credit loss Algorithm 1 tolerates before it decreases (see `credit_feedback`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TargetLossRule {
    /// ExpressPass Algorithm 1 as published: `target_loss` at every rate.
    #[default]
    Fixed,
    /// The authors' ns-2 simulator (kaist-ina/ns2-xpass): the target shrinks as the flow's
    /// rate grows, `target_loss_scaling · (1 − cur_rate/max_rate)` (their scripts use 0.125),
    /// so a flow below its share tolerates more loss and keeps increasing while a flow near
    /// `max_rate` backs off at the first loss.
    RateScaled { target_loss_scaling: f64 },
}

impl TargetLossRule {
    /// The scaling the authors' simulator scripts use.
    pub const NS2_SCALING: f64 = 0.125;

    /// From a command line's `--target-loss-scaling`: None keeps the paper's fixed target.
    pub fn from_scaling(scaling: Option<f64>) -> Result<Self, String> {
        match scaling {
            None => Ok(TargetLossRule::Fixed),
            Some(s) if (0.0..1.0).contains(&s) => Ok(TargetLossRule::RateScaled {
                target_loss_scaling: s,
            }),
            Some(s) => Err(format!("target_loss_scaling must be in [0, 1), got {s}")),
        }
    }

    /// Short name for reports: "fixed" or "rate-scaled(0.125)".
    pub fn name(&self) -> String {
        match self {
            TargetLossRule::Fixed => "fixed".into(),
            TargetLossRule::RateScaled {
                target_loss_scaling,
            } => format!("rate-scaled({target_loss_scaling})"),
        }
    }
}

/// ExpressPass receiver: Algorithm 1 (credit feedback control) and the credit pacer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreditConfig {
    /// `max_rate`: maximum credit rate of the receiver's link, credits/s.
    pub max_rate: f64,
    /// α: `initial_rate = α · max_rate` (ExpressPass §3.3; §6.3 recommends 1/16).
    pub alpha: f64,
    /// `w_init`: initial aggressiveness factor (§6.3: 1/16).
    pub w_init: f64,
    /// `w_min` (0.01 in all of the paper's experiments).
    pub w_min: f64,
    /// `w_max` (0.5).
    pub w_max: f64,
    /// `target_loss` (0.1).
    pub target_loss: f64,
    /// How Algorithm 1 uses `target_loss`. `Fixed`: the paper's Algorithm 1, one target for
    /// every rate. `RateScaled`: the rule of the authors' ns-2 simulator (see
    /// `credit_feedback`), target = target_loss_scaling · (1 − cur_rate/max_rate).
    #[serde(default)]
    pub target_loss_rule: TargetLossRule,
    /// Update period of Algorithm 1 (RTT by default).
    pub update_period: Nanos,
    /// Random jitter `j` of the inter-credit gap, relative to the gap: each gap is drawn
    /// uniformly from `gap·[1 − j, 1 + j]`. ExpressPass §3.1 sweeps j = 0.01–0.08 for fairness
    /// over 1 ms and notes that its prototype's natural host/NIC jitter (σ = 772 ns of a
    /// ≈1.3 µs gap at 10 Gbps) is what it relies on; the model has no natural jitter, so the
    /// default injects that much (j = 0.9: σ ≈ 0.52·gap). Fair credit drop at a drop-tail
    /// credit queue over a few RTTs needs it: with j = 0.05 the streams stay phase-locked for
    /// hundreds of credits (see docs/protocol.md §11).
    pub jitter: f64,
    /// Randomise credit sizes over 84–92 B on the wire (ExpressPass §3.1); otherwise always 84 B.
    pub randomize_size: bool,
    /// Credits paced in batches of this many (1: one by one, as in the papers). A host agent
    /// whose loop turn spans many credit gaps wakes once a batch and sends it as one write
    /// (bursts of up to `batch` + 1 credits, one size each); the switch's credit queue
    /// (ExpressPass §3.1: 8 credits) absorbs them, and its rate limiter spaces them again.
    #[serde(default = "one_credit")]
    pub batch: u32,
    /// Credits are paced at `pacing_scale` × the feedback control's current rate (1: the
    /// papers). The FlexPass artifact paces its receivers at `flexpass_beta_` (its FlexPass
    /// queue share) times a rate whose maximum already carries that share: 0.4727 there.
    #[serde(default = "unit_scale")]
    pub pacing_scale: f64,
}

fn unit_scale() -> f64 {
    1.0
}

impl CreditConfig {
    /// ExpressPass §6.3 defaults (α = w_init = 1/16) for a receiver whose credits may fill
    /// `share` of a `link_bps` link (share = w_q for FlexPass, 1 for ExpressPass), with
    /// update period `rtt`.
    pub fn for_link(link_bps: f64, share: f64, rtt: Nanos) -> Self {
        Self::for_link_mtu(link_bps, share, rtt, DEFAULT_MTU)
    }

    /// [`CreditConfig::for_link`] on a path of IP MTU `mtu` (a credit stands for one frame
    /// of `max_frame_wire(mtu)` bytes).
    pub fn for_link_mtu(link_bps: f64, share: f64, rtt: Nanos, mtu: usize) -> Self {
        CreditConfig {
            max_rate: credit_rate_for_link_mtu(link_bps, share, mtu),
            alpha: 1.0 / 16.0,
            w_init: 1.0 / 16.0,
            w_min: 0.01,
            w_max: 0.5,
            target_loss: 0.1,
            target_loss_rule: TargetLossRule::Fixed,
            update_period: rtt,
            jitter: 0.9,
            randomize_size: true,
            batch: 1,
            pacing_scale: 1.0,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let in_unit = |v: f64| v > 0.0 && v <= 1.0;
        if !in_unit(self.pacing_scale) {
            return Err(format!(
                "pacing_scale must be in (0, 1], got {}",
                self.pacing_scale
            ));
        }
        if !(self.max_rate.is_finite() && self.max_rate > 0.0) {
            return Err(format!(
                "max_rate must be > 0 credits/s, got {}",
                self.max_rate
            ));
        }
        if !in_unit(self.alpha) {
            return Err(format!("alpha must be in (0, 1], got {}", self.alpha));
        }
        if !(self.w_min > 0.0 && self.w_min <= self.w_max && self.w_max <= 0.5) {
            return Err(format!(
                "need 0 < w_min <= w_max <= 0.5, got w_min {} w_max {}",
                self.w_min, self.w_max
            ));
        }
        if !(self.w_init >= self.w_min && self.w_init <= self.w_max) {
            return Err(format!(
                "w_init must be in [w_min, w_max], got {}",
                self.w_init
            ));
        }
        if !(0.0..1.0).contains(&self.target_loss) {
            return Err(format!(
                "target_loss must be in [0, 1), got {}",
                self.target_loss
            ));
        }
        if let TargetLossRule::RateScaled {
            target_loss_scaling,
        } = self.target_loss_rule
        {
            TargetLossRule::from_scaling(Some(target_loss_scaling))?;
        }
        if self.update_period == 0 {
            return Err("update_period must be > 0".into());
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(format!("jitter must be in [0, 1), got {}", self.jitter));
        }
        if !(1..=MAX_CREDIT_BATCH).contains(&self.batch) {
            return Err(format!(
                "batch must be in 1..={MAX_CREDIT_BATCH} credits, got {}",
                self.batch
            ));
        }
        Ok(())
    }
}

/// Congestion control of the window transport (`dctcp` on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowCc {
    /// DCTCP: ECN-proportional cuts (α).
    #[default]
    Dctcp,
    /// TCP Cubic (RFC 8312; FlashPass's WAN baseline): loss-based, ignores ECN, cubic growth
    /// W(t) = C·(t − K)³ + W_max with the TCP-friendly region, multiplicative decrease β.
    Cubic,
}

/// DCTCP (Alizadeh et al., SIGCOMM'10) as used standalone and as FlexPass's reactive sub-flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DctcpConfig {
    /// g: EWMA gain of α (1/16).
    pub g: f64,
    /// Initial α (Linux starts at 1: the first marked window halves cwnd).
    pub alpha_init: f64,
    /// Initial window in packets (10, RFC 6928).
    pub init_cwnd: f64,
    /// Smallest window after a cut, in packets.
    pub min_cwnd: f64,
    /// Largest window, in packets.
    pub max_cwnd: f64,
    /// RTO_min (the FlexPass testbed sets kernel TCP's to 4 ms).
    pub rto_min: Nanos,
    /// RTO before the first RTT sample.
    pub rto_init: Nanos,
    pub rto_max: Nanos,
    /// Packets SACKed above a hole before it is declared lost.
    pub dupthresh: u32,
    /// DCTCP (default) or Cubic.
    #[serde(default)]
    pub cc: WindowCc,
    /// Cubic's C (RFC 8312: 0.4).
    #[serde(default = "cubic_c_default")]
    pub cubic_c: f64,
    /// Cubic's multiplicative decrease factor β_cubic (RFC 8312: 0.7).
    #[serde(default = "cubic_beta_default")]
    pub cubic_beta: f64,
    /// Tail-loss probe (RFC 8985 §7, as Linux's TLP): with packets in flight and no ACK
    /// progress for PTO = 2·SRTT (only when that is before the RTO), send one probe beyond
    /// the window — new data if there is any, else the last packet in flight again — and
    /// when the probe is acknowledged declare every packet sent before it and still
    /// unacknowledged lost (fast recovery, RACK-style, instead of waiting for the RTO). For
    /// the transports whose whole flow is one DCTCP window: dctcp and ppt's HCP. Off by
    /// default (the model's earlier results have none).
    #[serde(default)]
    pub tlp: bool,
}

fn cubic_c_default() -> f64 {
    0.4
}

fn cubic_beta_default() -> f64 {
    0.7
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig {
            g: 1.0 / 16.0,
            alpha_init: 1.0,
            init_cwnd: 10.0,
            min_cwnd: 1.0,
            max_cwnd: 10_000.0,
            rto_min: 4 * MILLIS,
            rto_init: 10 * MILLIS,
            rto_max: 1_000 * MILLIS,
            dupthresh: 3,
            cc: WindowCc::Dctcp,
            cubic_c: cubic_c_default(),
            cubic_beta: cubic_beta_default(),
            tlp: false,
        }
    }
}

impl DctcpConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err(format!("g must be in (0, 1], got {}", self.g));
        }
        if !(self.min_cwnd >= 1.0
            && self.init_cwnd >= self.min_cwnd
            && self.max_cwnd >= self.init_cwnd)
        {
            return Err("need 1 <= min_cwnd <= init_cwnd <= max_cwnd".into());
        }
        if self.rto_min == 0 || self.rto_max < self.rto_min {
            return Err("need 0 < rto_min <= rto_max".into());
        }
        if self.dupthresh == 0 {
            return Err("dupthresh must be >= 1".into());
        }
        if !(self.cubic_c > 0.0 && self.cubic_beta > 0.0 && self.cubic_beta < 1.0) {
            return Err(format!(
                "need cubic_c > 0 and 0 < cubic_beta < 1, got {} and {}",
                self.cubic_c, self.cubic_beta
            ));
        }
        Ok(())
    }
}

/// PPT (Suo et al., SIGCOMM'24): the low-priority loop (LCP) next to DCTCP (the HCP) and
/// buffer-aware flow scheduling. Names follow the paper (I, α_min, W_max, λ).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PptConfig {
    /// Bandwidth-delay product of the host's path, bytes: the initial LCP window in the
    /// first RTT (or the second, for flows identified as large) is I = BDP − the DCTCP
    /// initial window (§3.1, case 1).
    pub bdp_bytes: u64,
    /// RTT that paces the initial window (I/RTT) before the HCP has an RTT sample.
    pub base_rtt: Nanos,
    /// Buffer-aware identification (§4.1): a flow whose first write put more than this many
    /// bytes in the send buffer is large from its first packet. The testbed's value (Table 3:
    /// 100 KB) is the default.
    pub large_flow_threshold: u64,
    /// PIAS-style demotion of flows not identified as large (§4.1, §4.2): bytes sent (both
    /// loops) at which the HCP priority goes P0 → P1, P1 → P2 and P2 → P3 (LCP: P4 → … → P7).
    /// The paper gives no values; the default is the identification threshold × 1, 10, 100
    /// (100 KB, 1 MB, 10 MB): a flow that sent as much as a large one's first write is
    /// demoted, and streams go on down by decades.
    pub demotion_thresholds: [u64; 3],
    /// α_min is the minimum of the last this-many α updates (one per window, §3.1: "the
    /// minimum value α_min in the past RTTs"); a new LCP loop opens when α is at it.
    pub alpha_history: usize,
    /// The LCP loop closes after this many RTTs without a low-priority ACK (§3.2: 2).
    pub close_after_rtts: f64,
    /// Exponential window decrease (§3.2). Off (the Fig. 16 ablation "w.o. EWD"): the
    /// initial window goes out at line rate and every unmarked low-priority ACK releases two
    /// opportunistic packets, so the LCP window does not shrink until the loop closes.
    pub ewd: bool,
    /// Flow scheduling (§4). Off (the Fig. 17 ablation "w.o. scheduling"): every HCP packet
    /// is P0 and every LCP packet P4.
    pub scheduling: bool,
    /// Buffer-aware identification (§4.1). Off (Fig. 18 "w.o. identification"): every flow
    /// starts unidentified and is only demoted by bytes sent.
    pub identification: bool,
    /// The LCP itself; off, PPT is DCTCP with PPT's priority tagging (for tests).
    pub lcp: bool,
    /// Opportunistic packets are sent only where the receiver can buffer them: within this
    /// many bytes of the flow's acknowledged in-order point (the receiver's reorder limit,
    /// `ReceiverConfig::max_reorder_bytes`; TCP's receive window plays this role in the
    /// paper's kernel implementation).
    pub max_ahead_bytes: u64,
}

impl PptConfig {
    /// Defaults for a host on a `link_bps` link with base RTT `rtt`.
    pub fn for_link(link_bps: f64, rtt: Nanos) -> Self {
        let bdp = (link_bps * rtt as f64 / 8e9).round() as u64;
        PptConfig {
            bdp_bytes: bdp,
            base_rtt: rtt,
            large_flow_threshold: 100_000,
            demotion_thresholds: [100_000, 1_000_000, 10_000_000],
            alpha_history: 8,
            close_after_rtts: 2.0,
            ewd: true,
            scheduling: true,
            identification: true,
            lcp: true,
            max_ahead_bytes: 64 << 20,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.base_rtt == 0 {
            return Err("ppt.base_rtt must be > 0".into());
        }
        if self.alpha_history == 0 {
            return Err("ppt.alpha_history must be >= 1".into());
        }
        if !(self.close_after_rtts.is_finite() && self.close_after_rtts > 0.0) {
            return Err(format!(
                "ppt.close_after_rtts must be > 0, got {}",
                self.close_after_rtts
            ));
        }
        let t = self.demotion_thresholds;
        if !(t[0] <= t[1] && t[1] <= t[2]) {
            return Err(format!(
                "ppt.demotion_thresholds must not decrease, got {t:?}"
            ));
        }
        Ok(())
    }
}

impl Default for PptConfig {
    /// 10 Gbit/s, 25 µs.
    fn default() -> Self {
        PptConfig::for_link(10e9, 25 * MICROS)
    }
}

/// FlashPass (sender-driven emulation, over-provisioning, Aeolus-style first RTT). Names as in
/// the paper (§III, Algorithm 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlashPassConfig {
    /// `max_emulation_rate`: emulation packets/s that fill the host link's emulation share,
    /// C · 84/(84 + 1538) bits/s in 84-byte packets (the initial `cur_rate`, §IV-C1).
    pub max_emulation_rate: f64,
    /// `min_target_loss` (1 %) and `max_target_loss` (10 %) of Algorithm 1.
    pub min_target_loss: f64,
    pub max_target_loss: f64,
    /// T_wait: a granted data packet leaves at T + T_wait; must be ≥ the network's max RTT.
    pub t_wait: Nanos,
    /// The path's RTT before a measurement (emulation → grant), and Algorithm 1's floor period.
    pub base_rtt: Nanos,
    /// Algorithm 1 runs "every RTT": max(update_period, measured RTT).
    pub update_period: Nanos,
    /// `cur_rate` never falls below this fraction of `max_emulation_rate`.
    pub min_rate_fraction: f64,
    /// Algorithm 1 updates only once this many ordinary emulation packets were resolved
    /// since the last update, or this many periods passed (a period with fewer carries its
    /// counts into the next). 1:
    /// every RTT with a resolved packet, as published. On paths whose RTT holds only a
    /// few emulation packets (a host agent at a few hundred Mbit/s and a sub-ms RTT) one
    /// period's loss rate is 0 or 1, and one period of timer-found losses sends the rate
    /// to the floor.
    #[serde(default = "one")]
    pub min_update_samples: u64,
    /// Over-provisioning with selective dropping (§III-C); off: every emulation packet is
    /// ordinary until the granted slots cover the demand (the §IV-C2 ablation).
    pub over_provisioning: bool,
    /// Delayed credit feedback: the receiver may hold grants to batch them when T_wait leaves
    /// slack beyond the RTT (§III-B).
    pub delayed_feedback: bool,
    /// Aeolus-style pre-credit phase (§III-C): up to `unscheduled_bytes` sent at once as
    /// unscheduled (red) data, selectively dropped by the switches; losses go to the
    /// scheduled path after SACK or the tail-loss timer.
    pub unscheduled: bool,
    pub unscheduled_bytes: u64,
}

impl FlashPassConfig {
    /// Paper defaults for a host on a `link_bps` link whose own path RTT is about `base_rtt`,
    /// in a network whose max RTT is `t_wait`; the pre-credit phase is one BDP of the host link.
    pub fn for_link(link_bps: f64, base_rtt: Nanos, t_wait: Nanos) -> Self {
        Self::for_link_mtu(link_bps, base_rtt, t_wait, DEFAULT_MTU)
    }

    /// [`FlashPassConfig::for_link`] on a path of IP MTU `mtu`: one emulation packet per
    /// maximum frame, so the emulation share is 84/(84 + `max_frame_wire(mtu)`).
    pub fn for_link_mtu(link_bps: f64, base_rtt: Nanos, t_wait: Nanos, mtu: usize) -> Self {
        FlashPassConfig {
            max_emulation_rate: credit_rate_for_link_mtu(link_bps, 1.0, mtu),
            min_target_loss: 0.01,
            max_target_loss: 0.10,
            t_wait,
            base_rtt,
            update_period: base_rtt,
            min_rate_fraction: 1.0 / 1024.0,
            min_update_samples: 1,
            over_provisioning: true,
            delayed_feedback: true,
            unscheduled: true,
            unscheduled_bytes: (link_bps * base_rtt as f64 / 8e9) as u64,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.max_emulation_rate.is_finite() && self.max_emulation_rate > 0.0) {
            return Err("flashpass.max_emulation_rate must be > 0".into());
        }
        if !(0.0 <= self.min_target_loss
            && self.min_target_loss < self.max_target_loss
            && self.max_target_loss < 1.0)
        {
            return Err(format!(
                "flashpass: need 0 <= min_target_loss < max_target_loss < 1, got {} and {}",
                self.min_target_loss, self.max_target_loss
            ));
        }
        if self.t_wait == 0 || self.base_rtt == 0 || self.update_period == 0 {
            return Err("flashpass: t_wait, base_rtt and update_period must be > 0".into());
        }
        if !(self.min_rate_fraction > 0.0 && self.min_rate_fraction <= 1.0) {
            return Err("flashpass.min_rate_fraction must be in (0, 1]".into());
        }
        if self.min_update_samples == 0 {
            return Err("flashpass.min_update_samples must be ≥ 1".into());
        }
        Ok(())
    }
}

impl Default for FlashPassConfig {
    /// 10 Gbit/s, 40 ms RTT, T_wait 40 ms (the paper's Fig. 4 example).
    fn default() -> Self {
        FlashPassConfig::for_link(10e9, 40 * MILLIS, 40 * MILLIS)
    }
}

/// Per-flow sender parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SenderConfig {
    pub transport: TransportKind,
    /// Payload bytes per data packet.
    pub mss: usize,
    /// Reactive sub-flow (FlexPass) or the whole flow (DCTCP).
    pub dctcp: DctcpConfig,
    /// FlexPass §4.2: "As we assume no reordering … the sender will detect losses upon receiving a
    /// duplicated ACK": packets SACKed above a hole before it counts as lost, per sub-flow.
    pub subflow_dupthresh: u32,
    /// ExpressPass: idle time with nothing to send before CREDIT_STOP (streams only; a finished
    /// flow stops credits as soon as everything is ACKed).
    pub credit_stop_timeout: Nanos,
    /// FlexPass "recovery timer" of the proactive sub-flow: no credit and no proactive ACK
    /// progress for this long while data is owed → outstanding proactive packets are Lost and
    /// credits are re-requested.
    pub recovery_timeout: Nanos,
    /// Give-up timeout: a credit-based flow fails (`SenderError::NoProgress`) when its
    /// recovery timer expires and nothing at all (no credit, no ACK) has come from the peer
    /// for this long. Until then the timer keeps re-requesting credits, backed off to at most
    /// 64 × `recovery_timeout` (and `rto_max`) apart, so an outage of the path (a link or a
    /// switch down until the control plane repairs it) shorter than this is survived.
    #[serde(default = "default_give_up_timeout")]
    pub give_up_timeout: Nanos,
    /// HELLO retransmission timeout (doubled at each retry) and retries before the peer is
    /// declared not to speak FlexPass: 10 ms and 7 give up after about 2.5 s.
    pub hello_timeout: Nanos,
    pub hello_retries: u32,
    /// Seed for the sender's randomness (none today; kept for symmetry with the receiver).
    pub seed: u64,
    /// Layering (LY, FlexPass §6.2, ref. [45]): an ExpressPass sender also keeps a DCTCP
    /// window over its (ECN-capable) proactive packets, and a credit is spent on data only
    /// when that window allows; otherwise the credit is wasted. Ignored by other transports.
    #[serde(default)]
    pub layered_window: bool,
    /// The reactive sub-flow (a DCTCP flow's whole window) sends no data before the peer
    /// has answered the HELLO, as TCP waits for its SYN-ACK (ns-2 FullTcp, the FlexPass
    /// artifact's reactive sub-flow). Default false: the first window leaves with the HELLO.
    #[serde(default)]
    pub reactive_after_handshake: bool,
    /// FlexPass: new bytes on a flow whose credits are stopped (CREDIT_STOP sent, or an IDLE
    /// HELLO: a persistent connection's next request or reply) that the reactive window
    /// sends whole request no credits; credits are requested only if a loss shows, for bytes
    /// beyond the window's room, or when no ACK progress comes for 2·srtt + 4·rttvar (the
    /// RTO estimate without its floor, plus an srtt). A HELLO with
    /// data requests credits as in the paper. Default true; false requests credits for
    /// every burst.
    #[serde(default = "default_true")]
    pub resume_reactively: bool,
    /// PPT's low-priority loop and flow scheduling (transport ppt only).
    #[serde(default)]
    pub ppt: PptConfig,
    /// FlashPass's emulation (transport flashpass only).
    #[serde(default)]
    pub flashpass: FlashPassConfig,
    /// pFabric's window and RTO (transport pfabric only; `crate::pfabric`).
    #[serde(default)]
    pub pfabric: PFabricConfig,
    /// PASE's queues, line rate and reference-rate switch (transport pase only;
    /// `crate::pase`).
    #[serde(default)]
    pub pase: crate::pase::PaseConfig,
}

/// Default give-up timeout (`SenderConfig::give_up_timeout`): 30 s of silence from the peer.
pub const DEFAULT_GIVE_UP_TIMEOUT: Nanos = 30_000 * MILLIS;

fn default_true() -> bool {
    true
}

fn default_give_up_timeout() -> Nanos {
    DEFAULT_GIVE_UP_TIMEOUT
}

/// A host's path as its agent is configured (the agent's `EndpointConfig`; a program's
/// in-process flows get it from the agent's `settings`): what a flow of the host derives
/// its per-transport parameters from (`SenderConfig::fit_to_path`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostPath {
    /// The host link's rate (bits/s).
    pub link_bps: f64,
    /// The path's base RTT.
    pub base_rtt: Nanos,
    /// The path's IP MTU.
    pub mtu: usize,
    /// FlashPass T_wait (§III-B).
    pub t_wait: Nanos,
    /// FlashPass: the Aeolus pre-credit phase allowed on this host.
    pub flashpass_unscheduled: bool,
}

/// Algorithm 1 of a host's FlashPass senders updates over at least this many resolved
/// emulation packets: a loss rate resolves 1/16 (between the target band's edges, 1 % and
/// 10 %, a period of 16 tells "none", "some" and "many" apart).
pub const FLASHPASS_MIN_UPDATE_SAMPLES: u64 = 16;

/// Floor of a host's FlashPass emulation rate, as a fraction of the link's emulation rate
/// (Algorithm 1 grows back from it by × 1.1 per update: 44 updates).
pub const FLASHPASS_MIN_RATE_FRACTION: f64 = 1.0 / 64.0;

impl SenderConfig {
    /// The per-transport parameters that come from the host's path (the template's other
    /// choices kept): segments that fill the MTU (docs/protocol.md §9), PPT's first LCP
    /// window, FlashPass's emulation rate and T_wait, pFabric's window and RTO. PASE's
    /// line rate and RTT as well; its arbitration is the agent's (the caller's).
    pub fn fit_to_path(&mut self, p: &HostPath) {
        self.mss = flexpass_wire::max_payload_for_mtu(p.mtu);
        match self.transport {
            TransportKind::Ppt => {
                // PPT §3.1: the LCP's first window is the host path's BDP (C · base RTT)
                // less DCTCP's initial window, paced over the base RTT until the HCP has a
                // sample.
                let link = PptConfig::for_link(p.link_bps, p.base_rtt);
                self.ppt.bdp_bytes = link.bdp_bytes;
                self.ppt.base_rtt = link.base_rtt;
            }
            TransportKind::FlashPass => {
                // FlashPass §III-B: emulation at the host link's full emulation share (one
                // 84-byte packet per maximum frame of the MTU), data at T + T_wait.
                let fp = FlashPassConfig::for_link_mtu(p.link_bps, p.base_rtt, p.t_wait, p.mtu);
                let t = &self.flashpass;
                // The template's Algorithm 1 band and ablations stay.
                self.flashpass = FlashPassConfig {
                    min_target_loss: t.min_target_loss,
                    max_target_loss: t.max_target_loss,
                    over_provisioning: t.over_provisioning,
                    delayed_feedback: t.delayed_feedback,
                    unscheduled: t.unscheduled && p.flashpass_unscheduled,
                    // A host's RTT may hold only a few emulation packets: Algorithm 1 waits
                    // for enough of them to measure a loss rate (min_update_samples).
                    min_update_samples: t.min_update_samples.max(FLASHPASS_MIN_UPDATE_SAMPLES),
                    // A stalled host (descheduled longer than T_wait) finds a whole period
                    // of emulation lost: the floor bounds how long the rate takes to grow
                    // back.
                    min_rate_fraction: t.min_rate_fraction.max(FLASHPASS_MIN_RATE_FRACTION),
                    ..fp
                };
            }
            TransportKind::PFabric => {
                // pFabric §4.2: line-rate start with the host path's BDP as the window, the
                // RTO `pfabric::RTO_RTTS` base RTTs (the model's rule, flexpass-sim
                // build.rs). The PRIO field then carries the remaining size of the flow.
                self.pfabric = PFabricConfig {
                    bdp_bytes: (p.link_bps / 8.0 * p.base_rtt as f64 * 1e-9).ceil() as u64,
                    base_rtt: p.base_rtt.max(1),
                    ..PFabricConfig::default()
                };
            }
            TransportKind::Pase => {
                // PASE §3.3: the host link's rate is the largest reference rate, and rate ×
                // the base RTT the window.
                self.pase.line_rate_bps = p.link_bps;
                self.pase.base_rtt = p.base_rtt;
            }
            _ => {}
        }
    }

    pub fn new(transport: TransportKind) -> Self {
        SenderConfig {
            transport,
            mss: MAX_PAYLOAD_1500,
            dctcp: DctcpConfig::default(),
            subflow_dupthresh: 1,
            credit_stop_timeout: 100 * MICROS,
            recovery_timeout: 2 * MILLIS,
            give_up_timeout: DEFAULT_GIVE_UP_TIMEOUT,
            hello_timeout: 10 * MILLIS,
            hello_retries: 7,
            seed: 0,
            layered_window: false,
            reactive_after_handshake: false,
            resume_reactively: true,
            ppt: PptConfig::default(),
            flashpass: FlashPassConfig::default(),
            pfabric: PFabricConfig::default(),
            pase: crate::pase::PaseConfig::default(),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.mss == 0 || self.mss > u16::MAX as usize - flexpass_wire::DATA_HEADER_LEN {
            return Err(format!(
                "mss must be in 1..={}, got {}",
                u16::MAX as usize - flexpass_wire::DATA_HEADER_LEN,
                self.mss
            ));
        }
        if self.subflow_dupthresh == 0 {
            return Err("subflow_dupthresh must be >= 1".into());
        }
        if self.recovery_timeout == 0 || self.hello_timeout == 0 || self.give_up_timeout == 0 {
            return Err("timeouts must be > 0".into());
        }
        if self.transport == TransportKind::Ppt {
            self.ppt.validate()?;
        }
        if self.transport == TransportKind::FlashPass {
            self.flashpass.validate()?;
        }
        if self.transport == TransportKind::PFabric {
            self.pfabric.validate()?;
            if self.mss <= flexpass_wire::PRIORITY_LEN {
                return Err(format!("pfabric needs mss > 4, got {}", self.mss));
            }
        }
        if self.transport == TransportKind::Pase {
            self.pase.validate()?;
        }
        self.dctcp.validate()
    }

    pub fn uses_credits(&self) -> bool {
        uses_credits(self.transport)
    }
}

/// The path a pFabric flow starts on: its BDP (the initial and largest window) and base RTT
/// (the RTO is `pfabric::RTO_RTTS` of it; `crate::pfabric`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PFabricConfig {
    /// Bandwidth-delay product of the host's path in bytes: the initial window, and the
    /// largest (a window beyond it only queues, §4.2).
    pub bdp_bytes: u64,
    /// Base RTT of the path (no queueing): RTO = `pfabric::RTO_RTTS` · base_rtt.
    pub base_rtt: Nanos,
    /// Probe mode (§4.2): after this many consecutive timeouts the flow sends header-only
    /// probes instead of data until one is answered; 0 turns it off.
    /// `PFABRIC_PROBE_AFTER_TIMEOUTS` by default.
    #[serde(default = "default_probe_after_timeouts")]
    pub probe_after_timeouts: u32,
}

/// pFabric §4.2: consecutive timeouts before probe mode (`crate::pfabric`). The paper gives
/// no number; 5 is the `prob_cap_` of public ns-2 scripts that build on pFabric's simulator
/// (PIAS's, for one).
pub const PFABRIC_PROBE_AFTER_TIMEOUTS: u32 = 5;

fn default_probe_after_timeouts() -> u32 {
    PFABRIC_PROBE_AFTER_TIMEOUTS
}

impl Default for PFabricConfig {
    /// A 10 Gbps fabric with a 14.6 µs RTT (pFabric §5): BDP ≈ 18 kB.
    fn default() -> Self {
        PFabricConfig {
            bdp_bytes: 18_250,
            base_rtt: 14_600,
            probe_after_timeouts: PFABRIC_PROBE_AFTER_TIMEOUTS,
        }
    }
}

impl PFabricConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.bdp_bytes == 0 || self.base_rtt == 0 {
            return Err(format!(
                "pfabric needs bdp_bytes > 0 and base_rtt > 0, got {} and {}",
                self.bdp_bytes, self.base_rtt
            ));
        }
        Ok(())
    }
}

/// Per-flow receiver parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverConfig {
    /// Credit generation (ignored for DCTCP flows).
    pub credit: CreditConfig,
    /// Bytes the receiver buffers out of order before it drops further data (no ACK → resent).
    pub max_reorder_bytes: u64,
    /// Seed for credit jitter and credit sizes.
    pub seed: u64,
    /// Credits are windowed (0: not, as in the papers) when the receiver learns how much is
    /// to come: credits restarted by a CREDIT_REQUEST, at most ceil(pending_bytes / this) + 1
    /// unanswered by data, and credits started by the HELLO of a flow of known size, at
    /// most ceil(flow_size / this) + 1; one more for each data packet that arrives. The host
    /// agent sets its segment size here, so a small message costs a few credits, not an RTT
    /// of them at line rate.
    #[serde(default)]
    pub credit_window_segment: u64,
    /// Credit feedback updates that measure nothing (no data echoed a credit) back off, up
    /// to 2^6 periods, until an echo comes (`Receiver::handle_timeout`). An update without
    /// samples changes nothing, so this only saves work: the host agent sets it (1 000 flows
    /// at a 100 µs period are 10 million updates a second); the model keeps the papers'
    /// update every period (false).
    #[serde(default)]
    pub feedback_backoff: bool,
}

impl ReceiverConfig {
    pub fn new(credit: CreditConfig) -> Self {
        ReceiverConfig {
            credit,
            max_reorder_bytes: 64 << 20,
            seed: 0,
            credit_window_segment: 0,
            feedback_backoff: false,
        }
    }
    pub fn validate(&self) -> Result<(), String> {
        self.credit.validate()
    }
}

pub fn uses_credits(t: TransportKind) -> bool {
    match t {
        TransportKind::FlexPass | TransportKind::ExpressPass => true,
        TransportKind::Dctcp
        | TransportKind::Ppt
        | TransportKind::FlashPass
        | TransportKind::PFabric
        | TransportKind::Pase => false,
    }
}

fn one() -> u64 {
    1
}

fn one_credit() -> u32 {
    1
}

/// Largest `CreditConfig::batch` (with its one extra credit, within the 64 segments of a
/// UDP GSO write).
pub const MAX_CREDIT_BATCH: u32 = 63;

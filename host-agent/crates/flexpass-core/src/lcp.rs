//! PPT's low-priority control loop (LCP; Suo et al., SIGCOMM'24 §3), next to the DCTCP
//! window of the high-priority loop (HCP).
//!
//! - **Intermittent loop initialization** (§3.1). Case 1, the first RTTs: a loop opens with
//!   the flow's first data (first RTT) or, for a flow identified as large, with its first
//!   ACK (second RTT), with I = BDP − the DCTCP initial window. Case 2, the queue build-up
//!   phase: once the HCP is past its startup (in congestion avoidance), a loop opens whenever
//!   DCTCP's α, at one of its per-window updates, is at its minimum α_min over the recent
//!   updates, with I = (1/2 − α_min)·W_max, W_max the largest congestion-avoidance window
//!   the flow had (footnote 3).
//! - **Pacing**: the loop's initial window goes out paced at I/RTT.
//! - **The window is packets in flight**: EWD "ensures, in every RTT, the window summation
//!   of LCP and HCP will not exceed the MW a flow experienced in the past" (§3). A new loop
//!   therefore sends I minus the opportunistic packets still unacknowledged from earlier
//!   loops (for example packets starved in a low-priority queue behind HCP traffic, which
//!   would otherwise pile up loop after loop in the port buffer the queues share).
//! - **Exponential window decrease** (§3.2): the receiver returns one low-priority ACK per
//!   two opportunistic packets; each low-priority ACK without ECE lets one new opportunistic
//!   packet go, so the LCP sends I, I/2, I/4, … packets in successive RTTs. An ECE-marked
//!   low-priority ACK lets nothing go.
//! - **Close**: the loop ends once no low-priority ACK came for 2 RTTs; the sender then
//!   treats the LCP packets still unacknowledged as lost (the HCP sends them again).
//!
//! The sender decides what the packets carry (the tail of the send buffer) and runs this
//! loop's clock; this module is only the loop's state, sans-IO like the rest of the core.

use crate::config::PptConfig;
use crate::Nanos;
use serde::Serialize;
use std::collections::VecDeque;

/// Why a loop opened (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OpenCase {
    /// Case 1, first RTT (flows not identified as large).
    FirstRtt,
    /// Case 1, second RTT (flows identified as large).
    SecondRtt,
    /// Case 2: α at its recent minimum α_min.
    AlphaMin,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LcpStats {
    pub loops_case1: u64,
    pub loops_case2: u64,
    /// Sum of the initial windows I of every loop, packets.
    pub initial_window_packets: u64,
    pub lp_acks: u64,
    /// Low-priority ACKs with ECE (they release nothing).
    pub lp_acks_ece: u64,
    /// Loops closed by 2 RTTs without a low-priority ACK.
    pub closed: u64,
}

impl LcpStats {
    pub fn is_zero(&self) -> bool {
        *self == LcpStats::default()
    }
}

#[derive(Clone, Debug)]
pub struct Lcp {
    /// Off: no loop ever opens (PPT without its LCP).
    enabled: bool,
    ewd: bool,
    close_after_rtts: f64,
    history: usize,
    /// The last `history` values of α, oldest first.
    alphas: VecDeque<f64>,
    /// W_max: the largest HCP window seen in congestion avoidance, packets.
    w_max: f64,
    /// The HCP has left slow start.
    startup_over: bool,
    case1_done: bool,
    open: bool,
    opened_at: Nanos,
    last_ack_at: Nanos,
    /// Initial-window packets still to be paced out.
    to_pace: u32,
    gap: Nanos,
    next_pace_at: Nanos,
    /// Packets released by unmarked low-priority ACKs and not yet sent.
    released: u32,
    initial_window: u32,
    stats: LcpStats,
}

impl Lcp {
    pub fn new(cfg: &PptConfig) -> Self {
        Lcp {
            enabled: cfg.lcp,
            ewd: cfg.ewd,
            close_after_rtts: cfg.close_after_rtts,
            history: cfg.alpha_history.max(1),
            alphas: VecDeque::new(),
            w_max: 0.0,
            startup_over: false,
            case1_done: false,
            open: false,
            opened_at: 0,
            last_ack_at: 0,
            to_pace: 0,
            gap: 0,
            next_pace_at: 0,
            released: 0,
            initial_window: 0,
            stats: LcpStats::default(),
        }
    }

    pub fn stats(&self) -> &LcpStats {
        &self.stats
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// I of the current (or last) loop, packets.
    pub fn initial_window(&self) -> u32 {
        self.initial_window
    }

    /// W_max, packets (0 before the HCP reached congestion avoidance).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// α_min over the recent α updates.
    pub fn alpha_min(&self) -> Option<f64> {
        self.alphas.iter().copied().reduce(f64::min)
    }

    /// Case 1 (§3.1): open the flow's first loop with `window` = I = BDP − initial window.
    /// Only the first call opens a loop.
    pub fn open_first(&mut self, now: Nanos, case: OpenCase, window: u32, rtt: Nanos) {
        if self.case1_done {
            return;
        }
        self.case1_done = true;
        self.open_loop(now, window, 0, rtt, case);
    }

    /// The HCP's window after an ACK: W_max counts congestion-avoidance windows only
    /// (footnote 3), and the first one ends the startup phase.
    pub fn on_hcp_window(&mut self, cwnd: f64, ssthresh: f64) {
        if cwnd >= ssthresh {
            self.startup_over = true;
            self.w_max = self.w_max.max(cwnd);
        }
    }

    /// DCTCP updated α (once per window of HCP data). Case 2: opens a loop when α is at its
    /// recent minimum α_min, with I = (1/2 − α_min)·W_max, of which `in_flight`
    /// opportunistic packets are still unacknowledged. Returns whether a loop opened.
    pub fn on_alpha_update(&mut self, now: Nanos, alpha: f64, in_flight: u32, rtt: Nanos) -> bool {
        self.alphas.push_back(alpha);
        while self.alphas.len() > self.history {
            self.alphas.pop_front();
        }
        if self.open || !self.startup_over {
            return false;
        }
        let alpha_min = self.alpha_min().unwrap_or(alpha);
        if alpha > alpha_min {
            return false;
        }
        let window = ((0.5 - alpha_min) * self.w_max).floor();
        if window < 1.0 {
            return false;
        }
        self.open_loop(now, window as u32, in_flight, rtt, OpenCase::AlphaMin)
    }

    /// Open a loop of window I = `window` with `in_flight` opportunistic packets still
    /// unacknowledged: it sends the difference. Returns whether it opened.
    fn open_loop(
        &mut self,
        now: Nanos,
        window: u32,
        in_flight: u32,
        rtt: Nanos,
        case: OpenCase,
    ) -> bool {
        let window = window.saturating_sub(in_flight);
        if window == 0 || !self.enabled {
            return false;
        }
        match case {
            OpenCase::AlphaMin => self.stats.loops_case2 += 1,
            _ => self.stats.loops_case1 += 1,
        }
        self.stats.initial_window_packets += u64::from(window);
        self.open = true;
        self.opened_at = now;
        self.last_ack_at = now;
        self.to_pace = window;
        self.initial_window = window;
        self.released = 0;
        // EWD paces the initial window at I/RTT; without it the window goes at line rate.
        self.gap = if self.ewd {
            rtt / Nanos::from(window)
        } else {
            0
        };
        self.next_pace_at = now;
        true
    }

    /// May an opportunistic packet go at `now`?
    pub fn ready(&self, now: Nanos) -> bool {
        self.open && (self.released > 0 || (self.to_pace > 0 && now >= self.next_pace_at))
    }

    /// When the next paced packet of the initial window may go (None: none is waiting for
    /// the pacer).
    pub fn next_pace(&self) -> Option<Nanos> {
        (self.open && self.released == 0 && self.to_pace > 0).then_some(self.next_pace_at)
    }

    /// An opportunistic packet went out.
    pub fn on_sent(&mut self, now: Nanos) {
        if self.released > 0 {
            self.released -= 1;
        } else if self.to_pace > 0 {
            self.to_pace -= 1;
            self.next_pace_at = self.next_pace_at.max(now) + self.gap;
        }
    }

    /// The LCP has nothing left to send (its tail met the HCP): what the loop would still
    /// send is dropped; the loop stays open for the ACKs of what is in flight.
    pub fn exhausted(&mut self) {
        self.to_pace = 0;
        self.released = 0;
    }

    /// A low-priority ACK arrived (§3.2): without ECE it releases one new opportunistic
    /// packet (two without EWD, which keeps the window); with ECE, nothing.
    pub fn on_lp_ack(&mut self, now: Nanos, ece: bool) {
        self.stats.lp_acks += 1;
        if ece {
            self.stats.lp_acks_ece += 1;
        }
        if !self.open {
            return;
        }
        self.last_ack_at = now;
        if !ece {
            self.released += if self.ewd { 1 } else { 2 };
        }
    }

    /// When the loop closes if no low-priority ACK comes: 2 RTTs after the last one (or
    /// after the loop opened).
    pub fn close_deadline(&self, rtt: Nanos) -> Option<Nanos> {
        self.open.then(|| {
            self.opened_at.max(self.last_ack_at) + (self.close_after_rtts * rtt as f64) as Nanos
        })
    }

    /// Close the loop (the caller declares its unacknowledged packets lost).
    pub fn close(&mut self) {
        if self.open {
            self.stats.closed += 1;
        }
        self.open = false;
        self.to_pace = 0;
        self.released = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MICROS;

    fn lcp(ewd: bool) -> Lcp {
        Lcp::new(&PptConfig {
            ewd,
            ..PptConfig::default()
        })
    }

    #[test]
    fn initial_window_is_paced_at_i_over_rtt() {
        let mut l = lcp(true);
        l.open_first(1000, OpenCase::FirstRtt, 10, 20 * MICROS);
        let mut times = vec![];
        let mut now = 1000;
        while l.next_pace().is_some() {
            assert!(times.len() < 100, "the pacer never runs dry");
            now = l.next_pace().unwrap().max(now);
            assert!(l.ready(now));
            l.on_sent(now);
            times.push(now);
        }
        assert_eq!(times.len(), 10);
        assert_eq!(times[9] - times[0], 9 * 2 * MICROS);
        assert!(!l.ready(now + 100 * MICROS), "nothing more without an ACK");
        // Only the first case-1 call opens a loop.
        l.close();
        l.open_first(now, OpenCase::SecondRtt, 10, 20 * MICROS);
        assert!(!l.is_open());
    }

    #[test]
    fn unmarked_lp_ack_releases_one_packet_marked_releases_none() {
        let mut l = lcp(true);
        l.open_first(0, OpenCase::FirstRtt, 2, 10 * MICROS);
        l.on_sent(0);
        l.on_sent(5 * MICROS);
        l.on_lp_ack(12 * MICROS, true);
        assert!(!l.ready(12 * MICROS));
        l.on_lp_ack(13 * MICROS, false);
        assert!(l.ready(13 * MICROS));
        l.on_sent(13 * MICROS);
        assert!(!l.ready(13 * MICROS));
        // Without EWD an ACK releases two (the window holds).
        let mut l = lcp(false);
        l.open_first(0, OpenCase::FirstRtt, 4, 10 * MICROS);
        for _ in 0..4 {
            assert!(l.ready(0), "line rate: no pacing");
            l.on_sent(0);
        }
        l.on_lp_ack(1, false);
        l.on_sent(1);
        assert!(l.ready(1));
    }

    #[test]
    fn case_2_opens_at_alpha_min_after_startup_with_half_minus_alpha_min_of_w_max() {
        let mut l = lcp(true);
        let rtt = 10 * MICROS;
        // In slow start nothing opens.
        l.on_hcp_window(40.0, 1e4);
        assert!(!l.on_alpha_update(0, 0.1, 0, rtt));
        // Congestion avoidance: W_max = 40.
        l.on_hcp_window(40.0, 20.0);
        l.on_hcp_window(30.0, 20.0);
        assert_eq!(l.w_max(), 40.0);
        // α rises: not at its minimum.
        assert!(!l.on_alpha_update(1, 0.3, 0, rtt));
        // α back at the minimum of the window (0.1): I = (0.5 − 0.1)·40 = 16, of which 6
        // earlier opportunistic packets are still in flight: 10 go.
        assert!(l.on_alpha_update(2, 0.1, 6, rtt));
        assert_eq!(l.initial_window(), 10);
        assert_eq!(l.alpha_min(), Some(0.1));
        // An open loop is not reopened; it closes 2 RTTs after the last LP ACK.
        assert!(!l.on_alpha_update(3, 0.05, 0, rtt));
        l.on_lp_ack(5 * MICROS, false);
        assert_eq!(l.close_deadline(rtt), Some(25 * MICROS));
        l.close();
        assert_eq!(l.stats().closed, 1);
        // α_min ≥ 1/2 gives no window.
        let mut l = lcp(true);
        l.on_hcp_window(40.0, 20.0);
        assert!(!l.on_alpha_update(0, 0.6, 0, rtt));
        // Nor does a window already all in flight.
        assert!(!l.on_alpha_update(1, 0.1, 16, rtt));
    }
}

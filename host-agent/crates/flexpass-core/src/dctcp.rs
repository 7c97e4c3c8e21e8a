//! The DCTCP window (Alizadeh et al., SIGCOMM'10): ECN-fraction EWMA α with gain g, window
//! cut by α/2 once per window of marked data, slow start / congestion avoidance, halving on
//! loss, and an RFC 6298 retransmission timer with RTO_min and exponential backoff.
//!
//! Windows are counted in packets. Sequence numbers are the sub-flow's own packet numbers.

use crate::config::{DctcpConfig, WindowCc};
use crate::Nanos;

/// RFC 6298 RTT estimator.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<f64>,
    rttvar: f64,
    min_rtt: Option<Nanos>,
}

impl RttEstimator {
    pub fn new() -> Self {
        RttEstimator {
            srtt: None,
            rttvar: 0.0,
            min_rtt: None,
        }
    }

    pub fn on_sample(&mut self, rtt: Nanos) {
        let r = rtt as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    pub fn srtt(&self) -> Option<Nanos> {
        self.srtt.map(|s| s as Nanos)
    }

    pub fn min_rtt(&self) -> Option<Nanos> {
        self.min_rtt
    }

    /// srtt + 4·rttvar without clamping (0 before any sample).
    pub fn rto_estimate(&self) -> Nanos {
        self.srtt.map_or(0, |s| (s + 4.0 * self.rttvar) as Nanos)
    }

    /// RTO before backoff: max(rto_min, srtt + 4·rttvar), or rto_init before any sample.
    pub fn rto(&self, cfg: &DctcpConfig) -> Nanos {
        match self.srtt {
            None => cfg.rto_init.max(cfg.rto_min),
            Some(s) => ((s + 4.0 * self.rttvar) as Nanos).clamp(cfg.rto_min, cfg.rto_max),
        }
    }
}

impl Default for RttEstimator {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Debug)]
pub struct DctcpWindow {
    cfg: DctcpConfig,
    cwnd: f64,
    ssthresh: f64,
    /// DCTCP α: running estimate of the fraction of marked packets.
    alpha: f64,
    acked_in_window: u64,
    marked_in_window: u64,
    /// α is updated when the ACKs pass this sequence (one window of data).
    alpha_window_end: u32,
    /// No further window reduction (ECN or loss) until ACKs pass this sequence.
    reduce_window_end: Option<u32>,
    pub rtt: RttEstimator,
    backoff: u32,
    /// α updates so far (one per window of acknowledged data).
    alpha_updates: u64,
    /// Cubic (RFC 8312): the caller's clock, W_max, the previous W_max (fast convergence),
    /// K and the start of the current congestion-avoidance epoch.
    now: Nanos,
    w_max: f64,
    w_last_max: f64,
    k: f64,
    epoch_start: Option<Nanos>,
}

/// Wrapping "a ≥ b" for 32-bit sequence numbers.
pub(crate) fn seq_ge(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) < (1 << 31)
}

impl DctcpWindow {
    pub fn new(cfg: &DctcpConfig) -> Self {
        DctcpWindow {
            cwnd: cfg.init_cwnd,
            ssthresh: cfg.max_cwnd,
            alpha: cfg.alpha_init,
            acked_in_window: 0,
            marked_in_window: 0,
            alpha_window_end: 0,
            reduce_window_end: None,
            rtt: RttEstimator::new(),
            backoff: 0,
            alpha_updates: 0,
            now: 0,
            w_max: 0.0,
            w_last_max: 0.0,
            k: 0.0,
            epoch_start: None,
            cfg: cfg.clone(),
        }
    }

    /// Packets that may be outstanding.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    /// Number of α updates so far (DCTCP updates α once per window of data; PPT §3.1 opens
    /// an LCP loop at an update that finds α at its recent minimum).
    pub fn alpha_updates(&self) -> u64 {
        self.alpha_updates
    }

    fn may_reduce(&self, ack_seq: u32) -> bool {
        self.reduce_window_end
            .is_none_or(|end| seq_ge(ack_seq, end))
    }

    /// A data packet with sub-flow sequence `ack_seq` was newly acknowledged; `ece` tells
    /// whether it arrived CE-marked. `next_seq` is the next sequence the sender will use.
    pub fn on_ack(&mut self, ack_seq: u32, ece: bool, next_seq: u32) {
        if self.cfg.cc == WindowCc::Cubic {
            return self.cubic_on_ack();
        }
        self.backoff = 0;
        self.acked_in_window += 1;
        if ece {
            self.marked_in_window += 1;
        }
        if seq_ge(ack_seq, self.alpha_window_end) {
            let f = self.marked_in_window as f64 / self.acked_in_window as f64;
            self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g * f;
            self.alpha_updates += 1;
            self.acked_in_window = 0;
            self.marked_in_window = 0;
            self.alpha_window_end = next_seq;
        }
        if ece {
            if self.may_reduce(ack_seq) {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(self.cfg.min_cwnd);
                self.ssthresh = self.cwnd;
                self.reduce_window_end = Some(next_seq);
            }
        } else if self.cwnd < self.ssthresh {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
        self.cwnd = self.cwnd.min(self.cfg.max_cwnd);
    }

    /// A loss was detected by duplicate ACK / SACK (`ack_seq` is the ACK that revealed it):
    /// halve the window, at most once per window.
    pub fn on_loss(&mut self, ack_seq: u32, next_seq: u32) {
        if self.cfg.cc == WindowCc::Cubic {
            if self.may_reduce(ack_seq) {
                self.cubic_decrease();
                self.reduce_window_end = Some(next_seq);
            }
            return;
        }
        if self.may_reduce(ack_seq) {
            self.ssthresh = (self.cwnd / 2.0).max(self.cfg.min_cwnd.max(2.0));
            self.cwnd = self.ssthresh;
            self.reduce_window_end = Some(next_seq);
        }
    }

    /// An outside rate sets the window (PASE's reference rate × RTT): kept within
    /// [min_cwnd, max_cwnd]; ECN marks and losses then adjust it as usual.
    pub fn set_cwnd(&mut self, cwnd: f64) {
        self.cwnd = cwnd.clamp(self.cfg.min_cwnd, self.cfg.max_cwnd);
    }

    /// The retransmission timer fired: window to the minimum, back off the timer.
    pub fn on_timeout(&mut self, next_seq: u32) {
        if self.cfg.cc == WindowCc::Cubic {
            // RFC 8312 §4.7: as a loss, then the window restarts from one segment.
            self.cubic_decrease();
        }
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = self.cfg.min_cwnd;
        self.reduce_window_end = Some(next_seq);
        self.backoff = (self.backoff + 1).min(16);
    }

    /// The caller's clock, for Cubic's time-based growth (call before `on_ack`).
    pub fn clock(&mut self, now: Nanos) {
        self.now = now;
    }

    /// RFC 8312 §4.5–4.6: W_max ← cwnd (less with fast convergence), cwnd ← β·cwnd.
    fn cubic_decrease(&mut self) {
        let beta = self.cfg.cubic_beta;
        self.w_max = if self.cwnd < self.w_last_max {
            self.cwnd * (1.0 + beta) / 2.0
        } else {
            self.cwnd
        };
        self.w_last_max = self.cwnd;
        self.cwnd = (self.cwnd * beta).max(self.cfg.min_cwnd.max(2.0));
        self.ssthresh = self.cwnd;
        self.epoch_start = None;
    }

    /// RFC 8312 §4.1–4.3: slow start below ssthresh, then towards
    /// max(W_cubic(t + RTT), W_est(t)), ECN ignored.
    fn cubic_on_ack(&mut self) {
        self.backoff = 0;
        if self.cwnd < self.ssthresh {
            self.cwnd = (self.cwnd + 1.0).min(self.cfg.max_cwnd);
            return;
        }
        let (c, beta) = (self.cfg.cubic_c, self.cfg.cubic_beta);
        let epoch = *self.epoch_start.get_or_insert_with(|| {
            self.w_max = self.w_max.max(self.cwnd);
            self.k = (self.w_max * (1.0 - beta) / c).cbrt();
            self.now
        });
        if self.w_max < self.cwnd {
            self.w_max = self.cwnd;
        }
        let rtt = self.rtt.srtt().unwrap_or(crate::MILLIS) as f64 * 1e-9;
        let t = self.now.saturating_sub(epoch) as f64 * 1e-9;
        let w_cubic = c * (t + rtt - self.k).powi(3) + self.w_max;
        let w_est = self.w_max * beta + 3.0 * (1.0 - beta) / (1.0 + beta) * t / rtt;
        let target = w_cubic.max(w_est);
        self.cwnd += if target > self.cwnd {
            ((target - self.cwnd) / self.cwnd).min(0.5)
        } else {
            0.01 / self.cwnd
        };
        self.cwnd = self.cwnd.min(self.cfg.max_cwnd);
    }

    /// Timeouts since data was last newly acknowledged (at most 16).
    pub fn consecutive_timeouts(&self) -> u32 {
        self.backoff
    }

    /// The path answered without data being acknowledged (a probe's answer): the timer's
    /// backoff, and the count of consecutive timeouts, start over.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// The retransmission timeout without backoff.
    pub fn base_rto(&self) -> Nanos {
        self.rtt.rto(&self.cfg)
    }

    /// Current retransmission timeout including exponential backoff.
    pub fn rto(&self) -> Nanos {
        let base = self.rtt.rto(&self.cfg);
        base.saturating_mul(1 << self.backoff).min(self.cfg.rto_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_avoidance() {
        let mut w = DctcpWindow::new(&DctcpConfig::default());
        for s in 0..10 {
            w.on_ack(s, false, 100);
        }
        assert_eq!(w.cwnd(), 20.0);
        w.on_loss(10, 100);
        assert_eq!(w.cwnd(), 10.0);
        // Congestion avoidance: +1 per window.
        for s in 100..110 {
            w.on_ack(s, false, 200);
        }
        assert!((w.cwnd() - 11.0).abs() < 0.1);
    }

    #[test]
    fn alpha_converges_to_marked_fraction_and_cut_is_alpha_over_two() {
        let cfg = DctcpConfig {
            alpha_init: 0.0,
            ..Default::default()
        };
        let mut w = DctcpWindow::new(&cfg);
        // Many windows with 25% marks: α → 0.25.
        let mut seq = 0u32;
        for _ in 0..200 {
            let end = seq + 8;
            for i in 0..8 {
                w.on_ack(seq + i, false, end);
            }
            seq = end;
        }
        assert!(w.alpha() < 1e-6);
        let mut w = DctcpWindow::new(&cfg);
        let mut seq = 0u32;
        for _ in 0..300 {
            let end = seq + 8;
            for i in 0..8 {
                w.on_ack(seq + i, i % 4 == 0, end);
            }
            seq = end;
        }
        assert!((w.alpha() - 0.25).abs() < 0.02, "alpha {}", w.alpha());
        let before = w.cwnd();
        // A marked ACK in a fresh window cuts by α/2.
        w.on_ack(seq + 100, true, seq + 200);
        assert!((w.cwnd() - before * (1.0 - w.alpha() / 2.0)).abs() < 0.5);
    }

    #[test]
    fn one_reduction_per_window() {
        let mut w = DctcpWindow::new(&DctcpConfig::default());
        w.on_ack(0, true, 50);
        let after_first = w.cwnd();
        w.on_ack(1, true, 50);
        w.on_loss(2, 50);
        assert_eq!(w.cwnd(), after_first);
    }

    #[test]
    fn cubic_decreases_by_beta_ignores_ecn_and_regrows_to_w_max_in_k() {
        let cfg = DctcpConfig {
            cc: WindowCc::Cubic,
            ..Default::default()
        };
        let mut w = DctcpWindow::new(&cfg);
        w.rtt.on_sample(100 * crate::MILLIS);
        for s in 0..90 {
            w.on_ack(s, true, 200);
        }
        assert_eq!(w.cwnd(), 100.0, "slow start, CE ignored");
        w.on_loss(90, 200);
        assert!((w.cwnd() - 70.0).abs() < 1e-9, "β = 0.7: {}", w.cwnd());
        // K = cbrt(100 · 0.3 / 0.4) ≈ 4.2 s: after K the window is back near W_max = 100
        // (a 100 ms RTT: the TCP-friendly estimate stays below the cubic curve).
        let k = (100.0f64 * 0.3 / 0.4).cbrt();
        let mut seq = 200;
        let mut now = 0;
        let mut cwnd_at_k = 0.0;
        while (now as f64) < (k + 1.0) * 1e9 {
            w.clock(now);
            for _ in 0..(w.cwnd() as u32) {
                w.on_ack(seq, false, seq + 1000);
                seq += 1;
            }
            now += 100 * crate::MILLIS;
            if cwnd_at_k == 0.0 && now as f64 >= k * 1e9 {
                cwnd_at_k = w.cwnd();
            }
        }
        assert!((cwnd_at_k - 100.0).abs() < 5.0, "cwnd at K {cwnd_at_k}");
        assert!(w.cwnd() > 100.0, "convex growth beyond W_max: {}", w.cwnd());
    }

    #[test]
    fn rto_backoff_and_floor() {
        let cfg = DctcpConfig::default();
        let mut w = DctcpWindow::new(&cfg);
        w.rtt.on_sample(20_000);
        assert_eq!(w.rto(), cfg.rto_min);
        w.on_timeout(10);
        assert_eq!(w.rto(), 2 * cfg.rto_min);
        assert_eq!(w.cwnd(), cfg.min_cwnd);
    }
}

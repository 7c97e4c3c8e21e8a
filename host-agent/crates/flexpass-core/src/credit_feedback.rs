//! ExpressPass Algorithm 1: credit feedback control at the receiver.
//!
//! ```text
//! w ← w_init; cur_rate ← initial_rate
//! every update period (RTT):
//!   credit_loss = #credit_dropped / #credit_sent
//!   if credit_loss ≤ target_loss:                       (increasing phase)
//!     if previous phase was increasing: w = (w + w_max)/2
//!     cur_rate = (1 − w)·cur_rate + w·max_rate·(1 + target_loss)
//!   else:                                               (decreasing phase)
//!     cur_rate = cur_rate·(1 − credit_loss)·(1 + target_loss)
//!     w = max(w/2, w_min)
//! ```
//! Credit loss is measured from the credit sequence numbers that proactive data echoes: a gap
//! in the echoed sequence is a dropped (or wasted) credit.
//!
//! Line 12 and feedback delay. In the paper's model (§4) the loss measured in a period is that
//! of credits sent at the current `cur_rate`, so `cur_rate·(1 − credit_loss)` is "the credit
//! rate that passed through the bottleneck during the last RTT" (§3.2). With the update period
//! equal to the RTT, the echoes that arrive during one period are those of credits sent during
//! the *previous* one, and the previous update may already have cut the rate for the same
//! overload: applying line 12 to `cur_rate` again compounds the cut (two 50% losses in a row
//! take the rate to 30% instead of 55%), and the link runs under-utilised. So line 12 is applied
//! to the rate the measured credits were actually sent at (their count over the span of their
//! send times) when that is higher than `cur_rate`, and a decrease never raises the rate. When
//! the measured credits were sent at `cur_rate` this is line 12 as published.
//!
//! Target loss rule. The paper uses one `target_loss` (0.1) at every rate
//! (`TargetLossRule::Fixed`, the default). The authors' ns-2 simulator
//! (kaist-ina/ns2-xpass, `credit_feedback_control`) instead tolerates
//! `target_loss_scaling · (1 − cur_rate/max_rate)` (scaling 0.125) and aims the increase at
//! `max_rate` (`TargetLossRule::RateScaled`). A flow below its share then keeps increasing
//! through losses that make a flow near `max_rate` back off, which is what makes a joining
//! flow catch up: in the paper's own §4 model (synchronised updates, equal loss) the fixed
//! target needs 27 update periods for a flow joining at α = w_init = 1/16 to reach Jain's
//! index 0.98, the rate-scaled one 10 (`flexpass_sim::convergence::discrete_model_periods`).

use crate::config::{CreditConfig, TargetLossRule};

/// `cur_rate` never falls below `max_rate / MIN_RATE_DIVISOR`.
pub const MIN_RATE_DIVISOR: f64 = 1024.0;

#[derive(Clone, Debug)]
pub struct CreditFeedback {
    max_rate: f64,
    w_min: f64,
    w_max: f64,
    target_loss: f64,
    target_loss_rule: TargetLossRule,
    /// Lower bound of `cur_rate` (max_rate / 1024); `update` also keeps at least one credit
    /// per update period (the S_min of 1 credit/RTT in the FlexPass simulations), so a flow
    /// that lost every credit of a period keeps getting feedback instead of stalling.
    min_rate: f64,
    /// `CreditConfig::pacing_scale`: credits leave at this share of `cur_rate`, so a cut
    /// starts from the paced rate (compounding the scale, as the FlexPass artifact's
    /// `flexpass_beta_` does).
    pacing_scale: f64,
    w: f64,
    cur_rate: f64,
    previous_increasing: bool,
    /// Highest credit sequence echoed so far.
    last_echo: Option<u32>,
    /// Send time of the newest echoed credit, and of the newest one at the previous update:
    /// the credits measured in a period were sent between the two.
    last_echo_sent: Option<crate::Nanos>,
    mark_sent: Option<crate::Nanos>,
    dropped: u64,
    received: u64,
    /// Loss measured at the last update (for telemetry).
    last_loss: f64,
}

impl CreditFeedback {
    pub fn new(cfg: &CreditConfig) -> Self {
        let min_rate = cfg.max_rate / MIN_RATE_DIVISOR;
        CreditFeedback {
            max_rate: cfg.max_rate,
            w_min: cfg.w_min,
            w_max: cfg.w_max,
            target_loss: cfg.target_loss,
            target_loss_rule: cfg.target_loss_rule,
            min_rate,
            pacing_scale: cfg.pacing_scale,
            w: cfg.w_init,
            cur_rate: (cfg.alpha * cfg.max_rate).max(min_rate),
            previous_increasing: false,
            last_echo: None,
            last_echo_sent: None,
            mark_sent: None,
            dropped: 0,
            received: 0,
            last_loss: 0.0,
        }
    }

    /// Current credit sending rate, credits/s.
    pub fn cur_rate(&self) -> f64 {
        self.cur_rate
    }

    /// Current aggressiveness factor w.
    pub fn w(&self) -> f64 {
        self.w
    }

    /// Whether this period has any echo or counted drop to measure (`update` changes
    /// nothing otherwise).
    pub fn has_samples(&self) -> bool {
        self.dropped + self.received > 0
    }

    pub fn last_loss(&self) -> f64 {
        self.last_loss
    }

    /// A credit this receiver's own host could not send because it cannot keep up with the
    /// data it credits (the agent's receive-backlog guard): halve the rate, down to
    /// `min_rate`, at once, as TCP reduces its window on a local queue drop. The loss
    /// measured from echoes needs data to arrive, and a host busy crediting many flows
    /// reads little of it (1 000 connections starting together: netns test
    /// `test_a_thousand_concurrent_connections_from_one_process_are_byte_exact`).
    pub fn on_host_drop(&mut self) {
        self.cur_rate = (self.cur_rate / 2.0).max(self.min_rate);
        self.w = (self.w / 2.0).max(self.w_min);
        self.previous_increasing = false;
    }

    /// A proactive data packet echoed `credit_seq`, a credit this receiver sent at `sent_at`
    /// (None: no longer known). Credits whose sequence numbers were skipped count as dropped.
    /// Echoes older than the newest (reordered or duplicated data) carry no new information
    /// and are ignored.
    pub fn on_credit_echo(&mut self, credit_seq: u32, sent_at: Option<crate::Nanos>) {
        match self.last_echo {
            None => {
                self.received += 1;
                self.last_echo = Some(credit_seq);
                self.last_echo_sent = sent_at;
            }
            Some(last) => {
                let ahead = credit_seq.wrapping_sub(last);
                if ahead != 0 && ahead < (1 << 31) {
                    self.dropped += u64::from(ahead - 1);
                    self.received += 1;
                    self.last_echo = Some(credit_seq);
                    self.last_echo_sent = sent_at;
                }
            }
        }
    }

    /// Credits sent before `credit_seq` will never be echoed (e.g. the flow restarted its
    /// credit stream after a CREDIT_STOP): do not count them as dropped.
    pub fn resync(&mut self, next_credit_seq: u32) {
        self.last_echo = Some(next_credit_seq.wrapping_sub(1));
        self.last_echo_sent = None;
        self.mark_sent = None;
    }

    /// Rate (credits/s) at which the `total` credits measured in this period were sent:
    /// they follow the newest echo of the previous period. None when unknown.
    fn measured_send_rate(&self, total: u64) -> Option<f64> {
        let (a, b) = (self.mark_sent?, self.last_echo_sent?);
        (b > a).then(|| total as f64 * 1e9 / (b - a) as f64)
    }

    /// The credit loss tolerated at the current rate, and the rate the increasing phase
    /// aims at: `max_rate · (1 + target_loss)`. With the rate-scaled rule the target is 0 at
    /// `max_rate`, so the aim is `max_rate` itself.
    fn target_loss(&self) -> (f64, f64) {
        match self.target_loss_rule {
            TargetLossRule::Fixed => (self.target_loss, self.max_rate * (1.0 + self.target_loss)),
            TargetLossRule::RateScaled {
                target_loss_scaling,
            } => (
                target_loss_scaling * (1.0 - self.cur_rate / self.max_rate).max(0.0),
                self.max_rate,
            ),
        }
    }

    /// One update period (`period`, the RTT) has elapsed: run one step of Algorithm 1.
    /// Periods in which no feedback arrived at all leave the rate unchanged.
    pub fn update(&mut self, period: crate::Nanos) {
        let total = self.dropped + self.received;
        if total == 0 {
            return;
        }
        let credit_loss = self.dropped as f64 / total as f64;
        self.last_loss = credit_loss;
        let (target_loss, ceiling) = self.target_loss();
        if credit_loss <= target_loss {
            if self.previous_increasing {
                self.w = (self.w + self.w_max) / 2.0;
            }
            self.cur_rate = (1.0 - self.w) * self.cur_rate + self.w * ceiling;
            self.previous_increasing = true;
        } else {
            // Line 12, applied to the rate the measured credits were sent at when the previous
            // update already lowered cur_rate below it (see the module docs). The send rate
            // comes from the receiver's own send times, not from echo arrival times, so data
            // queueing (e.g. reactive data ahead of proactive data in Q1) does not bias it.
            let paced = self.cur_rate * self.pacing_scale;
            let sent_rate = self
                .measured_send_rate(total)
                .map_or(paced, |r| r.max(paced));
            let cut = sent_rate * (1.0 - credit_loss) * (1.0 + target_loss);
            self.cur_rate = cut.min(self.cur_rate);
            self.w = (self.w / 2.0).max(self.w_min);
            self.previous_increasing = false;
        }
        let floor = self
            .min_rate
            .max(1e9 / period.max(1) as f64)
            .min(self.max_rate);
        self.cur_rate = self.cur_rate.clamp(floor, ceiling);
        self.dropped = 0;
        self.received = 0;
        self.mark_sent = self.last_echo_sent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MICROS;

    fn cfg() -> CreditConfig {
        CreditConfig::for_link(10e9, 1.0, 20 * MICROS)
    }

    #[test]
    fn a_credit_the_host_drops_halves_the_rate_down_to_the_minimum() {
        let c = cfg();
        let mut f = CreditFeedback::new(&c);
        let r0 = f.cur_rate();
        f.on_host_drop();
        assert!((f.cur_rate() - r0 / 2.0).abs() < 1e-6);
        for _ in 0..40 {
            f.on_host_drop();
        }
        assert!((f.cur_rate() - c.max_rate / MIN_RATE_DIVISOR).abs() < 1e-6);
    }

    #[test]
    fn starts_at_alpha_times_max_rate() {
        let c = cfg();
        let f = CreditFeedback::new(&c);
        assert!((f.cur_rate() - c.max_rate / 16.0).abs() < 1e-6);
        assert_eq!(f.w(), 1.0 / 16.0);
    }

    #[test]
    fn increasing_phase_approaches_ceiling_and_w_grows() {
        let c = cfg();
        let mut f = CreditFeedback::new(&c);
        let mut seq = 0;
        let mut prev = f.cur_rate();
        for _ in 0..40 {
            for _ in 0..10 {
                f.on_credit_echo(seq, None);
                seq += 1;
            }
            f.update(c.update_period);
            assert!(f.cur_rate() >= prev, "no loss must never decrease the rate");
            prev = f.cur_rate();
        }
        assert!(f.cur_rate() > 0.99 * c.max_rate * 1.1);
        assert!(
            f.w() > 0.49,
            "w climbs to w_max after consecutive increases, got {}",
            f.w()
        );
    }

    #[test]
    fn decreasing_phase_matches_algorithm_1() {
        // A long period keeps the one-credit-per-period floor out of the way.
        let c = CreditConfig {
            update_period: 1_000 * MICROS,
            ..cfg()
        };
        let mut f = CreditFeedback::new(&c);
        let start = f.cur_rate();
        // 6 received, 5 dropped: loss 5/11 > target_loss.
        for s in [0u32, 2, 4, 6, 8, 10] {
            f.on_credit_echo(s, None);
        }
        f.update(c.update_period);
        let expected = start * (1.0 - 5.0 / 11.0) * 1.1;
        assert!(
            (f.cur_rate() - expected).abs() < 1e-6,
            "{} vs {expected}",
            f.cur_rate()
        );
        assert_eq!(f.w(), (1.0f64 / 32.0).max(0.01));
    }

    #[test]
    fn stale_loss_does_not_compound_the_cut() {
        // Credits sent 1 µs apart (1e6/s) lose half: the first decrease halves-ish; the next
        // period still measures credits sent at 1e6/s before that cut (stale) with the same
        // loss: the rate stays at what passed (·1.1), it is not cut again.
        let c = CreditConfig {
            max_rate: 1e6,
            alpha: 1.0,
            update_period: 1_000 * MICROS,
            ..cfg()
        };
        let mut f = CreditFeedback::new(&c);
        let mut seq = 0u32;
        let mut period = |f: &mut CreditFeedback| {
            for _ in 0..10 {
                f.on_credit_echo(seq, Some(u64::from(seq) * 1_000));
                seq += 2;
            }
            f.update(c.update_period);
        };
        period(&mut f);
        let first = f.cur_rate();
        assert!(first < 0.7e6, "{first}");
        period(&mut f);
        let expected: f64 = 1e6 * 0.5 * 1.1;
        assert!(
            (f.cur_rate() - expected.min(first)).abs() < 1.0,
            "{}",
            f.cur_rate()
        );
        // Line 12 on cur_rate would have given first · 0.5 · 1.1.
        assert!(f.cur_rate() > first * 0.5 * 1.1 * 1.5);
    }

    #[test]
    fn w_never_below_w_min_and_rate_has_floor() {
        let c = cfg();
        let mut f = CreditFeedback::new(&c);
        let mut seq = 0u32;
        for _ in 0..50 {
            f.on_credit_echo(seq, None);
            seq = seq.wrapping_add(100);
            f.update(c.update_period);
            assert!(f.w() >= c.w_min);
            assert!(f.cur_rate() >= 1e9 / c.update_period as f64 - 1e-9);
        }
    }

    #[test]
    fn rate_scaled_target_lets_a_small_flow_grow_through_loss() {
        // 11% loss: above the fixed target (0.1). At α = 1/16 the rate-scaled target is
        // 0.125·(1 − 1/16) ≈ 0.117, so the small flow keeps increasing; a flow at max_rate
        // has target 0 and backs off at the same loss.
        let period = 1_000 * MICROS;
        let lossy_period = |f: &mut CreditFeedback, seq: &mut u32| {
            for i in 0..89 {
                *seq += if i == 0 { 12 } else { 1 };
                f.on_credit_echo(*seq, None);
            }
            f.update(period);
        };
        let scaled = TargetLossRule::RateScaled {
            target_loss_scaling: TargetLossRule::NS2_SCALING,
        };
        for (rule, alpha, grows) in [
            (TargetLossRule::Fixed, 1.0 / 16.0, false),
            (scaled, 1.0 / 16.0, true),
            (scaled, 1.0, false),
        ] {
            let c = CreditConfig {
                alpha,
                update_period: period,
                target_loss_rule: rule,
                ..cfg()
            };
            let mut f = CreditFeedback::new(&c);
            let mut seq = 0;
            f.on_credit_echo(seq, None);
            let before = f.cur_rate();
            lossy_period(&mut f, &mut seq);
            assert_eq!(f.cur_rate() > before, grows, "{rule:?} α = {alpha}");
            assert!(f.cur_rate() <= c.max_rate * 1.1);
            if rule != TargetLossRule::Fixed {
                assert!(f.cur_rate() <= c.max_rate, "rate-scaled aims at max_rate");
            }
        }
        assert!(TargetLossRule::from_scaling(Some(1.0)).is_err());
        assert!(TargetLossRule::from_scaling(Some(f64::NAN)).is_err());
        assert_eq!(
            TargetLossRule::from_scaling(None),
            Ok(TargetLossRule::Fixed)
        );
    }

    #[test]
    fn stale_and_wrapped_echoes() {
        let c = cfg();
        let mut f = CreditFeedback::new(&c);
        f.on_credit_echo(u32::MAX - 1, None);
        f.on_credit_echo(u32::MAX - 3, None); // stale: ignored
        f.on_credit_echo(1, None); // wrapped: MAX, 0 dropped
        assert_eq!(f.dropped, 2);
        assert_eq!(f.received, 2);
    }
}

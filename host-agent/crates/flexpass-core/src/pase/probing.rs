//! PASE's probing (Munir et al., SIGCOMM'14 §3.3; evaluated in §5 "Impact of RTO and
//! Probing": "flows mapped to the lowest priority queue send header-only probe packets
//! every RTT instead of full-sized packets", which avoids the timeouts of data parked in the
//! lowest queue; +2.4 % / +11 % at 80 / 90 % load, all-to-all intra-rack).
//!
//! The state of one sender (`PaseConfig::probing`):
//! - an arbitration that moves the flow into the lowest queue (from a higher one, or its
//!   first) starts probing: no data, one header-only probe (flexpass-wire `FLAG_PROBE`,
//!   `subflow_seq` = `PROBE_SEQ`) per RTT in the lowest queue;
//! - the receiver answers a probe with an ACK echoing `PROBE_SEQ` and the probe's CE as ECE.
//!   An answer without ECE shows room (the lowest queue at the bottleneck is below K): the
//!   flow resumes data, in the lowest queue, under its window;
//! - while resumed and still in the lowest queue, an ECN-marked ACK of its data (the lowest
//!   queue filled to K again) sends it back to probing;
//! - an arbitration to a higher queue ends probing.
//!
//! "Resume when a probe's answer shows no mark" and "back to probing on a mark" are this
//! port's reading (the design text was not at hand, docs/results-pase.md).
//!
//! pFabric's probe mode (`crate::pfabric`) uses the same state, started by timeouts
//! (`Probing::start`) instead of an arbitration; its answers carry no ECE.

use crate::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeState {
    /// Not in the lowest queue: data as usual.
    Off,
    /// In the lowest queue: probes only, the next one due at `next_at`.
    Probing { next_at: Nanos },
    /// In the lowest queue, a probe's answer showed room: data under the window.
    Resumed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probing {
    pub state: ProbeState,
    /// A probe is unanswered: the earliest time the next may leave once it is answered (its
    /// send time + the interval). At most one probe per flow is in flight, so the probes of
    /// many parked flows cannot fill the lowest queue themselves (they did on Mininet: 631
    /// probes filled the port's shared buffer and the other queues' packets were dropped);
    /// the next probe leaves one interval after the last or at its answer, whichever is
    /// later, and after `timeout` if the answer was lost.
    awaiting: Option<Nanos>,
    /// Probes sent and answers received (with and without room).
    pub probes: u64,
    pub answers: u64,
    pub resumes: u64,
}

impl Default for Probing {
    fn default() -> Self {
        Probing {
            state: ProbeState::Off,
            awaiting: None,
            probes: 0,
            answers: 0,
            resumes: 0,
        }
    }
}

impl Probing {
    /// An arbitration: `lowest` = the flow's queue is now the lowest of several.
    pub fn on_arbitration(&mut self, lowest: bool) {
        self.state = match (self.state, lowest) {
            (_, false) => ProbeState::Off,
            (ProbeState::Off, true) => ProbeState::Probing { next_at: 0 },
            (s, true) => s,
        };
    }

    /// Data is held (only probes go out).
    pub fn holds_data(&self) -> bool {
        matches!(self.state, ProbeState::Probing { .. })
    }

    /// When the next probe is due (None unless probing).
    pub fn next_probe_at(&self) -> Option<Nanos> {
        match self.state {
            ProbeState::Probing { next_at } => Some(next_at),
            ProbeState::Off | ProbeState::Resumed => None,
        }
    }

    /// Is a probe due at `now`?
    pub fn probe_due(&self, now: Nanos) -> bool {
        self.next_probe_at().is_some_and(|t| now >= t)
    }

    /// A probe left at `now`. The next one leaves `interval` later if this one is answered
    /// by then, else at its answer, else (answer lost) `timeout` later.
    pub fn on_probe_sent(&mut self, now: Nanos, interval: Nanos, timeout: Nanos) {
        if let ProbeState::Probing { .. } = self.state {
            let interval = interval.max(1);
            self.state = ProbeState::Probing {
                next_at: now + timeout.max(interval),
            };
            self.awaiting = Some(now + interval);
            self.probes += 1;
        }
    }

    /// A probe's answer at `now`: without ECE it shows room and data resumes; with ECE the
    /// next probe may leave (one interval after this one at the earliest).
    pub fn on_probe_answer(&mut self, now: Nanos, ece: bool) {
        self.answers += 1;
        let earliest = self.awaiting.take();
        if !ece && self.holds_data() {
            self.state = ProbeState::Resumed;
            self.resumes += 1;
        } else if let (ProbeState::Probing { .. }, Some(t)) = (self.state, earliest) {
            self.state = ProbeState::Probing {
                next_at: t.max(now),
            };
        }
    }

    /// pFabric's probe mode (`crate::pfabric`, §4.2): probing from `now` on, whatever the
    /// state (the flow hit its consecutive timeouts); the first answer resumes data.
    pub fn start(&mut self, now: Nanos) {
        self.state = ProbeState::Probing { next_at: now };
        self.awaiting = None;
    }

    /// An ACK of data with ECE: while resumed in the lowest queue, back to probing at once.
    pub fn on_data_ece(&mut self, now: Nanos) {
        if self.state == ProbeState::Resumed {
            self.state = ProbeState::Probing { next_at: now };
            self.awaiting = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_queue_probes_every_rtt_and_resumes_on_room() {
        let mut p = Probing::default();
        assert!(!p.holds_data());
        p.on_arbitration(true);
        assert!(p.holds_data());
        assert!(p.probe_due(0));
        p.on_probe_sent(0, 40_000, 1_000_000);
        // Unanswered: the next probe waits for the answer (or the timeout).
        assert!(!p.probe_due(40_000));
        assert!(p.probe_due(1_000_000));
        // A marked answer: the lowest queue is full, keep probing, one interval after the
        // last probe.
        p.on_probe_answer(30_000, true);
        assert!(p.holds_data());
        assert!(!p.probe_due(39_999));
        assert!(p.probe_due(40_000));
        // The same arbitration again changes nothing.
        p.on_arbitration(true);
        assert_eq!(p.next_probe_at(), Some(40_000));
        p.on_probe_sent(40_000, 40_000, 1_000_000);
        // An answer later than the interval (a queue on the way): the next probe at once.
        p.on_probe_answer(95_000, true);
        assert_eq!(p.next_probe_at(), Some(95_000));
        p.on_probe_sent(95_000, 40_000, 1_000_000);
        p.on_probe_answer(120_000, false);
        assert_eq!(p.state, ProbeState::Resumed);
        assert!(!p.holds_data());
        p.on_arbitration(true);
        assert_eq!(p.state, ProbeState::Resumed);
        // A mark on its data sends it back to probing; a higher queue ends probing.
        p.on_data_ece(90_000);
        assert_eq!(p.state, ProbeState::Probing { next_at: 90_000 });
        p.on_arbitration(false);
        assert_eq!(p.state, ProbeState::Off);
        p.on_data_ece(100_000);
        assert_eq!(p.state, ProbeState::Off);
        assert_eq!((p.probes, p.answers, p.resumes), (3, 3, 1));
    }
}

//! PPT (SIGCOMM'24) next to the DCTCP window (the HCP on the reactive sub-flow): the
//! low-priority loop (LCP, `lcp`) on sub-flow 0, sending opportunistic packets from the tail
//! of the send buffer, and the flow's priority tags (`flow_scheduling`).

use super::timers::Timer;
use super::{Handshake, Sender};
use crate::config::PptConfig;
use crate::flow_scheduling::FlowScheduler;
use crate::lcp::{Lcp, OpenCase};
use crate::{Nanos, Transmit};
use flexpass_wire::{Ack, SubFlow};

pub(super) struct Ppt {
    pub(super) sched: FlowScheduler,
    pub(super) lcp: Lcp,
    /// The window's α-update count last seen (an update may open an LCP loop).
    alpha_updates: u64,
    /// Highest `flow_ack` received: opportunistic packets stay within `max_ahead_bytes` of it.
    flow_ack: u64,
}

impl Ppt {
    pub(super) fn new(cfg: &PptConfig) -> Self {
        Ppt {
            sched: FlowScheduler::new(cfg),
            lcp: Lcp::new(cfg),
            alpha_updates: 0,
            flow_ack: 0,
        }
    }
}

impl Sender {
    /// The RTT that paces the LCP and times its loops: the HCP's smoothed RTT, or the
    /// configured base RTT before a sample.
    fn ppt_rtt(&self) -> Nanos {
        self.window
            .rtt
            .srtt()
            .unwrap_or(self.cfg.ppt.base_rtt)
            .max(1)
    }

    /// §3.1 case 1: I = BDP − the DCTCP initial window, in packets.
    fn ppt_case1_window(&self) -> u32 {
        let bdp = self.cfg.ppt.bdp_bytes as f64 / self.cfg.mss as f64;
        (bdp - self.cfg.dctcp.init_cwnd).max(0.0).floor() as u32
    }

    /// The first time the flow has data to send, look at the send buffer (§4.1
    /// identification) and, unless the flow is large, open the first LCP loop (§3.1 case 1,
    /// first RTT).
    pub(super) fn ppt_first_data(&mut self, now: Nanos) {
        let rtt = self.ppt_rtt();
        let window = self.ppt_case1_window();
        let Some(p) = self.part.ppt_mut() else { return };
        if p.sched.is_identified() || !self.buf.has_pending() {
            return;
        }
        p.sched.identify(self.buf.written_bytes());
        self.stats.identified_large = p.sched.is_large();
        if !p.sched.is_large() {
            p.lcp.open_first(now, OpenCase::FirstRtt, window, rtt);
        }
    }

    /// §3.1, case 1 for a flow identified as large: its first LCP loop opens in the second
    /// RTT, i.e. with the first answer from the peer.
    pub(super) fn ppt_second_rtt(&mut self, now: Nanos) {
        let rtt = self.ppt_rtt();
        let window = self.ppt_case1_window();
        let established = self.handshake == Handshake::Established;
        if let Some(p) = self.part.ppt_mut() {
            if p.sched.is_large() && established {
                p.lcp.open_first(now, OpenCase::SecondRtt, window, rtt);
            }
        }
    }

    /// The LCP: an opportunistic packet from the tail of the send buffer when the loop lets
    /// one go (paced initial window, or released by a low-priority ACK).
    pub(super) fn next_opportunistic(&mut self, now: Nanos) -> Option<Transmit> {
        let max_ahead = self.cfg.ppt.max_ahead_bytes;
        let p = self.part.ppt_mut()?;
        if !p.lcp.ready(now) {
            return None;
        }
        let limit = p.flow_ack.saturating_add(max_ahead);
        match self.buf.next_from_tail(limit) {
            Some(idx) => {
                p.lcp.on_sent(now);
                let t = self.send_segment(idx, SubFlow::Proactive, 0, now);
                self.buf.on_sent_opportunistic(idx);
                t
            }
            None => {
                p.lcp.exhausted();
                None
            }
        }
    }

    /// An accepted ACK. An HCP ACK updates W_max and may find α at its recent minimum
    /// (§3.1 case 2); a low-priority ACK clocks the LCP (§3.2).
    pub(super) fn ppt_on_ack(&mut self, now: Nanos, ack: &Ack) {
        let rtt = self.ppt_rtt();
        let in_flight = self.proactive.outstanding();
        let Some(p) = self.part.ppt_mut() else { return };
        p.flow_ack = p.flow_ack.max(ack.flow_ack);
        match ack.subflow {
            SubFlow::Reactive => {
                p.lcp
                    .on_hcp_window(self.window.cwnd(), self.window.ssthresh());
                let updates = self.window.alpha_updates();
                if updates != p.alpha_updates {
                    p.alpha_updates = updates;
                    p.lcp
                        .on_alpha_update(now, self.window.alpha(), in_flight, rtt);
                }
            }
            SubFlow::Proactive => p.lcp.on_lp_ack(now, ack.ece),
        }
        self.stats.lcp = p.lcp.stats().clone();
    }

    /// `Timer::LcpPace`: the LCP's next paced packet (when there is data for it);
    /// `Timer::LcpClose`: the loop's close.
    pub(super) fn arm_lcp_timers(&mut self) {
        let rtt = self.ppt_rtt();
        let (pace, close) = match self.part.ppt() {
            Some(p) => (
                p.lcp.next_pace().filter(|_| self.buf.has_pending()),
                p.lcp.close_deadline(rtt),
            ),
            None => (None, None),
        };
        self.timers.set(Timer::LcpPace, pace);
        self.timers.set(Timer::LcpClose, close);
    }

    /// §3.2: no low-priority ACK for 2 RTTs closes the LCP loop (its packets still
    /// unacknowledged are left to the HCP, which sends them when it reaches them).
    pub(super) fn close_lcp(&mut self) {
        if let Some(p) = self.part.ppt_mut() {
            p.lcp.close();
            self.stats.lcp = p.lcp.stats().clone();
        }
    }
}

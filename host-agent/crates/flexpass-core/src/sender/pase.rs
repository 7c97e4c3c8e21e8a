//! The PASE sender's part (Munir et al., SIGCOMM'14 §3.3): arbitrations from the flow's
//! arbitrators (`crate::pase`) and, with probing, the header-only probes of a flow in the
//! lowest queue (`crate::pase::probing`); pFabric's probe mode (`crate::pfabric`, §4.2)
//! sends the same probes.

use super::{Handshake, Sender, TransportPart};
use crate::pase::probing::Probing;
use crate::pase::{Arbitration, ArbitrationError};
use crate::{wire_timestamp, Nanos, Transmit};
use bytes::Bytes;
use flexpass_wire::{Data, Packet, SubFlow, TrafficClass, TransportKind, PROBE_SEQ};

impl Sender {
    /// PASE: the arbitration the flow follows (None for other transports).
    pub fn arbitration(&self) -> Option<Arbitration> {
        self.part.arbitration().copied()
    }

    /// PASE: an arbitration from the flow's arbitrators (`crate::pase`), checked first (it
    /// may be forged): the data's queue from now on and, unless PASE-DCTCP, the window set
    /// to the reference rate × base RTT when the answer changed (the DCTCP window then
    /// adjusts it on ECN marks).
    pub fn on_arbitration(&mut self, flow_id: u32, a: Arbitration) -> Result<(), ArbitrationError> {
        if flow_id != self.flow_id {
            return Err(ArbitrationError::WrongFlow {
                expected: self.flow_id,
                got: flow_id,
            });
        }
        let TransportPart::Pase(current) = &mut self.part else {
            return Err(ArbitrationError::NotPase(self.cfg.transport.name()));
        };
        a.validate(&self.cfg.pase)?;
        // The same answer again leaves the window to DCTCP (self-adjusting within the queue);
        // a new one sets it to the reference rate × the base RTT (not the measured RTT, which
        // queueing inflates).
        let changed = *current != a;
        *current = a;
        if changed && self.cfg.pase.reference_rate {
            let w = crate::pase::window_for(&a, self.cfg.pase.base_rtt, self.buf.segment_size());
            self.window.set_cwnd(w);
        }
        if let Some(p) = self.probing.as_mut() {
            p.on_arbitration(self.cfg.pase.is_lowest(a.queue));
        }
        Ok(())
    }

    /// PASE with probing: the probing state and its counters (None otherwise).
    pub fn probing(&self) -> Option<&Probing> {
        self.probing.as_ref()
    }

    /// The header-only probe of PASE's probing (§3.3: in the lowest queue, one every RTT
    /// and no data) and of pFabric's probe mode (§4.2: one per RTO without backoff, with
    /// the flow's PRIO), once established (before, the HELLO's answer is awaited); at most
    /// one unanswered (`Probing::on_probe_sent`).
    pub(super) fn probe(&mut self, now: Nanos) -> Option<Transmit> {
        let pfabric = self.cfg.transport == TransportKind::PFabric;
        let class = if pfabric {
            None
        } else {
            Some(TrafficClass::Priority(self.part.arbitration()?.queue))
        };
        // The answer of a lost probe is waited for an RTO (without backoff).
        let timeout = self.window.base_rto();
        let interval = if pfabric {
            timeout
        } else {
            self.window.rtt.srtt().unwrap_or(self.cfg.pase.base_rtt)
        };
        let p = self.probing.as_mut()?;
        if self.handshake != Handshake::Established || !p.probe_due(now) {
            return None;
        }
        p.on_probe_sent(now, interval, timeout);
        if pfabric {
            self.stats.pfabric_probes += 1;
        } else {
            self.stats.pase_probes += 1;
        }
        let probe = Data {
            flow_id: self.flow_id,
            subflow: SubFlow::Reactive,
            flow_seq: self.buf.acked_bytes(),
            subflow_seq: PROBE_SEQ,
            credit_seq: 0,
            tsval: wire_timestamp(now),
            fin: false,
            retransmission: false,
            priority: pfabric
                .then(|| crate::pfabric::priority(self.flow_size, self.buf.acked_bytes())),
            payload: Bytes::new(),
        };
        let mut t = Transmit::new(Packet::Data(probe), self.cfg.transport);
        if let Some(class) = class {
            t.class = class;
        }
        Some(t)
    }

    /// pFabric §4.2: a timeout; the `probe_after_timeouts`-th in a row (no data newly
    /// acknowledged in between) enters probe mode.
    pub(super) fn pfabric_timeout(&mut self, now: Nanos) {
        let n = self.cfg.pfabric.probe_after_timeouts;
        if self.cfg.transport != TransportKind::PFabric || n == 0 {
            return;
        }
        if let Some(p) = self.probing.as_mut() {
            if !p.holds_data() && self.window.consecutive_timeouts() >= n {
                p.start(now);
                self.stats.pfabric_probe_modes += 1;
            }
        }
    }
}

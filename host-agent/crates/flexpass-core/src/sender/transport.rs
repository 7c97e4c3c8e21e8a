//! What one transport adds to the state every sender shares, and the per-transport choices
//! the shared code asks about. Every choice is an exhaustive match: a new transport is a new
//! variant, and the compiler lists what it has to decide.

use super::credits::CreditLoop;
use super::ppt::Ppt;
use crate::config::SenderConfig;
use crate::flashpass::Emulation;
use crate::pase::Arbitration;
use crate::Nanos;
use flexpass_wire::{SubFlow, TransportKind};

pub(super) enum TransportPart {
    /// Credits and the DCTCP window over one send buffer (FlexPass §4).
    FlexPass(CreditLoop),
    /// Credits only (or, layered, credits within a DCTCP window).
    ExpressPass(CreditLoop),
    /// The DCTCP window only.
    Dctcp,
    /// DCTCP as the high-priority loop, and the low-priority loop.
    Ppt(Box<Ppt>),
    /// The emulation that schedules data slots, and unscheduled data before the first slot.
    FlashPass(Box<Emulation>),
    /// One window at the BDP with the small RTO (`crate::pfabric`); every data packet
    /// carries its remaining-size priority.
    PFabric,
    /// One DCTCP window in the queue, and set to the reference rate, of the last accepted
    /// arbitration (`crate::pase`).
    Pase(Arbitration),
}

/// Where the reactive sub-flow takes its next segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReactiveSource {
    /// Pending segments (Lost ones first when the sub-flow retransmits its own losses).
    Head { retransmit_lost: bool },
    /// PPT's HCP (`SendBuffer::next_for_hcp`).
    Hcp,
}

impl TransportPart {
    pub(super) fn new(cfg: &SenderConfig, now: Nanos) -> Self {
        match cfg.transport {
            TransportKind::FlexPass => TransportPart::FlexPass(CreditLoop::new(now)),
            TransportKind::ExpressPass => TransportPart::ExpressPass(CreditLoop::new(now)),
            TransportKind::Dctcp => TransportPart::Dctcp,
            TransportKind::Ppt => TransportPart::Ppt(Box::new(Ppt::new(&cfg.ppt))),
            TransportKind::FlashPass => {
                TransportPart::FlashPass(Box::new(Emulation::new(&cfg.flashpass, now)))
            }
            TransportKind::PFabric => TransportPart::PFabric,
            TransportKind::Pase => TransportPart::Pase(cfg.pase.initial()),
        }
    }

    /// The credit loop of a credit-based transport.
    pub(super) fn credits(&self) -> Option<&CreditLoop> {
        match self {
            TransportPart::FlexPass(c) | TransportPart::ExpressPass(c) => Some(c),
            TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    pub(super) fn credits_mut(&mut self) -> Option<&mut CreditLoop> {
        match self {
            TransportPart::FlexPass(c) | TransportPart::ExpressPass(c) => Some(c),
            TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    pub(super) fn ppt(&self) -> Option<&Ppt> {
        match self {
            TransportPart::Ppt(p) => Some(p),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    pub(super) fn ppt_mut(&mut self) -> Option<&mut Ppt> {
        match self {
            TransportPart::Ppt(p) => Some(p),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    pub(super) fn emulation(&self) -> Option<&Emulation> {
        match self {
            TransportPart::FlashPass(em) => Some(em),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    pub(super) fn emulation_mut(&mut self) -> Option<&mut Emulation> {
        match self {
            TransportPart::FlashPass(em) => Some(em),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => None,
        }
    }

    /// The whole flow is one DCTCP window on the reactive sub-flow: its duplicate-ACK
    /// threshold is DCTCP's, and it sends tail-loss probes.
    pub(super) fn is_one_window(&self) -> bool {
        match self {
            TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => true,
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::FlashPass(_) => false,
        }
    }

    /// May an ACK be for `subflow`?
    pub(super) fn acks_on(&self, subflow: SubFlow) -> bool {
        match self {
            TransportPart::ExpressPass(_) => subflow == SubFlow::Proactive,
            TransportPart::Dctcp | TransportPart::PFabric | TransportPart::Pase(_) => {
                subflow == SubFlow::Reactive
            }
            TransportPart::FlexPass(_) | TransportPart::Ppt(_) | TransportPart::FlashPass(_) => {
                true
            }
        }
    }

    /// Is the proactive sub-flow limited by the DCTCP window? Only for a layered (LY)
    /// ExpressPass sender (FlexPass §6.2).
    pub(super) fn windows_proactive(&self, cfg: &SenderConfig) -> bool {
        match self {
            TransportPart::ExpressPass(_) => cfg.layered_window,
            TransportPart::FlexPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => false,
        }
    }

    /// May a credit (or a FlashPass slot) carry a segment still unACKed on the reactive
    /// sub-flow (FlexPass's proactive retransmission)?
    pub(super) fn proactive_retransmission(&self) -> bool {
        match self {
            TransportPart::FlexPass(_) => true,
            TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => false,
        }
    }

    /// The reactive sub-flow's source of segments (None: no reactive data).
    pub(super) fn reactive_source(&self) -> Option<ReactiveSource> {
        match self {
            TransportPart::ExpressPass(_) => None,
            TransportPart::FlexPass(_) => Some(ReactiveSource::Head {
                retransmit_lost: false,
            }),
            TransportPart::Dctcp | TransportPart::PFabric | TransportPart::Pase(_) => {
                Some(ReactiveSource::Head {
                    retransmit_lost: true,
                })
            }
            TransportPart::Ppt(_) => Some(ReactiveSource::Hcp),
            // Unscheduled data; a lost packet waits for a slot.
            TransportPart::FlashPass(_) => Some(ReactiveSource::Head {
                retransmit_lost: false,
            }),
        }
    }

    /// Every data packet carries its priority (flag PRIO): pFabric's remaining size (§4.1).
    pub(super) fn carries_priority(&self) -> bool {
        match self {
            TransportPart::PFabric => true,
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::Pase(_) => false,
        }
    }

    /// PASE: the arbitration the flow's data follows (queue, reference rate).
    pub(super) fn arbitration(&self) -> Option<&Arbitration> {
        match self {
            TransportPart::Pase(a) => Some(a),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric => None,
        }
    }
}

//! The model's events, and what the event loop loads ahead of them.

use super::{Network, NodeId, Port, Route, Side};
use crate::packet::SimPacket;

/// Packets move between queues and events boxed: a hop moves a pointer, not the packet.
/// Indices are u32 so that an event is 16 bytes (an entry of the event queue 32: two per
/// cache line); `Ev::Timer` fires at the time it was set for (the entry's time).
pub(super) enum Ev {
    Arrive {
        node: u32,
        /// `pkt.short_dst()`, for `prefetch_next` (which must not wait for the packet
        /// itself).
        dst: u16,
        pkt: Box<SimPacket>,
    },
    TxDone {
        node: u32,
        port: u32,
    },
    Wake {
        node: u32,
        port: u32,
    },
    Timer {
        flow: u32,
        side: Side,
    },
    Start {
        flow: u32,
    },
    Sample,
    /// A link fails (`up` false) or comes back.
    Link {
        node: u32,
        port: u32,
        up: bool,
    },
    /// The control plane recomputes the routes (after a failure or a repair).
    Reroute,
    /// Forget the flows' first paths: after a reroute, paths are compared afresh.
    PathEpoch,
    /// Release the state of flows that completed long enough ago (`retire_after`).
    Retire,
    /// PASE: an arbitration round (`arbitration.rs`).
    Arbitrate,
    /// PASE: an arbitration answer reaches flow `flow`'s sender.
    Arbitration {
        flow: u32,
        queue: u8,
        rate_kbps: u32,
    },
}

/// How many events ahead `prefetch_next` looks (an event's work is short: the next one is
/// too close to hide a cache miss).
const PREFETCH_AHEAD: usize = 2;
/// Cache lines of a port that `prefetch_port` loads.
const PORT_LINES: usize = 6;

impl Ev {
    pub(super) fn arrive(node: NodeId, pkt: Box<SimPacket>) -> Ev {
        Ev::Arrive {
            node: node as u32,
            dst: pkt.short_dst(),
            pkt,
        }
    }

    /// `arrive` of a packet whose `short_dst` is known (a dequeued one: not touched again).
    pub(super) fn arrive_to(node: NodeId, dst: u16, pkt: Box<SimPacket>) -> Ev {
        Ev::Arrive {
            node: node as u32,
            dst,
            pkt,
        }
    }

    /// PASE: arbitration `a` for flow `flow` (its rate in kbit/s, to keep the event small).
    pub(super) fn arbitration(flow: u32, a: flexpass_core::pase::Arbitration) -> Ev {
        Ev::Arbitration {
            flow,
            queue: a.queue,
            rate_kbps: (a.reference_rate_bps / 1e3)
                .round()
                .clamp(1.0, u32::MAX as f64) as u32,
        }
    }

    pub(super) fn tx_done(node: NodeId, port: usize) -> Ev {
        Ev::TxDone {
            node: node as u32,
            port: port as u32,
        }
    }
}

const _: () = assert!(std::mem::size_of::<Ev>() <= 16);

impl Network {
    /// Ask the CPU to start loading what the event `PREFETCH_AHEAD` places after the next
    /// one touches (its packet, its port): the model is bound by memory latency, and this
    /// overlaps it with the work of the events before it.
    #[inline]
    pub(super) fn prefetch_next(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let line = |p: *const u8| unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) };
            match self.events.peek_ahead(PREFETCH_AHEAD) {
                Some(Ev::Arrive { node, dst, pkt }) => {
                    let p = &**pkt as *const SimPacket as *const u8;
                    line(p);
                    line(p.wrapping_add(64));
                    // The route the switch will look up (a miss per hop otherwise).
                    if let Some(r) = self.nodes[*node as usize].routes.get(usize::from(*dst)) {
                        line(r as *const Route as *const u8);
                    }
                }
                Some(Ev::TxDone { node, port }) | Some(Ev::Wake { node, port }) => {
                    self.prefetch_port(*node as usize, *port as usize, line);
                }
                _ => {}
            }
        }
    }

    /// The first lines of a port: `Port`'s and `PortQueue`'s hot fields, `PortConfig`.
    #[inline]
    fn prefetch_port(&self, node: NodeId, port: usize, line: impl Fn(*const u8)) {
        if let Some(p) = self.nodes[node].ports.get(port) {
            let p = p as *const Port as *const u8;
            for k in 0..PORT_LINES {
                line(p.wrapping_add(64 * k));
            }
        }
    }
}

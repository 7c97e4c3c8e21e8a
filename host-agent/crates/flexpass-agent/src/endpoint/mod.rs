//! One FlexPass endpoint: a UDP socket (or AF_XDP) serving many concurrent flows in both
//! directions, driving the sans-IO core with the real clock.
//!
//! Here: the flow tables and what applications call (`open`, `write`, `accept`, `close_*`,
//! `abort_*`). Elsewhere: the settings (`config`), the event loop (`event_loop`), who gets a
//! flow or a RESET (crate::admission), the host's credit rate limits and emulation queue
//! (crate::shaper), the deadline heap (crate::timers).

mod config;
mod event_loop;
mod handover;

pub use self::config::{
    EndpointConfig, DEFAULT_ARBITRATION_INTERVAL, DEFAULT_BUSY_POLL, DEFAULT_CREDIT_BATCH,
    DEFAULT_SPIN,
};
pub use self::handover::{HandedHello, HANDED_LINGER};
pub use crate::admission::{
    CookieMode, DEFAULT_HALF_OPEN_CREDITS, DEFAULT_HALF_OPEN_CREDIT_SHARE,
    DEFAULT_HALF_OPEN_TIMEOUT, DEFAULT_MAX_FLOWS, DEFAULT_MAX_HALF_OPEN,
};
pub use crate::flow::{Dir, FlowKey};
pub use crate::shaper::{EMULATION_QUEUE_PACKETS, EMULATION_THRESHOLD_PACKETS};
pub use crate::stats::EndpointStats;

use crate::admission::Admission;
use crate::api::EndpointTables;
use crate::datapath::Datapath;
use crate::edge::CreditLimitStatus;
use crate::pase_arbitration::PaseRequests;
use crate::peer_move::PeerMoves;
use crate::shaper::HostShaper;
use crate::timers::{DeadlineHeap, Timer};
use crate::xdp::XdpConfig;
use bytes::Bytes;
use flexpass_core::{Nanos, Receiver, Sender, Transmit};
use flexpass_wire::{CreditRequest, HelloConn, Packet, Reset, ResetReason, TransportKind};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Instant;

/// One flow and its bookkeeping for the event loop (docs/agent-api.md, "Scale"): the timer
/// it has in the deadline heap, and whether it waits in the dirty list.
struct Slot<T> {
    flow: T,
    /// The entry of this flow in the deadline heap that counts (others are stale).
    timer: Option<Timer>,
    /// DIRTY: in the dirty list; NET: touched by a packet or a timer since its last turn.
    dirty: u8,
}

const DIRTY: u8 = 1;
const NET: u8 = 2;

impl<T> Slot<T> {
    fn new(flow: T) -> Self {
        Slot {
            flow,
            timer: None,
            dirty: 0,
        }
    }
}

/// Mark a flow for the next `run_timers_and_flush` (once in the dirty list).
fn mark<T>(slot: &mut Slot<T>, dirty: &mut Vec<(Dir, FlowKey)>, dir: Dir, key: FlowKey, net: bool) {
    if slot.dirty & DIRTY == 0 {
        dirty.push((dir, key));
    }
    slot.dirty |= DIRTY | if net { NET } else { 0 };
}

pub struct Endpoint {
    sock: Datapath,
    cfg: EndpointConfig,
    epoch: Instant,
    senders: HashMap<FlowKey, Slot<Sender>>,
    receivers: HashMap<FlowKey, Slot<Receiver>>,
    /// Flows touched (a packet, a write, open, confirmation) since the last turn: each turn
    /// handles these and the due timers only, never every flow.
    dirty: Vec<(Dir, FlowKey)>,
    /// Deadline heap (earliest first) with lazy deletion: an entry counts only while it
    /// equals its flow's `Slot::timer` (crate::timers).
    timers: DeadlineHeap<(Dir, FlowKey)>,
    /// Flows a packet or a timer touched, and flows closed, since the last `take_changed`
    /// (only while `track_changes` is on: the daemon services their owners only).
    changed: Vec<(Dir, FlowKey)>,
    track_changes: bool,
    accepted: VecDeque<FlowKey>,
    /// Receivers holding back ACKs during the current receive batch.
    ack_holds: Vec<FlowKey>,
    /// Credits out and in, EMULATION packets out.
    shaper: HostShaper,
    /// Half-open flows, cookies, the flow cap, RESET answers.
    admission: Admission,
    /// PASE: the flows that ask the arbitrator, and when.
    pase: PaseRequests,
    next_flow_id: u32,
    /// Earliest deadline of all flows after the last `run_timers_and_flush`, and whether it
    /// is a credit (a receiver that is sending credits).
    next_due: Option<Nanos>,
    credit_due: bool,
    /// How early (ns) the loop wakes before a credit deadline to busy-wait the rest: a
    /// running estimate of the median wake-up latency, at most `cfg.spin`.
    wake_lead: f64,
    /// When the last datagram arrived, and the running mean gap between datagrams (ns).
    last_rx: Nanos,
    rx_gap: f64,
    pacing_errors: Vec<u32>,
    /// Finished receivers kept to re-acknowledge late retransmissions (like TIME_WAIT).
    retired: VecDeque<(Nanos, FlowKey)>,
    /// Connection extension of the HELLO that opened each accepted flow that had one.
    hello_conn: HashMap<FlowKey, HelloConn>,
    /// Where our flows' datagrams go when their HELLO_ACK came from another port
    /// (crate::peer_move).
    moves: PeerMoves,
    /// Ports whose connections are handed to the process serving them (`handover`).
    handover: handover::Handover,
    /// Other file descriptors whose readiness (events as in poll(2)) ends a wait in `poll`
    /// (the daemon's API and application sockets).
    wake_fds: Vec<(RawFd, i16)>,
    /// The last wait ended only for a `wake_fds` descriptor: nothing to receive.
    woke_for_local: bool,
    /// The last `poll` waited, and its last ppoll(2) found no `wake_fds` descriptor ready.
    local_idle: bool,
    /// `set_deliver_first`: a `poll` that received datagrams leaves what it has to send
    /// queued for the start of the next `poll`.
    deliver_first: bool,
    pub stats: EndpointStats,
}

/// How long a finished receiver keeps answering retransmitted data before it is dropped.
pub const RECEIVER_LINGER: Nanos = 2_000_000_000;

impl Endpoint {
    pub fn bind(cfg: EndpointConfig) -> io::Result<Self> {
        cfg.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let sock = Datapath::open(
            cfg.datapath,
            &XdpConfig {
                bind: cfg.bind,
                iface: cfg.xdp_iface.clone(),
                queues: cfg.xdp_queue.clone(),
                route_hint: cfg.route_hint,
                mtu: cfg.mtu,
            },
            cfg.gso,
            cfg.credit_batch,
        )?;
        // Wake-ups within 1 µs of the requested time (the default slack is 50 µs).
        let _ = nix::sys::prctl::set_timerslack(1_000);
        let seed = cfg.seed;
        let datapath = if sock.xdp_info().is_some() {
            "xdp"
        } else {
            "udp"
        };
        Ok(Endpoint {
            sock,
            epoch: Instant::now(),
            senders: HashMap::new(),
            receivers: HashMap::new(),
            dirty: Vec::new(),
            timers: DeadlineHeap::default(),
            changed: Vec::new(),
            track_changes: false,
            accepted: VecDeque::new(),
            ack_holds: Vec::new(),
            shaper: HostShaper::new(
                cfg.link_bps,
                cfg.mtu,
                cfg.credit_batch,
                !cfg.nic_edge.polices_credits(),
            ),
            admission: cfg.admission(),
            pase: {
                let p = PaseRequests::new(cfg.arbitrator, cfg.arbitration_interval);
                if cfg.pase_delegation {
                    // Algorithm 1's base rate: one maximum frame per base RTT (as the
                    // arbitrator's).
                    let frame = flexpass_wire::ethernet_wire_len_ip(cfg.mtu) as f64;
                    let base = 8.0 * frame / (cfg.base_rtt as f64 * 1e-9);
                    p.with_delegation(cfg.pase_queues, base, cfg.link_bps)
                } else {
                    p
                }
            },
            next_flow_id: (seed as u32) ^ rand::random::<u32>() | 1,
            next_due: None,
            credit_due: false,
            wake_lead: 0.0,
            last_rx: 0,
            rx_gap: 1e6,
            pacing_errors: Vec::new(),
            retired: VecDeque::new(),
            hello_conn: HashMap::new(),
            moves: PeerMoves::default(),
            handover: handover::Handover::default(),
            wake_fds: Vec::new(),
            woke_for_local: false,
            local_idle: false,
            deliver_first: false,
            stats: EndpointStats {
                datapath,
                ..EndpointStats::default()
            },
            cfg,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Nanoseconds since the endpoint started (the core's clock).
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Open a flow to `peer`. Bytes are queued with `write` and closed with `finish`.
    pub fn open(
        &mut self,
        peer: SocketAddr,
        transport: TransportKind,
        size_hint: u64,
    ) -> io::Result<FlowKey> {
        // One id names one opening flow (a HELLO_ACK from another port finds it by id).
        let mut id = self.next_flow_id;
        while self.moves.id_in_use(id) {
            id = id.wrapping_add(1).max(1);
        }
        self.next_flow_id = id.wrapping_add(1).max(1);
        let mut cfg = (self.cfg.sender)(transport);
        cfg.give_up_timeout = self.cfg.give_up_timeout;
        if let Some(rto_min) = self.cfg.rto_min {
            cfg.dctcp.rto_min = rto_min;
            cfg.dctcp.rto_max = cfg.dctcp.rto_max.max(rto_min);
        }
        if let Some(w) = self.cfg.init_cwnd {
            cfg.dctcp.init_cwnd = w.max(cfg.dctcp.min_cwnd);
        }
        cfg.dctcp.tlp |= self.cfg.tlp;
        cfg.fit_to_path(&self.cfg.host_path());
        if transport == TransportKind::Pase {
            cfg.pase.queues = self.cfg.pase_queues;
            cfg.pase.probing = self.cfg.pase_probing;
        }
        let s = Sender::new(id, cfg, size_hint, self.now())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let key = (peer, id);
        if transport == TransportKind::Pase {
            let now = self.now();
            self.pase.add(key, now);
            self.next_due = Some(self.next_due.map_or(now, |d| d.min(now)));
        }
        let mut slot = Slot::new(s);
        mark(&mut slot, &mut self.dirty, Dir::Send, key, false);
        self.senders.insert(key, slot);
        self.moves.opened(key);
        Ok(key)
    }

    /// PASE delegation: the share of the arbitrator's link delegated to this host.
    pub fn pase_share_bps(&self) -> Option<f64> {
        self.pase.share_bps()
    }

    pub fn sender(&self, key: FlowKey) -> Option<&Sender> {
        self.senders.get(&key).map(|s| &s.flow)
    }
    /// The flow, for the application (writes, finish…): it is looked at in the next turn.
    pub fn sender_mut(&mut self, key: FlowKey) -> Option<&mut Sender> {
        let slot = self.senders.get_mut(&key)?;
        mark(slot, &mut self.dirty, Dir::Send, key, false);
        Some(&mut slot.flow)
    }
    pub fn receiver(&self, key: FlowKey) -> Option<&Receiver> {
        self.receivers.get(&key).map(|r| &r.flow)
    }
    /// The flow, for the application (reads…): it is looked at in the next turn.
    pub fn receiver_mut(&mut self, key: FlowKey) -> Option<&mut Receiver> {
        let slot = self.receivers.get_mut(&key)?;
        mark(slot, &mut self.dirty, Dir::Recv, key, false);
        Some(&mut slot.flow)
    }

    /// Collect the flows a packet or a timer touched, and the flows closed, for
    /// `take_changed` (the daemon: it services the owners of these flows only).
    pub fn track_changes(&mut self, on: bool) {
        self.track_changes = on;
        self.changed.clear();
    }

    /// The flows touched by the network (a packet or a timer) or closed since the last call
    /// (with `track_changes`; a flow may be listed more than once). `out` is cleared first.
    pub fn take_changed(&mut self, out: &mut Vec<(Dir, FlowKey)>) {
        out.clear();
        std::mem::swap(out, &mut self.changed);
    }

    fn note_changed(&mut self, dir: Dir, key: FlowKey) {
        if self.track_changes {
            self.changed.push((dir, key));
        }
    }

    /// Forget a flow (after the application is done with it).
    pub fn close_sender(&mut self, key: FlowKey) -> Option<Sender> {
        let s = self.senders.remove(&key)?.flow;
        if let Some(release) = self.pase.release(key, self.cfg.link_bps as u64) {
            self.send_arbitration(release);
        }
        self.note_changed(Dir::Send, key);
        self.moves.closed(key);
        self.forget(key);
        Some(s)
    }
    pub fn close_receiver(&mut self, key: FlowKey) -> Option<Receiver> {
        let r = self.receivers.remove(&key)?.flow;
        self.note_changed(Dir::Recv, key);
        self.hello_conn.remove(&key);
        self.admission.remove(key, &mut self.stats);
        self.forget(key);
        Some(r)
    }

    /// Abort a flow this endpoint sends: RESET to the peer, then forget it.
    pub fn abort_sender(&mut self, key: FlowKey, reason: ResetReason) {
        let peer = self.moves.peer(key);
        if let Some(s) = self.close_sender(key) {
            self.send_reset(peer, key.1, reason, s.transport());
        }
    }

    /// Abort (or refuse) a flow this endpoint receives: RESET to the peer (its sender
    /// fails), then forget it.
    pub fn abort_receiver(&mut self, key: FlowKey, reason: ResetReason) {
        if let Some(r) = self.close_receiver(key) {
            self.send_reset(key.0, key.1, reason, r.transport());
        }
    }

    fn send_reset(
        &mut self,
        peer: SocketAddr,
        flow_id: u32,
        reason: ResetReason,
        transport: TransportKind,
    ) {
        let reset = Packet::Reset(Reset { flow_id, reason });
        let now = self.now();
        let mut tx = self.tx();
        tx.send(peer, Transmit::new(reset, transport), now);
        tx.flush();
    }

    /// PASE: an ARBITRATION_REQUEST to the arbitrator (P0, Not-ECT like every non-data
    /// message of transport pase).
    fn send_arbitration(&mut self, request: Packet) {
        let Some(arbitrator) = self.pase.arbitrator() else {
            return;
        };
        self.stats.arbitration_requests += 1;
        let now = self.now();
        let mut tx = self.tx();
        tx.send(arbitrator, Transmit::new(request, TransportKind::Pase), now);
        tx.flush();
    }

    /// Where a flow this endpoint sends has its peer: the address of its key, or the port
    /// its HELLO_ACK came from (docs/protocol.md §11, "The peer of a flow").
    pub fn sender_peer(&self, key: FlowKey) -> SocketAddr {
        self.moves.peer(key)
    }

    /// The connection extension of the HELLO that opened an accepted flow.
    pub fn hello_conn(&self, key: FlowKey) -> Option<HelloConn> {
        self.hello_conn.get(&key).copied()
    }

    /// File descriptors (with poll(2) events) whose readiness also ends the wait in `poll`.
    pub fn set_wake_fds(&mut self, fds: &[(RawFd, i16)]) {
        self.wake_fds.clear();
        self.wake_fds.extend_from_slice(fds);
    }

    /// With `on`, a `poll` that received datagrams returns with what its last run of the
    /// flows had to send (the ACKs and credits they caused, timers due) still queued; the
    /// next `poll` sends it first thing. The caller (the daemon) hands the received bytes to the
    /// applications in between, so the application's wake-up is not behind a send to the
    /// peer (one system call; over copy-mode AF_XDP, the peer's whole receive path). The
    /// caller must call `poll` again right after.
    pub fn set_deliver_first(&mut self, on: bool) {
        self.deliver_first = on;
    }

    /// Whether a `wake_fds` descriptor may be ready: false only if the last `poll` ended
    /// with a ppoll(2) that found none ready (the daemon then skips its epoll_wait(2); a
    /// descriptor that became ready since ends the next wait at once).
    pub fn local_maybe_ready(&self) -> bool {
        !self.local_idle
    }

    /// The endpoint's configuration (what it was bound with).
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// UDP address this endpoint's peers use (its port; the IP of the bound address).
    pub fn port(&self) -> u16 {
        self.cfg.bind.port()
    }

    fn forget(&mut self, key: FlowKey) {
        let now = self.now();
        self.admission.forget(key, now);
    }

    /// The application is done with a finished flow: keep acknowledging retransmissions
    /// (the sender may have missed the last ACK) for `RECEIVER_LINGER`, then forget it.
    pub fn retire_receiver(&mut self, key: FlowKey) {
        let at = self.now() + RECEIVER_LINGER;
        self.retired.push_back((at, key));
    }

    /// Next incoming flow accepted since the last call.
    pub fn accept(&mut self) -> Option<FlowKey> {
        self.accepted.pop_front()
    }

    pub fn flows(&self) -> (usize, usize) {
        (self.senders.len(), self.receivers.len())
    }

    /// The AF_XDP set-up (interface, queue, native/generic, zero-copy), if in use.
    pub fn xdp_info(&self) -> Option<&crate::xdp::XdpInfo> {
        self.sock.xdp_info()
    }

    /// The peer of a half-open flow proved to receive what it is sent (its first data, a
    /// cookie, or — for a connection — the answer to the reverse flow's HELLO): the flow
    /// leaves the half-open table, is handed to the application if it was not yet, and
    /// gets its credits again if they were stopped here. No-op for other flows.
    pub fn confirm_receiver(&mut self, key: FlowKey) {
        let Some(h) = self.admission.confirm(key, &mut self.stats) else {
            return;
        };
        if !h.delivered {
            self.accepted.push_back(key);
        }
        if h.stopped {
            let now = self.now();
            if let Some(slot) = self.receivers.get_mut(&key) {
                mark(slot, &mut self.dirty, Dir::Recv, key, false);
                let r = &mut slot.flow;
                if !r.is_complete() {
                    let _ = r.handle_packet(
                        now,
                        &Packet::CreditRequest(CreditRequest {
                            flow_id: key.1,
                            pending_bytes: 0,
                        }),
                        false,
                    );
                }
            }
        }
    }

    /// Whether a receiver is half-open (not confirmed yet).
    pub fn is_half_open(&self, key: FlowKey) -> bool {
        self.admission.is_half_open(key)
    }

    /// Who limits this host's credits (`status` → `credit_limit`): the agent's credit
    /// shaper, or the NIC edge, whose counters are read from its pinned maps or its htb
    /// credit class if given.
    pub fn credit_limit(&self) -> CreditLimitStatus {
        let edge = self.cfg.nic_edge;
        let read = crate::edge::read_counters(
            self.cfg.nic_edge_maps.as_deref(),
            self.cfg.nic_edge_dev.as_deref(),
            self.cfg.nic_edge_swx.as_deref(),
        );
        let (mut counters, error) = match read {
            Some(Ok(c)) => (Some(c), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        if let Some(pna) = counters.as_mut().and_then(|c| c.pna.as_mut()) {
            let local = self.local_addr().ok().map(|a| a.ip());
            crate::edge::swx::match_receivers(pna, local, self.receivers.keys().copied());
        }
        let policed = self.shaper.police_credits_out;
        CreditLimitStatus {
            policed_by: if policed { "agent" } else { "edge" },
            nic_edge: edge,
            agent_bytes_per_s: policed.then_some(self.shaper.credits_out.per_ns * 1e9),
            edge: counters,
            edge_error: error,
        }
    }

    /// Sizes of the endpoint's tables (memory report).
    pub fn table_sizes(&self) -> EndpointTables {
        let (half_open, half_open_order, forgotten) = self.admission.table_sizes();
        EndpointTables {
            senders: self.senders.len(),
            receivers: self.receivers.len(),
            half_open,
            half_open_order,
            accepted: self.accepted.len(),
            retired: self.retired.len(),
            timers: self.timers.len(),
            dirty: self.dirty.len(),
            forgotten,
            hello_conn: self.hello_conn.len(),
            awaiting_hello_ack: self.moves.sizes().0,
            moved: self.moves.sizes().1,
            handed: self.handed(),
        }
    }

    /// Heap entries and dirty flows (the scale test and the memory report).
    pub fn timer_entries(&self) -> (usize, usize) {
        (self.timers.len(), self.dirty.len())
    }

    /// Credit pacing error percentiles (p50, p99, max) in ns, also stored in `stats`.
    pub fn pacing_error(&mut self) -> [u64; 3] {
        let mut v = self.pacing_errors.clone();
        if v.is_empty() {
            return [0; 3];
        }
        v.sort_unstable();
        let at = |q: f64| u64::from(v[((v.len() as f64 * q) as usize).min(v.len() - 1)]);
        self.stats.credit_pacing_error_ns =
            [at(0.5), at(0.99), u64::from(*v.last().expect("non-empty"))];
        self.stats.credit_pacing_error_ns
    }

    /// Bytes queued by `write` on a flow.
    pub fn write(&mut self, key: FlowKey, data: Bytes) -> bool {
        self.sender_mut(key).is_some_and(|s| s.write(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaper::EmulationQueue;
    use flexpass_core::Nanos;
    use flexpass_wire::{Ecn, HelloAck, HelloStatus};

    #[test]
    fn credit_batches_are_checked_and_deepen_both_credit_shapers() {
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        for bad in [0, flexpass_core::config::MAX_CREDIT_BATCH + 1] {
            cfg.credit_batch = bad;
            let e = cfg.validate().unwrap_err();
            assert!(e.contains("batch"), "{e}");
        }
        cfg.credit_batch = 8;
        let ep = Endpoint::bind(cfg).unwrap();
        // Two batches of the largest credit's frame (92 B on the wire, 68 B counted).
        assert_eq!(ep.shaper.credits_out.depth, 16.0 * 68.0);
        assert_eq!(ep.admission.half_open_credits.depth, 16.0 * 68.0);
    }

    /// docs/mtu-vectors.json (shared with the core, the model and Python): the agent's
    /// credit rates at 1500 and 9000 — its receivers' max_rate (FlexPass at w_q,
    /// ExpressPass at the whole link), its credit shaper and its incoming-credit limit —
    /// and its segment size.
    #[test]
    fn credit_rates_and_segments_follow_the_mtu_vectors() {
        let p =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/mtu-vectors.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        let mut checked = 0;
        for r in v["credit_rates"].as_array().unwrap() {
            let mtu = r["mtu"].as_u64().unwrap() as usize;
            let link = r["link_bps"].as_f64().unwrap();
            let share = r["share"].as_f64().unwrap();
            let cps = r["credits_per_second"].as_f64().unwrap();
            let bps = r["credit_queue_bps"].as_f64().unwrap();
            let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.link_bps = link;
            cfg.mtu = mtu;
            if share == 1.0 {
                let rc = cfg.receiver_config(TransportKind::ExpressPass);
                assert!(close(rc.credit.max_rate, cps), "{r}");
                let mut ep = Endpoint::bind(cfg).unwrap();
                assert!(
                    close(ep.shaper.credits_out.per_ns * 8e9, bps * 60.0 / 84.0),
                    "{r}"
                );
                // The credit shaper counts frame bytes, as the NIC edges do.
                let frame = r["credit_limit_frame_bytes_per_s"].as_f64().unwrap();
                assert!(close(ep.shaper.credits_out.per_ns * 1e9, frame), "{r}");
                assert!(close(ep.shaper.credits_in.per_ns * 1e9, cps), "{r}");
                let peer = ep.local_addr().unwrap();
                let k = ep.open(peer, TransportKind::FlexPass, 0).unwrap();
                ep.write(k, Bytes::from(vec![7u8; 20_000]));
                let s = ep.senders.get_mut(&k).unwrap();
                let now = 0;
                let mut biggest = 0;
                // Past the HELLO: the first-RTT reactive data (FlexPass) fills the MTU.
                s.flow
                    .handle_packet(
                        now,
                        &Packet::HelloAck(HelloAck {
                            flow_id: k.1,
                            transport: TransportKind::FlexPass,
                            status: HelloStatus::Accepted,
                        }),
                    )
                    .unwrap();
                while let Some(t) = s.flow.poll_transmit(now) {
                    if let Packet::Data(d) = &t.packet {
                        biggest = biggest.max(d.payload.len());
                        assert!(t.packet.encoded_len() + 28 <= mtu, "{r}");
                    }
                }
                assert_eq!(biggest, flexpass_wire::max_payload_for_mtu(mtu), "{r}");
            } else {
                cfg.w_q = share;
                let rc = cfg.receiver_config(TransportKind::FlexPass);
                assert!(close(rc.credit.max_rate, cps), "{r}");
            }
            checked += 1;
        }
        assert!(checked >= 4);
    }

    /// The host's emulation queue (FlashPass §III-C, as a switch's Q0 in the profile
    /// `flashpass`): a burst finds two packets' room for over-provisioned (Not-ECT) packets
    /// and eight for ordinary (ECT(0)) ones; afterwards it drains at the link's emulation
    /// share, C·84/(84 + max frame) — one packet per maximum frame of the MTU — and a FlashPass
    /// sender's first emulation rate is exactly that share.
    #[test]
    fn emulation_queue_drops_over_provisioned_above_two_and_drains_at_the_share() {
        for mtu in [1500, 9000] {
            let link = 1e9;
            let mut q = EmulationQueue::new(link, mtu);
            let per_packet = 1e9 * 8.0 * (84 + flexpass_wire::max_frame_wire(mtu)) as f64 / link;
            assert!(q.admit(0, Ecn::NotEct) && q.admit(0, Ecn::NotEct));
            assert!(
                !q.admit(0, Ecn::NotEct),
                "two queued: over-provisioned dropped"
            );
            for _ in 2..EMULATION_QUEUE_PACKETS {
                assert!(q.admit(0, Ecn::Ect0));
            }
            assert!(!q.admit(0, Ecn::Ect0), "eight queued: full");
            // One packet's time later one more fits, ordinary only (seven still queued).
            let t = per_packet.ceil() as Nanos;
            assert!(!q.admit(t, Ecn::NotEct) && q.admit(t, Ecn::Ect0) && !q.admit(t, Ecn::Ect0));
            // Drained to 2.5 queued: an over-provisioned packet is still dropped; at one
            // queued it gets through.
            assert!(!q.admit(t + (5.5 * per_packet) as Nanos, Ecn::NotEct));
            assert!(q.admit(t + (7.0 * per_packet).ceil() as Nanos, Ecn::NotEct));

            let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.link_bps = link;
            cfg.mtu = mtu;
            let mut ep = Endpoint::bind(cfg).unwrap();
            let peer = ep.local_addr().unwrap();
            let k = ep.open(peer, TransportKind::FlashPass, 0).unwrap();
            let fp = &ep.sender(k).unwrap().config().flashpass;
            assert!((fp.max_emulation_rate * per_packet / 1e9 - 1.0).abs() < 1e-9);
        }
    }

    /// pFabric (SIGCOMM'13 §4.1–4.2) on the agent: the window and RTO come from the host's
    /// link and base RTT (not the core's 10 Gbit/s default), and every data packet carries
    /// the flow's remaining size in PRIO, the field flexpass_switch ranks on.
    #[test]
    fn pfabric_flow_takes_the_hosts_bdp_and_sends_its_remaining_size_as_priority() {
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.link_bps = 1e9;
        cfg.base_rtt = 200_000;
        let mut ep = Endpoint::bind(cfg).unwrap();
        let peer = ep.local_addr().unwrap();
        let size = 100_000u64;
        let k = ep.open(peer, TransportKind::PFabric, size).unwrap();
        let pf = ep.sender(k).unwrap().config().pfabric.clone();
        assert_eq!((pf.bdp_bytes, pf.base_rtt), (25_000, 200_000));
        ep.write(k, Bytes::from(vec![7u8; size as usize]));
        let s = ep.senders.get_mut(&k).unwrap();
        s.flow
            .handle_packet(
                0,
                &Packet::HelloAck(HelloAck {
                    flow_id: k.1,
                    transport: TransportKind::PFabric,
                    status: HelloStatus::Accepted,
                }),
            )
            .unwrap();
        let mut sent = 0u64;
        while let Some(t) = s.flow.poll_transmit(0) {
            if let Packet::Data(d) = &t.packet {
                // Nothing acknowledged yet: the whole flow remains.
                assert_eq!(d.priority, Some(size as u32));
                sent += d.payload.len() as u64;
            }
        }
        // The first window is the BDP (25 kB in full segments), not the default's 18 kB.
        let seg = (flexpass_wire::max_payload_for_mtu(1500) - flexpass_wire::PRIORITY_LEN) as u64;
        assert_eq!(sent, 25_000u64.div_ceil(seg) * seg);
    }
}

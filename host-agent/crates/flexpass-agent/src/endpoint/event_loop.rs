//! The event loop of an endpoint: wait for packets or the next deadline (sleep, spin or
//! busy-poll), receive and dispatch datagrams to the flow tables, run the dirty and due
//! flows, and send what they have through the host's shapers (crate::shaper) and the
//! datapath's send batch. Who may open a flow is decided in crate::admission.

use super::{mark, Dir, Endpoint, FlowKey, Slot, NET};
use crate::admission::HelloVerdict;
use crate::datapath::{Datapath, POLL_FDS};
use crate::endpoint::EndpointStats;
use crate::pase_arbitration::Ignored;
use crate::peer_move::Route;
use crate::shaper::HostShaper;
use crate::socket::BATCH;
use crate::timers::Timer;
use flexpass_core::{Nanos, Receiver, Transmit};
use flexpass_wire::{
    DscpPlan, Ecn, Hello, HelloAck, HelloStatus, Packet, Reset, ResetReason, TransportKind,
};
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

/// Datagrams read per recvmmsg(2), and handled between two runs of the timers.
const RECV_BATCH: usize = 16;
/// recvmmsg(2) batches per `poll` call at most.
const MAX_BATCHES: usize = 16;
/// Step (ns) of the wake-up latency estimate per timer wake-up (median tracking).
const WAKE_LEAD_STEP: f64 = 200.0;
/// While busy-waiting for a credit, the socket is checked this often (ns).
const SPIN_CHECK: Nanos = 2_000;

fn libc_pollfd(fd: RawFd, events: i16) -> nix::libc::pollfd {
    nix::libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn libc_pollin() -> i16 {
    nix::libc::POLLIN
}

/// Keeps at most this many pacing-error samples (the first ones).
const PACING_SAMPLES: usize = 200_000;

/// The send side of one loop turn: the host's shapers, then the socket's send batch.
pub(super) struct Tx<'a> {
    pub(super) sock: &'a mut Datapath,
    pub(super) shaper: &'a mut HostShaper,
    pub(super) stats: &'a mut EndpointStats,
    pub(super) dscp: &'a DscpPlan,
}

impl Tx<'_> {
    /// Queue one packet (sent by `flush`, or right away once a batch is full).
    pub(super) fn send(&mut self, peer: SocketAddr, t: Transmit, now: Nanos) {
        let sock = &*self.sock;
        if !self
            .shaper
            .admit_out(&t, now, || sock.rx_backlog(), self.stats)
        {
            return;
        }
        let tos = self.dscp.tos(t.class, t.ecn);
        if self
            .sock
            .queue(peer, tos, |out| t.packet.encode(out))
            .is_err()
        {
            self.stats.send_errors += 1;
            return;
        }
        if self.sock.queued() >= BATCH {
            self.flush();
        }
    }

    /// A full socket buffer or an unreachable peer drops a datagram, as a NIC would; the
    /// transport recovers it like any other loss.
    pub(super) fn flush(&mut self) {
        if self.sock.queued() == 0 {
            return;
        }
        let f = self.sock.flush();
        self.stats.datagrams_out += f.sent;
        self.stats.send_errors += f.errors;
        self.stats.send_calls += f.calls;
    }
}

impl Endpoint {
    /// One turn of the event loop: wait (at most `max_wait`, less if a timer is due) for
    /// packets, handle them, run due timers and send everything the flows have to send.
    pub fn poll(&mut self, max_wait: Duration) -> io::Result<()> {
        self.local_idle = false;
        self.run_timers_and_flush();
        let now = self.now();
        let max = max_wait.as_nanos().min(u64::MAX as u128) as Nanos;
        let wait = self
            .next_due
            .map_or(max, |d| d.saturating_sub(now))
            .min(max);
        if wait > 0 {
            // Only a credit deadline is worth waking early for, and only if it is the
            // reason for waking up.
            let credit = self.credit_due && self.next_due.is_some_and(|d| d <= now + max);
            let lead = if credit {
                (self.wake_lead as Nanos).min(self.cfg.spin)
            } else {
                0
            };
            // Poll mode while packets arrive closely spaced: check the socket without
            // sleeping until the next deadline, for at most `busy_poll` after the last one.
            let mut readable = false;
            if self.cfg.busy_poll > 0 && self.rx_gap < self.cfg.busy_poll as f64 / 2.0 {
                let end = (self.last_rx + self.cfg.busy_poll).min(now + wait);
                loop {
                    if self.sleep(0)? {
                        readable = true;
                        break;
                    }
                    if self.now() >= end {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            let now = self.now();
            let wait = if readable {
                0
            } else {
                self.next_due
                    .map_or(max, |d| d.saturating_sub(now))
                    .min(max)
            };
            if wait > lead {
                let sleep = wait - lead;
                readable = self.sleep(sleep)?;
                if credit && !readable && self.cfg.spin > 0 {
                    // Learn the wake-up latency: the lead tracks its median.
                    let late = self.now().saturating_sub(now + sleep) as f64;
                    self.wake_lead = if late > self.wake_lead {
                        self.wake_lead + WAKE_LEAD_STEP
                    } else {
                        (self.wake_lead - WAKE_LEAD_STEP).max(0.0)
                    }
                    .min(self.cfg.spin as f64);
                }
            }
            if credit && !readable && lead > 0 && wait > 0 {
                // Woke early (or the credit is closer than the lead): busy-wait for it,
                // leaving as soon as a packet arrives.
                let until = now + wait;
                let mut check = self.now() + SPIN_CHECK;
                loop {
                    let t = self.now();
                    if t >= until {
                        break;
                    }
                    if t >= check {
                        if self.sleep(0)? {
                            break;
                        }
                        check = t + SPIN_CHECK;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        // Drain the socket in batches, running due timers (credit pacing) between batches;
        // at most MAX_BATCHES per call, so a caller that also serves other sockets (the
        // daemon's applications) is not starved while datagrams keep arriving.
        // A wait ended by the daemon's sockets alone has nothing to receive (one system
        // call saved per application event over the UDP socket).
        let mut received = 0;
        if !std::mem::take(&mut self.woke_for_local) {
            let mut batches = 1;
            loop {
                let n = self.receive_batch(RECV_BATCH)?;
                received += n;
                if n < RECV_BATCH || batches >= MAX_BATCHES {
                    break;
                }
                self.run_timers_and_flush();
                batches += 1;
            }
        }
        // `set_deliver_first`: the caller delivers what arrived before it is acknowledged.
        self.run_timers(!(self.deliver_first && received > 0));
        self.stats.xdp = self.sock.xdp_counters();
        Ok(())
    }

    /// ppoll(2) the datapath's sockets (and the wake fds) for `ns` (0: just check); whether
    /// any is readable. AF_XDP frames already on the receive ring end it without a call.
    fn sleep(&mut self, ns: Nanos) -> io::Result<bool> {
        self.woke_for_local = false;
        self.local_idle = false;
        if self.sock.rx_ready() {
            return Ok(true);
        }
        let timeout = nix::sys::time::TimeSpec::from_duration(Duration::from_nanos(ns));
        let mut own = [0 as RawFd; POLL_FDS];
        let k = self.sock.poll_fds(&mut own);
        let mut fds = [libc_pollfd(-1, 0); POLL_FDS];
        for (p, &fd) in fds.iter_mut().zip(&own[..k]) {
            *p = libc_pollfd(fd, libc_pollin());
        }
        let mut extra;
        let all: &mut [nix::libc::pollfd] = if self.wake_fds.is_empty() {
            &mut fds[..k]
        } else {
            // The datapath's sockets plus the daemon's: any of them ready ends the wait.
            extra = Vec::with_capacity(k + self.wake_fds.len());
            extra.extend_from_slice(&fds[..k]);
            extra.extend(self.wake_fds.iter().map(|&(fd, ev)| libc_pollfd(fd, ev)));
            &mut extra
        };
        let ts = timeout.as_ref();
        // SAFETY: `all` is a valid array of pollfd for the duration of the call.
        let n = unsafe { nix::libc::ppoll(all.as_mut_ptr(), all.len() as _, ts, std::ptr::null()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        self.local_idle = !self.wake_fds.is_empty() && all[k..].iter().all(|p| p.revents == 0);
        if n > 0 {
            let mut ready = [false; POLL_FDS];
            for (r, p) in ready.iter_mut().zip(&all[..k]) {
                *r = p.revents != 0;
            }
            if k > 1 {
                self.sock.readable(&ready[..k]);
            }
            // Ready frames on an AF_XDP ring need no poll event: `rx_ready` is checked too.
            self.woke_for_local = !ready[..k].contains(&true) && !self.sock.rx_ready();
        }
        Ok(n > 0)
    }

    /// Receive (one recvmmsg) and dispatch up to `max` messages (more datagrams if the
    /// kernel coalesced some), running timers whenever one is due; returns how many
    /// messages were read.
    fn receive_batch(&mut self, max: usize) -> io::Result<usize> {
        let n = self.sock.recv_batch(max.min(BATCH))?;
        self.stats.recv_calls += 1;
        if n > 0 {
            let t = self.now();
            let gap = t.saturating_sub(self.last_rx) as f64 / self.sock.datagrams().max(1) as f64;
            self.rx_gap += (gap.min(1e6) - self.rx_gap) / 8.0;
            self.last_rx = t;
        }
        for i in 0..self.sock.datagrams() {
            // Due timers (credit pacing) run as soon as they are due, not only between
            // batches: one clock read per datagram.
            if i > 0 && self.next_due.is_some_and(|d| d <= self.now()) {
                self.run_timers_and_flush();
            }
            let (packet, src, tos) = {
                let m = self.sock.received(i);
                if m.truncated {
                    self.stats.datagrams_in += 1;
                    self.stats.malformed += 1;
                    log_malformed(self.stats.malformed, m.src, "truncated", m.data);
                    continue;
                }
                if m.data.is_empty() {
                    self.stats.datagrams_in += 1;
                    self.stats.probes += 1;
                    continue;
                }
                (Packet::decode(m.data), m.src, m.tos)
            };
            self.stats.datagrams_in += 1;
            let packet = match packet {
                Ok(p) => p,
                Err(e) => {
                    self.stats.malformed += 1;
                    let m = self.sock.received(i);
                    log_malformed(self.stats.malformed, src, &e.to_string(), m.data);
                    continue;
                }
            };
            let ce = Ecn::from_bits(tos) == Ecn::Ce;
            self.dispatch(src, packet, ce);
        }
        self.sock.recycle();
        for key in self.ack_holds.drain(..) {
            if let Some(r) = self.receivers.get_mut(&key) {
                r.flow.set_ack_hold(false);
                mark(r, &mut self.dirty, Dir::Recv, key, true);
            }
        }
        Ok(n)
    }

    fn dispatch(&mut self, src: SocketAddr, packet: Packet, ce: bool) {
        let now = self.now();
        let key = (src, packet.flow_id());
        if matches!(packet, Packet::Reset(_)) {
            // RESET goes either way (docs/protocol.md §6.8): to the flow we send, or to the
            // flow we receive from this peer with that id (both, in the rare case of two).
            let mut known = false;
            match self.sender_route(key, &packet) {
                Route::Flow(k) | Route::Moved(k) => {
                    let s = self.senders.get_mut(&k).expect("routed");
                    known = true;
                    let _ = s.flow.handle_packet(now, &packet);
                    mark(s, &mut self.dirty, Dir::Send, k, true);
                }
                Route::Ignored => known = true,
                Route::Unknown => {}
            }
            if let Some(r) = self.receivers.get_mut(&key) {
                known = true;
                let _ = r.flow.handle_packet(now, &packet, ce);
                mark(r, &mut self.dirty, Dir::Recv, key, true);
            }
            if !known {
                self.stats.unknown_flow += 1;
            }
            return;
        }
        match &packet {
            Packet::ArbitrationResponse(r) => return self.on_arbitration(src, r),
            // This endpoint is no arbitrator (`flexpass arbitrator` is).
            Packet::ArbitrationRequest(_) => {
                self.stats.unknown_flow += 1;
                return;
            }
            _ => {}
        }
        let to_receiver = packet.is_sender_to_receiver();
        if to_receiver {
            let mut cookie_ok = false;
            if !self.receivers.contains_key(&key) {
                if self.handover_active() && self.handed_datagram(key, &packet, now) {
                    return;
                }
                match (&packet, self.cfg.accept) {
                    (Packet::Hello(h), true) => {
                        cookie_ok = self.admission.check_cookie(src, h, now, &mut self.stats);
                        if !self.admit_hello(key, h, cookie_ok, now) {
                            return;
                        }
                    }
                    (Packet::Hello(_), false) => {
                        self.stats.unknown_flow += 1;
                        return;
                    }
                    _ => {
                        self.unknown_flow(src, &packet, now);
                        return;
                    }
                }
            } else if let (Packet::Hello(h), true) = (&packet, self.admission.is_half_open(key)) {
                cookie_ok = self.admission.check_cookie(src, h, now, &mut self.stats);
            }
            let r = self.receivers.get_mut(&key).expect("present");
            mark(r, &mut self.dirty, Dir::Recv, key, true);
            if matches!(packet, Packet::Data(_)) && !r.flow.ack_hold() {
                // One ACK per receive batch for credit-scheduled data (released in
                // `receive_batch`).
                r.flow.set_ack_hold(true);
                self.ack_holds.push(key);
            }
            if r.flow.handle_packet(now, &packet, ce).is_err() {
                self.stats.rejected_by_flow += 1;
                return;
            }
            if self.admission.on_packet(key, &packet, cookie_ok) {
                self.confirm_receiver(key);
            }
        } else {
            let key = match self.sender_route(key, &packet) {
                Route::Flow(k) | Route::Moved(k) => k,
                Route::Ignored => return,
                Route::Unknown => return self.unknown_flow(src, &packet, now),
            };
            let s = self.senders.get_mut(&key).expect("routed");
            // Credits beyond the link's credit rate cannot be used (one frame each):
            // dropped here, as the sender's switch port would (forged credit floods).
            if matches!(packet, Packet::Credit(_)) && !self.shaper.admit_credit_in(now) {
                self.stats.credits_in_rate_limited += 1;
                return;
            }
            mark(s, &mut self.dirty, Dir::Send, key, true);
            if s.flow.handle_packet(now, &packet).is_err() {
                self.stats.rejected_by_flow += 1;
            }
            // The HELLO_ACK answered (or the flow failed): the flow's peer is settled.
            if matches!(packet, Packet::HelloAck(_))
                && (s.flow.is_established() || s.flow.error().is_some())
            {
                self.moves.settled(key);
            }
        }
    }

    /// The sender a datagram from `key` = (source, flow id) is for (crate::peer_move):
    /// its peer, or — an accepted HELLO_ACK from another port of the address its HELLO went
    /// to — the flow that now moves there; ignored datagrams are counted.
    fn sender_route(&mut self, key: FlowKey, packet: &Packet) -> Route {
        let senders = &self.senders;
        let route = self.moves.route(key, packet, |k| senders.contains_key(&k));
        match route {
            Route::Moved(_) => self.stats.peer_moved += 1,
            Route::Ignored => self.stats.peer_ignored += 1,
            _ => {}
        }
        route
    }

    /// PASE: an answer of the arbitrator, for a request of ours (else counted and ignored),
    /// checked by the flow (`Sender::on_arbitration`) before it takes effect.
    fn on_arbitration(&mut self, src: SocketAddr, r: &flexpass_wire::ArbitrationResponse) {
        if r.flow_id == crate::pase_arbitration::DELEGATION_FLOW_ID {
            // Delegation: this host's share of the arbitrator's link.
            match self.pase.on_share(src, r) {
                Ok(_) => self.stats.pase_shares += 1,
                Err(Ignored::Forged) => self.stats.arbitration_forged += 1,
                Err(Ignored::Unasked) => self.stats.arbitration_unasked += 1,
            }
            return;
        }
        let key = match self.pase.on_response(src, r) {
            Ok(key) => key,
            Err(Ignored::Forged) => {
                self.stats.arbitration_forged += 1;
                return;
            }
            Err(Ignored::Unasked) => {
                self.stats.arbitration_unasked += 1;
                return;
            }
        };
        let Some(s) = self.senders.get_mut(&key) else {
            self.stats.arbitration_unasked += 1;
            return;
        };
        let a = flexpass_core::pase::Arbitration {
            queue: r.queue,
            reference_rate_bps: r.reference_rate_bps as f64,
        };
        if s.flow.on_arbitration(key.1, a).is_err() {
            self.stats.arbitration_rejected += 1;
            return;
        }
        self.stats.arbitrations_accepted += 1;
        mark(s, &mut self.dirty, Dir::Send, key, true);
        self.pase.accepted(r);
    }

    /// A HELLO for a flow this endpoint does not have: ask admission (it may drop half-open
    /// flows first), then answer HELLO_ACK retry / refused or create the receiver. Whether
    /// it was created.
    fn admit_hello(&mut self, key: FlowKey, h: &Hello, cookie_ok: bool, now: Nanos) -> bool {
        let (verdict, dropped) = self.admission.on_new_hello(
            key.0,
            h,
            cookie_ok,
            self.receivers.len(),
            now,
            &mut self.stats,
        );
        if self.answer_hello(key.0, h, verdict, dropped, false, now) {
            return false;
        }
        let r = match Receiver::new(
            h.flow_id,
            h.transport,
            &self.cfg.receiver_config(h.transport),
        ) {
            Ok(r) => r,
            Err(_) => {
                self.stats.rejected_by_flow += 1;
                return false;
            }
        };
        self.receivers.insert(key, Slot::new(r));
        if let Some(c) = h.conn {
            self.hello_conn.insert(key, c);
        }
        // Connections are handed over at once (their server side answers first); other
        // flows once confirmed.
        let deliver = cookie_ok || h.conn.is_some();
        if deliver {
            self.accepted.push_back(key);
        }
        self.admission
            .admitted(key, cookie_ok, deliver, now, &mut self.stats);
        true
    }

    /// A valid packet for a flow this endpoint does not have: count it; answer
    /// RESET(unknown_flow) if admission says so (a flow this endpoint dropped, rate-limited).
    fn unknown_flow(&mut self, src: SocketAddr, packet: &Packet, now: Nanos) {
        self.stats.unknown_flow += 1;
        if !self.admission.answer_with_reset(src, packet, now) {
            return;
        }
        let reset = Packet::Reset(Reset {
            flow_id: packet.flow_id(),
            reason: ResetReason::UnknownFlow,
        });
        self.stats.resets_sent += 1;
        self.transmit(src, Transmit::new(reset, TransportKind::FlexPass), now);
    }

    /// One turn of the flows: the due timers (from the deadline heap) and the dirty flows
    /// run, send what they have, and register their next deadline; then the socket's send
    /// batch is flushed. Nothing here looks at flows that are neither due nor dirty.
    fn run_timers_and_flush(&mut self) {
        self.run_timers(true)
    }

    /// `run_timers_and_flush`; with `flush` false what the flows sent stays queued in the
    /// datapath's send batch (sent by the next flush, or once the batch is full).
    fn run_timers(&mut self, flush: bool) {
        let now = self.now();
        while self.retired.front().is_some_and(|&(at, _)| at <= now) {
            let (_, key) = self.retired.pop_front().expect("checked");
            self.close_receiver(key);
        }
        self.admission.expire_forgotten(now);
        self.expire_handed(now);
        if self.pase.next_due().is_some_and(|d| d <= now) {
            self.pase_requests(now);
        }
        // Due timers join the dirty flows (stale heap entries are dropped).
        while let Some(((dir, key), timer)) = self.timers.pop_due(now) {
            let timer = Some(timer);
            match dir {
                Dir::Send => {
                    if let Some(s) = self.senders.get_mut(&key).filter(|s| s.timer == timer) {
                        s.timer = None;
                        mark(s, &mut self.dirty, dir, key, true);
                    }
                }
                Dir::Recv => {
                    if let Some(r) = self.receivers.get_mut(&key).filter(|r| r.timer == timer) {
                        r.timer = None;
                        mark(r, &mut self.dirty, dir, key, true);
                    }
                }
            }
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        let Endpoint {
            senders,
            receivers,
            sock,
            shaper,
            stats,
            cfg,
            pacing_errors,
            admission,
            timers,
            changed,
            track_changes,
            pase,
            moves,
            ..
        } = self;
        let mut tx = Tx {
            sock,
            shaper,
            stats,
            dscp: &cfg.dscp,
        };
        let any_half_open = admission.any_half_open();
        for &(dir, key) in &dirty {
            let peer = match dir {
                Dir::Send => moves.peer(key),
                Dir::Recv => key.0,
            };
            // Registers the flow's next deadline in the heap if it changed.
            let mut arm = |timer: &mut Option<Timer>, next: Option<Timer>| {
                timers.arm(timer, (dir, key), next)
            };
            let (flags, failed) = match dir {
                Dir::Send => {
                    // Closed since it was marked.
                    let Some(slot) = senders.get_mut(&key) else {
                        continue;
                    };
                    let s = &mut slot.flow;
                    if s.poll_timeout().is_some_and(|d| d <= now) {
                        s.handle_timeout(now);
                    }
                    while let Some(t) = s.poll_transmit(now) {
                        tx.send(peer, t, now);
                    }
                    let next = s.poll_timeout().map(|d| (d, false));
                    let failed = s.error().is_some();
                    if failed || s.is_complete() {
                        // PASE: the arbitrator frees the flow's share at once.
                        if let (Some(r), Some(a)) =
                            (pase.release(key, cfg.link_bps as u64), pase.arbitrator())
                        {
                            tx.stats.arbitration_requests += 1;
                            tx.send(a, Transmit::new(r, TransportKind::Pase), now);
                        }
                    }
                    arm(&mut slot.timer, next);
                    (std::mem::take(&mut slot.dirty), failed)
                }
                Dir::Recv => {
                    let Some(slot) = receivers.get_mut(&key) else {
                        continue;
                    };
                    let r = &mut slot.flow;
                    let due = r.poll_timeout();
                    if due.is_some_and(|d| d <= now) {
                        r.handle_timeout(now);
                    }
                    let mut first_credit = true;
                    let mut half_open = false;
                    while let Some(t) = r.poll_transmit(now) {
                        if let Packet::Credit(c) = &t.packet {
                            if first_credit {
                                first_credit = false;
                                if let (Some(d), true) = (due, pacing_errors.len() < PACING_SAMPLES)
                                {
                                    pacing_errors
                                        .push(now.saturating_sub(d).min(u32::MAX as u64) as u32);
                                }
                                // Looked up only for flows that send a credit now.
                                half_open = any_half_open && admission.is_half_open(key);
                            }
                            tx.shaper.host_behind = false;
                            if half_open {
                                // Half-open: its own allowance, then the half-open share of
                                // the link.
                                let verdict = admission.half_open_credit(
                                    key,
                                    now,
                                    t.packet.frame_len(),
                                    tx.stats,
                                );
                                if verdict.stop {
                                    let stop = Packet::CreditStop { flow_id: c.flow_id };
                                    let _ = r.handle_packet(now, &stop, false);
                                }
                                if !verdict.send {
                                    continue;
                                }
                            }
                        }
                        tx.send(peer, t, now);
                        if std::mem::take(&mut tx.shaper.host_behind) {
                            r.credit_dropped_by_host();
                        }
                    }
                    let next = r.poll_timeout().map(|d| (d, r.is_pacing_credits()));
                    arm(&mut slot.timer, next);
                    (std::mem::take(&mut slot.dirty), false)
                }
            };
            if *track_changes && (flags & NET != 0 || failed) {
                changed.push((dir, key));
            }
        }
        if flush {
            tx.flush();
        }
        dirty.clear();
        self.dirty = dirty;
        // Rebuild the heap once stale entries outnumber the flows (amortised O(1) a push).
        let flows = self.senders.len() + self.receivers.len();
        if self.timers.needs_rebuild(flows) {
            self.rebuild_timers();
        }
        let next = self.next_timer();
        self.next_due = match (next.map(|(d, _)| d), self.pase.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.credit_due = next.is_some_and(|(_, c)| c) && self.next_due == next.map(|(d, _)| d);
    }

    /// PASE: the ARBITRATION_REQUESTs due (the criterion: bytes written and not yet
    /// acknowledged; a flow complete, failed or gone is released).
    fn pase_requests(&mut self, now: Nanos) {
        let mut out = Vec::new();
        let senders = &self.senders;
        self.pase.due(
            now,
            self.cfg.link_bps as u64,
            |key| {
                let s = &senders.get(&key)?.flow;
                (!s.is_complete() && s.error().is_none()).then(|| s.unacked_bytes())
            },
            &mut out,
        );
        // Delegation: the arbitrations this host made over its share.
        for (key, a) in self.pase.take_decisions() {
            let Some(s) = self.senders.get_mut(&key) else {
                continue;
            };
            if s.flow.on_arbitration(key.1, a).is_err() {
                self.stats.arbitration_rejected += 1;
                continue;
            }
            self.stats.pase_local_arbitrations += 1;
            mark(s, &mut self.dirty, Dir::Send, key, true);
        }
        let Some(arbitrator) = self.pase.arbitrator() else {
            return;
        };
        self.stats.arbitration_requests += out.len() as u64;
        let mut tx = self.tx();
        for p in out {
            tx.send(arbitrator, Transmit::new(p, TransportKind::Pase), now);
        }
        tx.flush();
    }

    /// The earliest registered deadline (stale entries at the top are dropped).
    fn next_timer(&mut self) -> Option<Timer> {
        let (senders, receivers) = (&self.senders, &self.receivers);
        self.timers.peek_current(|(dir, key)| match dir {
            Dir::Send => senders.get(&key).and_then(|s| s.timer),
            Dir::Recv => receivers.get(&key).and_then(|r| r.timer),
        })
    }

    fn rebuild_timers(&mut self) {
        let senders = self
            .senders
            .iter()
            .filter_map(|(&k, s)| s.timer.map(|t| ((Dir::Send, k), t)));
        let receivers = self
            .receivers
            .iter()
            .filter_map(|(&k, r)| r.timer.map(|t| ((Dir::Recv, k), t)));
        self.timers.rebuild(senders.chain(receivers));
    }

    /// After admission's verdict on a new HELLO: close the half-open flows it dropped, then
    /// answer HELLO_ACK retry / refused (`refuse`: refused whatever the verdict). Whether it
    /// answered (the flow is not admitted).
    pub(super) fn answer_hello(
        &mut self,
        peer: SocketAddr,
        h: &Hello,
        verdict: HelloVerdict,
        dropped: Vec<FlowKey>,
        refuse: bool,
        now: Nanos,
    ) -> bool {
        for old in dropped {
            self.accepted.retain(|k| *k != old);
            self.close_receiver(old);
        }
        let status = match verdict {
            _ if refuse => {
                self.stats.flows_refused += 1;
                HelloStatus::Refused
            }
            HelloVerdict::Admit => return false,
            HelloVerdict::Retry(cookie) => HelloStatus::Retry { cookie },
            HelloVerdict::Refuse => HelloStatus::Refused,
        };
        let ack = Packet::HelloAck(HelloAck {
            flow_id: h.flow_id,
            transport: h.transport,
            status,
        });
        self.transmit(peer, Transmit::new(ack, h.transport), now);
        true
    }

    pub(super) fn transmit(&mut self, peer: SocketAddr, t: Transmit, now: Nanos) {
        self.tx().send(peer, t, now);
    }

    pub(super) fn tx(&mut self) -> Tx<'_> {
        Tx {
            sock: &mut self.sock,
            shaper: &mut self.shaper,
            stats: &mut self.stats,
            dscp: &self.cfg.dscp,
        }
    }
}

/// The first malformed datagrams, at debug level (what was wrong, from whom, its first
/// bytes): enough to tell a stray sender from a datapath bug without flooding the log.
fn log_malformed(count: u64, src: SocketAddr, why: &str, data: &[u8]) {
    if count <= 8 {
        let head: Vec<String> = data.iter().take(16).map(|b| format!("{b:02x}")).collect();
        log::debug!(
            "flexpass agent: malformed datagram #{count} from {src} ({} bytes): {why}; starts {}",
            data.len(),
            head.join(" ")
        );
    }
}

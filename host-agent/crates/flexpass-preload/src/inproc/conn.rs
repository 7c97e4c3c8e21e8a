//! One FlexPass connection served in the application's process: its UDP socket, the open
//! flow's `Receiver` and the reply flow's `Sender` (docs/datapath.md, "Next step: the core
//! in the application's process"). Every method runs with the connection's lock held, by
//! an application thread (read/write) or by the timer thread.
//!
//! Readiness stays the kernel's: the application's fd is a dup of `own`, so poll/epoll see
//! the socket. Bytes the core holds for the application while the socket is empty (a read
//! that took part of a chunk, data drained by a write or by the timer thread) would not
//! wake a poller: the connection then sends an empty datagram to its own address (the
//! doorbell), which makes the socket readable until a drain consumes it.

use super::sys;
use bytes::Bytes;
use flexpass_core::{Nanos, Receiver, ReceiverConfig, Sender};
use flexpass_wire::{ConnRole, DscpPlan, Packet};
use libc::c_int;
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes the application may have written and not yet acknowledged (its socket buffer).
pub const SEND_LIMIT: u64 = 4 << 20;
/// A poll or select for writing sees a connection writable with this much room (src/wait.rs).
pub const WRITE_LOW_WATER: u64 = SEND_LIMIT / 4;
/// Socket buffers of a connection's UDP socket: data the core has not drained yet.
pub const SOCKET_BUFFER: c_int = 4 << 20;

pub struct Conn {
    /// The library's descriptor of the application's socket (the application's fd is a dup
    /// of it): the open flow's data, RESET and the doorbell arrive here, so it is readable
    /// only when the application has something to read (sys::socket_pair).
    pub own: c_int,
    /// The library's socket on the same address: the flows' control (credits, ACKs, …).
    pub ctl: c_int,
    /// The timer thread's name for it (timer::add; 0 before).
    pub timer_id: u64,
    /// The deadline the timer thread has for it (timer::rearm).
    pub armed: Option<Nanos>,
    /// `ctl` is in the timer thread's epoll set (`wants_watch`).
    pub watched: bool,
    /// The flow's peer: the opening host's UDP address (agent or process).
    pub peer: SocketAddrV4,
    /// This socket's own address (the doorbell's destination and source).
    pub local: SocketAddrV4,
    /// What getpeername / getsockname show the application.
    pub app_remote: SocketAddrV4,
    pub app_local: SocketAddrV4,
    pub v6: bool,
    /// The flow the application receives (answering side: the open flow; opening side:
    /// the reply flow, once its HELLO came) and the one it sends.
    pub rx: Option<Receiver>,
    pub tx: Sender,
    /// Opening side: the reply flow's receiver is made from its HELLO with this
    /// configuration, for this conn_id.
    pub reply_rx: Option<(u32, ReceiverConfig)>,
    /// Opening side, until the HELLO_ACK: where the HELLO went (the move rule applies).
    pub hello_to: Option<SocketAddrV4>,
    /// Answering side: the registration that handed the connection over (tcp_closed).
    pub reg: Option<Arc<super::listen::Registration>>,
    /// In-order bytes taken from the receiver, not yet read by the application.
    ready: VecDeque<Bytes>,
    /// A doorbell datagram is in the socket.
    doorbell: bool,
    /// The application closed its descriptor: the library finishes the flows alone.
    pub app_closed: Option<Nanos>,
    /// Bytes came that the application will never read (at its close or after): at exit
    /// such a connection is reset, as TCP answers them (timer::exit_linger).
    pub unread: bool,
    pub wr_shut: bool,
    /// The sockets are closed and the agent told (timer::end, once).
    pub ended: bool,
    /// A port unreachable from the peer ended the connection (`peer_errors`).
    pub gone: Option<Gone>,
    /// Both sockets are armed in the timer thread's error set (timer::rearm).
    pub err_watch: bool,
    dscp: DscpPlan,
    /// Datagrams queued by `send`, back to back: the runs, each datagrams of one kind.
    wbuf: Vec<u8>,
    runs: Vec<Run>,
    /// Since when the queued datagrams (ACKs only) wait for the application's reply, to
    /// leave with its data in one system call (`flush_after_read`).
    held_at: Option<Nanos>,
    pub ignored: u64,
    /// Of the datagrams sent: system calls, and calls where ACKs left with data (`FLEXPASS_LOG=debug`
    /// prints them when the connection ends).
    pub sends: SendCounts,
    /// When the connection was made, and the bytes the application wrote and read (its
    /// record for the agent's `status`: timer.rs `end`).
    pub opened: Nanos,
    pub bytes_written: u64,
    pub bytes_read: u64,
}

/// What a connection's datagrams cost (its debug line at the end).
#[derive(Default, Debug)]
pub struct SendCounts {
    pub datagrams: u64,
    pub calls: u64,
    /// Calls that carried ACKs and data together.
    pub acks_with_data: u64,
    /// Held ACKs sent because the application was about to wait, and after ACK_HOLD_MAX.
    pub held_at_wait: u64,
    pub held_expired: u64,
}

/// Datagrams in `Conn::wbuf` from `start`: `count` of one kind and TOS, all `segment`
/// bytes but the last (`short` once one is shorter: nothing may follow it).
struct Run {
    start: usize,
    kind: std::mem::Discriminant<Packet>,
    ack: bool,
    tos: u8,
    segment: usize,
    count: usize,
    short: bool,
}

/// A connection behind its lock. Every release tells the timer thread the connection's
/// deadline and whether to watch its control socket (timer::rearm): no call that changes
/// the flows can leave their timers unarmed.
pub struct Locked {
    m: Mutex<Conn>,
    /// Which process drives it (fork.rs).
    pub own: super::fork::Own,
}

pub struct Guard<'a>(MutexGuard<'a, Conn>, &'a Locked);

impl Locked {
    pub fn new(c: Conn) -> Locked {
        Locked {
            m: Mutex::new(c),
            own: super::fork::Own::new(),
        }
    }

    pub fn lock(&self) -> Result<Guard<'_>, ()> {
        self.m.lock().map(|g| Guard(g, self)).map_err(|_| ())
    }

    pub fn try_lock(&self) -> Option<Guard<'_>> {
        self.m.try_lock().ok().map(|g| Guard(g, self))
    }

    /// The lock alone, nothing re-armed at its release (held across fork: fork.rs).
    pub fn raw_lock(&self) -> Option<MutexGuard<'_, Conn>> {
        self.m.lock().ok()
    }
}

impl std::ops::Deref for Guard<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.0
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.0
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        super::timer::rearm(&mut self.0, &self.1.own);
    }
}

thread_local! {
    /// This thread's receive buffers (every connection it drains uses them in turn).
    static RX: std::cell::RefCell<sys::RxBatch> = std::cell::RefCell::new(sys::RxBatch::new());
}

/// Most segments the kernel takes in one UDP GSO send (UDP_MAX_SEGMENTS), and the largest
/// UDP payload of one.
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65_000;
/// Most bytes queued before they are sent: a full run and a few datagrams of other kinds.
const WBUF_MAX: usize = GSO_MAX_BYTES + 4096;
/// Longest an ACK waits for the application's reply to carry it to the peer in the same
/// system call (the timer thread sends it then). Far below any retransmission timeout;
/// TCP's delayed ACK waits up to 40 ms.
pub const ACK_HOLD_MAX: Nanos = 500_000;
/// UDP GSO works here (cleared for the process at the first refusal).
static GSO: AtomicBool = AtomicBool::new(true);

impl Conn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (own, ctl): (c_int, c_int),
        peer: SocketAddrV4,
        local: SocketAddrV4,
        app_remote: SocketAddrV4,
        app_local: SocketAddrV4,
        v6: bool,
        rx: Option<Receiver>,
        tx: Sender,
        reg: Option<Arc<super::listen::Registration>>,
    ) -> Conn {
        Conn {
            own,
            ctl,
            timer_id: 0,
            armed: None,
            watched: false,
            peer,
            local,
            app_remote,
            app_local,
            v6,
            rx,
            tx,
            reply_rx: None,
            hello_to: None,
            reg,
            ready: VecDeque::new(),
            doorbell: false,
            app_closed: None,
            unread: false,
            wr_shut: false,
            ended: false,
            gone: None,
            err_watch: false,
            dscp: DscpPlan::default(),
            wbuf: Vec::with_capacity(GSO_MAX_BYTES),
            runs: Vec::with_capacity(sys::MAX_RUNS),
            held_at: None,
            ignored: 0,
            sends: SendCounts::default(),
            opened: super::now(),
            bytes_written: 0,
            bytes_read: 0,
        }
    }

    /// Hand every datagram waiting in both sockets to the core (never blocks). The
    /// control socket first: a reply flow's HELLO before its data.
    pub fn drain(&mut self, now: Nanos) {
        let mut held = false;
        self.drain_one(self.ctl, now, &mut held);
        self.drain_one(self.own, now, &mut held);
        self.release(held);
    }

    /// Only the library's socket (the timer thread: the application's data stays in its
    /// socket, which keeps it readable).
    pub fn drain_ctl(&mut self, now: Nanos) {
        let mut held = false;
        self.drain_one(self.ctl, now, &mut held);
        self.release(held);
    }

    fn release(&mut self, held: bool) {
        if let Some(rx) = self.rx.as_mut() {
            if held {
                rx.set_ack_hold(false);
            }
            while let Some(b) = rx.read() {
                self.ready.push_back(b);
            }
        }
    }

    /// A datagram from `src`, not the flow's peer: while the HELLO_ACK is awaited, an
    /// accepted one from another port of the address moves the connection there
    /// (flexpass_core::peer); anything else is ignored.
    fn moved_by(&mut self, src: SocketAddrV4, p: &Packet) -> bool {
        let (Some(to), Packet::HelloAck(a)) = (self.hello_to, p) else {
            return false;
        };
        if a.flow_id != self.tx.flow_id()
            || !flexpass_core::peer::hello_ack_moves(to.into(), src.into(), a)
        {
            return false;
        }
        self.peer = src;
        self.hello_to = None;
        true
    }

    /// Opening side: the reply flow's HELLO makes its receiver.
    fn reply_hello(&mut self, p: &Packet) {
        let (Packet::Hello(h), Some((conn_id, cfg))) = (p, &self.reply_rx) else {
            return;
        };
        let ok = h
            .conn
            .is_some_and(|c| c.conn_id == *conn_id && c.role == ConnRole::Reply);
        if ok && self.rx.is_none() {
            self.rx = Receiver::new(h.flow_id, h.transport, cfg).ok();
        }
    }

    fn drain_one(&mut self, fd: c_int, now: Nanos, held: &mut bool) {
        RX.with(|cell| {
            let Ok(mut batch) = cell.try_borrow_mut() else {
                return; // not re-entered: nothing in a batch's handling reads a socket
            };
            loop {
                let n = batch.recv(fd);
                for i in 0..n {
                    let (data, src, tos, segment) = batch.get(i);
                    if data.is_empty() {
                        if src == self.local {
                            self.doorbell = false;
                        } else {
                            self.ignored += 1;
                        }
                        continue;
                    }
                    // A coalesced run (UDP_GRO) is the datagrams that were sent, back to back;
                    // one copy of the message, whose slices the payloads keep.
                    let step = if segment == 0 { data.len() } else { segment };
                    let msg = Bytes::copy_from_slice(data);
                    for at in (0..msg.len()).step_by(step) {
                        let d = msg.slice(at..(at + step).min(msg.len()));
                        self.handle_datagram(&d, src, tos, now, held);
                    }
                }
                if n < sys::RX_BATCH {
                    break;
                }
            }
        })
    }

    fn handle_datagram(
        &mut self,
        datagram: &Bytes,
        src: SocketAddrV4,
        tos: u8,
        now: Nanos,
        held: &mut bool,
    ) {
        let Ok(p) = Packet::decode_bytes(datagram) else {
            self.ignored += 1;
            return;
        };
        if src != self.peer && !self.moved_by(src, &p) {
            // A flow's peer is where its HELLO went, or where its HELLO_ACK came from:
            // nothing else speaks for it (docs/protocol.md §11).
            self.ignored += 1;
            return;
        }
        let ce = tos & 3 == 3;
        if let Packet::Reset(_) = p {
            // RESET goes either way: to the flow we send, or the one we receive.
            if p.flow_id() == self.tx.flow_id() {
                let _ = self.tx.handle_packet(now, &p);
            }
            if let Some(rx) = self.rx.as_mut().filter(|r| r.flow_id() == p.flow_id()) {
                let _ = rx.handle_packet(now, &p, ce);
            }
        } else if p.is_sender_to_receiver() {
            self.reply_hello(&p);
            let Some(rx) = self.rx.as_mut() else {
                self.ignored += 1;
                return;
            };
            if matches!(p, Packet::Data(_)) && !*held {
                // One ACK per receive batch (as the agent's loop).
                rx.set_ack_hold(true);
                *held = true;
            }
            let _ = rx.handle_packet(now, &p, ce);
        } else {
            let _ = self.tx.handle_packet(now, &p);
            if self.tx.is_established() || self.tx.error().is_some() {
                self.hello_to = None;
            }
        }
    }

    /// Fire due timers and send what the core has to send.
    pub fn flush(&mut self, now: Nanos) {
        self.queue_due(now);
        if self.held_at.is_some_and(|h| now >= h + ACK_HOLD_MAX) {
            self.sends.held_expired += 1;
        }
        self.send_all();
        self.release(false);
    }

    /// As `flush`, after bytes went to the application: ACKs alone (no data, no credit)
    /// wait for its reply, whose data then carries them in the same system call, as a
    /// TCP reply carries its ACK (at most ACK_HOLD_MAX; only one read's ACKs: a second
    /// read sends them). True if they wait.
    pub fn flush_after_read(&mut self, now: Nanos) -> bool {
        self.queue_due(now);
        let hold =
            self.held_at.is_none() && !self.runs.is_empty() && self.runs.iter().all(|r| r.ack);
        if hold {
            self.held_at = Some(now);
        } else {
            self.send_all();
        }
        self.release(false);
        hold
    }

    /// ACKs waiting for a reply leave now (the application is about to wait).
    pub fn send_held(&mut self) {
        if self.held_at.is_some() {
            self.sends.held_at_wait += 1;
            self.send_all();
        }
    }

    /// Due timers fired, and what both flows have to send queued.
    fn queue_due(&mut self, now: Nanos) {
        // A due time that a timeout does not move (a credit due: poll_transmit sends it)
        // ends the loop: calling again would change nothing.
        if let Some(rx) = self.rx.as_mut() {
            let mut last = None;
            for _ in 0..256 {
                match rx.poll_timeout() {
                    Some(t) if t <= now && last != Some(t) => {
                        last = Some(t);
                        rx.handle_timeout(now);
                    }
                    _ => break,
                }
            }
        }
        let mut last = None;
        for _ in 0..256 {
            match self.tx.poll_timeout() {
                Some(t) if t <= now && last != Some(t) => {
                    last = Some(t);
                    self.tx.handle_timeout(now);
                }
                _ => break,
            }
        }
        while let Some(t) = self.rx.as_mut().and_then(|rx| rx.poll_transmit(now)) {
            self.send(&t);
        }
        while let Some(t) = self.tx.poll_transmit(now) {
            self.send(&t);
        }
    }

    /// Queue `t`: consecutive datagrams of one kind, TOS and size (the last may be
    /// shorter) make a run, one UDP GSO send, as the agent's socket; the runs queued leave
    /// together in one system call (`send_all`).
    fn send(&mut self, t: &flexpass_core::Transmit) {
        let tos = (self.dscp.dscp(t.class) << 2) | t.ecn as u8;
        let kind = std::mem::discriminant(&t.packet);
        let len = t.packet.encoded_len();
        let end = self.wbuf.len();
        let joins = self.runs.last().is_some_and(|r| {
            r.kind == kind
                && r.tos == tos
                && !r.short
                && len <= r.segment
                && r.count < GSO_MAX_SEGMENTS
                && end - r.start + len <= GSO_MAX_BYTES
        });
        if !joins && (self.runs.len() == sys::MAX_RUNS || end + len > WBUF_MAX) {
            self.send_all(); // what was queued before this datagram
        }
        let start = self.wbuf.len();
        t.packet.encode(&mut self.wbuf);
        debug_assert_eq!(self.wbuf.len() - start, len);
        match self.runs.last_mut() {
            Some(r) if joins => {
                r.count += 1;
                r.short = len < r.segment;
            }
            _ => self.runs.push(Run {
                start,
                kind,
                ack: matches!(t.packet, Packet::Ack(_)),
                tos,
                segment: len,
                count: 1,
                short: false,
            }),
        }
    }

    /// Write the queued runs: each one GSO send of its datagrams (or, one datagram, or GSO
    /// refused by the kernel: then never again in this process, each on its own), all in
    /// one system call.
    fn send_all(&mut self) {
        self.held_at = None;
        let n = self.runs.len();
        if n == 0 {
            return;
        }
        let gso = GSO.load(Ordering::Relaxed);
        let mut runs = [(&[][..], 0u8, 0u16); sys::MAX_RUNS];
        let mut sent = [0isize; sys::MAX_RUNS];
        let (mut acks, mut datagrams) = (0, 0u64);
        for (i, r) in self.runs.iter().enumerate() {
            let end = self.runs.get(i + 1).map_or(self.wbuf.len(), |x| x.start);
            // Every encoded packet has a header: segment > 0.
            runs[i] = (
                &self.wbuf[r.start..end],
                r.tos,
                if r.count > 1 { r.segment as u16 } else { 0 },
            );
            acks += r.ack as usize;
            datagrams += r.count as u64;
        }
        self.sends.calls += 1;
        self.sends.datagrams += datagrams;
        if acks > 0 && acks < n {
            self.sends.acks_with_data += 1;
        }
        if gso && n == 1 {
            sent[0] = sys::send_run(self.own, runs[0].0, self.peer, runs[0].1, runs[0].2);
        } else if gso {
            sys::send_runs(self.own, &runs[..n], self.peer, &mut sent);
        }
        for (i, &(data, tos, segment)) in runs[..n].iter().enumerate() {
            let refused = segment > 0
                && sent[i] < 0
                && matches!(
                    -sent[i] as c_int,
                    libc::EIO | libc::EINVAL | libc::EOPNOTSUPP
                );
            if refused {
                GSO.store(false, Ordering::Relaxed); // never again in this process
            }
            if !gso && segment == 0 {
                sys::send_dgram(self.own, data, self.peer, tos);
            } else if refused || !gso {
                // Each datagram on its own. (Else sent, or dropped as a datagram would be:
                // a full buffer.)
                for d in data.chunks(segment as usize) {
                    sys::send_dgram(self.own, d, self.peer, tos);
                }
            }
        }
        self.runs.clear();
        self.wbuf.clear();
    }

    /// The timer thread watches `ctl`: the reply flow's bytes wait for credits (the program
    /// may be elsewhere), or the program closed the connection.
    pub fn wants_watch(&self) -> bool {
        self.tx.pending_bytes() > 0 || self.app_closed.is_some()
    }

    /// The earliest timer of either flow, or the end of an ACK's hold.
    pub fn deadline(&mut self) -> Option<Nanos> {
        [
            self.rx.as_ref().and_then(|r| r.poll_timeout()),
            self.tx.poll_timeout(),
            self.held_at.map(|h| h + ACK_HOLD_MAX),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn ready_len(&self) -> usize {
        self.ready.iter().map(|b| b.len()).sum()
    }

    /// Copy ready bytes into `out`; `peek` leaves them.
    pub fn take(&mut self, out: &mut [u8], peek: bool) -> usize {
        let mut n = 0;
        let mut i = 0;
        while n < out.len() {
            let Some(b) = self.ready.get_mut(i) else {
                break;
            };
            let k = b.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&b[..k]);
            n += k;
            if peek {
                i += 1;
                continue;
            }
            self.bytes_read += k as u64;
            if k == b.len() {
                self.ready.pop_front();
            } else {
                *b = b.slice(k..);
            }
        }
        n
    }

    /// Drop what the application will never read (it closed its descriptor).
    pub fn discard_ready(&mut self) {
        self.unread |= !self.ready.is_empty();
        self.ready.clear();
    }

    /// The peer closed its direction and the application read everything.
    pub fn at_eof(&self) -> bool {
        self.ready.is_empty() && self.rx.as_ref().is_some_and(|r| r.is_finished())
    }

    pub fn was_reset(&self) -> bool {
        self.rx.as_ref().is_some_and(|r| r.was_reset())
            || self.tx.error().is_some()
            || self.gone == Some(Gone::Crashed)
    }

    /// A poll or select for writing sees the application's socket writable: room in the
    /// send buffer (WRITE_LOW_WATER), or an end to report (a write then fails at once).
    pub fn writable(&self) -> bool {
        SEND_LIMIT.saturating_sub(self.tx.unacked_bytes()) >= WRITE_LOW_WATER
            || self.wr_shut
            || self.was_reset()
    }

    /// Opening side, during the handshake (open.rs; the timer thread does not have the
    /// connection yet): both error queues emptied. True if the HELLO's destination port is
    /// closed (no agent on that host: fallback at once, as the agent's probe), or, once
    /// the HELLO_ACK moved the connection, the peer is gone.
    pub fn hello_refused(&mut self) -> bool {
        match self.hello_to {
            Some(to) => sys::peer_refused(self.own, to) | sys::peer_refused(self.ctl, to),
            None => {
                self.peer_errors();
                self.gone.is_some()
            }
        }
    }

    /// A socket reported an error (timer.rs: POLLERR): both error queues are emptied, and
    /// a port unreachable from the peer ends the connection as `gone_verdict` says.
    pub fn peer_errors(&mut self) {
        // Both, always: each socket's queue keeps it reporting POLLERR until read.
        let refused =
            sys::peer_refused(self.own, self.peer) | sys::peer_refused(self.ctl, self.peer);
        if !refused || self.gone.is_some() {
            return;
        }
        let peer_fin = self
            .rx
            .as_ref()
            .is_some_and(|r| r.is_complete() || r.was_reset());
        self.gone = gone_verdict(self.hello_to.is_some(), peer_fin, self.wr_shut);
        crate::debug!(
            "{}: port unreachable from the peer {} ({:?}): {} byte(s) {}unacknowledged",
            self.app_remote,
            self.peer,
            self.gone,
            self.tx.unacked_bytes(),
            if self.tx.is_complete() {
                ""
            } else {
                "and the FIN "
            },
        );
    }

    /// Before returning to the application: bytes held while the socket is empty, or the
    /// end of the peer's flow (FIN or RESET), ring the doorbell, so that a poller sees
    /// them (the end stays readable, as on a TCP socket).
    pub fn ring_if_held(&mut self) {
        let held = !self.ready.is_empty() || self.at_eof() || self.was_reset();
        // Not by the flag alone: a doorbell is dropped like any datagram when the socket's
        // buffer is full (then the socket is readable anyway).
        if held && !sys::readable(self.own) {
            self.doorbell = sys::send_dgram(self.own, &[], self.local, 0);
        }
    }

    /// Before returning to the application after a read: a doorbell still in the socket
    /// when nothing is held any more would make the fd readable with nothing to read (a
    /// blocking read after poll would then wait): it is consumed (with whatever came
    /// since); then the doorbell rings again if something is held.
    pub fn settle(&mut self, now: Nanos) {
        if self.doorbell && self.ready.is_empty() {
            self.drain(now);
        }
        self.ring_if_held();
    }

    /// Both flows are over (the application closed, FIN acknowledged, the peer's flow
    /// ended), or the connection was reset or its peer is gone, or the peer kept its side open 10 s after close.
    pub fn done(&mut self, now: Nanos) -> bool {
        let Some(closed) = self.app_closed else {
            return false;
        };
        let tx_done = self.tx.is_complete() || self.tx.error().is_some();
        let rx_done = self
            .rx
            .as_ref()
            .is_none_or(|r| r.is_complete() || r.was_reset());
        (tx_done && rx_done) || self.gone.is_some() || now.saturating_sub(closed) > 10_000_000_000
    }

    /// The application is done writing (shutdown(SHUT_WR) or close): FIN after the data.
    pub fn finish(&mut self) {
        if !self.wr_shut {
            self.wr_shut = true;
            self.tx.finish();
        }
    }

    /// Bytes a write may put into the send buffer now.
    pub fn room(&self) -> usize {
        SEND_LIMIT.saturating_sub(self.tx.unacked_bytes()) as usize
    }

    pub fn write(&mut self, data: &[u8]) -> usize {
        let n = self.room().min(data.len());
        if n > 0 {
            self.tx.write(Bytes::copy_from_slice(&data[..n]));
            self.bytes_written += n as u64;
        }
        n
    }
}

/// What a port unreachable from the flow's peer means: its socket is closed, the peer's
/// process ended or dropped the connection (docs/datapath.md, "The peer is gone").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// The peer's flow had ended (its FIN came) and ours is closing (our FIN queued): the
    /// peer read what it wanted and left (an ACK of ours was lost). The connection ends
    /// without error, as TCP on a RST in LAST_ACK; the rest is not waited for.
    Left,
    /// Before that: the peer crashed. Readers and writers get ECONNRESET, as after a RST.
    Crashed,
}

/// `handshake`: the opening side's HELLO_ACK is still awaited (the HELLO went to the
/// peer's agent port; the answer may come from another port, `Conn::moved_by`): nothing
/// decided here (open.rs reads the errors then: `Conn::hello_refused`). `peer_fin`: the peer's flow ended. `closing`: the
/// application closed or shut down its writing side.
pub fn gone_verdict(handshake: bool, peer_fin: bool, closing: bool) -> Option<Gone> {
    if handshake {
        None
    } else if peer_fin && closing {
        Some(Gone::Left)
    } else {
        Some(Gone::Crashed)
    }
}

#[cfg(test)]
mod tests {
    use super::{gone_verdict, Gone};

    #[test]
    fn a_refused_peer_left_only_once_both_directions_ended() {
        assert_eq!(gone_verdict(false, true, true), Some(Gone::Left));
        // The peer's FIN not come, or ours not queued: a crash (ECONNRESET).
        assert_eq!(gone_verdict(false, false, true), Some(Gone::Crashed));
        assert_eq!(gone_verdict(false, true, false), Some(Gone::Crashed));
        assert_eq!(gone_verdict(false, false, false), Some(Gone::Crashed));
        // The HELLO_ACK awaited: nothing decided here.
        for (fin, closing) in [(false, false), (true, true), (false, true)] {
            assert_eq!(gone_verdict(true, fin, closing), None);
        }
    }
}

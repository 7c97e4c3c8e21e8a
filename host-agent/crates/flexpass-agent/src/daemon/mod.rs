//! The agent daemon: one process per host serving every flow of the host's applications
//! through a local Unix-socket API, so programs send and receive bytes over FlexPass,
//! ExpressPass, DCTCP, PPT or FlashPass without knowing the wire format
//! (docs/agent-api.md; the requests and replies are crate::api).
//!
//! Each API connection carries one flow (`connect`, `accept`), one TCP connection of an
//! unmodified application (`tcp_connect`: the API connection becomes the connection), or
//! one request and its reply (`tcp_listen`, `tcp_peer`, `status`). Errors are one reply
//! line `{"ok":false,"error":"…"}` followed by close.
//!
//! Here: the event loop, the API clients and their flows. Elsewhere: TCP connections
//! (`conns`), who may connect (`access`), the slot tables (`slab`).

mod access;
mod conns;
mod inproc;
mod slab;

pub use self::access::ApiAccess;
pub use crate::api::MAX_REQUEST_LINE;

use self::access::Refusals;
use self::conns::TcpState;
use self::slab::Slab;
use crate::api::{
    Accepted, ApiStatus, Connected, DatapathStatus, FlowCounts, FlowSent, Memory, Reply, Request,
    Status, Tables, TcpStatus,
};
use crate::poller::{self, Poller};
use crate::{Dir, Endpoint, FlowKey};
use bytes::Bytes;
use flexpass_wire::ConnRole;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Unacknowledged bytes a sending client may have queued in its flow.
const SEND_WINDOW: u64 = 8 << 20;
/// Received bytes held for a client that reads slower than the network delivers (default
/// of `Daemon::set_max_pending`).
const MAX_PENDING_OUT: usize = 64 << 20;

/// A client must send its request line within this long after connecting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// While accept(2) fails (EMFILE, ENFILE, ENOBUFS…) the listener is left alone this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

enum Role {
    /// Waiting for the request line (since when).
    Handshake(Vec<u8>, Instant),
    Sending {
        key: FlowKey,
        started: Instant,
        eof: bool,
    },
    Accepting,
    Receiving {
        key: FlowKey,
        out: VecDeque<Bytes>,
        out_bytes: usize,
    },
    /// Answer (or error) queued; close once written.
    Closing,
    /// The API connection became a TCP connection's local socket (`tcp_connect`).
    Moved,
    /// An in-process listener's registration (`tcp_listen` with `inproc`, module inproc).
    Registered(Box<inproc::Registration>),
}

struct Client {
    stream: UnixStream,
    role: Role,
    reply: Vec<u8>,
    /// epoll events its socket is registered for (0: not registered).
    interest: u32,
}

impl Client {
    /// Send `reply`, then close.
    fn close_with(&mut self, reply: Reply) {
        self.reply = reply.to_line();
        self.role = Role::Closing;
    }
}

/// Who serves a flow: the API client or the TCP connection in that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Client(usize),
    Conn(usize),
}

/// epoll tokens: the kind in the high 32 bits, the slot in the low ones.
const TOKEN_LISTENER: u64 = 0;
const KIND_CLIENT: u64 = 1 << 32;
const KIND_CONN: u64 = 2 << 32;
const KIND_PROBE: u64 = 3 << 32;
/// Longest wait of a loop turn while something is due by the clock (request lines,
/// connections opening, a paused listener), and while nothing is: an idle agent wakes 50
/// times a second, not 5 000 (which cost a tenth of a core).
const BUSY_TURN: Duration = Duration::from_micros(200);
const IDLE_TURN: Duration = Duration::from_millis(20);
/// Housekeeping of the TCP tables (expired peers, fallback caches) runs this often.
const CLEANUP_EVERY: Duration = Duration::from_secs(1);

pub struct Daemon {
    ep: Endpoint,
    listener: UnixListener,
    clients: Slab<Client>,
    /// The sockets of the listener, the clients and the connections; its fd is the only
    /// local one in the endpoint's wait (docs/agent-api.md, "Scale").
    poller: Poller,
    listener_registered: bool,
    /// Which client or connection serves each flow (entries go once the flow is closed).
    owners: HashMap<(Dir, FlowKey), Owner>,
    /// Clients waiting with `accept`, oldest first (entries of others are skipped).
    accepting: VecDeque<usize>,
    /// When each client's request line is due (creation order).
    handshakes: VecDeque<(Instant, usize)>,
    /// Scratch lists of one turn.
    events: Vec<(u64, u32)>,
    changed: Vec<(Dir, FlowKey)>,
    ready_clients: Vec<usize>,
    ready_conns: Vec<usize>,
    /// Connections still opening or connecting: serviced every turn (their timeouts).
    timed_conns: Vec<usize>,
    last_cleanup: Instant,
    /// Accepted network flows no client has claimed yet.
    unclaimed: VecDeque<FlowKey>,
    tcp: TcpState,
    /// Read buffer for the connections' local sockets (allocated once).
    buf: Vec<u8>,
    socket: PathBuf,
    access: ApiAccess,
    euid: u32,
    refusals: Refusals,
    /// Malformed or incomplete requests answered with an error.
    bad_requests: u64,
    /// accept(2) failures, and until when the listener is left alone after one.
    accept_errors: u64,
    accept_paused_until: Option<Instant>,
    /// `--inproc-listen`: `tcp_listen` may ask for in-process hand-over.
    inproc_listen: bool,
    /// Port → the client slot of its in-process registration.
    registrations: HashMap<u16, usize>,
    /// Taken connections reset because their process's registration ended.
    inproc_resets: u64,
    /// Received bytes queued for a receiving API client (MAX_PENDING_OUT).
    max_pending_out: usize,
}

impl Daemon {
    /// Serve the API on `socket` (removed first if it is a stale socket file), mode 0600:
    /// root and this process's user only (see `set_access`).
    pub fn new(ep: Endpoint, socket: &Path) -> io::Result<Self> {
        if socket.exists() {
            std::fs::remove_file(socket)?;
        }
        let listener = UnixListener::bind(socket)?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let peer_port = ep.local_addr()?.port();
        let mut ep = ep;
        ep.track_changes(true);
        // Received bytes reach the applications before the ACKs go out (see `turn`).
        ep.set_deliver_first(true);
        let poller = Poller::new()?;
        poller.update(listener.as_raw_fd(), 0, poller::IN, TOKEN_LISTENER)?;
        ep.set_wake_fds(&[(poller.raw_fd(), nix::libc::POLLIN)]);
        Ok(Daemon {
            ep,
            listener,
            clients: Slab::new(),
            poller,
            listener_registered: true,
            owners: HashMap::new(),
            accepting: VecDeque::new(),
            handshakes: VecDeque::new(),
            events: Vec::new(),
            changed: Vec::new(),
            ready_clients: Vec::new(),
            ready_conns: Vec::new(),
            timed_conns: Vec::new(),
            last_cleanup: Instant::now(),
            unclaimed: VecDeque::new(),
            tcp: TcpState::new(peer_port),
            buf: vec![0u8; 256 << 10],
            socket: socket.to_path_buf(),
            access: ApiAccess::default(),
            // SAFETY: geteuid(2) cannot fail and touches no memory.
            euid: unsafe { nix::libc::geteuid() },
            refusals: Refusals::default(),
            bad_requests: 0,
            accept_errors: 0,
            accept_paused_until: None,
            inproc_listen: false,
            registrations: HashMap::new(),
            inproc_resets: 0,
            max_pending_out: MAX_PENDING_OUT,
        })
    }

    /// UDP port of the peers' agents for TCP connections (default: this agent's port).
    pub fn set_peer_port(&mut self, port: u16) {
        self.tcp.peer_port = port;
    }

    /// Received bytes queued for one application's socket beyond what the socket holds: a
    /// TCP connection's (default tcp::CONN_MAX_PENDING, 16 MiB) and an API client's
    /// (default 64 MiB).
    pub fn set_max_pending(&mut self, bytes: usize) {
        self.tcp.max_pending = bytes.max(1);
        self.max_pending_out = bytes.max(1);
    }

    /// How long a connection's HELLO may go unanswered before the peer is taken not to
    /// speak FlexPass and the application connects with kernel TCP (default 300 ms).
    pub fn set_conn_fallback(&mut self, d: Duration) {
        self.tcp.fallback = d;
    }

    /// Let `tcp_listen` hand the port's connections to the listening process (`inproc`;
    /// off by default: only peers that know the move rule of docs/protocol.md §11 can
    /// follow a HELLO_ACK from the process's own port).
    pub fn set_inproc_listen(&mut self, on: bool) {
        self.inproc_listen = on;
    }

    /// Taken in-process connections reset because their process went away.
    pub fn inproc_resets(&self) -> u64 {
        self.inproc_resets
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Run until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            let wait = if self.waits_only_for_events() {
                IDLE_TURN
            } else {
                BUSY_TURN
            };
            self.turn(wait)?;
        }
        Ok(())
    }

    /// Nothing is due by the clock but the endpoint's own timers (which bound its wait):
    /// no request line awaited, no connection opening, the listener not paused. Every
    /// other event wakes the loop through a socket.
    fn waits_only_for_events(&self) -> bool {
        self.handshakes.is_empty()
            && self.timed_conns.is_empty()
            && self.accept_paused_until.is_none()
    }

    /// Accept the API connections waiting (unless accepting is paused after an error).
    fn accept_clients(&mut self) {
        if self.accept_paused_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(why) = self.check_peer(&stream) {
                        self.refuse(stream, why);
                        continue;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let now = Instant::now();
                    let i = self.clients.insert(Client {
                        stream,
                        role: Role::Handshake(vec![], now),
                        reply: vec![],
                        interest: 0,
                    });
                    // Serviced this turn (its request may be there already), then when its
                    // socket is ready, or when its request line is overdue.
                    self.ready_clients.push(i);
                    self.handshakes
                        .push_back((now + REQUEST_TIMEOUT + Duration::from_millis(1), i));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors or buffers: a problem of this host, not a reason
                    // to stop serving the flows; leave the listener alone for a while.
                    self.accept_errors += 1;
                    if self.accept_errors.is_power_of_two() {
                        log::warn!(
                            "flexpass agent: accepting an API connection failed: {e} \
                             ({} times so far)",
                            self.accept_errors
                        );
                    }
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    break;
                }
            }
        }
    }

    /// One turn: accept API connections, move bytes between clients and flows, run the
    /// network for at most `wait`. Only what is ready is looked at (docs/agent-api.md,
    /// "Scale"): sockets epoll reports, the owners of flows the network touched or closed,
    /// clients whose request line is overdue, connections still opening; never every
    /// client or connection.
    pub fn turn(&mut self, wait: Duration) -> io::Result<()> {
        let now = Instant::now();
        let mut accept_ready = false;
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        // Nothing local was ready when the last wait ended: no epoll_wait(2) this turn.
        if self.ep.local_maybe_ready() {
            self.poller.ready(&mut events)?;
        }
        for &(token, ev) in &events {
            let i = (token & 0xffff_ffff) as usize;
            match token & !0xffff_ffff {
                KIND_CLIENT => self.ready_clients.push(i),
                KIND_CONN => {
                    // Readable, at end of file or failed: the next read says which.
                    if ev & (poller::IN | poller::ERR_HUP) != 0 {
                        if let Some(c) = self.tcp.conns.get_mut(i) {
                            c.conn.local_readable = true;
                        }
                    }
                    self.ready_conns.push(i)
                }
                KIND_PROBE => self.ready_conns.push(i),
                _ => accept_ready = true,
            }
        }
        self.events = events;
        // The listener stays out of the wait while accepting is paused after an error.
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
        }
        let register = self.accept_paused_until.is_none();
        if register != self.listener_registered {
            let (old, new) = if register {
                (0, poller::IN)
            } else {
                (poller::IN, 0)
            };
            self.poller
                .update(self.listener.as_raw_fd(), old, new, TOKEN_LISTENER)?;
            self.listener_registered = register;
            accept_ready |= register;
        }
        if accept_ready {
            self.accept_clients();
            if self.accept_paused_until.is_some() {
                self.poller
                    .update(self.listener.as_raw_fd(), poller::IN, 0, TOKEN_LISTENER)?;
                self.listener_registered = false;
            }
        }
        // Owners of the flows the network touched or closed.
        let mut changed = std::mem::take(&mut self.changed);
        self.ep.take_changed(&mut changed);
        for &(dir, key) in &changed {
            let Some(&owner) = self.owners.get(&(dir, key)) else {
                continue;
            };
            match owner {
                Owner::Client(i) => self.ready_clients.push(i),
                Owner::Conn(i) => self.ready_conns.push(i),
            }
            let gone = match dir {
                Dir::Send => self.ep.sender(key).is_none(),
                Dir::Recv => self.ep.receiver(key).is_none(),
            };
            if gone {
                self.owners.remove(&(dir, key));
            }
        }
        self.changed = changed;
        while let Some(k) = self.ep.accept() {
            match self.ep.hello_conn(k) {
                None => self.unclaimed.push_back(k),
                Some(c) if c.role == ConnRole::Open => self.serve_conn(k, c),
                Some(c) => self.reply_flow(k, c),
            }
        }
        while self.handshakes.front().is_some_and(|&(at, _)| at <= now) {
            let (_, i) = self.handshakes.pop_front().expect("checked");
            self.ready_clients.push(i);
        }
        self.pass_handed();
        self.hand_out_flows();
        self.service_clients()?;
        // Clients that asked to `accept` this turn may take a waiting flow at once.
        if !self.unclaimed.is_empty() && !self.accepting.is_empty() {
            self.hand_out_flows();
            self.service_clients()?;
        }
        self.service_conns(now)?;
        if now.duration_since(self.last_cleanup) >= CLEANUP_EVERY {
            self.last_cleanup = now;
            self.tcp.expire(now);
        }
        // Sleep until the network or one of the local sockets (the epoll fd) needs us. What
        // the last `poll` received was handed to the applications above, before the ACKs
        // and credits it caused are sent here (`Endpoint::set_deliver_first`).
        self.ep.poll(wait)
    }

    /// Service the clients in `ready_clients` (each once); drop those that are done.
    fn service_clients(&mut self) -> io::Result<()> {
        let mut ready = std::mem::take(&mut self.ready_clients);
        ready.sort_unstable();
        ready.dedup();
        for &i in &ready {
            if self.clients.get(i).is_none() {
                continue;
            }
            // A client whose socket became a connection's is done at once.
            if self.service(i) && !matches!(self.clients.at(i).role, Role::Moved) {
                self.watch_client(i)?;
            } else {
                let c = self.clients.remove(i).expect("live");
                // Explicitly: a connection may hold a duplicate of this socket.
                self.poller
                    .watch(c.stream.as_raw_fd(), c.interest, 0, KIND_CLIENT | i as u64);
                self.release(i, c);
            }
        }
        ready.clear();
        if self.ready_clients.is_empty() {
            self.ready_clients = ready;
        }
        Ok(())
    }

    /// Give unclaimed flows to the clients waiting in `accept`, oldest first.
    fn hand_out_flows(&mut self) {
        while !self.unclaimed.is_empty() {
            let Some(i) = self.accepting.pop_front() else {
                return;
            };
            let Some(c) = self.clients.get_mut(i) else {
                continue;
            };
            if !matches!(c.role, Role::Accepting) {
                continue;
            }
            let key = self.unclaimed.pop_front().expect("checked");
            c.reply = Reply::Accepted(Accepted {
                flow_id: key.1,
                peer: key.0,
                transport: self.ep.receiver(key).map(|r| r.transport()),
            })
            .to_line();
            c.role = Role::Receiving {
                key,
                out: VecDeque::new(),
                out_bytes: 0,
            };
            self.owners.insert((Dir::Recv, key), Owner::Client(i));
            self.ready_clients.push(i);
        }
    }

    /// Register the events client `i` waits for (as a poll(2) wait list would).
    fn watch_client(&mut self, i: usize) -> io::Result<()> {
        let c = self.clients.get(i).expect("live");
        let mut ev = if c.reply.is_empty() { 0 } else { poller::OUT };
        match &c.role {
            Role::Handshake(..) | Role::Accepting | Role::Registered(_) => ev |= poller::IN,
            Role::Sending { key, eof, .. }
                if !*eof
                    && self
                        .ep
                        .sender(*key)
                        .is_some_and(|s| s.unacked_bytes() < SEND_WINDOW) =>
            {
                ev |= poller::IN
            }
            Role::Receiving { out, .. } if !out.is_empty() => ev |= poller::OUT,
            _ => {}
        }
        let fd = c.stream.as_raw_fd();
        let old = c.interest;
        self.clients.at(i).interest = self.poller.watch(fd, old, ev, KIND_CLIENT | i as u64);
        Ok(())
    }

    /// The `status` reply (docs/agent-api.md, "Counters and records").
    fn status(&self) -> Status {
        let t = &self.tcp;
        let (senders, receivers) = self.ep.flows();
        let conns: Vec<_> = t
            .conns
            .iter()
            .map(|c| &c.conn)
            .filter(|c| c.opening.is_none() && !c.close_after_line)
            .map(|c| c.record(&self.ep, "open"))
            .collect();
        let mut listening: Vec<u16> = t.listens.keys().copied().collect();
        listening.sort_unstable();
        let mut inproc_listening: Vec<u16> = self.registrations.keys().copied().collect();
        inproc_listening.sort_unstable();
        let mut no_agent_peers: Vec<_> = t.no_agent.keys().copied().collect();
        no_agent_peers.sort_unstable();
        Status {
            flows: FlowCounts { senders, receivers },
            tcp: TcpStatus {
                open: conns.len(),
                opened_flexpass: t.opened_flexpass,
                accepted_flexpass: t.accepted_flexpass,
                direct: t.direct,
                refused: t.refused,
                aborted: t.aborted,
                listening,
                inproc_listening,
                no_agent_peers,
                conns,
                closed: t.records.iter().cloned().collect(),
            },
            endpoint: self.ep.stats.clone(),
            datapath: DatapathStatus {
                kind: self.ep.stats.datapath,
                xdp: self.ep.xdp_info().cloned(),
            },
            credit_limit: self.ep.credit_limit(),
            api: ApiStatus {
                clients: self.clients.len(),
                refused: self.refusals.count,
                bad_requests: self.bad_requests,
                accept_errors: self.accept_errors,
            },
            memory: memory_report(),
            tables: Tables {
                endpoint: self.ep.table_sizes(),
                unclaimed: self.unclaimed.len(),
                conns: t.conns.len(),
                records: t.records.len(),
                owners: self.owners.len(),
                accepting: self.accepting.len(),
                handshakes: self.handshakes.len(),
                peers: t.peers.len(),
                no_agent: t.no_agent.len(),
            },
        }
    }

    /// Forget the network side of a client that went away.
    fn release(&mut self, i: usize, c: Client) {
        match c.role {
            Role::Registered(reg) => self.end_registration(i, *reg),
            Role::Sending { key, .. } => {
                self.ep.close_sender(key);
            }
            Role::Receiving { key, .. } => {
                self.ep.retire_receiver(key);
            }
            _ => {}
        }
    }

    /// Returns false when the client is done and must be dropped.
    fn service(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 64 << 10];
        let c = self.clients.at(i);
        // Flush what we owe the client first.
        while !c.reply.is_empty() {
            match c.stream.write(&c.reply) {
                Ok(0) => return false,
                Ok(n) => {
                    c.reply.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        if matches!(c.role, Role::Registered(_)) {
            return self.service_registration(i);
        }
        match &mut c.role {
            Role::Closing | Role::Moved => false,
            Role::Registered(_) => unreachable!("served above"),
            Role::Handshake(line, since) => {
                match c.stream.read(&mut buf) {
                    // Half-closed before the end of the line: say so (the client can still
                    // read), unless it sent nothing at all.
                    Ok(0) if line.is_empty() => return false,
                    Ok(0) => {
                        self.bad_requests += 1;
                        c.close_with(Reply::error(
                            "incomplete request: the connection was shut down before the \
                             request line's \\n",
                        ));
                        return true;
                    }
                    Ok(n) => line.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if since.elapsed() > REQUEST_TIMEOUT {
                            self.bad_requests += 1;
                            c.close_with(Reply::error(format!(
                                "no request line within {} s",
                                REQUEST_TIMEOUT.as_secs()
                            )));
                        }
                        return true;
                    }
                    Err(_) => return false,
                }
                let pos = line.iter().position(|&b| b == b'\n');
                if pos.unwrap_or(line.len()) > MAX_REQUEST_LINE {
                    self.bad_requests += 1;
                    c.close_with(Reply::error(format!(
                        "request line too long (more than {MAX_REQUEST_LINE} bytes)"
                    )));
                    return true;
                }
                let Some(pos) = pos else { return true };
                let rest = line.split_off(pos + 1);
                let req = std::mem::take(line);
                self.request(i, &req, rest);
                true
            }
            // Flows are handed out by `hand_out_flows`; a client that hangs up while
            // waiting is simply dropped.
            Role::Accepting => !matches!(c.stream.read(&mut buf), Ok(0)),
            Role::Sending { key, started, eof } => {
                let key = *key;
                let Some(s) = self.ep.sender_mut(key) else {
                    return false;
                };
                while !*eof && s.unacked_bytes() < SEND_WINDOW {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            *eof = true;
                            s.finish();
                        }
                        Ok(n) => {
                            s.write(Bytes::copy_from_slice(&buf[..n]));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => return false,
                    }
                }
                if let Some(e) = s.error() {
                    c.close_with(Reply::error(e));
                } else if s.is_complete() {
                    let st = s.stats();
                    let fct_us = started.elapsed().as_secs_f64() * 1e6;
                    c.close_with(Reply::FlowSent(FlowSent {
                        flow_id: key.1,
                        bytes: st.bytes_acked,
                        fct_us,
                        retransmissions: st.retransmissions,
                        timeouts: st.timeouts,
                        credits_received: st.credits_received,
                        credits_wasted: st.credits_wasted,
                    }));
                    self.ep.close_sender(key);
                }
                true
            }
            Role::Receiving {
                key,
                out,
                out_bytes,
            } => {
                let key = *key;
                // Until the client's socket is full or the flow drained (a turn that wrote all
                // it pulled at the cap pulls again: no packet may come to start another).
                loop {
                    let Some(r) = self.ep.receiver_mut(key) else {
                        return false;
                    };
                    let mut capped = true;
                    while *out_bytes < self.max_pending_out {
                        match r.read() {
                            Some(b) => {
                                *out_bytes += b.len();
                                out.push_back(b);
                            }
                            None => {
                                capped = false;
                                break;
                            }
                        }
                    }
                    let finished = r.is_finished();
                    while let Some(front) = out.front_mut() {
                        match c.stream.write(front) {
                            Ok(0) => return false,
                            Ok(n) if n == front.len() => {
                                *out_bytes -= n;
                                out.pop_front();
                            }
                            Ok(n) => {
                                *out_bytes -= n;
                                let _ = front.split_to(n);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                            Err(_) => return false,
                        }
                    }
                    if !capped {
                        // Everything up to the FIN delivered and written: close (EOF for the
                        // client).
                        return !finished;
                    }
                }
            }
        }
    }

    /// Serve client `i`'s request line (`rest`: bytes that came after it).
    fn request(&mut self, i: usize, line: &[u8], rest: Vec<u8>) {
        let req = match Request::parse(line) {
            Ok(r) => r,
            Err(e) => return self.answer(i, Reply::Error(e.0)),
        };
        match req {
            Request::Accept => {
                self.clients.at(i).role = Role::Accepting;
                self.accepting.push_back(i);
            }
            Request::Connect {
                peer,
                transport,
                size,
            } => match self.ep.open(peer, transport, size) {
                Ok(key) => {
                    if !rest.is_empty() {
                        self.ep.write(key, Bytes::from(rest));
                    }
                    self.owners.insert((Dir::Send, key), Owner::Client(i));
                    let c = self.clients.at(i);
                    c.reply = Reply::Connected(Connected { flow_id: key.1 }).to_line();
                    c.role = Role::Sending {
                        key,
                        started: Instant::now(),
                        eof: false,
                    };
                }
                Err(e) => self.answer(i, Reply::error(e)),
            },
            Request::TcpConnect {
                dst,
                src,
                transport,
            } => self.tcp_connect(i, dst, src, transport, rest),
            Request::TcpListen {
                port,
                addr: _,
                inproc: true,
            } => self.inproc_register(i, port, rest),
            Request::TcpListen { port, addr, .. } => {
                let r = self.tcp_listen(port, addr);
                if matches!(r, Reply::Listening(_)) {
                    self.inproc_unregister_port(port);
                }
                self.answer(i, r);
            }
            Request::TcpTaken { .. } | Request::TcpRefused { .. } | Request::TcpClosed { .. } => {
                let why = format!(
                    "{} answers a tcp_hello on an in-process registration (the API connection \
                     of a tcp_listen with \"inproc\"), not a request of its own",
                    req.op()
                );
                self.answer(i, Reply::error(why));
            }
            Request::TcpPeer { port } => {
                let r = self.tcp_peer(port);
                self.answer(i, r);
            }
            Request::Status => {
                let r = Reply::Status(Box::new(self.status()));
                self.answer(i, r);
            }
            Request::TcpRecord(r) => {
                self.keep_record(crate::api::ConnRecord {
                    side: r.side,
                    conn_id: 0,
                    remote: r.remote,
                    local: r.local,
                    transport: r.transport,
                    bytes_sent: r.bytes_sent,
                    bytes_received: r.bytes_received,
                    duration_s: r.duration_us as f64 / 1e6,
                    outcome: r.outcome,
                    in_process: true,
                    sender: None,
                });
                self.answer(i, Reply::Done);
            }
            Request::Settings => {
                let c = self.ep.config();
                let r = Reply::Settings(crate::api::Settings {
                    link_gbps: c.link_bps / 1e9,
                    rtt_us: c.base_rtt as f64 / 1e3,
                    w_q: c.w_q,
                    credit_batch: c.credit_batch,
                    mtu: c.mtu,
                    t_wait_us: c.t_wait as f64 / 1e3,
                    flashpass_unscheduled: c.flashpass_unscheduled,
                });
                self.answer(i, r);
            }
        }
    }

    /// Answer client `i`'s request and close once the reply is written; an error counts as
    /// a bad request.
    fn answer(&mut self, i: usize, reply: Reply) {
        if matches!(reply, Reply::Error(_)) {
            self.bad_requests += 1;
        }
        self.clients.at(i).close_with(reply);
    }
}

/// Every TCP connection an agent carries holds one file descriptor in it (the
/// application's AF_UNIX stream on the opening host, the loopback TCP connection on the
/// answering one), and every API client one more: the agent raises its soft RLIMIT_NOFILE
/// to the hard limit, as servers do. Returns the limit now in force.
pub fn raise_fd_limit() -> io::Result<u64> {
    use nix::libc::{getrlimit, rlimit, setrlimit, RLIMIT_NOFILE};
    let mut r = rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit(2) to fill.
    if unsafe { getrlimit(RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if r.rlim_cur < r.rlim_max {
        let raised = rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; setrlimit(2) only reads it.
        if unsafe { setrlimit(RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        r = raised;
    }
    Ok(r.rlim_cur)
}

/// The agent's memory as the kernel counts it (/proc/self/status): resident now and at
/// most so far, and the virtual size, in KiB.
pub fn memory_report() -> Memory {
    let st = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| -> Option<u64> {
        st.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    Memory {
        rss_kb: kb("VmRSS:"),
        rss_peak_kb: kb("VmHWM:"),
        virtual_kb: kb("VmSize:"),
    }
}

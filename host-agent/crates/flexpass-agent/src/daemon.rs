//! The agent daemon: one process per host serving every flow of the host's applications
//! through a local Unix-socket API, so programs send and receive bytes over FlexPass,
//! ExpressPass or DCTCP without knowing the wire format (docs/agent-api.md).
//!
//! Each API connection carries one flow:
//! - `{"op":"connect","peer":"10.0.0.2:7890","transport":"flexpass"}` → `{"ok":true,"flow_id":N}`;
//!   then the client writes the flow's bytes and shuts its write side down (FIN); the agent
//!   answers one JSON line with the flow record when everything is acknowledged, and closes.
//! - `{"op":"accept"}` → `{"ok":true,"flow_id":N,"peer":"…","transport":"…"}` once a flow
//!   arrives, then the flow's bytes; the agent closes the connection after the FIN.
//!
//! - TCP connections of unmodified applications (libflexpass.so, docs/agent-api.md):
//!   `tcp_connect` (the connection is the API connection itself), `tcp_listen`, `tcp_peer`;
//!   `status` reports counters and connection records.
//!
//! Errors are one JSON line `{"ok":false,"error":"…"}` followed by close.
//!
//! Access: the socket file is created with mode 0600 (0660 and the group with
//! `ApiAccess::allow_gids`, 0666 with `allow_uids`), and every connection's peer credentials
//! (SO_PEERCRED) are checked: root, the agent's own user and the allowed users / groups
//! only; anyone else gets one error line and is disconnected (logged).

use crate::poller::{self, Poller};
use crate::tcp::{
    connect_local, local_ip_towards, Conn, ConnectState, Connecting, Local, Side, Step,
};
use crate::{Dir, Endpoint, FlowKey};
use bytes::Bytes;
use flexpass_core::SenderError;
use flexpass_wire::{ConnRole, HelloConn, ResetReason, TransportKind};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Unacknowledged bytes a sending client may have queued in its flow.
const SEND_WINDOW: u64 = 8 << 20;
/// Received bytes held for a client that reads slower than the network delivers.
const MAX_PENDING_OUT: usize = 64 << 20;

const NOT_OK: &[u8] = b"\"ok\":false";
/// Longest request line (bytes, without its `\n`).
pub const MAX_REQUEST_LINE: usize = 4096;
/// A client must send its request line within this long after connecting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// While accept(2) fails (EMFILE, ENFILE, ENOBUFS…) the listener is left alone this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Who may use the API besides root and the agent's own user (docs/agent-api.md,
/// "Access").
#[derive(Clone, Debug, Default)]
pub struct ApiAccess {
    /// More users (the socket file becomes 0666: the peer-credential check is the gate).
    pub allow_uids: Vec<u32>,
    /// Groups whose members may connect (primary or supplementary group of the client
    /// process); the socket file becomes 0660 owned by the first one.
    pub allow_gids: Vec<u32>,
}

/// Connections refused by the access check (and the last log of them).
#[derive(Default)]
struct Refusals {
    count: u64,
    logged_at: Option<Instant>,
    unlogged: u64,
}

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
}

struct Client {
    stream: UnixStream,
    role: Role,
    reply: Vec<u8>,
    /// epoll events its socket is registered for (0: not registered).
    interest: u32,
}

/// A TCP connection and the epoll events its local socket is registered for.
struct ConnSlot {
    conn: Conn,
    interest: u32,
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

/// Slots with a free list: indices stay valid while their entry lives (epoll tokens, the
/// flow → owner map), and are reused afterwards.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
    live: usize,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
    fn insert(&mut self, v: T) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                self.items.len() - 1
            }
        }
    }
    fn remove(&mut self, i: usize) -> Option<T> {
        let v = self.items.get_mut(i)?.take()?;
        self.live -= 1;
        self.free.push(i);
        Some(v)
    }
    fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)?.as_ref()
    }
    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.items.get_mut(i)?.as_mut()
    }
    fn at(&mut self, i: usize) -> &mut T {
        self.items[i].as_mut().expect("live slot")
    }
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().flatten()
    }
    fn len(&self) -> usize {
        self.live
    }
}

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
}

/// How long a peer that did not answer a connection's HELLO is reached by kernel TCP
/// directly, without asking it again.
const NO_AGENT_TTL: Duration = Duration::from_secs(60);
/// How long a port a FlexPass peer does not serve is reached by kernel TCP directly.
const NO_SERVICE_TTL: Duration = Duration::from_secs(5);
/// How long the answering side remembers a closed connection's addresses (`tcp_peer`).
const PEER_LINGER: Duration = Duration::from_secs(60);
/// Opening side: HELLO_ACK came but no reply flow within this: kernel TCP instead.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Answering side: a registered listener that has not completed the loopback connect by
/// then is taken as gone.
const LOCAL_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Connection records kept for `status`.
const MAX_RECORDS: usize = 4096;

/// TCP connections of unmodified applications (see `crate::tcp`).
struct TcpState {
    conns: Slab<ConnSlot>,
    /// Opening side: connections waiting for the answering side's flow, by (peer agent's
    /// address, conn_id).
    awaiting_reply: HashMap<(IpAddr, u32), usize>,
    /// Ports served over FlexPass (registered by `tcp_listen`) → where the agent connects.
    listens: HashMap<u16, SocketAddr>,
    /// Answering side: agent's loopback source port → (remote, local) application-visible
    /// addresses, and when the connection ended.
    peers: HashMap<u16, (SocketAddr, SocketAddr, Option<Instant>)>,
    no_agent: HashMap<IpAddr, Instant>,
    /// Peers that answered a connection's HELLO: no first-contact probe needed.
    has_agent: HashSet<IpAddr>,
    no_service: HashMap<(IpAddr, u16), Instant>,
    /// Peers whose fallback was logged (once per peer).
    logged: HashSet<IpAddr>,
    records: VecDeque<serde_json::Value>,
    /// UDP port of the peers' agents.
    peer_port: u16,
    /// Opening side: no HELLO_ACK within this → the peer does not speak FlexPass.
    fallback: Duration,
    opened_flexpass: u64,
    accepted_flexpass: u64,
    direct: u64,
    refused: u64,
    aborted: u64,
}

fn json_line(v: serde_json::Value) -> Vec<u8> {
    let mut b = v.to_string().into_bytes();
    b.push(b'\n');
    b
}

fn err_line(msg: impl std::fmt::Display) -> Vec<u8> {
    json_line(serde_json::json!({"ok": false, "error": msg.to_string()}))
}

fn parse_transport(s: &str) -> Option<TransportKind> {
    TransportKind::from_name(s)
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
            tcp: TcpState {
                conns: Slab::new(),
                awaiting_reply: HashMap::new(),
                listens: HashMap::new(),
                peers: HashMap::new(),
                no_agent: HashMap::new(),
                has_agent: HashSet::new(),
                no_service: HashMap::new(),
                logged: HashSet::new(),
                records: VecDeque::new(),
                peer_port,
                fallback: Duration::from_millis(300),
                opened_flexpass: 0,
                accepted_flexpass: 0,
                direct: 0,
                refused: 0,
                aborted: 0,
            },
            buf: vec![0u8; 256 << 10],
            socket: socket.to_path_buf(),
            access: ApiAccess::default(),
            // SAFETY: geteuid(2) cannot fail and touches no memory.
            euid: unsafe { nix::libc::geteuid() },
            refusals: Refusals::default(),
            bad_requests: 0,
            accept_errors: 0,
            accept_paused_until: None,
        })
    }

    /// Let more users or groups use the API: the socket file becomes 0660 with the first
    /// group (`allow_gids`), or 0666 (`allow_uids`; the peer-credential check then does all
    /// the work). Root and the agent's own user are always allowed.
    pub fn set_access(&mut self, access: ApiAccess) -> io::Result<()> {
        let mode = if !access.allow_uids.is_empty() {
            0o666
        } else if let Some(&gid) = access.allow_gids.first() {
            std::os::unix::fs::chown(&self.socket, None, Some(gid))?;
            0o660
        } else {
            0o600
        };
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(mode))?;
        self.access = access;
        Ok(())
    }

    /// Whether the process at the other end of `stream` may use the API; `Err` names it.
    fn check_peer(&self, stream: &UnixStream) -> Result<(), String> {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let cred = getsockopt(stream, PeerCredentials)
            .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
        let (uid, gid, pid) = (cred.uid(), cred.gid(), cred.pid());
        if uid == 0 || uid == self.euid || self.access.allow_uids.contains(&uid) {
            return Ok(());
        }
        if !self.access.allow_gids.is_empty() {
            if self.access.allow_gids.contains(&gid) {
                return Ok(());
            }
            // Supplementary groups of the client process.
            if let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                let groups = st
                    .lines()
                    .find_map(|l| l.strip_prefix("Groups:"))
                    .unwrap_or("");
                if groups
                    .split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok())
                    .any(|g| self.access.allow_gids.contains(&g))
                {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "uid {uid} (gid {gid}, pid {pid}) is not allowed: the agent (uid {}) serves root, \
             its own user and --allow-uid / --allow-gid",
            self.euid
        ))
    }

    /// Refuse a client that failed the access check: one error line, then close.
    fn refuse(&mut self, mut stream: UnixStream, why: String) {
        self.refusals.count += 1;
        let now = Instant::now();
        // One log line per second at most: a local process cannot flood the log.
        if self
            .refusals
            .logged_at
            .is_none_or(|t| now - t >= Duration::from_secs(1))
        {
            let more = std::mem::take(&mut self.refusals.unlogged);
            log::warn!(
                "flexpass agent: API connection refused: {why}{}",
                if more > 0 {
                    format!(" ({more} more refused since the last message)")
                } else {
                    String::new()
                }
            );
            self.refusals.logged_at = Some(now);
        } else {
            self.refusals.unlogged += 1;
        }
        let _ = stream.set_nonblocking(true);
        let _ = stream.write(&err_line(format!("permission denied: {why}")));
    }

    /// UDP port of the peers' agents for TCP connections (default: this agent's port).
    pub fn set_peer_port(&mut self, port: u16) {
        self.tcp.peer_port = port;
    }

    /// How long a connection's HELLO may go unanswered before the peer is taken not to
    /// speak FlexPass and the application connects with kernel TCP (default 300 ms).
    pub fn set_conn_fallback(&mut self, d: Duration) {
        self.tcp.fallback = d;
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
        self.poller.ready(&mut events)?;
        for &(token, _) in &events {
            let i = (token & 0xffff_ffff) as usize;
            match token & !0xffff_ffff {
                KIND_CLIENT => self.ready_clients.push(i),
                KIND_CONN | KIND_PROBE => self.ready_conns.push(i),
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
            let t = &mut self.tcp;
            t.peers
                .retain(|_, e| e.2.is_none_or(|at| now - at < PEER_LINGER));
            t.no_agent.retain(|_, at| now - *at < NO_AGENT_TTL);
            t.no_service.retain(|_, at| now - *at < NO_SERVICE_TTL);
        }
        // Sleep until the network or one of the local sockets (the epoll fd) needs us.
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
                self.release(c);
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
            let transport = self
                .ep
                .receiver(key)
                .map(|r| format!("{:?}", r.transport()).to_lowercase());
            c.reply = json_line(
                serde_json::json!({"ok": true, "flow_id": key.1, "peer": key.0.to_string(), "transport": transport}),
            );
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
            Role::Handshake(..) | Role::Accepting => ev |= poller::IN,
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

    /// A new connection: registered, serviced this turn.
    fn add_conn(&mut self, conn: Conn) -> usize {
        let probe = conn.probe.as_ref().map(|p| p.as_raw_fd());
        let i = self.tcp.conns.insert(ConnSlot { conn, interest: 0 });
        if let Some(fd) = probe {
            self.poller.watch(fd, 0, poller::IN, KIND_PROBE | i as u64);
        }
        let c = &self.tcp.conns.get(i).expect("inserted").conn;
        for (dir, key) in [(Dir::Send, c.out_key), (Dir::Recv, c.in_key)] {
            if let Some(k) = key {
                self.owners.insert((dir, k), Owner::Conn(i));
            }
        }
        if c.side == Side::Client && c.in_key.is_none() {
            self.tcp
                .awaiting_reply
                .insert((c.udp_peer.ip(), c.conn_id), i);
        }
        self.ready_conns.push(i);
        i
    }

    /// Answering side: a peer opens a connection to `c.dst_port`. Served only if a local
    /// application registered the port (`tcp_listen`) and its listener accepts the
    /// loopback connection; otherwise the open flow is reset (the peer then uses kernel
    /// TCP).
    fn serve_conn(&mut self, key: FlowKey, c: HelloConn) {
        let t = &mut self.tcp;
        let Some(&target) = t.listens.get(&c.dst_port) else {
            t.refused += 1;
            log::debug!(
                "flexpass agent: {} asked for port {}, not served over FlexPass",
                key.0.ip(),
                c.dst_port
            );
            self.ep.abort_receiver(key, ResetReason::Unspecified);
            return;
        };
        let stream = match connect_local(target) {
            Ok(s) => s,
            Err(e) => {
                Self::refuse_port(t, &mut self.ep, key, c.dst_port, &e);
                return;
            }
        };
        let transport = self
            .ep
            .receiver(key)
            .map_or(TransportKind::FlexPass, |r| r.transport());
        let remote = SocketAddr::new(key.0.ip(), c.src_port);
        let local_ip = local_ip_towards(key.0.ip()).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let local_addr = SocketAddr::new(local_ip, c.dst_port);
        let mut conn = Conn::new(
            Side::Server,
            Local::Tcp(stream),
            remote,
            local_addr,
            key.0,
            c.conn_id,
            transport,
        );
        conn.in_key = Some(key);
        conn.connecting = Some(Connecting {
            since: Instant::now(),
            target,
            hello: c,
        });
        self.add_conn(conn);
    }

    /// The registered listener refused (or never answered) the loopback connection: the
    /// port is no longer served, and the peer is told with RESET (it then uses kernel TCP).
    fn refuse_port(t: &mut TcpState, ep: &mut Endpoint, key: FlowKey, port: u16, e: &io::Error) {
        t.refused += 1;
        log::info!("flexpass agent: port {port} no longer accepts ({e}): unregistered");
        t.listens.remove(&port);
        ep.abort_receiver(key, ResetReason::Unspecified);
    }

    /// Answering side: advance a loopback connect; once connected, open the reverse flow.
    fn local_connect(t: &mut TcpState, ep: &mut Endpoint, conn: &mut Conn, now: Instant) {
        let Some(cn) = conn.connecting else { return };
        let failed = match conn.connect_state() {
            ConnectState::InProgress if now - cn.since < LOCAL_CONNECT_TIMEOUT => return,
            ConnectState::InProgress => io::Error::from(io::ErrorKind::TimedOut),
            ConnectState::Failed(e) => {
                // A wildcard IPv6 listener with IPV6_V6ONLY is reached on ::1 instead.
                let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), cn.target.port());
                if cn.target.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) {
                    if let Ok(s) = connect_local(v6) {
                        conn.local = Local::Tcp(s);
                        conn.connecting = Some(Connecting { target: v6, ..cn });
                        return;
                    }
                }
                e
            }
            ConnectState::Connected => {
                conn.connecting = None;
                if let Local::Tcp(s) = &conn.local {
                    let _ = s.set_nodelay(true);
                    conn.loop_port = s.local_addr().map(|a| a.port()).ok();
                }
                match ep.open(conn.udp_peer, conn.transport, 0) {
                    Ok(out) => {
                        if let Some(s) = ep.sender_mut(out) {
                            s.set_conn(HelloConn {
                                role: ConnRole::Reply,
                                ..cn.hello
                            });
                        }
                        conn.out_key = Some(out);
                    }
                    Err(e) => {
                        log::warn!("flexpass agent: cannot open the reverse flow: {e}");
                        if let Some(k) = conn.in_key.take() {
                            ep.abort_receiver(k, ResetReason::Unspecified);
                        }
                        conn.close_after_line = true;
                        return;
                    }
                }
                if let Some(p) = conn.loop_port {
                    t.peers.insert(p, (conn.remote, conn.local_addr, None));
                }
                t.accepted_flexpass += 1;
                log::debug!(
                    "flexpass agent: connection {} → {} accepted over FlexPass",
                    conn.remote,
                    conn.local_addr
                );
                return;
            }
        };
        if let Some(k) = conn.in_key.take() {
            Self::refuse_port(t, ep, k, cn.hello.dst_port, &failed);
        }
        conn.connecting = None;
        conn.close_after_line = true; // dropped without a record
    }

    /// Opening side: the answering side's flow of one of our connections arrived.
    fn reply_flow(&mut self, key: FlowKey, c: HelloConn) {
        let at = self.tcp.awaiting_reply.remove(&(key.0.ip(), c.conn_id));
        let found = at.filter(|&i| {
            self.tcp.conns.get(i).is_some_and(|x| {
                let x = &x.conn;
                x.side == Side::Client
                    && x.conn_id == c.conn_id
                    && x.udp_peer.ip() == key.0.ip()
                    && x.in_key.is_none()
            })
        });
        match found {
            Some(i) => {
                self.tcp.conns.at(i).conn.in_key = Some(key);
                self.owners.insert((Dir::Recv, key), Owner::Conn(i));
                self.ready_conns.push(i);
            }
            None => self.ep.abort_receiver(key, ResetReason::UnknownFlow),
        }
    }

    fn verdict_direct(t: &mut TcpState, conn: &mut Conn, reason: &str, peer_has_no_agent: bool) {
        t.direct += 1;
        let ip = conn.remote.ip();
        if t.logged.insert(ip) {
            log::warn!(
                "flexpass agent: {ip}: {reason}: kernel TCP for this peer (logged once per peer)"
            );
        }
        conn.line = json_line(
            serde_json::json!({"ok": true, "mode": "direct", "reason": reason,
            "peer_has_no_agent": peer_has_no_agent}),
        );
        conn.close_after_line = true;
        conn.opening = None;
    }

    /// Service the connections that are ready (see `turn`) and those still opening or
    /// connecting (their timeouts); drop the finished ones.
    fn service_conns(&mut self, now: Instant) -> io::Result<()> {
        let mut ready = std::mem::take(&mut self.ready_conns);
        ready.append(&mut self.timed_conns);
        ready.sort_unstable();
        ready.dedup();
        let mut buf = std::mem::take(&mut self.buf);
        for &i in &ready {
            if self.tcp.conns.get(i).is_none() {
                continue;
            }
            match self.service_conn(i, now, &mut buf) {
                None => {
                    let c = self.tcp.conns.at(i);
                    let timed = c.conn.opening.is_some() || c.conn.connecting.is_some();
                    let ev = poller::from_poll(c.conn.wake_events(&self.ep));
                    let fd = c.conn.local.raw_fd();
                    c.interest = self.poller.watch(fd, c.interest, ev, KIND_CONN | i as u64);
                    if timed {
                        self.timed_conns.push(i);
                    }
                }
                Some((done, outcome)) => self.end_conn(i, done, &outcome, now)?,
            }
        }
        self.buf = buf;
        ready.clear();
        if self.ready_conns.is_empty() {
            self.ready_conns = ready;
        }
        Ok(())
    }

    /// One connection's turn: its verdict while opening, its loopback connect, its bytes.
    /// `Some((finished, outcome))` when it is over.
    fn service_conn(&mut self, i: usize, now: Instant, buf: &mut [u8]) -> Option<(bool, String)> {
        // Out of its slot while it is serviced (the TCP tables are used alongside).
        let mut slot = self.tcp.conns.items[i].take().expect("live");
        let out_before = slot.conn.out_key;
        let r = self.service_conn_inner(&mut slot.conn, now, buf);
        if slot.conn.out_key != out_before {
            if let Some(k) = slot.conn.out_key {
                self.owners.insert((Dir::Send, k), Owner::Conn(i));
            }
        }
        self.tcp.conns.items[i] = Some(slot);
        r
    }

    fn service_conn_inner(
        &mut self,
        conn: &mut Conn,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(bool, String)> {
        if let Some(since) = conn.opening {
            let s = conn.out_key.and_then(|k| self.ep.sender(k));
            let (err, established) = s.map_or((Some(SenderError::Reset), false), |s| {
                (s.error(), s.is_established())
            });
            let t = &mut self.tcp;
            if established {
                t.has_agent.insert(conn.remote.ip());
                conn.probe = None;
            }
            let refused = !established && conn.probe_refused();
            if conn.in_key.is_some() && err.is_none() {
                conn.opening = None;
                t.opened_flexpass += 1;
                conn.line = json_line(serde_json::json!({"ok": true, "mode": "flexpass",
                    "conn_id": conn.conn_id, "transport": format!("{:?}", conn.transport).to_lowercase()}));
                log::debug!(
                    "flexpass agent: connection {} → {} over FlexPass",
                    conn.local_addr,
                    conn.remote
                );
            } else if err != Some(SenderError::Reset)
                && !established
                && (refused || err.is_some() || now - since > t.fallback)
            {
                t.no_agent.insert(conn.remote.ip(), now);
                if let Some(k) = conn.out_key.take() {
                    self.ep.close_sender(k);
                }
                let why = if refused {
                    "peer does not speak FlexPass (its agent port is closed)"
                } else {
                    "peer does not speak FlexPass (no HELLO_ACK)"
                };
                Self::verdict_direct(t, conn, why, true);
            } else if err.is_some() || now - since > REPLY_TIMEOUT {
                t.no_service
                    .insert((conn.remote.ip(), conn.remote.port()), now);
                let aborted = err.is_none();
                conn.release(&mut self.ep, aborted);
                let why = format!(
                    "peer does not serve port {} over FlexPass",
                    conn.remote.port()
                );
                Self::verdict_direct(t, conn, &why, false);
            }
        }
        // The incoming flow of a connection is half-open until the peer answers this
        // side's flow (docs/protocol.md §11): its HELLO_ACK proves the address.
        if let (Some(k), Some(out)) = (conn.in_key, conn.out_key) {
            if self.ep.is_half_open(k) && self.ep.sender(out).is_some_and(|s| s.is_established()) {
                self.ep.confirm_receiver(k);
            }
        }
        // A half-open incoming flow dropped by the endpoint (its table was full and it
        // was the oldest, or too old): the connection cannot go on.
        let gone = conn.in_key.is_some_and(|k| self.ep.receiver(k).is_none());
        let step = if gone {
            conn.in_key = None;
            Step::Aborted("incoming flow dropped while half-open".into())
        } else {
            Self::local_connect(&mut self.tcp, &mut self.ep, conn, now);
            conn.pump(&mut self.ep, buf)
        };
        match step {
            Step::Keep => None,
            Step::Done => Some((
                true,
                if conn.close_after_line {
                    "direct".to_string()
                } else {
                    "closed".into()
                },
            )),
            Step::Aborted(why) => Some((false, format!("aborted: {why}"))),
        }
    }

    /// A connection is over: release its flows, record it, forget its socket.
    fn end_conn(&mut self, i: usize, done: bool, outcome: &str, now: Instant) -> io::Result<()> {
        let ConnSlot { mut conn, interest } = self.tcp.conns.remove(i).expect("live");
        self.poller
            .watch(conn.local.raw_fd(), interest, 0, KIND_CONN | i as u64);
        if self
            .tcp
            .awaiting_reply
            .get(&(conn.udp_peer.ip(), conn.conn_id))
            == Some(&i)
        {
            self.tcp
                .awaiting_reply
                .remove(&(conn.udp_peer.ip(), conn.conn_id));
        }
        let rec = (!conn.close_after_line).then(|| conn.record(&self.ep, outcome));
        conn.release(&mut self.ep, !done);
        if !done {
            self.tcp.aborted += 1;
        }
        if let Some(p) = conn.loop_port {
            if let Some(e) = self.tcp.peers.get_mut(&p) {
                e.2 = Some(now);
            }
        }
        if let Some(rec) = rec {
            log::debug!("flexpass agent: {rec}");
            if self.tcp.records.len() >= MAX_RECORDS {
                self.tcp.records.pop_front();
            }
            self.tcp.records.push_back(rec);
        }
        Ok(())
    }

    fn status(&self) -> serde_json::Value {
        let t = &self.tcp;
        let (senders, receivers) = self.ep.flows();
        serde_json::json!({
            "ok": true,
            "flows": {"senders": senders, "receivers": receivers},
            "tcp": {
                "open": t.conns.iter().map(|c| &c.conn).filter(|c| c.opening.is_none() && !c.close_after_line).count(),
                "opened_flexpass": t.opened_flexpass, "accepted_flexpass": t.accepted_flexpass,
                "direct": t.direct, "refused": t.refused, "aborted": t.aborted,
                "listening": t.listens.keys().collect::<Vec<_>>(),
                "no_agent_peers": t.no_agent.keys().map(|ip| ip.to_string()).collect::<Vec<_>>(),
                "conns": t.conns.iter().map(|c| &c.conn).filter(|c| c.opening.is_none() && !c.close_after_line)
                    .map(|c| c.record(&self.ep, "open")).collect::<Vec<_>>(),
                "closed": t.records.iter().collect::<Vec<_>>(),
            },
            "endpoint": self.ep.stats,
            "datapath": {"kind": self.ep.stats.datapath, "xdp": self.ep.xdp_info()},
            "api": {"clients": self.clients.len(), "refused": self.refusals.count,
                    "bad_requests": self.bad_requests, "accept_errors": self.accept_errors},
            "memory": memory_report(),
            "tables": {"endpoint": self.ep.table_sizes(), "unclaimed": self.unclaimed.len(),
                       "conns": t.conns.len(), "records": t.records.len(),
                       "owners": self.owners.len(), "accepting": self.accepting.len(),
                       "handshakes": self.handshakes.len(),
                       "peers": t.peers.len(), "no_agent": t.no_agent.len()},
        })
    }

    /// Forget the network side of a client that went away.
    fn release(&mut self, c: Client) {
        match c.role {
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
        match &mut c.role {
            Role::Closing | Role::Moved => false,
            Role::Handshake(line, since) => {
                match c.stream.read(&mut buf) {
                    // Half-closed before the end of the line: say so (the client can still
                    // read), unless it sent nothing at all.
                    Ok(0) if line.is_empty() => return false,
                    Ok(0) => {
                        self.bad_requests += 1;
                        c.reply = err_line(
                            "incomplete request: the connection was shut down before the \
                             request line's \\n",
                        );
                        c.role = Role::Closing;
                        return true;
                    }
                    Ok(n) => line.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if since.elapsed() > REQUEST_TIMEOUT {
                            self.bad_requests += 1;
                            c.reply = err_line(format!(
                                "no request line within {} s",
                                REQUEST_TIMEOUT.as_secs()
                            ));
                            c.role = Role::Closing;
                        }
                        return true;
                    }
                    Err(_) => return false,
                }
                let pos = line.iter().position(|&b| b == b'\n');
                if pos.unwrap_or(line.len()) > MAX_REQUEST_LINE {
                    self.bad_requests += 1;
                    c.reply = err_line(format!(
                        "request line too long (more than {MAX_REQUEST_LINE} bytes)"
                    ));
                    c.role = Role::Closing;
                    return true;
                }
                let Some(pos) = pos else { return true };
                let rest = line.split_off(pos + 1);
                let req = std::mem::take(line);
                self.request(i, &req, rest);
                let c = self.clients.at(i);
                if matches!(c.role, Role::Closing)
                    && c.reply.windows(NOT_OK.len()).any(|w| w == NOT_OK)
                {
                    self.bad_requests += 1;
                }
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
                    c.reply = err_line(e);
                    c.role = Role::Closing;
                } else if s.is_complete() {
                    let st = s.stats();
                    c.reply = json_line(
                        serde_json::json!({"ok": true, "event": "flow_sent", "flow_id": key.1,
                        "bytes": st.bytes_acked, "fct_us": started.elapsed().as_secs_f64() * 1e6,
                        "retransmissions": st.retransmissions, "timeouts": st.timeouts,
                        "credits_received": st.credits_received, "credits_wasted": st.credits_wasted}),
                    );
                    c.role = Role::Closing;
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
                let Some(r) = self.ep.receiver_mut(key) else {
                    return false;
                };
                while *out_bytes < MAX_PENDING_OUT {
                    match r.read() {
                        Some(b) => {
                            *out_bytes += b.len();
                            out.push_back(b);
                        }
                        None => break,
                    }
                }
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
                // Everything up to the FIN delivered and written: close (EOF for the client).
                !r.is_finished()
            }
        }
    }

    /// `tcp_connect`: the API connection becomes the application's socket of a TCP
    /// connection over FlexPass, or is told to use kernel TCP ("direct").
    fn tcp_connect(&mut self, i: usize, req: &serde_json::Value, rest: Vec<u8>) {
        let c = self.clients.at(i);
        let dst = req
            .get("dst")
            .and_then(|v| v.as_str())
            .and_then(|p| p.parse::<SocketAddr>().ok());
        let src = req
            .get("src")
            .and_then(|v| v.as_str())
            .and_then(|p| p.parse::<SocketAddr>().ok());
        let transport = req
            .get("transport")
            .and_then(|v| v.as_str())
            .unwrap_or("flexpass");
        let (Some(dst @ SocketAddr::V4(_)), Some(t)) = (dst, parse_transport(transport)) else {
            c.reply = err_line("tcp_connect needs \"dst\": \"IPv4:PORT\" (and \"transport\": flexpass | expresspass | dctcp)");
            c.role = Role::Closing;
            return;
        };
        if !rest.is_empty() {
            c.reply = err_line("no bytes may follow tcp_connect before its reply");
            c.role = Role::Closing;
            return;
        }
        let src = src.unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let cached = if self.tcp.no_agent.contains_key(&dst.ip()) {
            Some("peer does not speak FlexPass (cached)")
        } else if self.tcp.no_service.contains_key(&(dst.ip(), dst.port())) {
            Some("peer does not serve this port over FlexPass (cached)")
        } else {
            None
        };
        if let Some(reason) = cached {
            self.tcp.direct += 1;
            c.reply =
                json_line(serde_json::json!({"ok": true, "mode": "direct", "reason": reason}));
            c.role = Role::Closing;
            return;
        }
        let stream = match c.stream.try_clone() {
            Ok(s) => s,
            Err(e) => {
                c.reply = err_line(e);
                c.role = Role::Closing;
                return;
            }
        };
        c.role = Role::Moved;
        let udp_peer = SocketAddr::new(dst.ip(), self.tcp.peer_port);
        let key = match self.ep.open(udp_peer, t, 0) {
            Ok(k) => k,
            Err(e) => {
                let c = self.clients.at(i);
                c.reply = err_line(e);
                c.role = Role::Closing;
                return;
            }
        };
        if let Some(s) = self.ep.sender_mut(key) {
            s.set_conn(HelloConn {
                conn_id: key.1,
                src_port: src.port(),
                dst_port: dst.port(),
                role: ConnRole::Open,
            });
        }
        let mut conn = Conn::new(
            Side::Client,
            Local::Unix(stream),
            dst,
            src,
            udp_peer,
            key.1,
            t,
        );
        conn.out_key = Some(key);
        conn.opening = Some(Instant::now());
        if !self.tcp.has_agent.contains(&dst.ip()) {
            conn.start_probe();
        }
        self.add_conn(conn);
    }

    fn request(&mut self, i: usize, line: &[u8], rest: Vec<u8>) {
        let c = self.clients.at(i);
        let req: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                c.reply = err_line(format!("request is not JSON: {e}"));
                c.role = Role::Closing;
                return;
            }
        };
        match req.get("op").and_then(|v| v.as_str()) {
            Some("accept") => {
                c.role = Role::Accepting;
                self.accepting.push_back(i);
            }
            Some("tcp_connect") => self.tcp_connect(i, &req, rest),
            Some("tcp_listen") => {
                let port = req
                    .get("port")
                    .and_then(|v| v.as_u64())
                    .and_then(|p| u16::try_from(p).ok());
                let addr = req
                    .get("addr")
                    .and_then(|v| v.as_str())
                    .and_then(|a| a.parse::<IpAddr>().ok())
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                c.reply = match port {
                    // Loopback listeners are local-only: remote peers must not reach them.
                    Some(_) if addr.is_loopback() => {
                        err_line("a listener bound to a loopback address is not offered to peers")
                    }
                    Some(p) if p != 0 => {
                        // The agent connects to the listener over loopback when it is bound to
                        // a wildcard address: 127.0.0.1 also for an IPv6 wildcard (dual
                        // stack; an IPV6_V6ONLY listener is reached on ::1 instead, see
                        // `serve_conn`).
                        let ip = match addr {
                            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                            a => a,
                        };
                        self.tcp.listens.insert(p, SocketAddr::new(ip, p));
                        log::debug!("flexpass agent: port {p} served over FlexPass ({ip})");
                        json_line(serde_json::json!({"ok": true, "port": p}))
                    }
                    _ => err_line("tcp_listen needs \"port\": 1..65535"),
                };
                c.role = Role::Closing;
            }
            Some("tcp_peer") => {
                let port = req
                    .get("port")
                    .and_then(|v| v.as_u64())
                    .and_then(|p| u16::try_from(p).ok());
                c.reply = match port.and_then(|p| self.tcp.peers.get(&p)) {
                    Some((remote, local, _)) => json_line(serde_json::json!({"ok": true,
                        "peer": remote.to_string(), "local": local.to_string()})),
                    None => err_line("not a FlexPass connection"),
                };
                c.role = Role::Closing;
            }
            Some("status") => {
                let reply = json_line(self.status());
                let c = self.clients.at(i);
                c.reply = reply;
                c.role = Role::Closing;
            }
            Some("connect") => {
                let peer = req
                    .get("peer")
                    .and_then(|v| v.as_str())
                    .and_then(|p| p.parse().ok());
                let transport = req
                    .get("transport")
                    .and_then(|v| v.as_str())
                    .unwrap_or("flexpass");
                let (Some(peer), Some(t)) = (peer, parse_transport(transport)) else {
                    c.reply = err_line("connect needs \"peer\": \"IP:PORT\" and \"transport\": flexpass | expresspass | dctcp");
                    c.role = Role::Closing;
                    return;
                };
                let size = req.get("size").and_then(|v| v.as_u64()).unwrap_or(0);
                match self.ep.open(peer, t, size) {
                    Ok(key) => {
                        if !rest.is_empty() {
                            self.ep.write(key, Bytes::from(rest));
                        }
                        self.owners.insert((Dir::Send, key), Owner::Client(i));
                        let c = self.clients.at(i);
                        c.reply = json_line(serde_json::json!({"ok": true, "flow_id": key.1}));
                        c.role = Role::Sending {
                            key,
                            started: Instant::now(),
                            eof: false,
                        };
                    }
                    Err(e) => {
                        let c = self.clients.at(i);
                        c.reply = err_line(e);
                        c.role = Role::Closing;
                    }
                }
            }
            other => {
                c.reply = err_line(format!(
                    "unknown op {other:?}: use connect, accept, tcp_connect, tcp_listen, tcp_peer or status"
                ));
                c.role = Role::Closing;
            }
        }
    }
}

/// The agent's memory as the kernel counts it (/proc/self/status): resident now and at
/// most so far, and the virtual size, in KiB.
pub fn memory_report() -> serde_json::Value {
    let st = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| -> Option<u64> {
        st.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    serde_json::json!({"rss_kb": kb("VmRSS:"), "rss_peak_kb": kb("VmHWM:"),
                       "virtual_kb": kb("VmSize:")})
}

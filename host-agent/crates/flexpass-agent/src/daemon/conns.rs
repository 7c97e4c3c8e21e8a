//! TCP connections of unmodified applications (libflexpass.so; docs/agent-api.md, "TCP
//! connections"): `tcp_connect`, `tcp_listen`, `tcp_peer`, the answering side's loopback
//! connect, the verdicts (over FlexPass or "direct"), and each connection's turn. The
//! byte pumping of one connection is crate::tcp.

use super::{Daemon, Owner, Role, KIND_CONN, KIND_PROBE};
use crate::api::{ConnRecord, Listening, PeerNames, Reply, TcpVerdict};
use crate::daemon::slab::Slab;
use crate::poller;
use crate::tcp::{
    connect_local, local_ip_towards, Conn, ConnectState, Connecting, Local, Side, Step,
};
use crate::{Dir, Endpoint, FlowKey};
use flexpass_core::SenderError;
use flexpass_wire::{ConnRole, HelloConn, ResetReason, TransportKind};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A TCP connection and the epoll events its local socket is registered for.
pub(super) struct ConnSlot {
    pub(super) conn: Conn,
    pub(super) interest: u32,
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
pub(super) struct TcpState {
    pub(super) conns: Slab<ConnSlot>,
    /// Opening side: connections waiting for the answering side's flow, by (peer agent's
    /// address, conn_id).
    pub(super) awaiting_reply: HashMap<(IpAddr, u32), usize>,
    /// Ports served over FlexPass (registered by `tcp_listen`) → where the agent connects.
    pub(super) listens: HashMap<u16, SocketAddr>,
    /// Answering side: agent's loopback source port → (remote, local) application-visible
    /// addresses, and when the connection ended.
    pub(super) peers: HashMap<u16, (SocketAddr, SocketAddr, Option<Instant>)>,
    pub(super) no_agent: HashMap<IpAddr, Instant>,
    /// Peers that answered a connection's HELLO: no first-contact probe needed.
    pub(super) has_agent: HashSet<IpAddr>,
    pub(super) no_service: HashMap<(IpAddr, u16), Instant>,
    /// Peers whose fallback was logged (once per peer).
    pub(super) logged: HashSet<IpAddr>,
    pub(super) records: VecDeque<ConnRecord>,
    /// UDP port of the peers' agents.
    pub(super) peer_port: u16,
    /// Opening side: no HELLO_ACK within this → the peer does not speak FlexPass.
    pub(super) fallback: Duration,
    /// Received bytes queued per connection for its local socket (tcp::CONN_MAX_PENDING).
    pub(super) max_pending: usize,
    pub(super) opened_flexpass: u64,
    pub(super) accepted_flexpass: u64,
    pub(super) direct: u64,
    pub(super) refused: u64,
    pub(super) aborted: u64,
}

impl TcpState {
    pub(super) fn new(peer_port: u16) -> Self {
        TcpState {
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
            max_pending: crate::tcp::CONN_MAX_PENDING,
            opened_flexpass: 0,
            accepted_flexpass: 0,
            direct: 0,
            refused: 0,
            aborted: 0,
        }
    }

    /// Forget closed connections' addresses and cached fallbacks past their time.
    pub(super) fn expire(&mut self, now: Instant) {
        self.peers
            .retain(|_, e| e.2.is_none_or(|at| now - at < PEER_LINGER));
        self.no_agent.retain(|_, at| now - *at < NO_AGENT_TTL);
        self.no_service.retain(|_, at| now - *at < NO_SERVICE_TTL);
    }
}

impl Daemon {
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
    pub(super) fn serve_conn(&mut self, key: FlowKey, c: HelloConn) {
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
            // Out of file descriptors here: this connection is refused (its peer uses
            // kernel TCP), the port stays served.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(nix::libc::EMFILE | nix::libc::ENFILE)
                ) =>
            {
                t.refused += 1;
                log::warn!(
                    "flexpass agent: connection to port {} refused: {e}",
                    c.dst_port
                );
                self.ep.abort_receiver(key, ResetReason::Unspecified);
                return;
            }
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
    pub(super) fn reply_flow(&mut self, key: FlowKey, c: HelloConn) {
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
        conn.line = Reply::TcpVerdict(TcpVerdict::Direct {
            reason: reason.into(),
            peer_has_no_agent,
        })
        .to_line();
        conn.close_after_line = true;
        conn.opening = None;
    }

    /// Service the connections that are ready (see `turn`) and those still opening or
    /// connecting (their timeouts); drop the finished ones.
    pub(super) fn service_conns(&mut self, now: Instant) -> io::Result<()> {
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
                conn.line = Reply::TcpVerdict(TcpVerdict::FlexPass {
                    conn_id: conn.conn_id,
                    transport: conn.transport,
                })
                .to_line();
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
            conn.pump(&mut self.ep, buf, self.tcp.max_pending)
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
            conn.local.reset_on_close();
        }
        if let Some(p) = conn.loop_port {
            if let Some(e) = self.tcp.peers.get_mut(&p) {
                e.2 = Some(now);
            }
        }
        if let Some(rec) = rec {
            self.keep_record(rec);
        }
        Ok(())
    }

    /// A connection's record: logged at debug level, kept for `status` (the last
    /// MAX_RECORDS).
    pub(super) fn keep_record(&mut self, rec: ConnRecord) {
        log::debug!(
            "flexpass agent: {}",
            serde_json::to_value(&rec).expect("serializable")
        );
        if self.tcp.records.len() >= MAX_RECORDS {
            self.tcp.records.pop_front();
        }
        self.tcp.records.push_back(rec);
    }

    /// `tcp_connect`: the API connection becomes the application's socket of a TCP
    /// connection over FlexPass, or is told to use kernel TCP ("direct").
    pub(super) fn tcp_connect(
        &mut self,
        i: usize,
        dst: SocketAddrV4,
        src: SocketAddr,
        t: TransportKind,
        rest: Vec<u8>,
    ) {
        if !rest.is_empty() {
            return self.answer(
                i,
                Reply::error("no bytes may follow tcp_connect before its reply"),
            );
        }
        let dst = SocketAddr::V4(dst);
        let cached = if self.tcp.no_agent.contains_key(&dst.ip()) {
            Some(("peer does not speak FlexPass (cached)", true))
        } else if self.tcp.no_service.contains_key(&(dst.ip(), dst.port())) {
            Some((
                "peer does not serve this port over FlexPass (cached)",
                false,
            ))
        } else {
            None
        };
        if let Some((reason, peer_has_no_agent)) = cached {
            self.tcp.direct += 1;
            let verdict = TcpVerdict::Direct {
                reason: reason.into(),
                peer_has_no_agent,
            };
            return self.answer(i, Reply::TcpVerdict(verdict));
        }
        let c = self.clients.at(i);
        let stream = match c.stream.try_clone() {
            Ok(s) => s,
            Err(e) => return self.answer(i, Reply::error(e)),
        };
        c.role = Role::Moved;
        let udp_peer = SocketAddr::new(dst.ip(), self.tcp.peer_port);
        let key = match self.ep.open(udp_peer, t, 0) {
            Ok(k) => k,
            Err(e) => return self.answer(i, Reply::error(e)),
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

    /// `tcp_listen`: serve `port` to FlexPass peers. The agent connects to the listener
    /// over loopback when it is bound to a wildcard address: 127.0.0.1 also for an IPv6
    /// wildcard (dual stack; an IPV6_V6ONLY listener is reached on ::1 instead, see
    /// `local_connect`).
    pub(super) fn tcp_listen(&mut self, port: u16, addr: IpAddr) -> Reply {
        // Loopback listeners are local-only: remote peers must not reach them.
        if addr.is_loopback() {
            return Reply::error("a listener bound to a loopback address is not offered to peers");
        }
        let ip = match addr {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            a => a,
        };
        self.tcp.listens.insert(port, SocketAddr::new(ip, port));
        log::debug!("flexpass agent: port {port} served over FlexPass ({ip})");
        Reply::Listening(Listening { port })
    }

    /// `tcp_peer`: the addresses of the connection whose loopback leg comes from `port`.
    pub(super) fn tcp_peer(&self, port: u16) -> Reply {
        match self.tcp.peers.get(&port) {
            Some(&(peer, local, _)) => Reply::PeerNames(PeerNames { peer, local }),
            None => Reply::error("not a FlexPass connection"),
        }
    }
}

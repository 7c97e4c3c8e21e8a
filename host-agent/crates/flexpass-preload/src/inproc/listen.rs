//! The listening side in the application's process: the registration of a listener with
//! the agent, and each handed-over connection (docs/agent-api.md, "In-process listeners").
//!
//! Per `tcp_hello`: a UDP socket on the host's address towards the peer (a new port), the
//! open flow's `Receiver` made from the HELLO, the reply flow's `Sender`; then a loopback
//! TCP connection from the library to the application's own listening socket, so that
//! the kernel's accept queue, its backlog and the listener's readiness (poll/epoll) stay
//! as they are. `accept()` finds that loopback connection by its source port (PENDING)
//! and dup3s the UDP socket onto the accepted descriptor. If the queue is full (the
//! loopback connect does not complete within ACCEPT_WAIT) the flow is refused:
//! `tcp_refused`, and the peer falls back to kernel TCP.

use super::conn::{Conn, Locked, SOCKET_BUFFER};
use super::{insert, now, settings, sys, timer, Shared};
use crate::text::{self, Buf};
use flexpass_core::{CreditConfig, Receiver, ReceiverConfig, Sender, SenderConfig};
use flexpass_wire::{ConnRole, HelloConn, Packet, TransportKind};
use libc::c_int;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// How long a handed connection waits for the listener's accept queue.
const ACCEPT_WAIT_NS: u64 = 200_000_000;

/// A listener's registration: the API connection the agent's events come on (a new one
/// after an agent restart: `serve` registers again).
pub struct Registration {
    fd: AtomicI32,
    pub port: u16,
    /// The listener's address, as registered.
    addr: String,
    write: Mutex<()>,
    /// Taken connections not ended yet, and whether the program closed the listener: the
    /// registration ends only when both say so, since its end makes the agent reset every
    /// taken connection (closing a TCP listener leaves its accepted connections alone).
    live: AtomicUsize,
    listener_closed: std::sync::atomic::AtomicBool,
    /// The registration ended for good and the descriptor is closed (by `serve`).
    gone: std::sync::atomic::AtomicBool,
    /// The process that registered (a forked child's copy never ends the registration:
    /// its descriptor is the parent's too).
    pid: i32,
}

impl Registration {
    /// A taken connection ended (after its `tcp_closed`).
    pub fn conn_ended(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.end_if_unused();
        }
    }

    fn end_if_unused(&self) {
        if self.listener_closed.load(Ordering::Acquire)
            && self.live.load(Ordering::Acquire) == 0
            && !self.gone.load(Ordering::Acquire)
        {
            // Under `write`: `serve` closes and replaces the descriptor under it too, so
            // this never reaches a number the program reused.
            let _g = self.write.lock();
            let fd = self.fd.load(Ordering::Acquire);
            if fd >= 0 {
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
        }
    }
}

impl Registration {
    /// `tcp_taken` (with the socket's descriptor), `tcp_refused` or `tcp_closed`.
    pub fn answer(
        &self,
        op: &str,
        peer: SocketAddrV4,
        flow_id: u32,
        reply_flow_id: Option<u32>,
        pass: Option<c_int>,
    ) -> bool {
        let mut b: Buf<200> = Buf::new();
        crate::request::hello_answer(&mut b, op, peer, flow_id, reply_flow_id);
        let _g = self.write.lock();
        let fd = self.fd.load(Ordering::Acquire);
        fd >= 0 && sys::send_line(fd, b.as_bytes(), pass)
    }
}

/// What fork holds besides the connections (fork.rs): the registrations' write locks (a
/// forked child's `tcp_closed` goes on the same API connection) and the listener table.
pub(super) struct ForkHold {
    _writes: Vec<(std::sync::MutexGuard<'static, ()>, Arc<Registration>)>,
    _listeners: Option<std::sync::MutexGuard<'static, HashMap<c_int, Arc<Registration>>>>,
}

/// `regs`: the registrations of the connections held (a closed listener's live on there).
pub(super) fn hold_for_fork(mut regs: Vec<Arc<Registration>>) -> ForkHold {
    let listeners = listeners().lock().ok();
    if let Some(l) = listeners.as_ref() {
        regs.extend(l.values().cloned());
    }
    let mut writes: Vec<(std::sync::MutexGuard<'static, ()>, Arc<Registration>)> = Vec::new();
    for r in regs {
        if writes.iter().any(|(_, o)| Arc::ptr_eq(o, &r)) {
            continue;
        }
        // The guard borrows from `r`, kept with it and dropped after it.
        let l: &'static Registration = unsafe { &*Arc::as_ptr(&r) };
        if let Ok(g) = l.write.lock() {
            writes.push((g, r));
        }
    }
    ForkHold {
        _writes: writes,
        _listeners: listeners,
    }
}

/// Loopback connections to the application's listener not accepted yet, by source port.
static PENDING_COUNT: AtomicUsize = AtomicUsize::new(0);
fn pending() -> &'static Mutex<HashMap<u16, Shared>> {
    static P: OnceLock<Mutex<HashMap<u16, Shared>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

static LISTENERS: AtomicUsize = AtomicUsize::new(0);
/// Registrations by the listening descriptor (closing the listener ends its registration).
fn listeners() -> &'static Mutex<HashMap<c_int, Arc<Registration>>> {
    static L: OnceLock<Mutex<HashMap<c_int, Arc<Registration>>>> = OnceLock::new();
    L.get_or_init(Default::default)
}

/// Register `port` (listener `fd`, bound to `addr`) for in-process connections. False if
/// the agent is not running or refuses (e.g. without `--inproc-listen`): the caller then
/// registers it the usual way.
pub fn register(fd: c_int, port: u16, addr: &str, target: SocketAddrV4) -> bool {
    let Some(reg) = (unsafe { open_registration(port, addr, false) }) else {
        return false;
    };
    let reg = Arc::new(Registration {
        fd: AtomicI32::new(reg),
        port,
        addr: addr.to_string(),
        write: Mutex::new(()),
        live: AtomicUsize::new(0),
        listener_closed: std::sync::atomic::AtomicBool::new(false),
        gone: std::sync::atomic::AtomicBool::new(false),
        pid: super::fork::my_pid(),
    });
    if let Ok(mut l) = listeners().lock() {
        if l.insert(fd, Arc::clone(&reg)).is_none() {
            LISTENERS.fetch_add(1, Ordering::Relaxed);
        }
    }
    let spawned = std::thread::Builder::new()
        .name(format!("flexpass-reg-{port}"))
        .spawn(move || serve(reg, target));
    spawned.is_ok()
}

/// The registration's API connection, or None. `again`: a retry after the agent went
/// away (`serve` keeps trying): a failure is not printed, so no line per retry.
unsafe fn open_registration(port: u16, addr: &str, again: bool) -> Option<c_int> {
    let s = match crate::agent_stream(None, 0) {
        Ok(s) => s,
        Err(e) => {
            if !again {
                crate::log_agent_down(e);
            }
            return None;
        }
    };
    let mut req: Buf<200> = Buf::new();
    crate::request::tcp_listen_inproc(&mut req, port, addr);
    let mut reply: Buf<512> = Buf::new();
    if !crate::write_all(s, req.as_bytes())
        || !crate::read_line(s, &mut reply, crate::QUERY_TIMEOUT_MS)
        || !text::contains(reply.as_bytes(), b"\"ok\":true")
    {
        sys::close(s);
        if again {
            crate::debug!(
                "port {port}: not registered again yet: {}",
                reply.as_str().trim_end()
            );
            return None;
        }
        let mut b: Buf<700> = Buf::new();
        let _ = core::fmt::Write::write_fmt(
            &mut b,
            format_args!(
                "flexpass: port {port}: no in-process registration ({}): through the agent\n",
                reply.as_str().trim_end()
            ),
        );
        b.stderr();
        return None;
    }
    crate::debug!("port {port} ({addr}) served in this process");
    Some(s)
}

/// The listener `fd` is closed: its registration ends (the port goes back to the agent)
/// once its taken connections ended.
pub fn on_listener_close(fd: c_int) {
    if LISTENERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let r = listeners().lock().ok().and_then(|mut l| l.remove(&fd));
    if let Some(r) = r {
        LISTENERS.fetch_sub(1, Ordering::Relaxed);
        if r.pid != super::fork::my_pid() {
            return; // a forked child's copy: the parent's listener is still open
        }
        // New connections are refused from now on; the registration ends with the last
        // taken connection.
        r.listener_closed.store(true, Ordering::Release);
        r.end_if_unused();
    }
}

/// First wait before registering again after the agent went away, and the longest.
const REREGISTER_FIRST_NS: u64 = 50_000_000;
const REREGISTER_MAX_NS: u64 = 2_000_000_000;

/// The registration's events until the listener is closed: when the agent goes away
/// (restart), the port is registered again with the next agent, retried with backoff
/// while the listener is open (docs/agent-api.md, "Agent restart"). Connections taken
/// before go on; their `tcp_closed` then names flows the new agent does not know (it
/// answers with an error line, logged at debug).
fn serve(reg: Arc<Registration>, target: SocketAddrV4) {
    loop {
        events(&reg, target);
        {
            let _g = reg.write.lock();
            sys::close(reg.fd.swap(-1, Ordering::AcqRel));
        }
        let mut wait = REREGISTER_FIRST_NS;
        let fd = loop {
            if reg.listener_closed.load(Ordering::Acquire) {
                crate::debug!("registration of port {} ended", reg.port);
                reg.gone.store(true, Ordering::Release);
                return;
            }
            std::thread::sleep(std::time::Duration::from_nanos(wait));
            if let Some(fd) = unsafe { open_registration(reg.port, &reg.addr, true) } {
                break fd;
            }
            wait = (wait * 2).min(REREGISTER_MAX_NS);
        };
        crate::debug!("port {}: registered again", reg.port);
        {
            let _g = reg.write.lock();
            reg.fd.store(fd, Ordering::Release);
        }
        // The listener may have been closed meanwhile, with nothing taken left.
        reg.end_if_unused();
    }
}

/// The events of one registration, one line each, until its connection ends.
fn events(reg: &Arc<Registration>, target: SocketAddrV4) {
    let mut taken: HashMap<(SocketAddrV4, u32), Weak<Locked>> = HashMap::new();
    let mut line: Vec<u8> = Vec::with_capacity(4096);
    let mut buf = vec![0u8; 16_384];
    loop {
        let n = sys::read(reg.fd.load(Ordering::Acquire), &mut buf);
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            if b != b'\n' {
                line.push(b);
                continue;
            }
            if text::contains(&line, b"\"event\":\"tcp_hello\"") {
                taken.retain(|_, w| w.strong_count() > 0);
                hello(reg, &line, target, &mut taken);
            } else if !line.is_empty() {
                crate::debug!(
                    "registration of port {}: {}",
                    reg.port,
                    String::from_utf8_lossy(&line)
                );
            }
            line.clear();
        }
    }
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    fn nib(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

/// The host's address towards `peer` and the route's MTU.
pub(super) fn route_to(peer: SocketAddrV4) -> Option<(Ipv4Addr, usize)> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    let r = (sys::connect(s, peer) == 0)
        .then(|| sys::name(s))
        .flatten()
        .map(|a| {
            let mtu = sys::get_int(s, libc::IPPROTO_IP, libc::IP_MTU).unwrap_or(1500);
            (
                *a.ip(),
                (mtu as usize).clamp(flexpass_wire::MIN_MTU, flexpass_wire::MAX_MTU),
            )
        });
    sys::close(s);
    r
}

static NEXT_REPLY_ID: AtomicU32 = AtomicU32::new(0);

/// A flow id for a flow this process opens (a reply flow, or an opening connection's).
pub(super) fn new_flow_id() -> u32 {
    if NEXT_REPLY_ID.load(Ordering::Relaxed) == 0 {
        let seed = (std::process::id() << 12) ^ (now() as u32) | 1;
        let _ = NEXT_REPLY_ID.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
    }
    NEXT_REPLY_ID.fetch_add(1, Ordering::Relaxed).max(1)
}

/// The flows' configuration, as the agent's `EndpointConfig` makes it.
pub(super) fn configs(t: TransportKind, mtu: usize) -> (ReceiverConfig, SenderConfig) {
    let p = settings();
    let share = if t == TransportKind::FlexPass {
        p.w_q
    } else {
        1.0
    };
    let mut credit = CreditConfig::for_link_mtu(p.link_bps, share, p.base_rtt, mtu);
    credit.batch = p.credit_batch;
    let mut r = ReceiverConfig::new(credit);
    r.credit_window_segment = flexpass_wire::max_payload_for_mtu(mtu) as u64;
    r.feedback_backoff = true;
    let mut s = SenderConfig::new(t);
    s.fit_to_path(&flexpass_core::HostPath {
        link_bps: p.link_bps,
        base_rtt: p.base_rtt,
        mtu,
        t_wait: p.t_wait,
        flashpass_unscheduled: p.flashpass_unscheduled,
    });
    (r, s)
}

struct Hello {
    peer: SocketAddrV4,
    flow_id: u32,
    packet: Packet,
    conn: HelloConn,
    transport: TransportKind,
}

fn parse_hello(line: &[u8]) -> Option<Hello> {
    let peer = text::json_str(line, b"\"peer\":\"").and_then(text::parse_v4)?;
    let flow_id = text::json_u64(line, b"\"flow_id\":")? as u32;
    let packet = Packet::decode(&unhex(text::json_str(line, b"\"hello\":\"")?)?).ok()?;
    let Packet::Hello(h) = &packet else {
        return None;
    };
    let conn = h.conn?;
    let transport = h.transport;
    (h.flow_id == flow_id).then_some(Hello {
        peer,
        flow_id,
        conn,
        transport,
        packet,
    })
}

fn hello(
    reg: &Arc<Registration>,
    line: &[u8],
    target: SocketAddrV4,
    taken: &mut HashMap<(SocketAddrV4, u32), Weak<Locked>>,
) {
    let Some(h) = parse_hello(line) else {
        crate::debug!("registration: a tcp_hello the library cannot read");
        return;
    };
    if let Some(c) = taken.get(&(h.peer, h.flow_id)).and_then(Weak::upgrade) {
        // A retransmitted HELLO (our HELLO_ACK was lost): the same answer again.
        if let Ok(mut g) = c.lock() {
            let now = now();
            if let Some(rx) = g.rx.as_mut() {
                let _ = rx.handle_packet(now, &h.packet, false);
            }
            g.flush(now);
        }
        reg.answer("tcp_taken", h.peer, h.flow_id, None, None);
        return;
    }
    if reg.listener_closed.load(Ordering::Acquire) {
        reg.answer("tcp_refused", h.peer, h.flow_id, None, None);
        return;
    }
    match take(reg, &h, target) {
        Some((c, reply)) => {
            taken.insert((h.peer, h.flow_id), Arc::downgrade(&c));
            timer::add(c);
            crate::debug!(
                "{}: connection taken (flow {}, reply {reply})",
                h.peer,
                h.flow_id
            );
        }
        None => {
            crate::debug!(
                "{}: connection refused (flow {}, errno {})",
                h.peer,
                h.flow_id,
                sys::errno()
            );
            reg.answer("tcp_refused", h.peer, h.flow_id, None, None);
        }
    }
}

/// Make the connection and queue it at the listener; None: refused.
fn take(reg: &Arc<Registration>, h: &Hello, target: SocketAddrV4) -> Option<(Shared, u32)> {
    let Some((ip, mtu)) = route_to(h.peer) else {
        crate::debug!("{}: no route", h.peer);
        return None;
    };
    let Some((own, ctl, local)) = sys::socket_pair(ip, SOCKET_BUFFER) else {
        crate::debug!("{}: no socket pair on {ip}", h.peer);
        return None;
    };
    let close_both = || {
        sys::close(own);
        sys::close(ctl);
    };
    let (rcfg, scfg) = configs(h.transport, mtu);
    let now = now();
    let reply = new_flow_id();
    let flows = Receiver::new(h.flow_id, h.transport, &rcfg)
        .and_then(|rx| Ok((rx, Sender::new(reply, scfg, 0, now)?)));
    let Ok((mut rx, mut tx)) = flows else {
        close_both();
        return None;
    };
    let _ = rx.handle_packet(now, &h.packet, false);
    tx.set_conn(HelloConn {
        role: ConnRole::Reply,
        ..h.conn
    });
    let c: Shared = Arc::new(Locked::new(Conn::new(
        (own, ctl),
        h.peer,
        local,
        SocketAddrV4::new(*h.peer.ip(), h.conn.src_port),
        SocketAddrV4::new(ip, h.conn.dst_port),
        false,
        Some(rx),
        tx,
        Some(Arc::clone(reg)),
    )));
    if !queue_at_listener(&c, target) {
        crate::debug!("{}: the listener's accept queue did not take it", h.peer);
        close_both();
        return None;
    }
    if let Ok(mut g) = c.lock() {
        g.flush(now); // HELLO_ACK and the reply flow's HELLO, from this socket
    }
    reg.live.fetch_add(1, Ordering::AcqRel);
    reg.answer("tcp_taken", h.peer, h.flow_id, Some(reply), Some(own));
    Some((c, reply))
}

/// A loopback connection to the application's listener (at `target`) stands for the
/// connection in the accept queue; false if it did not complete.
fn queue_at_listener(c: &Shared, target: SocketAddrV4) -> bool {
    let l = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if l < 0 {
        return false;
    }
    let Some(port) = (sys::bind(l, SocketAddrV4::new(*target.ip(), 0)) == 0)
        .then(|| sys::name(l))
        .flatten()
        .map(|a| a.port())
    else {
        sys::close(l);
        return false;
    };
    if let Ok(mut p) = pending().lock() {
        p.insert(port, Arc::clone(c));
        PENDING_COUNT.fetch_add(1, Ordering::Relaxed);
    }
    let r = sys::connect(l, target);
    let connected = r == 0
        || (sys::errno() == libc::EINPROGRESS
            && sys::wait(l, libc::POLLOUT, ACCEPT_WAIT_NS)
            && sys::get_int(l, libc::SOL_SOCKET, libc::SO_ERROR) == Some(0));
    // The stand-in has done its work once queued: a connection closed by its client stays
    // in the accept queue (and accept() replaces it at once).
    sys::close(l);
    // Not connected: refused, unless accept() took it already.
    connected || pending_take(port).is_none()
}

fn pending_take(port: u16) -> Option<Shared> {
    let c = pending().lock().ok()?.remove(&port)?;
    PENDING_COUNT.fetch_sub(1, Ordering::Relaxed);
    Some(c)
}

/// After accept(2) returned `fd`: if it is the loopback stand-in of a handed connection,
/// the connection's socket replaces it (dup3, with accept4's SOCK_CLOEXEC/SOCK_NONBLOCK);
/// the application-visible remote address.
pub fn on_accept(fd: c_int, flags: c_int) -> Option<SocketAddrV4> {
    if PENDING_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let r = unsafe {
        libc::syscall(
            libc::SYS_getpeername,
            fd as libc::c_long,
            &mut st as *mut libc::sockaddr_storage,
            &mut len as *mut libc::socklen_t,
        )
    };
    if r != 0 {
        return None;
    }
    let (from, _) = unsafe { crate::inet4_of((&st as *const libc::sockaddr_storage).cast(), len)? };
    let c = pending_take(from.port())?;
    let (own, remote) = {
        let mut g = c.lock().ok()?;
        // An AF_INET6 listener (dual stack) gives v4-mapped names, as for its other peers.
        g.v6 = st.ss_family as c_int == libc::AF_INET6;
        (g.own, g.app_remote)
    };
    let cloexec = if flags & libc::SOCK_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    unsafe {
        if libc::dup3(own, fd, cloexec) < 0 {
            return None;
        }
        // O_NONBLOCK belongs to the open file (shared with `own`; the library's own calls
        // never block on it).
        let fl = libc::fcntl(fd, libc::F_GETFL);
        let fl = if flags & libc::SOCK_NONBLOCK != 0 {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        libc::fcntl(fd, libc::F_SETFL, fl);
    }
    insert(fd, c);
    crate::debug!("{remote}: accepted in this process (fd {fd})");
    Some(remote)
}

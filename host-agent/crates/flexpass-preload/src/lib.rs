//! `libflexpass.so`: unmodified applications over FlexPass (README "Unmodified
//! applications"; FlexPass §5's libflxpass).
//!
//! Loaded with LD_PRELOAD (`flexpass run -- CMD`), it hooks only the calls where a TCP
//! connection is set up or named, never the data path:
//!
//! * `connect` to an IPv4 destination that matches the policy asks the local agent
//!   (`tcp_connect`, docs/agent-api.md) over a new AF_UNIX stream. If the agent carries the
//!   connection over FlexPass, that stream is `dup3`'d onto the application's socket fd
//!   (O_NONBLOCK and FD_CLOEXEC kept): every data call, poll/select/epoll, dup, fcntl, fork
//!   and exec then work natively on a real kernel fd. Otherwise ("direct": the peer does not
//!   speak FlexPass, does not serve the port, or the agent is not running) the original
//!   `connect` runs untouched on the original socket: kernel TCP.
//! * `listen` on a policy port registers the port with the agent (`tcp_listen`); the agent
//!   then delivers FlexPass connections for it as loopback TCP connections to the
//!   application's own listening socket, so `accept`/`accept4`/epoll need nothing.
//! * `accept`/`accept4`/`getpeername`/`getsockname` map those loopback connections back to
//!   the real remote (and local) address (`tcp_peer`), and name the AF_UNIX sockets of
//!   client connections with their IPv4 addresses (kept in the socket's own abstract
//!   address, so dup, fork and exec keep them too).
//! * `getsockopt`/`setsockopt`: TCP- and IP-level options on a FlexPass client socket are
//!   accepted and ignored (TCP_NODELAY, keepalive tuning, IP_TOS…); reads return plausible
//!   values (SO_DOMAIN AF_INET, SO_PROTOCOL TCP, TCP_CONGESTION "flexpass", TCP_INFO
//!   established).
//!
//! With FLEXPASS_INPROC=1 (or `listen`: the listening side only), connections run the
//! transport in this process instead (module inproc: the core inline in the data calls and
//! the waits, which io.rs, wait.rs and epoll.rs hook; docs/datapath.md, "The core in the
//! application's process").
//!
//! Environment: FLEXPASS_POLICY (`ports=5201,8000-8010;nets=10.0.0.0/8`; default: every
//! port, every non-loopback IPv4 destination), FLEXPASS_AGENT_SOCKET (default
//! /run/flexpass/agent.sock), FLEXPASS_TRANSPORT (flexpass | expresspass | dctcp | ppt | flashpass | pfabric | pase),
//! FLEXPASS_LOG=info|debug (the CLI's log level: the library's lines on stderr). The once-per-peer fallback line and the
//! once-per-process "agent not running" line are always printed.
//!
//! Rules kept by every hook: no heap allocation (stack buffers and core::fmt only), no
//! locks (atomics), errno preserved on the pass-through paths, and the real functions
//! come from dlsym(RTLD_NEXT). The in-process connections (FLEXPASS_INPROC) allocate and
//! lock, on their own descriptors only; other descriptors cost one atomic load.

#![allow(clippy::missing_safety_doc)]

mod policy;
mod request;
mod text;

use flexpass_wire::TransportKind;
use libc::{c_int, c_void, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_un, socklen_t};
use policy::Policy;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;
use text::Buf;

/// Abstract-address prefix of the AF_UNIX sockets that stand in for TCP client sockets.
const NAME_PREFIX: &[u8] = b"flexpass/c/";
/// The agent's loopback connections to local listeners come from this address.
const AGENT_LOOPBACK_SRC: [u8; 4] = [127, 0, 0, 2];
/// How long `connect` waits for the agent's verdict (its own fallback is far shorter).
const VERDICT_TIMEOUT_MS: i64 = 15_000;
/// How long a name query (`tcp_peer`, `tcp_listen`) may take.
const QUERY_TIMEOUT_MS: i64 = 2_000;

// ---------------------------------------------------------------------------------------
// Real functions
// ---------------------------------------------------------------------------------------

macro_rules! real_fn {
    ($get:ident, $sym:literal, fn($($a:ty),*) -> $r:ty) => {
        unsafe fn $get() -> Option<unsafe extern "C" fn($($a),*) -> $r> {
            static P: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let mut p = P.load(std::sync::atomic::Ordering::Relaxed);
            if p == 0 {
                p = libc::dlsym(libc::RTLD_NEXT, concat!($sym, "\0").as_ptr().cast()) as usize;
                P.store(p, std::sync::atomic::Ordering::Relaxed);
            }
            if p == 0 {
                None
            } else {
                Some(std::mem::transmute::<usize, unsafe extern "C" fn($($a),*) -> $r>(p))
            }
        }
    };
}

real_fn!(
    real_connect,
    "connect",
    fn(c_int, *const sockaddr, socklen_t) -> c_int
);
real_fn!(real_listen, "listen", fn(c_int, c_int) -> c_int);
real_fn!(
    real_accept,
    "accept",
    fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int
);
real_fn!(
    real_accept4,
    "accept4",
    fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int
);
real_fn!(
    real_getpeername,
    "getpeername",
    fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int
);
real_fn!(
    real_getsockname,
    "getsockname",
    fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int
);
real_fn!(
    real_getsockopt,
    "getsockopt",
    fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int
);
real_fn!(
    real_setsockopt,
    "setsockopt",
    fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int
);

unsafe fn errno() -> c_int {
    *libc::__errno_location()
}
unsafe fn set_errno(e: c_int) {
    *libc::__errno_location() = e;
}

fn enosys() -> c_int {
    unsafe { set_errno(libc::ENOSYS) };
    -1
}

// ---------------------------------------------------------------------------------------
// Configuration and logging
// ---------------------------------------------------------------------------------------

struct Config {
    policy: Policy,
    log: bool,
    agent: Buf<108>,
    transport: &'static str,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

unsafe fn env(name: &[u8]) -> Option<&'static [u8]> {
    let p = libc::getenv(name.as_ptr().cast());
    if p.is_null() {
        None
    } else {
        Some(std::ffi::CStr::from_ptr(p).to_bytes())
    }
}

fn config() -> &'static Config {
    CONFIG.get_or_init(|| unsafe {
        let mut agent = Buf::new();
        agent.push(env(b"FLEXPASS_AGENT_SOCKET\0").unwrap_or(b"/run/flexpass/agent.sock"));
        // One of the wire's transport names (docs/protocol.md), else flexpass.
        let transport = env(b"FLEXPASS_TRANSPORT\0")
            .and_then(|v| TransportKind::ALL.into_iter().find(|t| t.name().as_bytes() == v))
            .map_or("flexpass", TransportKind::name);
        // The CLI's log-level variable: info or debug turn the library's lines on too.
        let log = env(b"FLEXPASS_LOG\0").is_some_and(|v| matches!(v, b"info" | b"debug"));
        let policy = match env(b"FLEXPASS_POLICY\0") {
            Some(p) => Policy::parse(p).unwrap_or_else(|| {
                let mut b: Buf<160> = Buf::new();
                b.push(b"flexpass: FLEXPASS_POLICY is not valid (ports=..;nets=..): no connection uses FlexPass\n");
                b.stderr();
                Policy::none()
            }),
            None => Policy::all(),
        };
        Config {
            policy,
            log,
            agent,
            transport,
        }
    })
}

macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::config().log {
            let mut b: $crate::text::Buf<400> = $crate::text::Buf::new();
            let _ = core::fmt::Write::write_fmt(&mut b, format_args!("flexpass[{}]: ", unsafe { libc::getpid() }));
            let _ = core::fmt::Write::write_fmt(&mut b, format_args!($($arg)*));
            b.push(b"\n");
            b.stderr();
        }
    };
}

pub(crate) use debug;

// After the macros they use.
mod epoll;
mod inproc;
mod io;
mod process;
mod sendfile;
mod sockopt;
mod wait;

static AGENT_DOWN_LOGGED: AtomicBool = AtomicBool::new(false);
/// Peers (IPv4) whose fallback to kernel TCP this process has logged.
static FALLBACK_LOGGED: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];

fn log_agent_down(err: c_int) {
    if !AGENT_DOWN_LOGGED.swap(true, Ordering::Relaxed) {
        let mut b: Buf<300> = Buf::new();
        let _ = core::fmt::Write::write_fmt(
            &mut b,
            format_args!(
                "flexpass: agent not running at {} (errno {err}): kernel TCP for every connection of this process\n",
                config().agent.as_str()
            ),
        );
        b.stderr();
    }
}

/// Print the fallback line once per peer (and process).
fn log_fallback(dst: SocketAddrV4, reason: &str) {
    let ip = u32::from(*dst.ip());
    for slot in &FALLBACK_LOGGED {
        match slot.compare_exchange(0, ip, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break,
            Err(cur) if cur == ip => return,
            Err(_) => {}
        }
    }
    let mut b: Buf<300> = Buf::new();
    let _ = core::fmt::Write::write_fmt(
        &mut b,
        format_args!("flexpass: {dst}: {reason}: kernel TCP (logged once per peer)\n"),
    );
    b.stderr();
}

// ---------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------

/// An IPv4 endpoint from AF_INET or IPv4-mapped AF_INET6; the bool says AF_INET6.
unsafe fn inet4_of(addr: *const sockaddr, len: socklen_t) -> Option<(SocketAddrV4, bool)> {
    if addr.is_null() || (len as usize) < size_of::<libc::sa_family_t>() {
        return None;
    }
    match (*addr).sa_family as c_int {
        libc::AF_INET if len as usize >= size_of::<sockaddr_in>() => {
            let a = &*(addr as *const sockaddr_in);
            Some((
                SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                ),
                false,
            ))
        }
        libc::AF_INET6 if len as usize >= size_of::<sockaddr_in6>() => {
            let a = &*(addr as *const sockaddr_in6);
            let o = a.sin6_addr.s6_addr;
            if o[..10] == [0; 10] && o[10] == 0xff && o[11] == 0xff {
                Some((
                    SocketAddrV4::new(
                        Ipv4Addr::new(o[12], o[13], o[14], o[15]),
                        u16::from_be(a.sin6_port),
                    ),
                    true,
                ))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Write `a` into the caller's buffer (capacity `cap`) as AF_INET or IPv4-mapped AF_INET6,
/// truncating like the kernel; `*len` becomes the full size.
unsafe fn write_inet4(
    a: SocketAddrV4,
    v6: bool,
    out: *mut sockaddr,
    len: *mut socklen_t,
    cap: socklen_t,
) {
    if out.is_null() || len.is_null() {
        return;
    }
    if v6 {
        let mut s: sockaddr_in6 = std::mem::zeroed();
        s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        s.sin6_port = a.port().to_be();
        let o = a.ip().octets();
        s.sin6_addr.s6_addr[10] = 0xff;
        s.sin6_addr.s6_addr[11] = 0xff;
        s.sin6_addr.s6_addr[12..].copy_from_slice(&o);
        copy_out(&s, out, len, cap);
    } else {
        let mut s: sockaddr_in = std::mem::zeroed();
        s.sin_family = libc::AF_INET as libc::sa_family_t;
        s.sin_port = a.port().to_be();
        s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
        copy_out(&s, out, len, cap);
    }
}

unsafe fn copy_out<T>(s: &T, out: *mut sockaddr, len: *mut socklen_t, cap: socklen_t) {
    let n = size_of::<T>().min(cap as usize);
    std::ptr::copy_nonoverlapping((s as *const T).cast::<u8>(), out.cast::<u8>(), n);
    *len = size_of::<T>() as socklen_t;
}

/// The socket's own address (real getsockname) into `st`.
unsafe fn own_name(fd: c_int, st: &mut libc::sockaddr_storage) -> Option<socklen_t> {
    let mut len = size_of::<libc::sockaddr_storage>() as socklen_t;
    let f = real_getsockname()?;
    (f(fd, (st as *mut libc::sockaddr_storage).cast(), &mut len) == 0).then_some(len)
}

unsafe fn peer_name(fd: c_int, st: &mut libc::sockaddr_storage) -> Option<socklen_t> {
    let mut len = size_of::<libc::sockaddr_storage>() as socklen_t;
    let f = real_getpeername()?;
    (f(fd, (st as *mut libc::sockaddr_storage).cast(), &mut len) == 0).then_some(len)
}

/// A FlexPass client socket: (local, remote, was AF_INET6), from its abstract name.
struct ClientName {
    local: SocketAddrV4,
    remote: SocketAddrV4,
    v6: bool,
}

unsafe fn client_name(fd: c_int) -> Option<ClientName> {
    let mut st: libc::sockaddr_storage = std::mem::zeroed();
    let len = own_name(fd, &mut st)? as usize;
    if st.ss_family as c_int != libc::AF_UNIX {
        return None;
    }
    let un = &*(&st as *const libc::sockaddr_storage as *const sockaddr_un);
    let off = size_of::<libc::sa_family_t>();
    let n = len.checked_sub(off)?.min(un.sun_path.len());
    let path: &[u8] = std::slice::from_raw_parts(un.sun_path.as_ptr().cast(), n);
    let name = path.strip_prefix(b"\0")?.strip_prefix(NAME_PREFIX)?;
    text::parse_client_name(name).map(|(v6, local, remote)| ClientName { local, remote, v6 })
}

fn is_loopback_peer(peer: SocketAddrV4, local: SocketAddrV4) -> bool {
    peer.ip().octets() == AGENT_LOOPBACK_SRC || peer.ip() == local.ip()
}

// ---------------------------------------------------------------------------------------
// Talking to the agent
// ---------------------------------------------------------------------------------------

/// A new AF_UNIX stream to the agent (`flags`: SOCK_NONBLOCK), bound to `bind_name` if any.
unsafe fn agent_stream(bind_name: Option<&[u8]>, flags: c_int) -> Result<c_int, c_int> {
    let cfg = config();
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags;
    let s = libc::socket(libc::AF_UNIX, kind, 0);
    if s < 0 {
        return Err(errno());
    }
    if let Some(name) = bind_name {
        let mut un: sockaddr_un = std::mem::zeroed();
        un.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let n = name.len().min(un.sun_path.len() - 1);
        for (d, &b) in un.sun_path[1..].iter_mut().zip(&name[..n]) {
            *d = b as libc::c_char;
        }
        let len = (size_of::<libc::sa_family_t>() + 1 + n) as socklen_t;
        if libc::bind(s, (&un as *const sockaddr_un).cast(), len) != 0 {
            let e = errno();
            libc::close(s);
            return Err(e);
        }
    }
    let mut un: sockaddr_un = std::mem::zeroed();
    un.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = cfg.agent.as_bytes();
    let n = path.len().min(un.sun_path.len() - 1);
    for (d, &b) in un.sun_path.iter_mut().zip(&path[..n]) {
        *d = b as libc::c_char;
    }
    let Some(conn) = real_connect() else {
        libc::close(s);
        return Err(libc::ENOSYS);
    };
    if conn(
        s,
        (&un as *const sockaddr_un).cast(),
        size_of::<sockaddr_un>() as socklen_t,
    ) != 0
    {
        let e = errno();
        libc::close(s);
        return Err(e);
    }
    Ok(s)
}

unsafe fn write_all(s: c_int, mut b: &[u8]) -> bool {
    while !b.is_empty() {
        let n = libc::send(s, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL);
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        b = &b[n as usize..];
    }
    true
}

unsafe fn now_ms() -> i64 {
    let mut ts: libc::timespec = std::mem::zeroed();
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    ts.tv_sec as i64 * 1000 + ts.tv_nsec as i64 / 1_000_000
}

/// Read exactly one reply line (nothing after it: the stream may carry data next).
unsafe fn read_line<const N: usize>(s: c_int, out: &mut Buf<N>, timeout_ms: i64) -> bool {
    let deadline = now_ms() + timeout_ms;
    loop {
        let left = deadline - now_ms();
        if left <= 0 {
            return false;
        }
        let mut pfd = libc::pollfd {
            fd: s,
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: left / 1000,
            tv_nsec: left % 1000 * 1_000_000,
        };
        let r = inproc::sys::ppoll(std::slice::from_mut(&mut pfd), Some(&ts));
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            return false;
        }
        let mut tmp = [0u8; 512];
        let room = (N - out.len()).min(tmp.len());
        if room == 0 {
            return false;
        }
        let n = libc::recv(s, tmp.as_mut_ptr().cast(), room, libc::MSG_PEEK);
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        let n = n as usize;
        let take = match tmp[..n].iter().position(|&b| b == b'\n') {
            Some(p) => p + 1,
            None => n,
        };
        let got = libc::recv(s, tmp.as_mut_ptr().cast(), take, 0);
        if got != take as isize {
            return false;
        }
        out.push(&tmp[..take]);
        if tmp[take - 1] == b'\n' {
            return true;
        }
    }
}

/// One request, one reply line, close.
unsafe fn query<const N: usize>(req: &[u8], reply: &mut Buf<N>) -> Result<(), c_int> {
    let s = agent_stream(None, 0)?;
    let ok = write_all(s, req) && read_line(s, reply, QUERY_TIMEOUT_MS);
    libc::close(s);
    if ok {
        Ok(())
    } else {
        Err(libc::EIO)
    }
}

/// The application-visible addresses of an agent loopback connection (answering side),
/// by the agent's source port: (remote, local).
unsafe fn server_names(agent_port: u16) -> Option<(SocketAddrV4, SocketAddrV4)> {
    let mut req: Buf<96> = Buf::new();
    request::tcp_peer(&mut req, agent_port);
    let mut reply: Buf<512> = Buf::new();
    query(req.as_bytes(), &mut reply).ok()?;
    let r = reply.as_bytes();
    if !text::contains(r, b"\"ok\":true") {
        return None;
    }
    let peer = text::json_str(r, b"\"peer\":\"").and_then(text::parse_v4)?;
    let local = text::json_str(r, b"\"local\":\"").and_then(text::parse_v4)?;
    Some((peer, local))
}

// ---------------------------------------------------------------------------------------
// Hooks
// ---------------------------------------------------------------------------------------

unsafe fn sockopt_int(fd: c_int, level: c_int, name: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    let f = real_getsockopt()?;
    (f(fd, level, name, (&mut v as *mut c_int).cast(), &mut len) == 0).then_some(v)
}

enum Verdict {
    FlexPass,
    Direct,
}

/// The local address a connection to `dst` gets: the socket's bound address if it has a
/// port, else the address the route uses and a fresh port (a connected UDP socket's).
unsafe fn local_for(fd: c_int, dst: SocketAddrV4) -> SocketAddrV4 {
    let mut st: libc::sockaddr_storage = std::mem::zeroed();
    let mut bound = None;
    if let Some(len) = own_name(fd, &mut st) {
        if let Some((a, _)) = inet4_of((&st as *const libc::sockaddr_storage).cast(), len) {
            if a.port() != 0 {
                bound = Some(a);
            }
        }
    }
    let u = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    let mut probe = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    if u >= 0 {
        let mut sin: sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = dst.port().to_be();
        sin.sin_addr.s_addr = u32::from(*dst.ip()).to_be();
        if let Some(c) = real_connect() {
            if c(
                u,
                (&sin as *const sockaddr_in).cast(),
                size_of::<sockaddr_in>() as socklen_t,
            ) == 0
            {
                if let Some(len) = own_name(u, &mut st) {
                    if let Some((a, _)) =
                        inet4_of((&st as *const libc::sockaddr_storage).cast(), len)
                    {
                        probe = a;
                    }
                }
            }
        }
        libc::close(u);
    }
    match bound {
        Some(b) if !b.ip().is_unspecified() => b,
        Some(b) => SocketAddrV4::new(*probe.ip(), b.port()),
        None => probe,
    }
}

static NAME_SEQ: AtomicU32 = AtomicU32::new(0);

/// Ask the agent to carry this connection; on FlexPass the agent's stream now is `fd`.
unsafe fn via_agent(fd: c_int, dst: SocketAddrV4, v6: bool) -> Verdict {
    let local = local_for(fd, dst);
    let mut name: Buf<100> = Buf::new();
    let mut s = -1;
    for _ in 0..4 {
        name.clear();
        name.push(NAME_PREFIX);
        let seq = NAME_SEQ.fetch_add(1, Ordering::Relaxed);
        let _ = core::fmt::Write::write_fmt(
            &mut name,
            format_args!(
                "{}/{local}/{dst}/{}.{seq}",
                if v6 { 6 } else { 4 },
                libc::getpid()
            ),
        );
        match agent_stream(Some(name.as_bytes()), 0) {
            Ok(x) => {
                s = x;
                break;
            }
            Err(libc::EADDRINUSE) => continue,
            Err(e) => {
                log_agent_down(e);
                return Verdict::Direct;
            }
        }
    }
    if s < 0 {
        return Verdict::Direct;
    }
    let mut req: Buf<200> = Buf::new();
    request::tcp_connect(&mut req, dst, local, config().transport);
    let mut reply: Buf<512> = Buf::new();
    if !write_all(s, req.as_bytes()) || !read_line(s, &mut reply, VERDICT_TIMEOUT_MS) {
        libc::close(s);
        debug!("{dst}: no answer from the agent: kernel TCP");
        return Verdict::Direct;
    }
    let r = reply.as_bytes();
    if text::contains(r, b"\"mode\":\"flexpass\"") {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        let fdfl = libc::fcntl(fd, libc::F_GETFD);
        let cloexec = fdfl >= 0 && fdfl & libc::FD_CLOEXEC != 0;
        if libc::dup3(s, fd, if cloexec { libc::O_CLOEXEC } else { 0 }) < 0 {
            libc::close(s);
            debug!("{dst}: dup3 failed: kernel TCP");
            return Verdict::Direct;
        }
        libc::close(s);
        if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
            libc::fcntl(
                fd,
                libc::F_SETFL,
                fl & (libc::O_NONBLOCK | libc::O_APPEND | libc::O_ASYNC),
            );
        }
        debug!("{local} → {dst}: over FlexPass (fd {fd})");
        return Verdict::FlexPass;
    }
    libc::close(s);
    let reason = text::json_str(r, b"\"reason\":\"")
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("the agent did not carry it");
    if text::contains(r, b"\"mode\":\"direct\"") {
        log_fallback(dst, reason);
    } else {
        debug!(
            "{dst}: agent refused ({}): kernel TCP",
            std::str::from_utf8(r).unwrap_or("?").trim_end()
        );
    }
    Verdict::Direct
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(real) = real_connect() else {
        return enosys();
    };
    let Some((dst, v6)) = inet4_of(addr, len) else {
        return real(fd, addr, len);
    };
    let saved = errno();
    if inproc::is_conn(fd) {
        // A second connect on an in-process connection (non-blocking completion check).
        set_errno(libc::EISCONN);
        return -1;
    }
    if !config().policy.client(dst) {
        return real(fd, addr, len);
    }
    match sockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN) {
        Some(libc::AF_INET) | Some(libc::AF_INET6) => {}
        Some(libc::AF_UNIX) if client_name(fd).is_some() => {
            // A second connect on a FlexPass socket (non-blocking completion check).
            set_errno(libc::EISCONN);
            return -1;
        }
        _ => {
            set_errno(saved);
            return real(fd, addr, len);
        }
    }
    if sockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) != Some(libc::SOCK_STREAM)
        || sockopt_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL) != Some(libc::IPPROTO_TCP)
    {
        set_errno(saved);
        return real(fd, addr, len);
    }
    let nonblocking = libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0;
    let verdict = if inproc::opening() {
        match inproc::open::connect(fd, dst, v6) {
            inproc::open::Opened::FlexPass => {
                debug!("→ {dst}: over FlexPass in this process (fd {fd})");
                Verdict::FlexPass
            }
            inproc::open::Opened::Direct(reason) => {
                log_fallback(dst, reason);
                Verdict::Direct
            }
        }
    } else {
        via_agent(fd, dst, v6)
    };
    match verdict {
        Verdict::FlexPass => {
            if nonblocking {
                // As kernel TCP: in progress, and the socket is already writable with
                // SO_ERROR 0.
                set_errno(libc::EINPROGRESS);
                -1
            } else {
                set_errno(saved);
                0
            }
        }
        Verdict::Direct => {
            set_errno(saved);
            real(fd, addr, len)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    let Some(real) = real_listen() else {
        return enosys();
    };
    let saved = errno();
    let mut st: libc::sockaddr_storage = std::mem::zeroed();
    let name = own_name(fd, &mut st).filter(|&len| port_of(&st, len).is_some_and(|p| p != 0));
    // A socket bound to its port is offered to the agent before it listens: a peer that sees
    // the port open (a connect, `ss`) then finds it served over FlexPass, never in between
    // on kernel TCP. One bound by listen() itself (no port yet) is offered after.
    let offered = match name {
        Some(len) => offer_listener(fd, &st, len),
        None => Offered::No,
    };
    let r = real(fd, backlog);
    if r != 0 {
        if offered == Offered::InProcess {
            let e = errno();
            inproc::listen::on_listener_close(fd);
            set_errno(e);
        }
        // Offered to the agent: the agent finds nothing listening at the first peer's
        // connection and unregisters the port (the peer then uses kernel TCP).
        return r;
    }
    if name.is_none() {
        if let Some(len) = own_name(fd, &mut st) {
            offer_listener(fd, &st, len);
        }
    }
    set_errno(saved);
    r
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Offered {
    No,
    InProcess,
    Agent,
}

/// The port of a socket name (AF_INET or AF_INET6).
unsafe fn port_of(st: &libc::sockaddr_storage, len: socklen_t) -> Option<u16> {
    match st.ss_family as c_int {
        libc::AF_INET => {
            inet4_of((st as *const libc::sockaddr_storage).cast(), len).map(|(a, _)| a.port())
        }
        libc::AF_INET6 => {
            let a = &*(st as *const libc::sockaddr_storage as *const sockaddr_in6);
            Some(u16::from_be(a.sin6_port))
        }
        _ => None,
    }
}

/// Offer the TCP listener `fd` (bound to its port; `st`, `len`: its name) for FlexPass: served in this process
/// (in-process, when on and the agent takes it) or by the agent, unless it is local-only,
/// not TCP, or the policy keeps the port on kernel TCP. Leaves errno as it may find it
/// changed: the caller restores it.
unsafe fn offer_listener(fd: c_int, st: &libc::sockaddr_storage, len: socklen_t) -> Offered {
    let (port, addr): (u16, Buf<64>) = match st.ss_family as c_int {
        libc::AF_INET => {
            let Some((a, _)) = inet4_of((st as *const libc::sockaddr_storage).cast(), len) else {
                return Offered::No;
            };
            let mut b = Buf::new();
            let _ = core::fmt::Write::write_fmt(&mut b, format_args!("{}", a.ip()));
            (a.port(), b)
        }
        libc::AF_INET6 => {
            let a = &*(st as *const libc::sockaddr_storage as *const sockaddr_in6);
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            let mut b = Buf::new();
            let _ = core::fmt::Write::write_fmt(&mut b, format_args!("{ip}"));
            (u16::from_be(a.sin6_port), b)
        }
        _ => return Offered::No,
    };
    // A listener bound to a loopback address is local-only: never offered to remote peers.
    let loopback = addr.as_str().starts_with("127.")
        || addr.as_str() == "::1"
        || addr.as_str().starts_with("::ffff:127.");
    if loopback
        || sockopt_int(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL) != Some(libc::IPPROTO_TCP)
        || !config().policy.server(port)
    {
        return Offered::No;
    }
    if inproc::enabled() {
        if let Some(target) = self_connect_target(st.ss_family as c_int, addr.as_str(), port) {
            if inproc::listen::register(fd, port, addr.as_str(), target) {
                return Offered::InProcess;
            }
        }
    }
    let mut req: Buf<160> = Buf::new();
    request::tcp_listen(&mut req, port, addr.as_str());
    let mut reply: Buf<256> = Buf::new();
    match query(req.as_bytes(), &mut reply) {
        Ok(()) => {
            debug!("port {port} ({}) served over FlexPass", addr.as_str());
            Offered::Agent
        }
        Err(e) => {
            log_agent_down(e);
            Offered::No
        }
    }
}

/// Where the library reaches a listener bound to `addr` (in-process connections queue
/// there as loopback connections): its IPv4 address, or 127.0.0.1 for a wildcard.
fn self_connect_target(family: c_int, addr: &str, port: u16) -> Option<SocketAddrV4> {
    let ip = match (family, addr) {
        (_, "0.0.0.0") | (libc::AF_INET6, "::") => Ipv4Addr::LOCALHOST,
        (libc::AF_INET, a) => a.parse().ok()?,
        (_, a) => a.strip_prefix("::ffff:")?.parse().ok()?,
    };
    Some(SocketAddrV4::new(ip, port))
}

/// After accept: an in-process connection (FLEXPASS_INPROC) takes the place of its
/// loopback stand-in; a loopback connection from the agent gets the real remote address.
unsafe fn after_accept(
    conn_fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    cap: socklen_t,
    flags: c_int,
) {
    if inproc::enabled() {
        if let Some(remote) = inproc::listen::on_accept(conn_fd, flags) {
            if !addr.is_null() && !len.is_null() && cap as usize >= size_of::<libc::sa_family_t>() {
                let v6 = (*addr).sa_family as c_int == libc::AF_INET6;
                write_inet4(remote, v6, addr, len, cap);
            }
            return;
        }
    }
    fix_accepted(conn_fd, addr, len, cap);
}

/// After accept: a loopback connection from the agent gets the real remote address.
unsafe fn fix_accepted(conn_fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, cap: socklen_t) {
    if addr.is_null() || len.is_null() || (cap as usize) < size_of::<libc::sa_family_t>() {
        return;
    }
    let Some((peer, v6)) = inet4_of(addr, (*len).min(cap)) else {
        return;
    };
    let mut st: libc::sockaddr_storage = std::mem::zeroed();
    let Some(l) = own_name(conn_fd, &mut st) else {
        return;
    };
    let Some((me, _)) = inet4_of((&st as *const libc::sockaddr_storage).cast(), l) else {
        return;
    };
    if !is_loopback_peer(peer, me) || !config().policy.server(me.port()) {
        return;
    }
    if let Some((remote, _)) = server_names(peer.port()) {
        write_inet4(remote, v6, addr, len, cap);
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(real) = real_accept() else {
        return enosys();
    };
    let cap = if len.is_null() { 0 } else { *len };
    let r = real(fd, addr, len);
    if r >= 0 {
        let saved = errno();
        after_accept(r, addr, len, cap, 0);
        set_errno(saved);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let Some(real) = real_accept4() else {
        return enosys();
    };
    let cap = if len.is_null() { 0 } else { *len };
    let r = real(fd, addr, len, flags);
    if r >= 0 {
        let saved = errno();
        after_accept(r, addr, len, cap, flags);
        set_errno(saved);
    }
    r
}

/// getpeername / getsockname on a FlexPass socket: `peer` selects which address.
unsafe fn names(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, cap: socklen_t, peer: bool) {
    if addr.is_null() || len.is_null() {
        return;
    }
    if (*addr).sa_family as c_int == libc::AF_UNIX {
        if let Some(n) = client_name(fd) {
            write_inet4(if peer { n.remote } else { n.local }, n.v6, addr, len, cap);
        }
        return;
    }
    // Answering side: the application's end of an agent loopback connection.
    let mut other: libc::sockaddr_storage = std::mem::zeroed();
    let (mine, theirs) = if peer {
        let Some((p, v6)) = inet4_of(addr, (*len).min(cap)) else {
            return;
        };
        let Some(l) = own_name(fd, &mut other) else {
            return;
        };
        let Some((me, _)) = inet4_of((&other as *const libc::sockaddr_storage).cast(), l) else {
            return;
        };
        ((me, v6), p)
    } else {
        let Some((me, v6)) = inet4_of(addr, (*len).min(cap)) else {
            return;
        };
        let Some(l) = peer_name(fd, &mut other) else {
            return;
        };
        let Some((p, _)) = inet4_of((&other as *const libc::sockaddr_storage).cast(), l) else {
            return;
        };
        ((me, v6), p)
    };
    let ((me, v6), them) = (mine, theirs);
    if !is_loopback_peer(them, me) || !config().policy.server(me.port()) {
        return;
    }
    if let Some((remote, local)) = server_names(them.port()) {
        write_inet4(if peer { remote } else { local }, v6, addr, len, cap);
    }
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(real) = real_getpeername() else {
        return enosys();
    };
    let cap = if len.is_null() { 0 } else { *len };
    if let Some((remote, _, v6)) = inproc::names(fd) {
        write_inet4(remote, v6, addr, len, cap);
        return 0;
    }
    let r = real(fd, addr, len);
    if r == 0 && cap as usize >= size_of::<libc::sa_family_t>() {
        let saved = errno();
        names(fd, addr, len, cap, true);
        set_errno(saved);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(real) = real_getsockname() else {
        return enosys();
    };
    let cap = if len.is_null() { 0 } else { *len };
    if let Some((_, local, v6)) = inproc::names(fd) {
        write_inet4(local, v6, addr, len, cap);
        return 0;
    }
    let r = real(fd, addr, len);
    if r == 0 && cap as usize >= size_of::<libc::sa_family_t>() {
        let saved = errno();
        names(fd, addr, len, cap, false);
        set_errno(saved);
    }
    r
}

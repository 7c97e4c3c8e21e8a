//! The transport in the application's process (#28; docs/datapath.md, "Next step: the
//! core in the application's process"), behind `FLEXPASS_INPROC=1` (off by default).
//!
//! FLEXPASS_INPROC=1: both sides; FLEXPASS_INPROC=listen: the listening side only (the
//! opening side through the agent, as without the switch).
//!
//! Built: the listening side. `listen()` on a FlexPass port holds an in-process
//! registration with the agent (`tcp_listen` + `inproc`, agent `--inproc-listen`); each
//! `tcp_hello` becomes a connection with its own UDP socket, the open flow's `Receiver`
//! and the reply flow's `Sender` (listen.rs); `accept()` returns a descriptor onto which
//! that socket is dup3'd; the data calls run the core inline (io.rs in the crate root);
//! one timer thread per process (timer.rs). The opening side (open.rs): connect() sends
//! the HELLO from the connection's own sockets and follows the HELLO_ACK (the move rule).
//! Across fork and exec: one process drives a connection at a time (fork.rs).
//!
//! Environment: FLEXPASS_INPROC turns it on; FLEXPASS_PEER_PORT is the peer agents' UDP
//! port (default 7890); the flows take the agent's `--link-gbps`, `--rtt-us`, `--w-q` and
//! `--credit-batch` from the agent (`settings`), unless FLEXPASS_LINK_GBPS, FLEXPASS_RTT_US,
//! FLEXPASS_W_Q or FLEXPASS_CREDIT_BATCH set them; the MTU is the route's (IP_MTU).

pub mod conn;
pub mod deadlines;
pub mod fork;
pub mod listen;
pub mod open;
pub mod sys;
pub mod timer;

use flexpass_core::Nanos;
use libc::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

pub type Shared = Arc<conn::Locked>;

struct Params {
    /// The listening side in-process (FLEXPASS_INPROC=1 or `listen`).
    on: bool,
    /// The opening side too (FLEXPASS_INPROC=1).
    open: bool,
}

fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| Params {
        on: std::env::var("FLEXPASS_INPROC").is_ok_and(|v| v == "1" || v == "listen"),
        open: std::env::var("FLEXPASS_INPROC").is_ok_and(|v| v == "1"),
    })
}

/// The settings of this process's flows, as the agent's flows have them (docs/agent-api.md,
/// "The host's settings").
pub struct Settings {
    pub link_bps: f64,
    pub base_rtt: Nanos,
    pub w_q: f64,
    /// Credits paced per batch (the agent's --credit-batch; docs/datapath.md "Credit batches").
    pub credit_batch: u32,
    /// FlashPass T_wait and pre-credit phase (the agent's; no environment variable).
    pub t_wait: Nanos,
    pub flashpass_unscheduled: bool,
}

/// Each setting from the environment if set there (FLEXPASS_LINK_GBPS, FLEXPASS_RTT_US,
/// FLEXPASS_W_Q, FLEXPASS_CREDIT_BATCH), else from the host's agent (`settings`, asked once
/// per process, at its first connection), else the agent's defaults (10, 100, 0.5, 1).
pub fn settings() -> &'static Settings {
    static S: OnceLock<Settings> = OnceLock::new();
    S.get_or_init(|| {
        let keys: [(&str, &[u8], f64); 4] = [
            ("FLEXPASS_LINK_GBPS", b"\"link_gbps\":", 10.0),
            ("FLEXPASS_RTT_US", b"\"rtt_us\":", 100.0),
            ("FLEXPASS_W_Q", b"\"w_q\":", 0.5),
            ("FLEXPASS_CREDIT_BATCH", b"\"credit_batch\":", 1.0),
        ];
        // Each value a positive number, w_q at most 1: else the next source (a variable
        // set to anything else is named once).
        let valid = |i: usize, x: f64| x.is_finite() && x > 0.0 && (i != 2 || x <= 1.0);
        let mut env = [None; 4];
        for (i, (name, _, _)) in keys.iter().enumerate() {
            let Ok(set) = std::env::var(name) else { continue };
            env[i] = set.trim().parse().ok().filter(|&x| valid(i, x));
            if env[i].is_none() {
                let mut b: crate::text::Buf<200> = crate::text::Buf::new();
                let _ = core::fmt::Write::write_fmt(
                    &mut b,
                    format_args!("flexpass: {name}={set} is not valid: the agent's value\n"),
                );
                b.stderr();
            }
        }
        let mut reply: crate::text::Buf<512> = crate::text::Buf::new();
        let asked = env.iter().any(Option::is_none) && {
            let mut req: crate::text::Buf<32> = crate::text::Buf::new();
            crate::request::settings(&mut req);
            unsafe { crate::query(req.as_bytes(), &mut reply) }.is_ok()
                && crate::text::contains(reply.as_bytes(), b"\"ok\":true")
        };
        let mut from = ["default"; 4];
        let mut v = [0.0; 4];
        for (i, (_, key, default)) in keys.iter().enumerate() {
            let agent = asked
                .then(|| crate::text::json_f64(reply.as_bytes(), key))
                .flatten()
                .filter(|&x| valid(i, x));
            (v[i], from[i]) = match (env[i], agent) {
                (Some(x), _) => (x, "environment"),
                (None, Some(x)) => (x, "agent"),
                (None, None) => (*default, "default"),
            };
        }
        let r = reply.as_bytes();
        // The agent's default T_wait: 2 base RTTs, at least 2 ms.
        let t_wait_us = asked
            .then(|| crate::text::json_f64(r, b"\"t_wait_us\":"))
            .flatten()
            .unwrap_or((2.0 * v[1]).max(2000.0));
        let flashpass_unscheduled =
            !(asked && crate::text::contains(r, b"\"flashpass_unscheduled\":false"));
        crate::debug!(
            "flow settings: link {} Gbit/s ({}), RTT {} us ({}), w_q {} ({}), credit batch {} ({}); FlashPass T_wait {} us, pre-credit phase {}",
            v[0], from[0], v[1], from[1], v[2], from[2], v[3], from[3], t_wait_us,
            if flashpass_unscheduled { "on" } else { "off" }
        );
        Settings {
            link_bps: v[0] * 1e9,
            base_rtt: (v[1] * 1e3) as Nanos,
            w_q: v[2],
            credit_batch: v[3].clamp(1.0, 64.0) as u32,
            t_wait: (t_wait_us * 1e3) as Nanos,
            flashpass_unscheduled,
        }
    })
}

pub fn enabled() -> bool {
    params().on
}

/// connect() opens in-process too.
pub fn opening() -> bool {
    params().open
}

/// The core's clock: nanoseconds since the first use in this process.
pub fn now() -> Nanos {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as Nanos
}

/// Connections whose ACKs wait for the application's reply (Conn::flush_after_read), and
/// whether any may: every wait of the application sends them first (`send_held`), so that
/// a read that is not answered costs its peer no delay. try_lock only: a lock held by a
/// thread at fork stays held in the child, whose ACKs then wait for the timer thread.
static HELD: Mutex<Vec<Shared>> = Mutex::new(Vec::new());
static HELD_ANY: AtomicBool = AtomicBool::new(false);

/// `c` holds ACKs for a reply (after its guard is dropped or not: `send_held` locks it).
pub fn holding(c: &Shared) {
    if let Ok(mut v) = HELD.try_lock() {
        v.push(c.clone());
        HELD_ANY.store(true, Ordering::Release);
    }
}

/// The application is about to wait (a blocking poll, epoll or select, or a blocking call
/// on a connection): held ACKs leave now. Call with no connection locked.
pub fn send_held() {
    if !HELD_ANY.load(Ordering::Acquire) {
        return;
    }
    let list = match HELD.try_lock() {
        Ok(mut v) => {
            HELD_ANY.store(false, Ordering::Release);
            std::mem::take(&mut *v)
        }
        Err(_) => return,
    };
    for c in list {
        if !c.own.owned() {
            continue;
        }
        if let Ok(mut g) = c.lock() {
            g.send_held();
        }
    }
}

/// Connections by the application's descriptor. `COUNT` is the fast path of every hooked
/// data call: 0 means no descriptor of this process is an in-process connection.
static COUNT: AtomicUsize = AtomicUsize::new(0);
fn table() -> &'static RwLock<HashMap<c_int, Shared>> {
    static T: OnceLock<RwLock<HashMap<c_int, Shared>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

type TableRead = std::sync::RwLockReadGuard<'static, HashMap<c_int, Shared>>;

fn table_read() -> Option<TableRead> {
    table().read().ok()
}

/// Some descriptor of this process is an in-process connection.
pub fn any() -> bool {
    count() > 0
}

fn count() -> usize {
    COUNT.load(Ordering::Relaxed)
}

/// The connections of this process's descriptors, each once.
fn distinct() -> Vec<Shared> {
    if count() == 0 {
        return Vec::new();
    }
    table_read().map_or_else(Vec::new, |t| distinct_in(&t))
}

/// The connections of `t`, each once (duplicated descriptors share one).
fn distinct_in(t: &HashMap<c_int, Shared>) -> Vec<Shared> {
    let mut seen = std::collections::HashSet::new();
    t.values()
        .filter(|c| seen.insert(Arc::as_ptr(c)))
        .cloned()
        .collect()
}

/// A data call's claim (fork.rs): false if another process drives the connection (the
/// call fails with EIO). A connection claimed after a fork joins this process's timer
/// thread (a forked child starts its own).
pub fn claim(c: &Shared) -> bool {
    match c.own.claim() {
        fork::Claim::Mine => true,
        fork::Claim::Claimed => {
            adopt(c);
            true
        }
        fork::Claim::Refused => {
            if let Ok(g) = c.lock() {
                crate::debug!(
                    "{}: in-process connection driven by another process (fork): EIO",
                    g.app_remote
                );
            }
            false
        }
    }
}

fn adopt(c: &Shared) {
    if c.own.gen.load(Ordering::Relaxed) != timer::generation() {
        timer::add(Arc::clone(c));
    }
}

pub fn lookup(fd: c_int) -> Option<Shared> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    table().read().ok()?.get(&fd).cloned()
}

pub fn is_conn(fd: c_int) -> bool {
    lookup(fd).is_some()
}

/// getpeername / getsockname of a connection: (remote, local, AF_INET6).
pub fn names(fd: c_int) -> Option<(std::net::SocketAddrV4, std::net::SocketAddrV4, bool)> {
    let c = lookup(fd)?;
    let g = c.lock().ok()?;
    Some((g.app_remote, g.app_local, g.v6))
}

fn insert(fd: c_int, c: Shared) {
    if let Ok(mut t) = table().write() {
        if t.insert(fd, c).is_none() {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn remove(fd: c_int) -> Option<Shared> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let c = table().write().ok()?.remove(&fd);
    if c.is_some() {
        COUNT.fetch_sub(1, Ordering::Relaxed);
    }
    c
}

/// `new` is a duplicate of `old` (dup, dup2, dup3): if `old` is a connection, so is `new`,
/// the same one (the kernel's descriptor is a dup of the same socket).
pub fn on_dup(old: c_int, new: c_int) {
    if let Some(c) = lookup(old) {
        insert(new, c);
    }
}

/// The application closes `fd`: if it is a connection and no other descriptor of the
/// process is (a dup), the library finishes its flows (FIN after the written bytes) on its
/// own descriptor, and the timer thread ends it.
///
/// After a fork (fork.rs) only the process that drives the connection ends it; another
/// one's close forgets its copy (no datagram).
pub fn on_close(fd: c_int) {
    if let Some(c) = remove(fd) {
        let duplicated = table()
            .read()
            .is_ok_and(|t| t.values().any(|o| Arc::ptr_eq(o, &c)));
        if duplicated {
            return;
        }
        release(&c);
    }
}

/// This process lets go of `c` (its last descriptor closed, or the process exits).
fn release(c: &Shared) -> fork::Release {
    let (r, claimed) = c.own.release();
    match r {
        fork::Release::End => {
            if claimed {
                adopt(c);
            }
            end_by_app(c);
        }
        fork::Release::Forget => timer::forget(c),
    }
    r
}

fn end_by_app(c: &Shared) {
    if let Ok(mut g) = c.lock() {
        if g.app_closed.is_none() {
            let now = now();
            g.app_closed = Some(now);
            g.finish();
            g.discard_ready();
            g.flush(now);
        }
    } // the timer thread drives it from here (timer::rearm)
}

/// The process exits or execs: every connection of its descriptors is released as a close
/// would.
pub fn release_all() {
    for c in distinct() {
        release(&c);
    }
}

/// shutdown(2) on a connection: SHUT_WR / SHUT_RDWR end the reply flow with its FIN.
pub fn on_shutdown(c: &Shared, how: c_int) {
    if (how == libc::SHUT_WR || how == libc::SHUT_RDWR) && claim(c) {
        if let Ok(mut g) = c.lock() {
            g.finish();
            g.flush(now());
        }
    }
}

//! One thread per process for what no application call does: the connections' timers
//! (credit pacing of the receivers, the senders' retransmission and handshake timers),
//! the credits of a sender whose bytes wait for them while the application is elsewhere
//! (it watches the library's socket `ctl` of such connections), and connections the
//! application closed (their FIN still to be acknowledged). Data
//! arriving for the application wakes the application, not this thread.
//!
//! A wake touches only the connections that are due (deadlines.rs: a heap by deadline)
//! or whose watched `ctl` is readable (an epoll set): every release of a connection's lock
//! re-arms its deadline and its watch (`rearm`), and writes the eventfd only when the new
//! deadline comes WAKE_SLACK or more before the thread's sleep ends. A connection with no
//! timer and nothing watched (an idle one, its credits stopped) costs the thread nothing.
//! A due connection's control socket is read only if a second, never-waited epoll set
//! reports it readable.

use super::conn::Conn;
use super::deadlines::Deadlines;
use super::fork::Own;
use super::{now, sys, Shared};
use flexpass_core::Nanos;
use libc::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// A closed connection's ACKs wait at most CLOSED_TICK.
const CLOSED_TICK: Nanos = 2_000_000;
/// Retry of a connection an application call holds.
const BUSY_RETRY: Nanos = 50_000;
/// A deadline armed less than this before the thread's sleep ends waits for that end (the
/// kernel's default timer slack: the sleep itself may end that late), so the thread runs
/// such connections together instead of waking once for each.
const WAKE_SLACK: Nanos = 50_000;
/// The eventfd's report in the epoll set (connections report their id, from 1).
const EVENT: u64 = u64::MAX;
/// The error set's report in the epoll set.
const ERRS: u64 = u64::MAX - 1;

struct State {
    conns: HashMap<u64, Shared>,
    /// When each connection is next due (its flows' deadline; a closed one's tick).
    due: Deadlines,
    /// What the thread sleeps until; 0 while it is awake (it reads `due` before sleeping
    /// again, so an earlier deadline armed meanwhile needs no wake).
    sleep_until: Nanos,
    next_id: u64,
}

struct Timers {
    state: Mutex<State>,
    /// The control sockets of the watched connections (`Conn::watched`) and `event`.
    epoll: c_int,
    /// Written to wake the thread (a deadline earlier than its sleep).
    event: c_int,
    /// Every connection's control socket, level-triggered, never waited on: one
    /// non-blocking epoll_wait per wake tells which of the due connections have something
    /// to drain (most find their socket empty: a receive call each would be wasted).
    ready: c_int,
    /// Both sockets of every connection, for errors only (EPOLLERR: an ICMP error queued,
    /// IP_RECVERR), one report each until `rearm` asks again; itself in `epoll`. Costs
    /// the data path nothing: no call reads an error queue unless one is reported.
    errs: c_int,
}

/// This process's timer thread. A forked child has none (threads do not survive fork):
/// its first claim of a connection starts one, with its own epoll sets (the inherited ones
/// are the parent's: a change to them would change the parent's).
static CURRENT: AtomicPtr<Timers> = AtomicPtr::new(std::ptr::null_mut());
/// CURRENT is the parent's (set by the atfork child handler).
static STALE: AtomicBool = AtomicBool::new(false);
/// Counts the timer threads this process started (fork::Own::gen).
static GENERATION: AtomicU32 = AtomicU32::new(0);
static CREATING: AtomicBool = AtomicBool::new(false);

pub fn generation() -> u32 {
    GENERATION.load(Ordering::Acquire)
}

fn timers() -> &'static Timers {
    let p = CURRENT.load(Ordering::Acquire);
    if !p.is_null() && !STALE.load(Ordering::Acquire) {
        return unsafe { &*p };
    }
    start()
}

#[cold]
fn start() -> &'static Timers {
    while CREATING
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        std::thread::yield_now();
    }
    let p = CURRENT.load(Ordering::Acquire);
    if !p.is_null() && !STALE.load(Ordering::Acquire) {
        CREATING.store(false, Ordering::Release);
        return unsafe { &*p };
    }
    // A parent's, inherited, is left as it is: its table holds the parent's connections,
    // and its descriptors (CLOEXEC) are not closed, since the program may have closed and
    // reused their numbers.
    let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    sys::epoll_ctl(
        epoll,
        libc::EPOLL_CTL_ADD,
        event,
        libc::EPOLLIN as u32,
        EVENT,
    );
    let ready = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let errs = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    sys::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, errs, libc::EPOLLIN as u32, ERRS);
    let t: &'static Timers = Box::leak(Box::new(Timers {
        state: Mutex::new(State {
            conns: HashMap::new(),
            due: Deadlines::default(),
            sleep_until: 0,
            next_id: 1,
        }),
        epoll,
        event,
        ready,
        errs,
    }));
    GENERATION.fetch_add(1, Ordering::AcqRel);
    CURRENT.store(t as *const Timers as *mut Timers, Ordering::Release);
    STALE.store(false, Ordering::Release);
    CREATING.store(false, Ordering::Release);
    let _ = std::thread::Builder::new()
        .name("flexpass-timer".into())
        .spawn(move || run(t));
    t
}

/// atfork child handler: the timer thread and its sets are the parent's.
pub(super) fn forked() {
    STALE.store(true, Ordering::Release);
    // No inherited connection is registered here any more (fork::Own::gen).
    GENERATION.fetch_add(1, Ordering::AcqRel);
    CREATING.store(false, Ordering::Release);
}

/// The timer state's lock, held across fork (fork.rs).
pub(super) struct ForkHold(#[allow(dead_code)] std::sync::MutexGuard<'static, State>);

pub(super) fn hold_for_fork() -> Option<ForkHold> {
    let p = CURRENT.load(Ordering::Acquire);
    if p.is_null() || STALE.load(Ordering::Acquire) {
        return None;
    }
    let t: &'static Timers = unsafe { &*p };
    t.state.lock().ok().map(ForkHold)
}

pub fn add(c: Shared) {
    super::fork::init();
    let t = timers();
    let Ok(mut s) = t.state.lock() else { return };
    if s.conns.is_empty() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| unsafe {
            libc::atexit(at_exit);
        });
    }
    let id = s.next_id;
    s.next_id += 1;
    s.conns.insert(id, Arc::clone(&c));
    drop(s);
    c.own.gen.store(generation(), Ordering::Relaxed);
    if let Ok(mut g) = c.lock() {
        g.timer_id = id; // armed as the guard drops
        g.armed = None;
        g.watched = false;
        sys::epoll_ctl(
            t.ready,
            libc::EPOLL_CTL_ADD,
            g.ctl,
            libc::EPOLLIN as u32,
            id,
        );
        for fd in [g.own, g.ctl] {
            sys::epoll_ctl(
                t.errs,
                libc::EPOLL_CTL_ADD,
                fd,
                libc::EPOLLONESHOT as u32,
                id,
            ); // errors only
        }
        g.err_watch = true;
    }
}

/// This process lets go of a connection another process drives (fork.rs): it leaves the
/// timer thread, and its sockets are closed here (the other process keeps them); no
/// datagram is sent.
pub(super) fn forget(c: &Shared) {
    let Ok(mut g) = c.lock() else { return };
    if std::mem::replace(&mut g.ended, true) {
        return;
    }
    let here = c.own.gen.load(Ordering::Relaxed) == generation() && !STALE.load(Ordering::Acquire);
    if g.timer_id != 0 && here {
        let t = timers();
        if let Ok(mut s) = t.state.lock() {
            s.conns.remove(&g.timer_id);
            s.due.arm(g.timer_id, None);
        }
        // The socket outlives this process's descriptor: it leaves the sets explicitly.
        for ep in [t.epoll, t.ready, t.errs] {
            sys::epoll_watch(ep, g.ctl, 0, false);
        }
        sys::epoll_watch(t.errs, g.own, 0, false);
    }
    sys::close(g.own);
    sys::close(g.ctl);
    crate::debug!(
        "{}: in-process connection left to another process",
        g.app_remote
    );
}

/// A connection's lock is released (conn::Locked): the thread learns its deadline if it
/// changed, and watches its control socket while the reply flow's bytes wait for credits
/// (the program may be elsewhere) or the program closed it.
pub(super) fn rearm(g: &mut Conn, own: &Own) {
    if g.timer_id == 0 || g.ended || !own.owned() || own.gen.load(Ordering::Relaxed) != generation()
    {
        return;
    }
    let t = timers();
    if !g.err_watch {
        // Reported once (EPOLLONESHOT): the next error is asked for.
        for fd in [g.own, g.ctl] {
            sys::epoll_ctl(
                t.errs,
                libc::EPOLL_CTL_MOD,
                fd,
                libc::EPOLLONESHOT as u32,
                g.timer_id,
            );
        }
        g.err_watch = true;
    }
    let watch = g.wants_watch();
    if watch != g.watched {
        sys::epoll_watch(t.epoll, g.ctl, g.timer_id, watch);
        g.watched = watch;
    }
    let mut at = g.deadline();
    if g.app_closed.is_some() {
        let tick = now() + CLOSED_TICK;
        at = Some(at.map_or(tick, |d| d.min(tick)));
    }
    if at == g.armed {
        return;
    }
    g.armed = at;
    let wake = {
        let Ok(mut s) = t.state.lock() else { return };
        s.due.arm(g.timer_id, at);
        match at {
            Some(a) if a.saturating_add(WAKE_SLACK) < s.sleep_until => {
                s.sleep_until = a;
                true
            }
            _ => false,
        }
    };
    if wake {
        self::wake();
    }
}

/// Longest wait at exit for the connections' written bytes to be acknowledged.
const EXIT_LINGER: Nanos = 10_000_000_000;
/// How long exit also waits for the peer's FIN, once everything written is acknowledged
/// (its program reads the last bytes, then closes: its FIN finds the connection here, as
/// a kernel's socket in FIN_WAIT2 would answer it after its process is gone).
const PEER_FIN_WAIT: Nanos = 2_000_000_000;

/// The process exits: what it wrote is still in its connections' send buffers (a kernel
/// TCP socket outlives its process; these do not). Every connection is closed as close()
/// would, and exit waits until their bytes and FIN are acknowledged (at most EXIT_LINGER)
/// while this thread keeps driving them.
extern "C" fn at_exit() {
    exit_linger();
}

/// exit, _exit and exec (process.rs): once per process, not in a vfork child (whose
/// memory is its parent's). A connection another process drives is only forgotten.
pub fn exit_linger() {
    if !super::fork::is_mine() || super::fork::EXITING.swap(true, Ordering::AcqRel) {
        return;
    }
    super::release_all();
    let p = CURRENT.load(Ordering::Acquire);
    if p.is_null() || STALE.load(Ordering::Acquire) {
        return; // a child that drove nothing
    }
    let t: &'static Timers = unsafe { &*p };
    let list: Vec<Shared> = t
        .state
        .lock()
        .map(|s| {
            s.conns
                .values()
                .filter(|c| c.own.owned())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let start = now();
    for c in &list {
        if let Ok(mut g) = c.lock() {
            if g.app_closed.is_none() {
                g.app_closed = Some(start);
                g.finish();
                g.discard_ready();
                g.flush(start);
            }
        }
    }
    while now().saturating_sub(start) < EXIT_LINGER {
        let fin_wait = now().saturating_sub(start) < PEER_FIN_WAIT;
        let pending = list.iter().any(|c| {
            c.lock()
                .map(|g| {
                    let peer_open = !g.unread
                        && g.rx
                            .as_ref()
                            .is_some_and(|r| !r.is_complete() && !r.was_reset());
                    g.tx.error().is_none()
                        && g.gone.is_none()
                        && (!g.tx.is_complete() || (fin_wait && peer_open))
                })
                .unwrap_or(false)
        });
        if !pending {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Connections that ended both ways, or whose bytes and FIN were all acknowledged with
    // nothing left unread here (the peer may still be reading them: TCP's FIN_WAIT), are
    // closed now, with `tcp_closed` ahead of the registration's end: else the agent would
    // reset them from the sockets it keeps, and a RESET can reach the peer before its
    // program has read the last bytes. The others (bytes unread here, or not acknowledged
    // in time) are reset by the agent, as TCP answers a close with unread data.
    let now = now();
    for c in &list {
        let finished = c
            .lock()
            .map(|mut g| g.done(now) || (g.tx.is_complete() && !g.unread))
            .unwrap_or(false);
        if finished {
            end(c);
        }
    }
    if list.is_empty() {
        return;
    }
    crate::debug!(
        "exit: {} connection(s) driven here, {} ms for their bytes to be acknowledged",
        list.len(),
        now.saturating_sub(start) / 1_000_000
    );
}

pub fn wake() {
    let one: u64 = 1;
    unsafe {
        libc::syscall(
            libc::SYS_write,
            timers().event as libc::c_long,
            &one as *const u64,
            8 as libc::c_long,
        );
    }
}

/// The thread: sleeps until the earliest deadline or a report of a watched control
/// socket, then runs the due and the reported connections only.
fn run(t: &'static Timers) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut ids: Vec<u64> = Vec::new();
    let mut readable: Vec<u64> = Vec::new();
    let mut ready = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    // Connections whose sockets reported an error, until handled (one may be busy).
    let mut erred: Vec<u64> = Vec::new();
    loop {
        let next = match t.state.lock() {
            Ok(mut s) => {
                let next = s.due.next();
                s.sleep_until = next.unwrap_or(Nanos::MAX);
                next
            }
            Err(_) => return,
        };
        let wait = next.map(|d| d.saturating_sub(now()));
        let n = if wait == Some(0) {
            0
        } else {
            sys::epoll_wait(t.epoll, &mut events, wait)
        };
        ids.clear();
        // Reported control sockets (EPOLLONESHOT: off until `handle` asks again).
        for ev in &events[..n] {
            let id = ev.u64;
            if id == EVENT {
                let mut v = 0u64;
                unsafe {
                    libc::syscall(
                        libc::SYS_read,
                        t.event as libc::c_long,
                        &mut v as *mut u64,
                        8 as libc::c_long,
                    );
                }
            } else if id == ERRS {
                let n = sys::epoll_wait(t.errs, &mut ready, Some(0));
                erred.extend(ready[..n].iter().map(|e| e.u64));
            } else {
                ids.push(id);
            }
        }
        erred.sort_unstable();
        erred.dedup();
        ids.extend_from_slice(&erred);
        let now = now();
        let list: Vec<(u64, Option<Shared>)> = {
            let Ok(mut s) = t.state.lock() else { return };
            s.sleep_until = 0;
            s.due.pop_due(now, &mut ids);
            ids.sort_unstable();
            ids.dedup(); // due and reported
            ids.iter()
                .map(|&id| (id, s.conns.get(&id).cloned()))
                .collect()
        };
        // Which of them have something in their control socket (all of them if more are
        // readable than one call reports). Reported ones are readable.
        readable.clear();
        let all = !list.is_empty() && {
            let n = sys::epoll_wait(t.ready, &mut ready, Some(0));
            readable.extend(ready[..n].iter().map(|e| e.u64));
            readable.sort_unstable();
            n == ready.len()
        };
        for (id, c) in list {
            let err = erred.binary_search(&id).is_ok();
            let Some(c) = c else {
                erred.retain(|&e| e != id); // ended meanwhile
                continue;
            };
            let ctl = all || readable.binary_search(&id).is_ok();
            if handle(t, &c, now, ctl, err) {
                erred.retain(|&e| e != id);
            } else {
                // An application call holds it: again soon.
                if let Ok(mut s) = t.state.lock() {
                    s.due.arm_by(id, now + BUSY_RETRY);
                }
            }
        }
    }
}

/// A due or reported connection: its control socket drained if `ctl` has something (both
/// sockets once the program closed it), its error queues read if `err` (a port unreachable
/// from the peer may end it: Conn::peer_errors), its timers run, what it has to send sent;
/// ended if done. False if an application call holds it.
fn handle(t: &Timers, c: &Shared, now: Nanos, ctl: bool, err: bool) -> bool {
    let Some(mut g) = c.try_lock() else {
        return false;
    };
    g.armed = None; // popped from `due`, or reported: the guard arms it again
    if g.ended {
        return true;
    }
    if err {
        g.err_watch = false; // its owner's next release asks for the next report
    }
    if !c.own.owned() {
        // Unclaimed since a fork, or another process's: its claim arms it again.
        if std::mem::take(&mut g.watched) {
            sys::epoll_watch(t.epoll, g.ctl, g.timer_id, false);
        }
        return true;
    }
    if err {
        g.peer_errors();
    }
    if g.app_closed.is_some() {
        g.drain(now);
        g.discard_ready();
    } else if ctl {
        g.drain_ctl(now);
    }
    g.flush(now);
    g.ring_if_held();
    if g.done(now) {
        drop(g);
        end(c);
        return true;
    }
    // Reported or not (a report may have found it busy), its next report is asked for.
    if g.watched && g.wants_watch() {
        sys::epoll_rearm(t.epoll, g.ctl, g.timer_id);
    }
    true
}

/// A finished connection: its sockets closed, the agent told (tcp_closed frees the
/// descriptor it kept).
fn end(c: &Shared) {
    let Ok(mut g) = c.lock() else { return };
    if std::mem::replace(&mut g.ended, true) {
        return;
    }
    if let Ok(mut s) = timers().state.lock() {
        s.conns.remove(&g.timer_id);
        s.due.arm(g.timer_id, None);
    }
    // A forked process may keep the sockets open: they leave the error set explicitly.
    sys::epoll_watch(timers().errs, g.own, 0, false);
    sys::epoll_watch(timers().errs, g.ctl, 0, false);
    sys::close(g.own);
    sys::close(g.ctl); // leaves the epoll set
    if let (Some(reg), Some(rx)) = (&g.reg, &g.rx) {
        reg.answer("tcp_closed", g.peer, rx.flow_id(), None, None);
        reg.conn_ended();
    }
    let mut rec: crate::text::Buf<400> = crate::text::Buf::new();
    crate::request::tcp_record(
        &mut rec,
        g.reg.is_none(),
        g.app_remote,
        g.app_local,
        g.tx.transport().name(),
        (g.bytes_written, g.bytes_read),
        (now() - g.opened) / 1000,
        if g.was_reset() { "reset" } else { "closed" },
    );
    crate::debug!("{}: connection ended; sent {:?}", g.app_remote, g.sends);
    drop(g); // the agent is told with no lock held (its socket's calls go through hooks)
    tell(rec.as_bytes());
}

/// A line to the host's agent on an API connection of its own, the reply not waited for:
/// non-blocking, so an agent that does not accept costs the timer thread nothing (the
/// line is lost).
fn tell(line: &[u8]) {
    unsafe {
        if let Ok(s) = crate::agent_stream(None, libc::SOCK_NONBLOCK) {
            libc::syscall(
                libc::SYS_sendto,
                s as libc::c_long,
                line.as_ptr(),
                line.len(),
                libc::MSG_NOSIGNAL as libc::c_long,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::c_long,
            );
            sys::close(s);
        }
    }
}

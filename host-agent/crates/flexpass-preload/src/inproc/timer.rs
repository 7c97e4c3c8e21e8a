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
use super::{now, sys, Shared};
use flexpass_core::Nanos;
use libc::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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
}

fn timers() -> &'static Timers {
    static T: OnceLock<Timers> = OnceLock::new();
    T.get_or_init(|| {
        let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: EVENT,
        };
        unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, event, &mut ev) };
        let ready = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let _ = std::thread::Builder::new()
            .name("flexpass-timer".into())
            .spawn(run);
        Timers {
            state: Mutex::new(State {
                conns: HashMap::new(),
                due: Deadlines::default(),
                sleep_until: 0,
                next_id: 1,
            }),
            epoll,
            event,
            ready,
        }
    })
}

pub fn add(c: Shared) {
    let t = timers();
    let Ok(mut s) = t.state.lock() else { return };
    if s.conns.is_empty() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| unsafe {
            OWNER.store(libc::getpid(), Ordering::Relaxed);
            libc::atexit(at_exit);
            libc::pthread_atfork(None, None, Some(in_child));
        });
    }
    let id = s.next_id;
    s.next_id += 1;
    s.conns.insert(id, Arc::clone(&c));
    drop(s);
    if let Ok(mut g) = c.lock() {
        g.timer_id = id; // armed as the guard drops
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: id,
        };
        if !CHILD.load(Ordering::Relaxed) {
            unsafe { libc::epoll_ctl(t.ready, libc::EPOLL_CTL_ADD, g.ctl, &mut ev) };
        }
    }
}

/// The process whose timer thread drives the connections (a forked child inherits the
/// atexit handler, not the thread).
static OWNER: AtomicI32 = AtomicI32::new(0);
/// This process is a forked child: no timer thread, and the epoll set is the parent's.
static CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    CHILD.store(true, Ordering::Relaxed);
}

/// A connection's lock is released (conn::Locked): the thread learns its deadline if it
/// changed, and watches its control socket while the reply flow's bytes wait for credits
/// (the program may be elsewhere) or the program closed it.
pub(super) fn rearm(g: &mut Conn) {
    if g.timer_id == 0 || g.ended || CHILD.load(Ordering::Relaxed) {
        return;
    }
    let t = timers();
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

/// The process exits: what it wrote is still in its connections' send buffers (a kernel
/// TCP socket outlives its process; these do not). Every connection is closed as close()
/// would, and exit waits until their bytes and FIN are acknowledged (at most EXIT_LINGER)
/// while this thread keeps driving them.
extern "C" fn at_exit() {
    if unsafe { libc::getpid() } != OWNER.load(Ordering::Relaxed) {
        return;
    }
    let t = timers();
    let list: Vec<Shared> = t
        .state
        .lock()
        .map(|s| s.conns.values().cloned().collect())
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
        let pending = list.iter().any(|c| {
            c.lock()
                .map(|g| g.tx.error().is_none() && !g.tx.is_complete())
                .unwrap_or(false)
        });
        if !pending {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Connections that ended both ways are closed now, with `tcp_closed` ahead of the
    // registration's end: else the agent would reset them from the sockets it keeps, and
    // a RESET can reach the peer before its program has read the last bytes. The others
    // (bytes unread here, or not acknowledged in time) are reset by the agent, as TCP
    // answers a close with unread data.
    let now = now();
    for c in &list {
        let finished = c.lock().map(|mut g| g.done(now)).unwrap_or(false);
        if finished {
            end(c);
        }
    }
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
fn run() {
    let t = timers();
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut ids: Vec<u64> = Vec::new();
    let mut readable: Vec<u64> = Vec::new();
    let mut ready = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
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
            } else {
                ids.push(id);
            }
        }
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
            let Some(c) = c else { continue }; // ended meanwhile
            let ctl = all || readable.binary_search(&id).is_ok();
            if !handle(t, &c, now, ctl) {
                // An application call holds it: again soon.
                if let Ok(mut s) = t.state.lock() {
                    s.due.arm_by(id, now + BUSY_RETRY);
                }
            }
        }
    }
}

/// A due or reported connection: its control socket drained if `ctl` has something (both
/// sockets once the program closed it), its timers run, what it has to send sent; ended if
/// done. False if an application call holds it.
fn handle(t: &Timers, c: &Shared, now: Nanos, ctl: bool) -> bool {
    let Some(mut g) = c.try_lock() else {
        return false;
    };
    g.armed = None; // popped from `due`, or reported: the guard arms it again
    if g.ended {
        return true;
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
    sys::close(g.own);
    sys::close(g.ctl); // leaves the epoll set
    if let (Some(reg), Some(rx)) = (&g.reg, &g.rx) {
        reg.answer("tcp_closed", g.peer, rx.flow_id(), None, None);
        reg.conn_ended();
    }
    crate::debug!("{}: connection ended", g.app_remote);
}

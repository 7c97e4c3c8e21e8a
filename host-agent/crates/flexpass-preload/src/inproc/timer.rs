//! One thread per process for what no application call does: the connections' timers
//! (credit pacing of the receivers, the senders' retransmission and handshake timers),
//! the credits of a sender whose bytes wait for them while the application is elsewhere
//! (it watches the library's socket `ctl` of such connections), and connections the
//! application closed (their FIN still to be acknowledged). Data
//! arriving for the application wakes the application, not this thread.

use super::{now, sys, Shared};
use flexpass_core::Nanos;
use libc::c_int;
use std::sync::{Mutex, OnceLock};

/// Longest sleep (a closed connection's ACKs wait at most CLOSED_TICK).
const IDLE_TICK: Nanos = 20_000_000;
const CLOSED_TICK: Nanos = 2_000_000;
/// Retry of a connection an application call holds.
const BUSY_RETRY: Nanos = 50_000;

struct Timers {
    conns: Mutex<Vec<Shared>>,
    /// Written to wake the thread (a new connection, a close, bytes waiting for credits).
    event: c_int,
}

fn timers() -> &'static Timers {
    static T: OnceLock<Timers> = OnceLock::new();
    T.get_or_init(|| {
        let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        let _ = std::thread::Builder::new()
            .name("flexpass-timer".into())
            .spawn(run);
        Timers {
            conns: Mutex::new(Vec::new()),
            event,
        }
    })
}

pub fn add(c: Shared) {
    let t = timers();
    if let Ok(mut v) = t.conns.lock() {
        if v.is_empty() {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| unsafe {
                OWNER.store(libc::getpid(), std::sync::atomic::Ordering::Relaxed);
                libc::atexit(at_exit);
            });
        }
        v.push(c);
    }
    wake();
}

/// The process whose timer thread drives the connections (a forked child inherits the
/// atexit handler, not the thread).
static OWNER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Longest wait at exit for the connections' written bytes to be acknowledged.
const EXIT_LINGER: Nanos = 10_000_000_000;

/// The process exits: what it wrote is still in its connections' send buffers (a kernel
/// TCP socket outlives its process; these do not). Every connection is closed as close()
/// would, and exit waits until their bytes and FIN are acknowledged (at most EXIT_LINGER)
/// while this thread keeps driving them.
extern "C" fn at_exit() {
    if unsafe { libc::getpid() } != OWNER.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let t = timers();
    let list: Vec<Shared> = t.conns.lock().map(|v| v.clone()).unwrap_or_default();
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
    wake();
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
            if let Ok(mut v) = t.conns.lock() {
                v.retain(|x| !std::sync::Arc::ptr_eq(x, c));
            }
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

fn run() {
    let t = timers();
    let mut list: Vec<Shared> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    // Which connection each watched pollfd (after the eventfd) belongs to.
    let mut owner: Vec<usize> = Vec::new();
    let mut readable: Vec<bool> = Vec::new();
    loop {
        list.clear();
        if let Ok(v) = t.conns.lock() {
            list.extend(v.iter().cloned());
        }
        readable.clear();
        readable.resize(list.len(), false);
        for (f, &i) in fds.iter().skip(1).zip(&owner) {
            if f.revents != 0 && i < readable.len() {
                readable[i] = true;
            }
        }
        fds.clear();
        owner.clear();
        fds.push(libc::pollfd {
            fd: t.event,
            events: libc::POLLIN,
            revents: 0,
        });
        let now = now();
        let mut next = now + IDLE_TICK;
        let mut ended = Vec::new();
        for (i, c) in list.iter().enumerate() {
            let Ok(mut g) = c.try_lock() else {
                next = next.min(now + BUSY_RETRY); // an application call holds it
                continue;
            };
            let due = g.deadline().is_some_and(|d| d <= now);
            if due || readable[i] || g.app_closed.is_some() {
                if g.app_closed.is_some() {
                    g.drain(now);
                    g.discard_ready();
                } else {
                    g.drain_ctl(now);
                }
                g.flush(now);
                g.ring_if_held();
            }
            if g.done(now) {
                ended.push(i);
                continue;
            }
            if let Some(d) = g.deadline() {
                next = next.min(d);
            }
            if g.app_closed.is_some() {
                next = next.min(now + CLOSED_TICK);
            }
            // The control socket of a connection whose bytes wait for credits (the program
            // may be elsewhere); the others are drained by the program's calls and here
            // when a timer is due.
            g.watched = g.tx.pending_bytes() > 0 || g.app_closed.is_some();
            if g.watched {
                fds.push(libc::pollfd {
                    fd: g.ctl,
                    events: libc::POLLIN,
                    revents: 0,
                });
                owner.push(i);
            }
        }
        if !ended.is_empty() {
            if let Ok(mut v) = t.conns.lock() {
                v.retain(|c| !ended.iter().any(|&i| std::sync::Arc::ptr_eq(c, &list[i])));
            }
            for &i in &ended {
                end(&list[i]);
            }
            // Indices moved: look at everything again at once.
            fds.truncate(1);
            owner.clear();
            continue;
        }
        let wait = next.saturating_sub(super::now());
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait % 1_000_000_000) as libc::c_long,
        };
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            );
        }
        if fds[0].revents != 0 {
            let mut v = 0u64;
            unsafe {
                libc::syscall(
                    libc::SYS_read,
                    t.event as libc::c_long,
                    &mut v as *mut u64,
                    8 as libc::c_long,
                );
            }
        }
    }
}

/// A finished connection: its sockets closed, the agent told (tcp_closed frees the
/// descriptor it kept).
fn end(c: &Shared) {
    let Ok(mut g) = c.lock() else { return };
    if std::mem::replace(&mut g.ended, true) {
        return;
    }
    sys::close(g.own);
    sys::close(g.ctl);
    if let (Some(reg), Some(rx)) = (&g.reg, &g.rx) {
        reg.answer("tcp_closed", g.peer, rx.flow_id(), None, None);
        reg.conn_ended();
    }
    crate::debug!("{}: connection ended", g.app_remote);
}

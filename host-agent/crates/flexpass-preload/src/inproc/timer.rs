//! One thread per process for the connections' timers: credit pacing of the open flows'
//! receivers, the reply flows' retransmission and handshake timers, and connections the
//! application closed (their FIN still to be acknowledged). It drains a connection's
//! socket only when it has work on it (a due timer, or the application closed it); the
//! data calls do the rest, in the application's threads.

use super::{now, Shared};
use flexpass_core::Nanos;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Longest sleep with connections open (a closed connection's ACKs wait at most this).
const IDLE_TICK: Nanos = 2_000_000;

struct Timers {
    conns: Mutex<Vec<Shared>>,
    wake: Condvar,
}

fn timers() -> &'static Timers {
    static T: OnceLock<Timers> = OnceLock::new();
    T.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("flexpass-timer".into())
            .spawn(run);
        Timers {
            conns: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }
    })
}

pub fn add(c: Shared) {
    let t = timers();
    if let Ok(mut v) = t.conns.lock() {
        v.push(c);
    }
    t.wake.notify_one();
}

pub fn wake() {
    timers().wake.notify_one();
}

fn run() {
    let t = timers();
    let mut list: Vec<Shared> = Vec::new();
    loop {
        list.clear();
        if let Ok(v) = t.conns.lock() {
            list.extend(v.iter().cloned());
        }
        let now = now();
        let mut next = now + IDLE_TICK * 10;
        let mut ended = Vec::new();
        for (i, c) in list.iter().enumerate() {
            let Ok(mut g) = c.try_lock() else {
                next = next.min(now + 50_000); // an application call holds it
                continue;
            };
            let due = g.deadline();
            if g.app_closed.is_some() || due.is_some_and(|d| d <= now) {
                g.drain(now);
                if g.app_closed.is_some() {
                    g.discard_ready();
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
                next = next.min(now + IDLE_TICK);
            }
        }
        for &i in ended.iter().rev() {
            end(&list[i]);
        }
        let Ok(mut v) = t.conns.lock() else { return };
        if !ended.is_empty() {
            v.retain(|c| !ended.iter().any(|&i| std::sync::Arc::ptr_eq(c, &list[i])));
        }
        let wait = next.saturating_sub(super::now());
        if wait > 0 {
            let _ = t.wake.wait_timeout(v, Duration::from_nanos(wait));
        }
    }
}

/// A finished connection: its socket closed, the agent told (tcp_closed frees the
/// descriptor it kept).
fn end(c: &Shared) {
    let Ok(g) = c.lock() else { return };
    super::sys::close(g.own);
    g.reg
        .answer("tcp_closed", g.peer, g.rx.flow_id(), None, None);
    crate::debug!("{}: connection ended", g.app_remote);
}

//! epoll and in-process connections: held ACKs leave before a wait that may block (as in
//! wait.rs), and write readiness. A connection's descriptor is a UDP socket, always
//! writable, so a level-triggered EPOLLOUT on a connection whose send buffer is full would
//! wake its sender at once, again and again (write, EAGAIN, wait, writable).
//!
//! epoll's registrations live in the kernel, so the library keeps a copy of those of
//! connections (`epoll_ctl`: set, descriptor, events, data). Before a wait, a registered
//! connection without room (Conn::writable) is parked: its registration loses EPOLLOUT
//! (EPOLL_CTL_MOD) and its control socket joins the set under a tag of the library's. A
//! wait that sees that tag drives the connection (credits and ACKs drained, the data they
//! allow sent, as a blocking write does); once it has room, the registration gets its
//! events back and the waiting thread reports EPOLLOUT with the application's data. While
//! a connection is parked, a wait looks at it again at least every FULL_SLICE (the timer
//! thread may free its room just before the wait starts). EPOLLONESHOT and EPOLLEXCLUSIVE
//! registrations are left alone (re-arming one is the application's to do, the other
//! cannot be modified).

use crate::inproc;
// The library's own epoll_ctl: a system call, which this hook does not see.
use crate::inproc::sys::epoll_ctl as ctl;
use crate::wait::{before_wait, drive, full, ts_blocks, ts_ns, FULL_SLICE};
use libc::{c_int, epoll_event, sigset_t, timespec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

real_fn!(
    real_epoll_ctl,
    "epoll_ctl",
    fn(c_int, c_int, c_int, *mut epoll_event) -> c_int
);
real_fn!(
    real_epoll_wait,
    "epoll_wait",
    fn(c_int, *mut epoll_event, c_int, c_int) -> c_int
);
real_fn!(
    real_epoll_pwait,
    "epoll_pwait",
    fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int
);
real_fn!(
    real_epoll_pwait2,
    "epoll_pwait2",
    fn(c_int, *mut epoll_event, c_int, *const timespec, *const sigset_t) -> c_int
);

/// A connection's registration in an epoll set, as the application made it.
struct Watch {
    ep: c_int,
    fd: c_int,
    events: u32,
    data: u64,
    /// Parked: the control socket that stands in for EPOLLOUT in `ep`.
    parked: Option<c_int>,
}

static WATCHES: Mutex<Vec<Watch>> = Mutex::new(Vec::new());
/// Some connection is registered for EPOLLOUT (the waits' fast path: one atomic load).
static ANY: AtomicBool = AtomicBool::new(false);

/// A parked connection's control socket in the application's set: data no application
/// gives (above every user-space address and every descriptor).
const TAG: u64 = 0xf1e9_0000_0000_0000;
const TAG_MASK: u64 = 0xffff_0000_0000_0000;

/// Registrations the library may park: EPOLLOUT, neither one-shot nor exclusive.
fn parkable(events: u32) -> bool {
    events & libc::EPOLLOUT as u32 != 0
        && events & (libc::EPOLLONESHOT as u32 | libc::EPOLLEXCLUSIVE as u32) == 0
}

impl Watch {
    /// EPOLLOUT leaves the registration; the control socket watches for room.
    fn park(&mut self, ctl_fd: c_int) {
        let events = self.events & !(libc::EPOLLOUT as u32);
        if ctl(self.ep, libc::EPOLL_CTL_MOD, self.fd, events, self.data) != 0 {
            return;
        }
        let r = ctl(
            self.ep,
            libc::EPOLL_CTL_ADD,
            ctl_fd,
            libc::EPOLLIN as u32,
            TAG | ctl_fd as u64,
        );
        if r != 0 && unsafe { crate::errno() } != libc::EEXIST {
            // No stand-in (another set's limit?): the application's registration as it was.
            ctl(
                self.ep,
                libc::EPOLL_CTL_MOD,
                self.fd,
                self.events,
                self.data,
            );
            return;
        }
        self.parked = Some(ctl_fd);
    }

    /// The registration as the application made it again.
    fn unpark(&mut self) {
        if let Some(c) = self.parked.take() {
            ctl(self.ep, libc::EPOLL_CTL_DEL, c, 0, 0);
            ctl(
                self.ep,
                libc::EPOLL_CTL_MOD,
                self.fd,
                self.events,
                self.data,
            );
        }
    }
}

/// The application's epoll_ctl succeeded: keep the copy of a connection's registration.
fn note(ep: c_int, op: c_int, fd: c_int, ev: *const epoll_event) {
    let Ok(mut w) = WATCHES.lock() else { return };
    let at = w.iter().position(|x| x.ep == ep && x.fd == fd);
    if let Some(i) = at {
        // Its parked stand-in leaves with it (a MOD replaced the registration anyway).
        if let Some(c) = w[i].parked.take() {
            ctl(ep, libc::EPOLL_CTL_DEL, c, 0, 0);
        }
        w.swap_remove(i);
    }
    if (op == libc::EPOLL_CTL_ADD || op == libc::EPOLL_CTL_MOD) && !ev.is_null() {
        let (events, data) = unsafe { ((*ev).events, (*ev).u64) };
        if parkable(events) && inproc::is_conn(fd) {
            w.push(Watch {
                ep,
                fd,
                events,
                data,
                parked: None,
            });
        }
    }
    ANY.store(!w.is_empty(), Ordering::Release);
}

/// `fd` is being closed (a connection, or an epoll set): its registrations are forgotten,
/// parked stand-ins removed.
pub fn forget(fd: c_int) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let Ok(mut w) = WATCHES.lock() else { return };
    w.retain_mut(|x| {
        if x.fd != fd && x.ep != fd {
            return true;
        }
        if x.ep != fd {
            x.unpark();
        }
        false
    });
    ANY.store(!w.is_empty(), Ordering::Release);
}

/// Before a wait on `ep`: park the full connections, unpark those with room again (the
/// real wait then reports their EPOLLOUT). Whether any stays parked.
fn settle(ep: c_int) -> bool {
    let Ok(mut w) = WATCHES.lock() else {
        return false;
    };
    let mut parked = false;
    for x in w.iter_mut().filter(|x| x.ep == ep) {
        match x.parked {
            None => {
                if let Some((_, ctl_fd)) = full(x.fd) {
                    x.park(ctl_fd);
                }
            }
            Some(_) => {
                if inproc::lookup(x.fd).is_none_or(|c| drive(&c, false)) {
                    x.unpark();
                }
            }
        }
        parked |= x.parked.is_some();
    }
    parked
}

/// After a wait: the library's events leave `ev[..n]`; a stand-in's connection is driven,
/// and gets its EPOLLOUT (in its own event if it has none) once it has room. The events
/// left for the application.
unsafe fn sift(ep: c_int, ev: *mut epoll_event, n: usize, max: usize) -> usize {
    let set = std::slice::from_raw_parts_mut(ev, max);
    let mut kept = 0;
    let mut ready: Vec<u64> = Vec::new();
    for i in 0..n {
        let e = set[i];
        if e.u64 & TAG_MASK == TAG {
            ready.push(e.u64 & !TAG_MASK);
        } else {
            set[kept] = e;
            kept += 1;
        }
    }
    if ready.is_empty() {
        return kept;
    }
    let Ok(mut w) = WATCHES.lock() else {
        return kept;
    };
    for x in w.iter_mut().filter(|x| x.ep == ep) {
        if !x.parked.is_some_and(|c| ready.contains(&(c as u64))) {
            continue;
        }
        if !inproc::lookup(x.fd).is_none_or(|c| drive(&c, true)) {
            continue;
        }
        x.unpark();
        let data = x.data;
        if let Some(e) = set[..kept].iter_mut().find(|e| e.u64 == data) {
            e.events |= libc::EPOLLOUT as u32;
        } else if kept < max {
            set[kept] = epoll_event {
                events: libc::EPOLLOUT as u32,
                u64: data,
            };
            kept += 1;
        }
    }
    kept
}

/// The three waits: `call` is the real one with what is left of the timeout (None: none).
/// Every result is sifted, parked or not: another thread may park a connection of the same
/// set while this one waits, and a tag must never reach the application.
unsafe fn wait_with(
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: Option<u64>,
    call: impl Fn(Option<u64>) -> c_int,
) -> c_int {
    if ev.is_null() || max <= 0 || !inproc::enabled() {
        return call(timeout);
    }
    let end = timeout.map(|t| inproc::now() + t);
    loop {
        let left = end.map(|e| e.saturating_sub(inproc::now()));
        let parked = ANY.load(Ordering::Acquire) && settle(ep);
        let r = call(if parked {
            Some(left.map_or(FULL_SLICE, |l| l.min(FULL_SLICE)))
        } else {
            left
        });
        if r < 0 {
            return r;
        }
        let kept = sift(ep, ev, r as usize, max as usize);
        let timed_out = (!parked && r == 0) || end.is_some_and(|e| inproc::now() >= e);
        if kept > 0 || timed_out {
            return kept as c_int;
        }
    }
}

/// epoll_wait's millisecond timeout of what is left, rounded up (never 0 before the end).
fn ms(left: Option<u64>) -> c_int {
    left.map_or(-1, |l| l.div_ceil(1_000_000).min(i32::MAX as u64) as c_int)
}

fn enosys() -> c_int {
    unsafe { crate::set_errno(libc::ENOSYS) };
    -1
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(ep: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    let Some(f) = real_epoll_ctl() else {
        return enosys();
    };
    let r = f(ep, op, fd, ev);
    if r == 0 && inproc::any() {
        let saved = crate::errno();
        note(ep, op, fd, ev);
        crate::set_errno(saved);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    before_wait(timeout != 0);
    let Some(f) = real_epoll_wait() else {
        return enosys();
    };
    let t = (timeout >= 0).then(|| timeout as u64 * 1_000_000);
    wait_with(ep, ev, max, t, |left| f(ep, ev, max, ms(left)))
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    before_wait(timeout != 0);
    let Some(f) = real_epoll_pwait() else {
        return enosys();
    };
    let t = (timeout >= 0).then(|| timeout as u64 * 1_000_000);
    wait_with(ep, ev, max, t, |left| f(ep, ev, max, ms(left), mask))
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    before_wait(ts_blocks(timeout));
    let Some(f) = real_epoll_pwait2() else {
        return enosys();
    };
    wait_with(ep, ev, max, ts_ns(timeout), |left| {
        let ts = left.map(crate::wait::to_ts);
        f(
            ep,
            ev,
            max,
            ts.as_ref().map_or(std::ptr::null(), |t| t),
            mask,
        )
    })
}

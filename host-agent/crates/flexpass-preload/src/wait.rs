//! The application's waits (poll, ppoll, select, pselect; epoll's in epoll.rs): ACKs an
//! in-process connection holds for the application's reply (inproc::send_held;
//! docs/datapath.md, "An ACK rides with the reply") leave before a wait that may block, as
//! the reply is not coming before it; a wait that cannot block (timeout 0) sends nothing.
//! One atomic load when nothing is held.
//!
//! Write readiness (poll, ppoll, select, pselect): a connection's descriptor is a UDP
//! socket, always writable, so a non-blocking sender whose send buffer is full (SEND_LIMIT
//! unacknowledged) would spin: write EAGAIN, wait, writable at once. A connection without
//! room (Conn::writable) leaves the write set; the wait watches its control socket instead,
//! and the waiting thread drives the connection as a blocking write does: credits and
//! ACKs drained, the data they allow sent, until it has room (then POLLOUT, or its bit in
//! the write set), another descriptor is ready, or the timeout ends. Other descriptors and
//! events are the kernel's.

use crate::inproc;
use libc::{c_int, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

real_fn!(real_poll, "poll", fn(*mut pollfd, nfds_t, c_int) -> c_int);
real_fn!(
    real_ppoll,
    "ppoll",
    fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int
);
real_fn!(
    real_select,
    "select",
    fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int
);
real_fn!(
    real_pselect,
    "pselect",
    fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *const timespec, *const sigset_t) -> c_int
);

/// Before a wait: held ACKs leave unless the wait cannot block.
pub(crate) fn before_wait(may_block: bool) {
    if may_block {
        inproc::send_held();
    }
}

/// A connection in a wait for writing that has no room: (index or descriptor in the
/// application's set, the connection, its control socket).
type Full = Vec<(usize, inproc::Shared, c_int)>;

/// `fd`'s connection and control socket, if it has no room to write.
pub(crate) fn full(fd: c_int) -> Option<(inproc::Shared, c_int)> {
    let c = inproc::lookup(fd)?;
    let ctl = {
        let g = c.lock().ok()?;
        if g.writable() || !c.own.owned() {
            return None;
        }
        g.ctl
    };
    Some((c, ctl))
}

/// The waiting thread drives a full connection whose control socket was readable (its
/// credits and ACKs drained, what they allow sent); whether it has room now.
pub(crate) fn drive(c: &inproc::Shared, ctl_ready: bool) -> bool {
    let Ok(mut g) = c.lock() else { return true };
    if ctl_ready {
        let now = inproc::now();
        g.drain_ctl(now);
        g.flush(now);
    }
    g.writable()
}

/// What is left of a wait that ends at `end` (None: no timeout).
fn left(end: Option<u64>) -> Option<u64> {
    end.map(|e| e.saturating_sub(inproc::now()))
}

/// Longest single wait on full connections: the timer thread may drain the ACKs that free
/// a connection's room just before the wait starts (its control socket then stays quiet
/// if they were the last), so the wait looks at the connections again at least this often.
pub(crate) const FULL_SLICE: u64 = 2_000_000;

/// What is left, at most FULL_SLICE.
fn slice(end: Option<u64>) -> Option<u64> {
    Some(left(end).map_or(FULL_SLICE, |l| l.min(FULL_SLICE)))
}

/// poll and ppoll: `call` is the real call on a set, with what is left of the timeout.
unsafe fn poll_with(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: Option<u64>,
    call: impl Fn(*mut pollfd, nfds_t, Option<u64>) -> c_int,
) -> c_int {
    let end = timeout.map(|t| inproc::now() + t);
    loop {
        let mut waiting: Full = Vec::new();
        if !fds.is_null() && inproc::any() {
            let set = std::slice::from_raw_parts(fds, n as usize);
            for (i, p) in set.iter().enumerate() {
                if p.events & libc::POLLOUT != 0 {
                    if let Some((c, ctl)) = full(p.fd) {
                        waiting.push((i, c, ctl));
                    }
                }
            }
        }
        if waiting.is_empty() {
            return call(fds, n, left(end));
        }
        let set = std::slice::from_raw_parts_mut(fds, n as usize);
        let mut copy: Vec<pollfd> = set.to_vec();
        for (i, _, ctl) in &waiting {
            copy[*i].events &= !libc::POLLOUT;
            copy.push(pollfd {
                fd: *ctl,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let r = call(copy.as_mut_ptr(), copy.len() as nfds_t, slice(end));
        if r < 0 {
            return r;
        }
        for (i, p) in set.iter_mut().enumerate() {
            p.revents = copy[i].revents;
        }
        for (k, (i, c, _)) in waiting.iter().enumerate() {
            if drive(c, copy[n as usize + k].revents != 0) {
                set[*i].revents |= libc::POLLOUT;
            }
        }
        let count = set.iter().filter(|p| p.revents != 0).count() as c_int;
        if count > 0 || left(end) == Some(0) {
            return count;
        }
    }
}

/// select and pselect: `call` is the real call with the number, the three sets and what
/// is left of the timeout.
unsafe fn select_with(
    n: c_int,
    sets: [*mut fd_set; 3],
    timeout: Option<u64>,
    call: impl Fn(c_int, [*mut fd_set; 3], Option<u64>) -> c_int,
) -> c_int {
    // The hooks call this only with a write set and an in-process connection.
    let [r, w, _] = sets;
    let end = timeout.map(|t| inproc::now() + t);
    // The application's sets, as given (each turn starts from them).
    let given: [Option<fd_set>; 3] = sets.map(|s| (!s.is_null()).then(|| *s));
    let mut own_read: fd_set = std::mem::zeroed();
    loop {
        let mut waiting: Full = Vec::new();
        for fd in 0..n.min(libc::FD_SETSIZE as c_int) {
            if libc::FD_ISSET(fd, w) {
                if let Some((c, ctl)) = full(fd) {
                    if ctl < libc::FD_SETSIZE as c_int {
                        waiting.push((fd as usize, c, ctl));
                    }
                }
            }
        }
        if waiting.is_empty() {
            return call(n, sets, left(end));
        }
        // The control sockets join the read set (one of ours when the application gave none).
        let read = if r.is_null() {
            &mut own_read as *mut fd_set
        } else {
            r
        };
        let mut top = n;
        for (fd, _, ctl) in &waiting {
            libc::FD_CLR(*fd as c_int, w);
            libc::FD_SET(*ctl, read);
            top = top.max(ctl + 1);
        }
        let got = call(top, [read, w, sets[2]], slice(end));
        if got < 0 {
            return got;
        }
        let mut count = got;
        for (fd, c, ctl) in &waiting {
            let ready = libc::FD_ISSET(*ctl, read);
            let asked = given[0].is_some_and(|g| libc::FD_ISSET(*ctl, &g));
            if ready && !asked {
                libc::FD_CLR(*ctl, read);
                count -= 1;
            }
            if drive(c, ready) {
                libc::FD_SET(*fd as c_int, w);
                count += 1;
            }
        }
        if count > 0 || left(end) == Some(0) {
            return count;
        }
        // Nothing for the application yet: again from its sets.
        for (s, g) in sets.iter().zip(given.iter()) {
            if let Some(g) = g {
                **s = *g;
            }
        }
        own_read = std::mem::zeroed();
    }
}

/// A timespec or timeval as nanoseconds (None: null, no timeout).
pub(crate) unsafe fn ts_ns(t: *const timespec) -> Option<u64> {
    (!t.is_null()).then(|| (*t).tv_sec.max(0) as u64 * 1_000_000_000 + (*t).tv_nsec.max(0) as u64)
}

unsafe fn tv_ns(t: *const timeval) -> Option<u64> {
    (!t.is_null())
        .then(|| (*t).tv_sec.max(0) as u64 * 1_000_000_000 + (*t).tv_usec.max(0) as u64 * 1000)
}

pub(crate) fn to_ts(ns: u64) -> timespec {
    timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

pub(crate) unsafe fn ts_blocks(t: *const timespec) -> bool {
    t.is_null() || (*t).tv_sec != 0 || (*t).tv_nsec != 0
}

unsafe fn tv_blocks(t: *const timeval) -> bool {
    t.is_null() || (*t).tv_sec != 0 || (*t).tv_usec != 0
}

fn enosys() -> c_int {
    unsafe { crate::set_errno(libc::ENOSYS) };
    -1
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    before_wait(timeout != 0);
    let Some(f) = real_poll() else {
        return enosys();
    };
    if !inproc::any() {
        return f(fds, n, timeout);
    }
    let t = (timeout >= 0).then(|| timeout as u64 * 1_000_000);
    // What is left, in whole milliseconds up (poll's unit): never 0 before the end.
    poll_with(fds, n, t, |p, k, left| {
        f(
            p,
            k,
            left.map_or(-1, |l| l.div_ceil(1_000_000).min(i32::MAX as u64) as c_int),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    before_wait(ts_blocks(timeout));
    let Some(f) = real_ppoll() else {
        return enosys();
    };
    if !inproc::any() {
        return f(fds, n, timeout, mask);
    }
    poll_with(fds, n, ts_ns(timeout), |p, k, left| {
        let ts = left.map(to_ts);
        f(p, k, ts.as_ref().map_or(std::ptr::null(), |t| t), mask)
    })
}

#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *mut timeval,
) -> c_int {
    before_wait(tv_blocks(timeout));
    let Some(f) = real_select() else {
        return enosys();
    };
    if w.is_null() || !inproc::any() {
        return f(n, r, w, e, timeout); // Linux updates the timeout: the application's own
    }
    let end = tv_ns(timeout).map(|t| inproc::now() + t);
    let got = select_with(
        n,
        [r, w, e],
        tv_ns(timeout),
        |k, [r, w, e], left| match left {
            None => f(k, r, w, e, std::ptr::null_mut()),
            Some(l) => {
                let mut tv = timeval {
                    tv_sec: (l / 1_000_000_000) as libc::time_t,
                    tv_usec: (l % 1_000_000_000 / 1000) as libc::suseconds_t,
                };
                f(k, r, w, e, &mut tv)
            }
        },
    );
    if let Some(l) = left(end) {
        // What is left, as Linux's select leaves it.
        (*timeout).tv_sec = (l / 1_000_000_000) as libc::time_t;
        (*timeout).tv_usec = (l % 1_000_000_000 / 1000) as libc::suseconds_t;
    }
    got
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    before_wait(ts_blocks(timeout));
    let Some(f) = real_pselect() else {
        return enosys();
    };
    if w.is_null() || !inproc::any() {
        return f(n, r, w, e, timeout, mask);
    }
    select_with(n, [r, w, e], ts_ns(timeout), |k, [r, w, e], left| {
        let ts = left.map(to_ts);
        f(
            k,
            r,
            w,
            e,
            ts.as_ref().map_or(std::ptr::null(), |t| t),
            mask,
        )
    })
}

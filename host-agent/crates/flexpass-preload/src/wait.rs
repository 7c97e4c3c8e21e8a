//! The application's waits (poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
//! epoll_pwait2): ACKs an in-process connection holds for the application's reply
//! (inproc::send_held; docs/datapath.md, "An ACK rides with the reply") leave before a
//! wait that may block, as the reply is not coming before it. Then the real call, untouched;
//! a wait that cannot block (timeout 0) sends nothing. One atomic load when nothing is held.

use crate::inproc;
use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

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

/// Before a wait: held ACKs leave unless the wait cannot block.
fn before_wait(may_block: bool) {
    if may_block {
        inproc::send_held();
    }
}

unsafe fn ts_blocks(t: *const timespec) -> bool {
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
    real_poll().map_or_else(enosys, |f| f(fds, n, timeout))
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    before_wait(ts_blocks(timeout));
    real_ppoll().map_or_else(enosys, |f| f(fds, n, timeout, mask))
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
    real_select().map_or_else(enosys, |f| f(n, r, w, e, timeout))
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
    real_pselect().map_or_else(enosys, |f| f(n, r, w, e, timeout, mask))
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    ep: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    before_wait(timeout != 0);
    real_epoll_wait().map_or_else(enosys, |f| f(ep, ev, max, timeout))
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
    real_epoll_pwait().map_or_else(enosys, |f| f(ep, ev, max, timeout, mask))
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
    real_epoll_pwait2().map_or_else(enosys, |f| f(ep, ev, max, timeout, mask))
}

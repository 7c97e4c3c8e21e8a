//! The data calls of in-process connections (FLEXPASS_INPROC=1, crate::inproc): read,
//! write and their relatives run the core inline on the connection's socket; every other
//! descriptor goes straight to the real call (one atomic load when this process has no
//! in-process connection).

use crate::inproc::conn::Conn;
use crate::inproc::{self, sys, Shared};
use crate::{errno, set_errno};
use libc::{c_int, c_void, iovec, msghdr, sockaddr, socklen_t, ssize_t};

real_fn!(real_read, "read", fn(c_int, *mut c_void, usize) -> ssize_t);
real_fn!(
    real_write,
    "write",
    fn(c_int, *const c_void, usize) -> ssize_t
);
real_fn!(
    real_recv,
    "recv",
    fn(c_int, *mut c_void, usize, c_int) -> ssize_t
);
real_fn!(
    real_send,
    "send",
    fn(c_int, *const c_void, usize, c_int) -> ssize_t
);
real_fn!(
    real_recvfrom,
    "recvfrom",
    fn(c_int, *mut c_void, usize, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t
);
real_fn!(
    real_sendto,
    "sendto",
    fn(c_int, *const c_void, usize, c_int, *const sockaddr, socklen_t) -> ssize_t
);
real_fn!(
    real_recvmsg,
    "recvmsg",
    fn(c_int, *mut msghdr, c_int) -> ssize_t
);
real_fn!(
    real_sendmsg,
    "sendmsg",
    fn(c_int, *const msghdr, c_int) -> ssize_t
);
real_fn!(
    real_readv,
    "readv",
    fn(c_int, *const iovec, c_int) -> ssize_t
);
real_fn!(
    real_writev,
    "writev",
    fn(c_int, *const iovec, c_int) -> ssize_t
);
real_fn!(real_close, "close", fn(c_int) -> c_int);
real_fn!(real_dup, "dup", fn(c_int) -> c_int);
real_fn!(real_dup2, "dup2", fn(c_int, c_int) -> c_int);
real_fn!(real_dup3, "dup3", fn(c_int, c_int, c_int) -> c_int);
real_fn!(
    real_fcntl,
    "fcntl",
    fn(c_int, c_int, libc::c_ulong) -> c_int
);
real_fn!(
    real_fcntl64,
    "fcntl64",
    fn(c_int, c_int, libc::c_ulong) -> c_int
);
real_fn!(real_shutdown, "shutdown", fn(c_int, c_int) -> c_int);
real_fn!(
    real_read_chk,
    "__read_chk",
    fn(c_int, *mut c_void, usize, usize) -> ssize_t
);
real_fn!(
    real_recv_chk,
    "__recv_chk",
    fn(c_int, *mut c_void, usize, usize, c_int) -> ssize_t
);

/// Longest single wait of a blocking call (it then looks at the connection again).
const MAX_WAIT_NS: u64 = 50_000_000;

unsafe fn nonblocking(fd: c_int, flags: c_int) -> bool {
    flags & libc::MSG_DONTWAIT != 0 || libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0
}

fn fail(e: c_int) -> ssize_t {
    unsafe { set_errno(e) };
    -1
}

/// recv on a connection: the bytes the core has in order, after draining the socket; 0 at
/// the peer's FIN; blocking calls wait on the socket (and the connection's timers).
pub(crate) unsafe fn conn_recv(c: &Shared, fd: c_int, out: &mut [u8], flags: c_int) -> ssize_t {
    if out.is_empty() {
        return 0;
    }
    let peek = flags & libc::MSG_PEEK != 0;
    // O_NONBLOCK is looked up (a system call) only when no byte is ready, once per call.
    let mut nb: Option<bool> = None;
    loop {
        let (own, wait) = {
            let Ok(mut g) = c.lock() else {
                return fail(libc::EIO);
            };
            // Under the lock (a fork changes the owner under it), at every turn: a fork by
            // another thread may have handed it to a child.
            if !c.own.owned() {
                drop(g);
                if !inproc::claim(c) {
                    return fail(libc::EIO);
                }
                continue;
            }
            let now = inproc::now();
            if g.ready_len() < out.len() {
                g.drain(now);
            }
            let n = g.take(out, peek);
            // ACKs and credits after the bytes reached the application (its ACKs alone
            // wait for its reply).
            if n > 0 && g.flush_after_read(now) {
                inproc::holding(c);
            } else if n == 0 {
                g.flush(now);
            }
            if n > 0 {
                g.settle(now);
                return n as ssize_t;
            }
            if g.at_eof() {
                g.settle(now);
                return 0;
            }
            if g.was_reset() {
                g.settle(now);
                crate::debug!(
                    "{}: connection reset (received flow reset: {:?}, sent flow: {:?})",
                    g.app_remote,
                    g.rx.as_ref().map(|r| r.was_reset()),
                    g.tx.error()
                );
                return fail(libc::ECONNRESET);
            }
            if *nb.get_or_insert_with(|| nonblocking(fd, flags)) {
                g.ring_if_held();
                return fail(libc::EAGAIN);
            }
            let wait = g
                .deadline()
                .map_or(MAX_WAIT_NS, |d| d.saturating_sub(now).max(1));
            (g.own, wait.min(MAX_WAIT_NS))
        };
        inproc::send_held();
        sys::wait(own, libc::POLLIN, wait);
    }
}

/// send on a connection: into the reply flow's send buffer (at most SEND_LIMIT unacked),
/// then whatever the core may send now.
pub(crate) unsafe fn conn_send(c: &Shared, fd: c_int, data: &[u8], flags: c_int) -> ssize_t {
    if data.is_empty() {
        return 0;
    }
    conn_send_from(c, fd, flags, |g| Ok(g.write(data)))
}

/// The write path of a connection, with the bytes put into its send buffer by `put` (under
/// the connection's lock): Ok(n) the bytes it put (0: no room, the call waits for room as
/// a write does, or fails with EAGAIN), Err(r) the call returns r (errno set if -1).
pub(crate) unsafe fn conn_send_from(
    c: &Shared,
    fd: c_int,
    flags: c_int,
    mut put: impl FnMut(&mut Conn) -> Result<usize, ssize_t>,
) -> ssize_t {
    // O_NONBLOCK is looked up (a system call) only when the send buffer has no room.
    let mut nb: Option<bool> = None;
    loop {
        let (ctl, wait) = {
            let Ok(mut g) = c.lock() else {
                return fail(libc::EIO);
            };
            if !c.own.owned() {
                drop(g);
                if !inproc::claim(c) {
                    return fail(libc::EIO);
                }
                continue;
            }
            let now = inproc::now();
            g.drain(now);
            if g.was_reset() {
                g.ring_if_held(); // a poller sees the reset (readable), as on TCP
                return fail(libc::ECONNRESET);
            }
            if g.wr_shut {
                if flags & libc::MSG_NOSIGNAL == 0 {
                    libc::raise(libc::SIGPIPE);
                }
                return fail(libc::EPIPE);
            }
            let n = match put(&mut g) {
                Ok(n) => n,
                Err(r) => return r,
            };
            g.flush(now); // bytes waiting for credits: the timer thread watches ctl
            if n > 0 || *nb.get_or_insert_with(|| nonblocking(fd, flags)) {
                g.ring_if_held();
                return if n > 0 {
                    n as ssize_t
                } else {
                    fail(libc::EAGAIN)
                };
            }
            let wait = g
                .deadline()
                .map_or(MAX_WAIT_NS, |d| d.saturating_sub(now).max(1));
            (g.ctl, wait.min(MAX_WAIT_NS))
        };
        // Credits and ACKs make room: they come on the library's socket.
        inproc::send_held();
        sys::wait(ctl, libc::POLLIN, wait);
    }
}

unsafe fn slice_mut<'a>(p: *mut c_void, n: usize) -> &'a mut [u8] {
    if p.is_null() || n == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(p.cast(), n)
    }
}

unsafe fn slice<'a>(p: *const c_void, n: usize) -> &'a [u8] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p.cast(), n)
    }
}

/// Scatter: the first non-empty buffer waits as recv does, the others take what is
/// already in order.
unsafe fn conn_recv_iov(
    c: &Shared,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    flags: c_int,
) -> ssize_t {
    let iovs: &[iovec] = if iov.is_null() || cnt <= 0 {
        &[]
    } else {
        std::slice::from_raw_parts(iov, cnt as usize)
    };
    let mut total: ssize_t = 0;
    for v in iovs.iter().filter(|v| v.iov_len > 0) {
        let out = slice_mut(v.iov_base, v.iov_len);
        if total == 0 {
            let n = conn_recv(c, fd, out, flags);
            if n <= 0 {
                return n;
            }
            total = n;
            if (n as usize) < out.len() {
                break;
            }
        } else {
            let Ok(mut g) = c.lock() else { break };
            if !c.own.owned() {
                break;
            }
            let n = g.take(out, flags & libc::MSG_PEEK != 0);
            g.settle(inproc::now());
            total += n as ssize_t;
            if n < out.len() {
                break;
            }
        }
    }
    total
}

/// Gather into one write.
unsafe fn conn_send_iov(
    c: &Shared,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    flags: c_int,
) -> ssize_t {
    if iov.is_null() || cnt <= 0 {
        return 0;
    }
    let iovs = std::slice::from_raw_parts(iov, cnt as usize);
    if let [one] = iovs {
        return conn_send(c, fd, slice(one.iov_base, one.iov_len), flags);
    }
    let mut all = Vec::with_capacity(iovs.iter().map(|v| v.iov_len).sum());
    for v in iovs {
        all.extend_from_slice(slice(v.iov_base, v.iov_len));
    }
    conn_send(c, fd, &all, flags)
}

unsafe fn remote_into(c: &Shared, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    if let Ok(g) = c.lock() {
        let cap = *len;
        crate::write_inet4(g.app_remote, g.v6, addr, len, cap);
    }
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_recv(&c, fd, slice_mut(buf, n), 0);
    }
    match real_read() {
        Some(f) => f(fd, buf, n),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: usize, cap: usize) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_recv(&c, fd, slice_mut(buf, n.min(cap)), 0);
    }
    match real_read_chk() {
        Some(f) => f(fd, buf, n, cap),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_send(&c, fd, slice(buf, n), 0);
    }
    match real_write() {
        Some(f) => f(fd, buf, n),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_recv(&c, fd, slice_mut(buf, n), flags);
    }
    match real_recv() {
        Some(f) => f(fd, buf, n, flags),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    cap: usize,
    flags: c_int,
) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_recv(&c, fd, slice_mut(buf, n.min(cap)), flags);
    }
    match real_recv_chk() {
        Some(f) => f(fd, buf, n, cap, flags),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_send(&c, fd, slice(buf, n), flags);
    }
    match real_send() {
        Some(f) => f(fd, buf, n, flags),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        let r = conn_recv(&c, fd, slice_mut(buf, n), flags);
        if r >= 0 {
            remote_into(&c, addr, len);
        }
        return r;
    }
    match real_recvfrom() {
        Some(f) => f(fd, buf, n, flags, addr, len),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        // As on a connected TCP socket, the address is ignored.
        return conn_send(&c, fd, slice(buf, n), flags);
    }
    match real_sendto() {
        Some(f) => f(fd, buf, n, flags, addr, len),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    if let (Some(c), false) = (inproc::lookup(fd), msg.is_null()) {
        let m = &mut *msg;
        let r = conn_recv_iov(&c, fd, m.msg_iov, m.msg_iovlen as c_int, flags);
        if r >= 0 {
            if !m.msg_name.is_null() {
                let mut len = m.msg_namelen;
                remote_into(&c, m.msg_name.cast(), &mut len);
                m.msg_namelen = len;
            }
            m.msg_controllen = 0;
            m.msg_flags = 0;
        }
        return r;
    }
    match real_recvmsg() {
        Some(f) => f(fd, msg, flags),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if let (Some(c), false) = (inproc::lookup(fd), msg.is_null()) {
        let m = &*msg;
        return conn_send_iov(&c, fd, m.msg_iov, m.msg_iovlen as c_int, flags);
    }
    match real_sendmsg() {
        Some(f) => f(fd, msg, flags),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_recv_iov(&c, fd, iov, cnt, 0);
    }
    match real_readv() {
        Some(f) => f(fd, iov, cnt),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if let Some(c) = inproc::lookup(fd) {
        return conn_send_iov(&c, fd, iov, cnt, 0);
    }
    match real_writev() {
        Some(f) => f(fd, iov, cnt),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if inproc::enabled() {
        let saved = errno();
        crate::epoll::forget(fd);
        inproc::on_close(fd);
        inproc::listen::on_listener_close(fd);
        set_errno(saved);
    }
    match real_close() {
        Some(f) => f(fd),
        None => sys::close_result(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let r = match real_dup() {
        Some(f) => f(fd),
        None => fail(libc::ENOSYS) as c_int,
    };
    if r >= 0 && inproc::enabled() {
        inproc::on_dup(fd, r);
    }
    r
}

/// fcntl(2) and its 64-bit-offset name (what programs built with _FILE_OFFSET_BITS=64,
/// CPython among them, call): F_DUPFD / F_DUPFD_CLOEXEC duplicate as dup does (CPython's
/// os.dup is F_DUPFD_CLOEXEC). The third argument is passed on as the register it came in
/// (x86-64 and aarch64 pass a variadic int or pointer as a plain one); commands without
/// one ignore it.
unsafe fn fcntl_with(
    real: Option<unsafe extern "C" fn(c_int, c_int, libc::c_ulong) -> c_int>,
    fd: c_int,
    cmd: c_int,
    arg: libc::c_ulong,
) -> c_int {
    let r = match real {
        Some(f) => f(fd, cmd, arg),
        None => fail(libc::ENOSYS) as c_int,
    };
    if r >= 0 && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) && inproc::enabled() {
        inproc::on_dup(fd, r);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    fcntl_with(real_fcntl(), fd, cmd, arg)
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    fcntl_with(real_fcntl64().or(real_fcntl()), fd, cmd, arg)
}

/// dup2 / dup3 onto `new`: the kernel closes what `new` was (a connection: as close), then
/// `new` is a duplicate of `old`.
unsafe fn dup_onto(old: c_int, new: c_int, r: c_int) -> c_int {
    if r >= 0 && old != new && inproc::enabled() {
        let saved = errno();
        inproc::on_close(new);
        inproc::listen::on_listener_close(new);
        inproc::on_dup(old, new);
        set_errno(saved);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let r = match real_dup2() {
        Some(f) => f(old, new),
        None => fail(libc::ENOSYS) as c_int,
    };
    dup_onto(old, new, r)
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let r = match real_dup3() {
        Some(f) => f(old, new, flags),
        None => fail(libc::ENOSYS) as c_int,
    };
    dup_onto(old, new, r)
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if let Some(c) = inproc::lookup(fd) {
        inproc::on_shutdown(&c, how);
        return 0;
    }
    match real_shutdown() {
        Some(f) => f(fd, how),
        None => fail(libc::ENOSYS) as c_int,
    }
}

//! sendfile(2) and splice(2) with an in-process connection (docs/datapath.md, "sendfile
//! and splice"). The connection's descriptor is a UDP socket: the kernel's zero-copy calls
//! would move raw datagrams, so the bytes are copied through the connection's own read and
//! write paths instead, at most CHUNK per call (both calls may move less than asked;
//! callers loop). Any other pair of descriptors: the real call.
//!
//! sendfile: the file's bytes are read (pread at the offset, or at the file's position,
//! which then moves by what was sent, as sendfile does) and written: the count sent,
//! blocking or EAGAIN as write.
//!
//! splice from a pipe onto a connection: no more is read from the pipe than the
//! connection's send buffer takes at once (under its lock), so nothing taken from the pipe
//! is lost; splice from a connection into a pipe: the bytes are peeked, as many written to
//! the pipe as it has room for, and only those consumed. The connection's side blocks or
//! not by its O_NONBLOCK, the pipe's by its own and SPLICE_F_NONBLOCK, as in the kernel.

use crate::inproc;
use libc::{c_int, off64_t, ssize_t};

real_fn!(
    real_sendfile,
    "sendfile",
    fn(c_int, c_int, *mut off64_t, usize) -> ssize_t
);
real_fn!(
    real_splice,
    "splice",
    fn(c_int, *mut off64_t, c_int, *mut off64_t, usize, libc::c_uint) -> ssize_t
);
real_fn!(
    real_sendfile64,
    "sendfile64",
    fn(c_int, c_int, *mut off64_t, usize) -> ssize_t
);

/// Most bytes one call reads from the file.
const CHUNK: usize = 1 << 20;

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `f` on this thread's buffer, its first `n` bytes (at most CHUNK); EAGAIN if a signal
/// handler's call is already using it.
fn with_buf(n: usize, f: impl FnOnce(&mut [u8]) -> ssize_t) -> ssize_t {
    BUF.with(|b| {
        let Ok(mut buf) = b.try_borrow_mut() else {
            return fail(libc::EAGAIN);
        };
        let n = n.min(CHUNK);
        if buf.len() < n {
            buf.resize(n, 0);
        }
        f(&mut buf[..n])
    })
}

fn fail(e: c_int) -> ssize_t {
    unsafe { crate::set_errno(e) };
    -1
}

unsafe fn conn_sendfile(
    c: &inproc::Shared,
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: usize,
) -> ssize_t {
    if inproc::is_conn(in_fd) {
        return fail(libc::EINVAL); // sendfile reads only from what mmap can map
    }
    if count == 0 {
        return 0;
    }
    let at = if offset.is_null() {
        libc::lseek64(in_fd, 0, libc::SEEK_CUR)
    } else {
        *offset
    };
    if at < 0 {
        return fail(libc::EINVAL); // not seekable (sendfile's answer too)
    }
    with_buf(count, |buf| {
        let got = libc::pread64(in_fd, buf.as_mut_ptr().cast(), buf.len(), at);
        if got <= 0 {
            return got; // end of file (0) or the read's error
        }
        let sent = crate::io::conn_send(c, out_fd, &buf[..got as usize], 0);
        if sent > 0 {
            if offset.is_null() {
                libc::lseek64(in_fd, at + sent as off64_t, libc::SEEK_SET);
            } else {
                *offset = at + sent as off64_t;
            }
        }
        sent
    })
}

type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut off64_t, usize) -> ssize_t;

/// sendfile and sendfile64 (one signature on 64-bit Linux): an in-process connection's,
/// else the real call.
unsafe fn sendfile_or(
    real: Option<SendfileFn>,
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: usize,
) -> ssize_t {
    if let Some(c) = inproc::lookup(out_fd) {
        return conn_sendfile(&c, out_fd, in_fd, offset, count);
    }
    match real {
        Some(f) => f(out_fd, in_fd, offset, count),
        None => fail(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: usize,
) -> ssize_t {
    sendfile_or(real_sendfile(), out_fd, in_fd, offset, count)
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: usize,
) -> ssize_t {
    sendfile_or(
        real_sendfile64().or(real_sendfile()),
        out_fd,
        in_fd,
        offset,
        count,
    )
}

/// The pipe `fd` may be waited on (neither SPLICE_F_NONBLOCK nor O_NONBLOCK).
unsafe fn pipe_blocks(fd: c_int, flags: libc::c_uint) -> bool {
    flags & libc::SPLICE_F_NONBLOCK == 0 && libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK == 0
}

/// Until the pipe `fd` has `events` (POLLIN: bytes or no writer left; POLLOUT: room), or
/// EAGAIN if it may not be waited on.
unsafe fn pipe_ready(fd: c_int, events: i16, flags: libc::c_uint) -> Result<(), ssize_t> {
    let mut p = [libc::pollfd {
        fd,
        events,
        revents: 0,
    }];
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let wait = pipe_blocks(fd, flags);
    if inproc::sys::ppoll(&mut p, (!wait).then_some(&zero)) > 0 {
        Ok(())
    } else if !wait {
        Err(fail(libc::EAGAIN))
    } else {
        Err(-1) // the wait's error (EINTR), errno set
    }
}

/// Pipe `pipe` → connection `c` (descriptor `fd`).
unsafe fn splice_into(
    c: &inproc::Shared,
    fd: c_int,
    pipe: c_int,
    len: usize,
    flags: libc::c_uint,
) -> ssize_t {
    if len == 0 {
        return 0;
    }
    // Bytes or EOF first: the pipe is read under the connection's lock, so not waited on.
    if let Err(r) = pipe_ready(pipe, libc::POLLIN, flags) {
        return r;
    }
    with_buf(len, |buf| {
        crate::io::conn_send_from(c, fd, 0, |g| {
            let n = buf.len().min(g.room());
            if n == 0 {
                return Ok(0); // no room: wait for it, as a write does
            }
            match libc::read(pipe, buf.as_mut_ptr().cast(), n) {
                got if got > 0 => Ok(g.write(&buf[..got as usize])), // got ≤ room: all of it
                got => Err(got), // no writer left (0), or the read's error
            }
        })
    })
}

/// Connection `c` (descriptor `fd`) → pipe `pipe`.
unsafe fn splice_out_of(
    c: &inproc::Shared,
    fd: c_int,
    pipe: c_int,
    len: usize,
    flags: libc::c_uint,
) -> ssize_t {
    if len == 0 {
        return 0;
    }
    if let Err(r) = pipe_ready(pipe, libc::POLLOUT, flags) {
        return r;
    }
    let size = libc::fcntl(pipe, libc::F_GETPIPE_SZ);
    let mut queued: c_int = 0;
    if size <= 0 || libc::ioctl(pipe, libc::FIONREAD, &mut queued) < 0 {
        return fail(libc::EINVAL); // not a pipe
    }
    let room = (size - queued).max(0) as usize;
    if room == 0 {
        return fail(libc::EAGAIN); // another writer filled it since
    }
    with_buf(len.min(room), |buf| {
        let got = crate::io::conn_recv(c, fd, buf, libc::MSG_PEEK);
        if got <= 0 {
            return got;
        }
        let put = libc::write(pipe, buf.as_ptr().cast(), got as usize);
        if put > 0 {
            // Those bytes are in order in the connection: taking them does not wait.
            crate::io::conn_recv(c, fd, &mut buf[..put as usize], 0);
        }
        put
    })
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut off64_t,
    fd_out: c_int,
    off_out: *mut off64_t,
    len: usize,
    flags: libc::c_uint,
) -> ssize_t {
    if inproc::any() {
        if let Some(c) = inproc::lookup(fd_out) {
            if !off_out.is_null() {
                return fail(libc::ESPIPE); // as for any socket
            }
            if inproc::is_conn(fd_in) || !off_in.is_null() {
                return fail(libc::EINVAL); // one end must be a pipe
            }
            return splice_into(&c, fd_out, fd_in, len, flags);
        }
        if let Some(c) = inproc::lookup(fd_in) {
            if !off_in.is_null() {
                return fail(libc::ESPIPE);
            }
            if !off_out.is_null() {
                return fail(libc::EINVAL);
            }
            return splice_out_of(&c, fd_in, fd_out, len, flags);
        }
    }
    match real_splice() {
        Some(f) => f(fd_in, off_in, fd_out, off_out, len, flags),
        None => fail(libc::ENOSYS),
    }
}

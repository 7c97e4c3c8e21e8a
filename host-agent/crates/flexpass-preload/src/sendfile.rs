//! sendfile(2) onto an in-process connection (docs/datapath.md, "sendfile"): the file's
//! bytes are read (pread at the offset, or at the file's position, which then moves by
//! what was sent, as sendfile does) and go through the connection's write path: the count
//! sent, blocking or EAGAIN as write. At most CHUNK bytes per call (sendfile may send less
//! than asked; callers loop). Any other descriptor: the real call. splice(2) is not hooked.

use crate::inproc;
use libc::{c_int, off64_t, ssize_t};

real_fn!(
    real_sendfile,
    "sendfile",
    fn(c_int, c_int, *mut off64_t, usize) -> ssize_t
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
    BUF.with(|b| {
        let Ok(mut buf) = b.try_borrow_mut() else {
            return fail(libc::EAGAIN);
        };
        let n = count.min(CHUNK);
        if buf.len() < n {
            buf.resize(n, 0);
        }
        let got = libc::pread64(in_fd, buf.as_mut_ptr().cast(), n, at);
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

//! A small epoll(7) wrapper for the daemon: its API clients' and connections' sockets are
//! registered once (with the events they wait for, level-triggered), and one epoll file
//! descriptor stands for all of them in the endpoint's ppoll(2). A turn then learns which
//! sockets are ready from `epoll_wait` instead of asking every socket (docs/agent-api.md,
//! "Scale").

use nix::libc;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Ready for reading (also: end of file, error, hang-up are reported with it).
pub const IN: u32 = libc::EPOLLIN as u32;
/// Error or hang-up (always reported, whatever the registration).
pub const ERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;
/// Ready for writing.
pub const OUT: u32 = libc::EPOLLOUT as u32;

/// poll(2) events (POLLIN / POLLOUT) as epoll events.
pub fn from_poll(ev: i16) -> u32 {
    let mut e = 0;
    if ev & libc::POLLIN != 0 {
        e |= IN;
    }
    if ev & libc::POLLOUT != 0 {
        e |= OUT;
    }
    e
}

pub struct Poller {
    fd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

impl Poller {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked and owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Poller {
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Change `fd`'s registration from `old` events to `new` (0: not registered): an fd
    /// that waits for nothing is not registered at all, so its hang-up cannot wake the loop.
    /// Self-healing: a registration the kernel dropped (its fd was closed and replaced) is
    /// added again, one it still has is modified.
    pub fn update(&self, fd: RawFd, old: u32, new: u32, token: u64) -> io::Result<()> {
        let errno = |r: io::Result<()>| r.err().and_then(|e| e.raw_os_error());
        match (old, new) {
            (o, n) if o == n => Ok(()),
            (_, 0) => match errno(self.ctl(libc::EPOLL_CTL_DEL, fd, 0, token)) {
                None | Some(libc::ENOENT) | Some(libc::EBADF) => Ok(()),
                Some(e) => Err(io::Error::from_raw_os_error(e)),
            },
            (0, n) => match self.ctl(libc::EPOLL_CTL_ADD, fd, n, token) {
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    self.ctl(libc::EPOLL_CTL_MOD, fd, n, token)
                }
                r => r,
            },
            (_, n) => match self.ctl(libc::EPOLL_CTL_MOD, fd, n, token) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    self.ctl(libc::EPOLL_CTL_ADD, fd, n, token)
                }
                r => r,
            },
        }
    }

    /// `update`, for a socket of one client: a failure (out of epoll watches…) is logged
    /// and leaves the registration as it was; returns the events registered.
    pub fn watch(&self, fd: RawFd, old: u32, new: u32, token: u64) -> u32 {
        match self.update(fd, old, new, token) {
            Ok(()) => new,
            Err(e) => {
                log::warn!("flexpass agent: epoll registration of fd {fd} failed: {e}");
                old
            }
        }
    }

    /// Ready registrations now (no wait): up to 1024 `(token, events)` pairs appended to
    /// `out` (level-triggered: the rest are reported next time).
    pub fn ready(&mut self, out: &mut Vec<(u64, u32)>) -> io::Result<()> {
        loop {
            // SAFETY: `buf` holds `len` writable epoll_events.
            let n = unsafe {
                libc::epoll_wait(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr(),
                    self.buf.len() as libc::c_int,
                    0,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let n = n as usize;
            out.extend(self.buf[..n].iter().map(|e| {
                let (token, events) = (e.u64, e.events);
                (token, events)
            }));
            return Ok(());
        }
    }
}

//! System calls of the in-process datapath, made directly (`syscall(2)`): the library
//! exports read/write/recv/send/close/connect itself, so calling those symbols from here
//! would enter its own hooks.

use libc::{c_int, c_void, sockaddr_in, socklen_t};
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};

pub fn sin(a: SocketAddrV4) -> sockaddr_in {
    let mut s: sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

pub fn from_sin(s: &sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    )
}

pub fn errno() -> c_int {
    unsafe { *libc::__errno_location() }
}

pub fn close(fd: c_int) {
    unsafe {
        libc::syscall(libc::SYS_close, fd as libc::c_long);
    }
}

pub fn connect(fd: c_int, to: SocketAddrV4) -> c_int {
    let s = sin(to);
    unsafe {
        libc::syscall(
            libc::SYS_connect,
            fd as libc::c_long,
            &s as *const sockaddr_in,
            size_of::<sockaddr_in>() as libc::c_long,
        ) as c_int
    }
}

pub fn bind(fd: c_int, at: SocketAddrV4) -> c_int {
    let s = sin(at);
    unsafe {
        libc::bind(
            fd,
            (&s as *const sockaddr_in).cast(),
            size_of::<sockaddr_in>() as socklen_t,
        )
    }
}

/// getsockname of an AF_INET socket.
pub fn name(fd: c_int) -> Option<SocketAddrV4> {
    let mut s: sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = size_of::<sockaddr_in>() as socklen_t;
    let r = unsafe {
        libc::syscall(
            libc::SYS_getsockname,
            fd as libc::c_long,
            &mut s as *mut sockaddr_in,
            &mut len as *mut socklen_t,
        )
    };
    (r == 0 && s.sin_family as c_int == libc::AF_INET).then(|| from_sin(&s))
}

pub fn set_int(fd: c_int, level: c_int, opt: c_int, v: c_int) {
    unsafe {
        libc::syscall(
            libc::SYS_setsockopt,
            fd as libc::c_long,
            level as libc::c_long,
            opt as libc::c_long,
            &v as *const c_int,
            size_of::<c_int>() as libc::c_long,
        );
    }
}

pub fn get_int(fd: c_int, level: c_int, opt: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    let r = unsafe {
        libc::syscall(
            libc::SYS_getsockopt,
            fd as libc::c_long,
            level as libc::c_long,
            opt as libc::c_long,
            &mut v as *mut c_int,
            &mut len as *mut socklen_t,
        )
    };
    (r == 0).then_some(v)
}

/// Messages per recvmmsg(2) call (`RxBatch::recv`).
pub const RX_BATCH: usize = 16;
/// Room for one message: a coalesced run (UDP_GRO) is at most 64 KiB.
const RX_SLOT: usize = 65_536;

/// Receive buffers for `RxBatch::recv`, one thread's: a batch is handled before the next
/// call. 1 MiB, so one per thread, not per connection.
pub struct RxBatch {
    buf: Box<[u8]>,
    names: [sockaddr_in; RX_BATCH],
    cmsg: [[u64; 8]; RX_BATCH],
    iov: [libc::iovec; RX_BATCH],
    hdrs: [libc::mmsghdr; RX_BATCH],
    got: usize,
}

impl RxBatch {
    pub fn new() -> Self {
        RxBatch {
            buf: vec![0; RX_BATCH * RX_SLOT].into_boxed_slice(),
            names: unsafe { std::mem::zeroed() },
            cmsg: [[0; 8]; RX_BATCH],
            iov: unsafe { std::mem::zeroed() },
            hdrs: unsafe { std::mem::zeroed() },
            got: 0,
        }
    }

    /// Up to RX_BATCH messages waiting in `fd`, non-blocking (one recvmmsg): how many.
    pub fn recv(&mut self, fd: c_int) -> usize {
        for i in 0..RX_BATCH {
            self.iov[i] = libc::iovec {
                iov_base: self.buf[i * RX_SLOT..].as_mut_ptr().cast(),
                iov_len: RX_SLOT,
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = (&mut self.names[i] as *mut sockaddr_in).cast();
            h.msg_namelen = size_of::<sockaddr_in>() as socklen_t;
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.cmsg[i].as_mut_ptr().cast();
            h.msg_controllen = size_of::<[u64; 8]>();
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                fd as libc::c_long,
                self.hdrs.as_mut_ptr(),
                RX_BATCH as libc::c_long,
                libc::MSG_DONTWAIT as libc::c_long,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        self.got = n.max(0) as usize;
        self.got
    }

    /// Message `i` of the last `recv`: (bytes, source, IP TOS byte, segment size). With
    /// UDP_GRO (`socket_pair`) a message may hold a run of datagrams of one source and
    /// TOS, all `segment` bytes but the last; `segment` is 0 for a single datagram.
    pub fn get(&self, i: usize) -> (&[u8], SocketAddrV4, u8, usize) {
        assert!(i < self.got);
        let h = &self.hdrs[i].msg_hdr;
        let len = (self.hdrs[i].msg_len as usize).min(RX_SLOT);
        let (mut tos, mut segment) = (0u8, 0usize);
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) => tos = *libc::CMSG_DATA(c),
                    (libc::SOL_UDP, libc::UDP_GRO) => {
                        segment =
                            (libc::CMSG_DATA(c) as *const c_int).read_unaligned().max(0) as usize
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        let data = &self.buf[i * RX_SLOT..i * RX_SLOT + len];
        (data, from_sin(&self.names[i]), tos, segment)
    }
}

/// One datagram to `to` with the IP TOS byte `tos` (DSCP and ECN of the core's marking).
pub fn send_dgram(fd: c_int, data: &[u8], to: SocketAddrV4, tos: u8) -> bool {
    send_run(fd, data, to, tos, 0) >= 0
}

/// Control buffer of one datagram run: its IP_TOS and, with `segment` > 0, UDP_SEGMENT.
type RunCmsg = [u64; 8];

/// `msg` sends `iov` to `dst` with the TOS byte `tos`, as datagrams of `segment` bytes
/// (UDP GSO; 0: one datagram); its control messages are written into `cbuf`.
unsafe fn run_msghdr(
    msg: &mut libc::msghdr,
    dst: &mut sockaddr_in,
    iov: &mut libc::iovec,
    cbuf: &mut RunCmsg,
    tos: u8,
    segment: u16,
) {
    *msg = std::mem::zeroed();
    msg.msg_name = (dst as *mut sockaddr_in).cast();
    msg.msg_namelen = size_of::<sockaddr_in>() as socklen_t;
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    let tos_space = libc::CMSG_SPACE(size_of::<c_int>() as u32) as usize;
    let seg_space = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = tos_space + if segment > 0 { seg_space } else { 0 };
    let c = libc::CMSG_FIRSTHDR(msg);
    (*c).cmsg_level = libc::IPPROTO_IP;
    (*c).cmsg_type = libc::IP_TOS;
    (*c).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as u32) as usize;
    *(libc::CMSG_DATA(c) as *mut c_int) = tos as c_int;
    if segment > 0 {
        let c = libc::CMSG_NXTHDR(msg, c);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
        (libc::CMSG_DATA(c) as *mut u16).write_unaligned(segment);
    }
}

/// `data` as datagrams of `segment` bytes each (the last may be shorter) in one UDP GSO
/// send (UDP_SEGMENT), or as one datagram with `segment` 0; each with the IP TOS byte
/// `tos`. The syscall's result: bytes sent, or -errno.
pub fn send_run(fd: c_int, data: &[u8], to: SocketAddrV4, tos: u8, segment: u16) -> isize {
    let mut dst = sin(to);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let mut cbuf: RunCmsg = [0; 8];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    unsafe {
        run_msghdr(&mut msg, &mut dst, &mut iov, &mut cbuf, tos, segment);
        let r = libc::syscall(
            libc::SYS_sendmsg,
            fd as libc::c_long,
            &msg as *const libc::msghdr,
            (libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as libc::c_long,
        );
        if r < 0 {
            -(errno() as isize)
        } else {
            r as isize
        }
    }
}

/// Most runs one `send_runs` call takes.
pub const MAX_RUNS: usize = 8;

/// Several runs (`runs[i]`: bytes, TOS, segment as in `send_run`) in one sendmmsg: a
/// connection's ACK and the data after it leave in one system call. `out[i]` gets run i's
/// result as `send_run` gives it (a run the kernel refused is skipped; the later ones
/// are sent by another call).
pub fn send_runs(fd: c_int, runs: &[(&[u8], u8, u16)], to: SocketAddrV4, out: &mut [isize]) {
    let n = runs.len().min(MAX_RUNS);
    let mut dst = sin(to);
    let mut iovs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_RUNS];
    let mut cbufs: [RunCmsg; MAX_RUNS] = [[0; 8]; MAX_RUNS];
    let mut msgs: [libc::mmsghdr; MAX_RUNS] = unsafe { std::mem::zeroed() };
    for (i, &(data, tos, segment)) in runs[..n].iter().enumerate() {
        iovs[i] = libc::iovec {
            iov_base: data.as_ptr() as *mut c_void,
            iov_len: data.len(),
        };
        unsafe {
            run_msghdr(
                &mut msgs[i].msg_hdr,
                &mut dst,
                &mut iovs[i],
                &mut cbufs[i],
                tos,
                segment,
            )
        };
    }
    let mut at = 0;
    while at < n {
        let r = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                fd as libc::c_long,
                msgs[at..].as_mut_ptr(),
                (n - at) as libc::c_long,
                (libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as libc::c_long,
            )
        };
        if r > 0 {
            for i in at..at + r as usize {
                out[i] = msgs[i].msg_len as isize;
            }
            at += r as usize;
        } else {
            // The run at `at` failed (sendmmsg reports the error of its first message).
            out[at] = -(errno() as isize);
            at += 1;
        }
    }
}

/// A line and at most one descriptor (SCM_RIGHTS) in one sendmsg; all of it or false.
pub fn send_line(fd: c_int, line: &[u8], pass: Option<c_int>) -> bool {
    let mut iov = libc::iovec {
        iov_base: line.as_ptr() as *mut c_void,
        iov_len: line.len(),
    };
    let mut cbuf = [0u64; 4];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    unsafe {
        if let Some(p) = pass {
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(size_of::<c_int>() as u32) as usize;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as u32) as usize;
            *(libc::CMSG_DATA(c) as *mut c_int) = p;
        }
        let n = libc::syscall(
            libc::SYS_sendmsg,
            fd as libc::c_long,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL as libc::c_long,
        );
        n == line.len() as libc::c_long
    }
}

/// Blocking read(2) of up to `buf.len()` bytes (0: end of stream, <0: error).
pub fn read(fd: c_int, buf: &mut [u8]) -> isize {
    loop {
        let n = unsafe {
            libc::syscall(
                libc::SYS_read,
                fd as libc::c_long,
                buf.as_mut_ptr(),
                buf.len() as libc::c_long,
            )
        } as isize;
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return n;
    }
}

/// ppoll(2) as a system call (the library hooks the libc functions that wait: wait.rs).
/// `ts` None: no timeout.
pub fn ppoll(fds: &mut [libc::pollfd], ts: Option<&libc::timespec>) -> c_int {
    unsafe {
        libc::syscall(
            libc::SYS_ppoll,
            fds.as_mut_ptr(),
            fds.len() as libc::c_long,
            ts.map_or(std::ptr::null(), |t| t as *const libc::timespec),
            std::ptr::null::<libc::sigset_t>(),
            8 as libc::c_long, // the kernel's sigset size
        ) as c_int
    }
}

/// Wait until `fd` has `events` or `ns` nanoseconds passed.
pub fn wait(fd: c_int, events: i16, ns: u64) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    ppoll(std::slice::from_mut(&mut p), Some(&ts)) > 0
}

/// epoll_pwait2 (Linux 5.11) is missing: wait with ppoll on the epoll descriptor.
static NO_EPOLL_PWAIT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Events of epoll instance `ep` into `out`, waiting at most `ns` nanoseconds (None: until
/// one comes); the timeout is the nanosecond one of ppoll, not epoll_wait's millisecond.
pub fn epoll_wait(ep: c_int, out: &mut [libc::epoll_event], ns: Option<u64>) -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    let ts = ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    unsafe {
        if !NO_EPOLL_PWAIT2.load(Relaxed) {
            let n = libc::syscall(
                libc::SYS_epoll_pwait2,
                ep as libc::c_long,
                out.as_mut_ptr(),
                out.len() as libc::c_long,
                tsp,
                std::ptr::null::<libc::sigset_t>(),
                0 as libc::c_long,
            );
            if n >= 0 {
                return n as usize;
            }
            if errno() != libc::ENOSYS {
                return 0;
            }
            NO_EPOLL_PWAIT2.store(true, Relaxed);
        }
        let mut p = libc::pollfd {
            fd: ep,
            events: libc::POLLIN,
            revents: 0,
        };
        if ppoll(std::slice::from_mut(&mut p), ts.as_ref()) <= 0 {
            return 0;
        }
        libc::syscall(
            libc::SYS_epoll_pwait,
            ep as libc::c_long,
            out.as_mut_ptr(),
            out.len() as libc::c_long,
            0 as libc::c_long,
            std::ptr::null::<libc::sigset_t>(),
            8 as libc::c_long, // the kernel's sigset size
        )
        .max(0) as usize
    }
}

/// epoll_ctl(2) as a system call (the library hooks libc's: epoll.rs keeps a copy of the
/// application's registrations, and must not see the library's own).
pub fn epoll_ctl(ep: c_int, op: c_int, fd: c_int, events: u32, data: u64) -> c_int {
    let mut ev = libc::epoll_event { events, u64: data };
    unsafe {
        libc::syscall(
            libc::SYS_epoll_ctl,
            ep as libc::c_long,
            op as libc::c_long,
            fd as libc::c_long,
            &mut ev as *mut libc::epoll_event,
        ) as c_int
    }
}

/// Add (or, `on` false, remove) `fd` in epoll instance `ep`: one report when readable,
/// carrying `data` (EPOLLONESHOT: `epoll_rearm` asks for the next).
pub fn epoll_watch(ep: c_int, fd: c_int, data: u64, on: bool) {
    let op = if on {
        libc::EPOLL_CTL_ADD
    } else {
        libc::EPOLL_CTL_DEL
    };
    epoll_ctl(
        ep,
        op,
        fd,
        (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        data,
    );
}

/// The next report of a watched `fd` (after EPOLLONESHOT's).
pub fn epoll_rearm(ep: c_int, fd: c_int, data: u64) {
    let events = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
    epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, events, data);
}

/// close(2) with its result (the fallback of the `close` hook).
pub fn close_result(fd: c_int) -> c_int {
    unsafe { libc::syscall(libc::SYS_close, fd as libc::c_long) as c_int }
}

/// Which socket of a connection's pair a datagram goes to, by its message type (the low
/// nibble of byte 0, docs/protocol.md §3): data and RESET to the application's socket
/// (index 0), everything else (credits, ACKs, HELLO, CREDIT_REQUEST/STOP…) to the
/// library's (index 1). An empty datagram (the doorbell) fails the load: index 0.
const STEER: [libc::sock_filter; 7] = [
    libc::sock_filter {
        code: 0x30,
        jt: 0,
        jf: 0,
        k: 0,
    }, // ldb [0]
    libc::sock_filter {
        code: 0x54,
        jt: 0,
        jf: 0,
        k: 0x0f,
    }, // and #0xf
    libc::sock_filter {
        code: 0x15,
        jt: 3,
        jf: 0,
        k: 2,
    }, // PROACTIVE_DATA
    libc::sock_filter {
        code: 0x15,
        jt: 2,
        jf: 0,
        k: 3,
    }, // REACTIVE_DATA
    libc::sock_filter {
        code: 0x15,
        jt: 1,
        jf: 0,
        k: 9,
    }, // RESET
    libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 1,
    }, // ret #1
    libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }, // ret #0
];

fn udp_socket() -> c_int {
    unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }
}

/// A connection's two UDP sockets on one address of `ip` (a SO_REUSEPORT group steered by
/// STEER): the application's (data: readable means bytes or the end for the application,
/// as a TCP socket) and the library's (the flows' control). Both report each datagram's
/// TOS, take coalesced runs of datagrams (UDP_GRO: `recv_dgram` gives the segment size)
/// and have `buffer` bytes of socket buffer each way. None if no port could be had.
pub fn socket_pair(ip: Ipv4Addr, buffer: c_int) -> Option<(c_int, c_int, SocketAddrV4)> {
    let (own, ctl, at) = reuseport_pair(ip)?;
    for fd in [own, ctl] {
        set_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
        // ICMP errors of our datagrams queue on the socket (POLLERR): `peer_refused`.
        set_int(fd, libc::IPPROTO_IP, libc::IP_RECVERR, 1);
        set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1);
        set_buffer(fd, libc::SO_RCVBUF, libc::SO_RCVBUFFORCE, buffer);
        set_buffer(fd, libc::SO_SNDBUF, libc::SO_SNDBUFFORCE, buffer);
    }
    Some((own, ctl, at))
}

fn reuseport_pair(ip: Ipv4Addr) -> Option<(c_int, c_int, SocketAddrV4)> {
    for _ in 0..8 {
        // A port nobody uses: a port-0 bind with SO_REUSEPORT could join another group.
        let probe = udp_socket();
        if probe < 0 {
            return None;
        }
        let at = (bind(probe, SocketAddrV4::new(ip, 0)) == 0)
            .then(|| name(probe))
            .flatten();
        close(probe);
        let at = at?;
        let (a, b) = (udp_socket(), udp_socket());
        if a >= 0 && b >= 0 {
            set_int(a, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1);
            set_int(b, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1);
            if bind(a, at) == 0 && bind(b, at) == 0 {
                let prog = libc::sock_fprog {
                    len: STEER.len() as u16,
                    filter: STEER.as_ptr() as *mut libc::sock_filter,
                };
                let r = unsafe {
                    libc::setsockopt(
                        a,
                        libc::SOL_SOCKET,
                        libc::SO_ATTACH_REUSEPORT_CBPF,
                        (&prog as *const libc::sock_fprog).cast(),
                        size_of::<libc::sock_fprog>() as socklen_t,
                    )
                };
                if r == 0 {
                    return Some((a, b, at));
                }
            }
        }
        close(a);
        close(b);
    }
    None
}

/// Whether `fd` has something to read now.
pub fn readable(fd: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    ppoll(std::slice::from_mut(&mut p), Some(&zero)) > 0
}

/// Empty `fd`'s error queue (IP_RECVERR: `socket_pair`), non-blocking: whether one of
/// the errors is an ICMP port unreachable for a datagram sent to `peer` (its port is
/// closed: the peer is gone). Every other error (another address, a host unreachable, a
/// fragmentation needed) is dropped. Reading the queue also clears the pending SO_ERROR.
pub fn peer_refused(fd: c_int, peer: SocketAddrV4) -> bool {
    let mut refused = false;
    for _ in 0..64 {
        let mut to: sockaddr_in = unsafe { std::mem::zeroed() };
        let mut cmsg = [0u64; 16];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut to as *mut sockaddr_in).cast();
        msg.msg_namelen = size_of::<sockaddr_in>() as socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 16]>();
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvmsg,
                fd as libc::c_long,
                &mut msg as *mut libc::msghdr,
                (libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) as libc::c_long,
            )
        };
        if n < 0 {
            break;
        }
        // The name is the datagram's destination; the extended error says what happened.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if ((*c).cmsg_level, (*c).cmsg_type) == (libc::IPPROTO_IP, libc::IP_RECVERR) {
                    let e = (libc::CMSG_DATA(c) as *const libc::sock_extended_err).read_unaligned();
                    refused |= e.ee_origin == libc::SO_EE_ORIGIN_ICMP
                        && (e.ee_type, e.ee_code) == (3, 3)
                        && from_sin(&to) == peer;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
    }
    refused
}

/// A socket buffer of `bytes` (SO_RCVBUF / SO_SNDBUF), beyond net.core.*mem_max where the
/// process may (the *FORCE options need CAP_NET_ADMIN).
pub fn set_buffer(fd: c_int, opt: c_int, force: c_int, bytes: c_int) {
    if get_int(fd, libc::SOL_SOCKET, opt).is_some_and(|v| v >= bytes) {
        return;
    }
    set_int(fd, libc::SOL_SOCKET, force, bytes);
    if get_int(fd, libc::SOL_SOCKET, opt).is_none_or(|v| v < bytes) {
        set_int(fd, libc::SOL_SOCKET, opt, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run sent as one UDP GSO send arrives as the same datagrams, each with the run's
    /// TOS, whether the kernel hands it over coalesced (UDP_GRO) or one by one.
    #[test]
    fn a_gso_run_arrives_as_the_datagrams_that_were_sent() {
        let lo = Ipv4Addr::LOCALHOST;
        let (own, ctl, at) = socket_pair(lo, 1 << 20).expect("a socket pair on loopback");
        let (from, _, _) = socket_pair(lo, 1 << 20).expect("a second pair");
        // Five datagrams of 100 bytes and a shorter last one, all of the data type
        // (byte 0's low nibble 2: steered to `own`).
        let sent: Vec<Vec<u8>> = (0..6u8)
            .map(|i| {
                let mut d = vec![0x02; if i == 5 { 40 } else { 100 }];
                d[1] = i;
                d
            })
            .collect();
        let r = send_run(from, &sent.concat(), at, 0x2a << 2 | 1, 100);
        if r == -(libc::EIO as isize) || r == -(libc::EINVAL as isize) {
            eprintln!("kernel without UDP_SEGMENT: GSO not tested");
            return;
        }
        assert_eq!(r, 540, "the run's bytes");
        assert!(wait(own, libc::POLLIN, 1_000_000_000));
        let mut batch = RxBatch::new();
        let mut got = Vec::new();
        while got.len() < sent.len() && wait(own, libc::POLLIN, 100_000_000) {
            for i in 0..batch.recv(own) {
                let (data, src, tos, segment) = batch.get(i);
                assert_eq!((src.ip(), tos), (&lo, 0x2a << 2 | 1));
                let step = if segment == 0 { data.len() } else { segment };
                got.extend(data.chunks(step).map(<[u8]>::to_vec));
            }
        }
        assert_eq!(got, sent);
        assert_eq!(batch.recv(ctl), 0, "nothing steered to the control socket");
        for fd in [own, ctl, from] {
            close(fd);
        }
    }

    /// A datagram to a closed port comes back as ICMP port unreachable in the error queue
    /// of one of the pair's sockets (the kernel picks it by hash), POLLERR until read:
    /// `peer_refused` says so for that destination only, and empties the queue.
    #[test]
    fn a_closed_port_is_reported_for_its_address_only() {
        let lo = Ipv4Addr::LOCALHOST;
        let (own, ctl, _) = socket_pair(lo, 1 << 16).expect("a socket pair on loopback");
        let closed = |p: c_int| {
            let gone = udp_socket();
            assert_eq!(bind(gone, SocketAddrV4::new(lo, 0)), 0);
            let at = name(gone).unwrap();
            close(gone);
            assert!(send_dgram(p, &[0x14; 32], at, 0));
            at
        };
        let error = || {
            let mut p = [own, ctl].map(|fd| libc::pollfd {
                fd,
                events: 0,
                revents: 0,
            });
            unsafe { libc::poll(p.as_mut_ptr(), 2, 1000) > 0 }
        };
        let first = closed(own);
        assert!(error(), "POLLERR after the port unreachable");
        let other = SocketAddrV4::new(lo, first.port() ^ 1);
        assert!(
            !(peer_refused(own, other) | peer_refused(ctl, other)),
            "another address"
        );
        assert!(
            !wait(own, 0, 0) && !wait(ctl, 0, 0),
            "the queues were emptied"
        );
        let second = closed(own);
        assert!(error());
        assert!(
            peer_refused(own, second) | peer_refused(ctl, second),
            "its own address"
        );
        assert!(
            !wait(own, 0, 0) && !wait(ctl, 0, 0),
            "the queues were emptied"
        );
        for fd in [own, ctl] {
            close(fd);
        }
    }
}

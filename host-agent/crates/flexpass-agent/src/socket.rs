//! A UDP socket that sets the IP TOS byte (DSCP + ECN) per packet and reports the TOS of
//! every received packet (IP_RECVTOS), so ECN marks reach the transport core.
//!
//! Datagrams move in batches: `recv_batch` reads up to [`BATCH`] datagrams with one
//! recvmmsg(2), each into its own buffer with its own control buffer (so every datagram's
//! TOS byte is reported); `queue` + `flush` send everything one loop turn produced with
//! sendmmsg(2), each datagram with its own IP_TOS control message. nix's `sendmmsg` shares
//! one set of control messages across a whole call and its `recvmmsg` does not reset the
//! control-buffer length the kernel shrinks, so both calls go through `libc` (re-exported by
//! nix) on buffers this type owns.
//!
//! With `set_gro`, the kernel may hand over several datagrams of one peer coalesced
//! (UDP_GRO: same source, same TOS, equal sizes but the last); `recv_batch` splits them
//! again, so the caller sees exactly the datagrams that were sent, each with its TOS.
//!
//! Optionally (`set_gso`), a run of consecutive queued datagrams to the same peer with the
//! same TOS and the same size (the last may be shorter) leaves as one UDP GSO send
//! (UDP_SEGMENT): the kernel splits it into the same datagrams, each with the same TOS. A
//! kernel or device that refuses GSO turns it off for good and the run is sent datagram by
//! datagram.

use nix::libc;
use nix::sys::socket::{self, sockopt};
use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per recvmmsg / sendmmsg call.
pub const BATCH: usize = 32;
/// Receive buffer per datagram: the largest UDP payload over IPv4 fits, so nothing valid is
/// ever truncated (as with the former single 64 KiB buffer).
const RX_SLOT: usize = 65_536;
/// Slots are spaced by a little more than RX_SLOT so that the datagrams of one batch do not
/// all map to the same cache sets.
const RX_STRIDE: usize = RX_SLOT + 320;
/// Most segments the kernel accepts in one UDP GSO send (UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest UDP payload of one GSO send.
const GSO_MAX_BYTES: usize = 65_000;

/// Room for the control messages of one datagram (IP_TOS, UDP_SEGMENT / UDP_GRO),
/// aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Cmsg([u8; 64]);

impl std::os::fd::AsFd for TosSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// One datagram waiting in the send batch.
#[derive(Clone, Copy)]
struct TxMsg {
    off: usize,
    len: usize,
    dst: SocketAddrV4,
    tos: u8,
}

/// A datagram of the last receive batch: where it is in `rx_buf`, and from which slot.
#[derive(Clone, Copy)]
struct RxSeg {
    off: usize,
    len: usize,
    slot: usize,
    tos: u8,
    truncated: bool,
}

/// One received datagram (see [`TosSocket::received`]).
pub struct Received<'a> {
    pub data: &'a [u8],
    pub src: SocketAddr,
    pub tos: u8,
    /// Larger than the buffer (cannot happen for IPv4 UDP; kept as a guard).
    pub truncated: bool,
}

/// Outcome of [`TosSocket::flush`]: datagrams the kernel accepted and datagrams dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    pub sent: u64,
    pub errors: u64,
    /// sendmmsg calls made.
    pub calls: u64,
}

pub struct TosSocket {
    sock: UdpSocket,
    // Receive side: BATCH slots.
    rx_buf: Box<[u8]>,
    rx_names: Box<[libc::sockaddr_in]>,
    rx_cmsg: Box<[Cmsg]>,
    rx_iov: Box<[libc::iovec]>,
    rx_hdrs: Box<[libc::mmsghdr]>,
    rx_segs: Vec<RxSeg>,
    // Send side: encoded datagrams back to back in `tx_buf`.
    tx_buf: Vec<u8>,
    tx_msgs: Vec<TxMsg>,
    tx_names: Vec<libc::sockaddr_in>,
    tx_cmsg: Vec<Cmsg>,
    tx_iov: Vec<libc::iovec>,
    tx_hdrs: Vec<libc::mmsghdr>,
    /// Datagram count of each header of the current call (> 1 for a GSO send).
    tx_segs: Vec<usize>,
    /// Queued datagram the current call starts at.
    tx_first: usize,
    gso: bool,
    /// Share of the receive buffer in use, read (SO_MEMINFO) after a full receive batch
    /// only: after a shorter one the queue was drained.
    rx_backlog: f64,
}

// SAFETY: the raw pointers in the iovec / mmsghdr scratch arrays only ever point into heap
// buffers owned by the same TosSocket, and are rewritten before every syscall that reads
// them; nothing is shared, so moving the socket to another thread is sound.
unsafe impl Send for TosSocket {}

fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "FlexPass runs over IPv4 only",
        )),
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut s: libc::sockaddr_in = unsafe { mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr = libc::in_addr {
        s_addr: u32::from(*a.ip()).to_be(),
    };
    s
}

fn from_sockaddr(s: &libc::sockaddr_in) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    ))
}

/// A zeroed header (msghdr has private padding fields on some libcs).
fn empty_hdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data; null pointers and zero lengths are valid.
    unsafe { mem::zeroed() }
}

/// Write one control message at `at` (inside the buffer `hdr` describes); returns the next
/// position. The caller sized the buffer for every message it writes.
///
/// SAFETY: `hdr.msg_control` points to a buffer of at least `hdr.msg_controllen` bytes,
/// `at` is a cmsghdr position inside it with CMSG_SPACE(size_of::<T>()) bytes left.
unsafe fn put_cmsg<T: Copy>(
    at: *mut libc::cmsghdr,
    level: libc::c_int,
    ty: libc::c_int,
    value: T,
) -> *mut u8 {
    let len = mem::size_of::<T>() as libc::c_uint;
    (*at).cmsg_level = level;
    (*at).cmsg_type = ty;
    (*at).cmsg_len = libc::CMSG_LEN(len) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(at) as *mut T, value);
    (at as *mut u8).add(libc::CMSG_SPACE(len) as usize)
}

/// Requested UDP socket buffer sizes (bytes; the kernel doubles the value for overhead).
const SOCKET_BUFFER: usize = 4 << 20;

impl TosSocket {
    /// Bind a non-blocking UDP socket on an IPv4 address.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        v4(addr)?;
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        socket::setsockopt(&sock, sockopt::IpRecvTos, &true).map_err(io::Error::from)?;
        // The default receive buffer (~208 KB, ~200 small datagrams) overflows whenever the
        // loop is descheduled for a millisecond while credits and ACKs keep arriving (seen
        // as UDP RcvbufErrors and spurious timeouts); ask for more, beyond rmem_max where
        // allowed (CAP_NET_ADMIN), else up to it.
        if socket::setsockopt(&sock, sockopt::RcvBufForce, &SOCKET_BUFFER).is_err() {
            let _ = socket::setsockopt(&sock, sockopt::RcvBuf, &SOCKET_BUFFER);
        }
        if socket::setsockopt(&sock, sockopt::SndBufForce, &SOCKET_BUFFER).is_err() {
            let _ = socket::setsockopt(&sock, sockopt::SndBuf, &SOCKET_BUFFER);
        }
        Ok(TosSocket {
            sock,
            rx_buf: vec![0u8; RX_STRIDE * BATCH].into_boxed_slice(),
            // SAFETY: plain old data, all-zero is valid.
            rx_names: vec![unsafe { mem::zeroed::<libc::sockaddr_in>() }; BATCH].into_boxed_slice(),
            rx_cmsg: vec![Cmsg([0; 64]); BATCH].into_boxed_slice(),
            rx_iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                BATCH
            ]
            .into_boxed_slice(),
            rx_hdrs: vec![empty_hdr(); BATCH].into_boxed_slice(),
            rx_segs: Vec::with_capacity(BATCH),
            tx_buf: Vec::with_capacity(BATCH * 1600),
            tx_msgs: Vec::with_capacity(BATCH),
            tx_names: Vec::with_capacity(BATCH),
            tx_cmsg: Vec::with_capacity(BATCH),
            tx_iov: Vec::with_capacity(BATCH),
            tx_hdrs: Vec::with_capacity(BATCH),
            tx_segs: Vec::with_capacity(BATCH),
            tx_first: 0,
            gso: false,
            rx_backlog: 0.0,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Use UDP GSO for runs of equal-sized datagrams when the kernel supports it (probed
    /// with getsockopt(UDP_SEGMENT)); returns whether it is on.
    pub fn set_gso(&mut self, on: bool) -> bool {
        self.gso = on && socket::getsockopt(&self.sock, sockopt::UdpGsoSegment).is_ok();
        self.gso
    }

    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Accept coalesced datagrams (UDP_GRO) when the kernel supports it; returns whether it
    /// is on. `recv_batch` splits them, so this changes nothing but the cost.
    pub fn set_gro(&mut self, on: bool) -> bool {
        socket::setsockopt(&self.sock, sockopt::UdpGroSegment, &on).is_ok() && on
    }

    /// Receive up to `max` (≤ [`BATCH`]) messages with one recvmmsg(2); returns how many
    /// (`Ok(0)` when none is waiting). With UDP_GRO a message may hold several datagrams:
    /// read the [`datagrams`](Self::datagrams) of the batch with [`received`](Self::received).
    pub fn recv_batch(&mut self, max: usize) -> io::Result<usize> {
        let n = max.clamp(1, BATCH);
        self.rx_segs.clear();
        let buf = self.rx_buf.as_mut_ptr();
        for i in 0..n {
            // SAFETY: slot i lies inside rx_buf (BATCH * RX_STRIDE bytes).
            self.rx_iov[i] = libc::iovec {
                iov_base: unsafe { buf.add(i * RX_STRIDE) } as *mut libc::c_void,
                iov_len: RX_SLOT,
            };
            // Every field is reset: the kernel rewrites namelen, controllen and flags.
            let mut h = empty_hdr();
            h.msg_hdr.msg_name = &mut self.rx_names[i] as *mut libc::sockaddr_in as *mut _;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut self.rx_iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = self.rx_cmsg[i].0.as_mut_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_controllen = mem::size_of::<Cmsg>() as _;
            self.rx_hdrs[i] = h;
        }
        loop {
            // SAFETY: the n headers point to buffers owned by self that outlive the call;
            // the socket is non-blocking and no timeout is given.
            let r = unsafe {
                libc::recvmmsg(
                    self.sock.as_raw_fd(),
                    self.rx_hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_TRUNC,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                let r = r as usize;
                for slot in 0..r {
                    self.split(slot);
                }
                self.rx_backlog = if r == n { self.read_backlog() } else { 0.0 };
                return Ok(r);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => {
                    self.rx_backlog = 0.0;
                    return Ok(0);
                }
                io::ErrorKind::Interrupted => continue,
                _ => return Err(e),
            }
        }
    }

    /// Share of the receive buffer held by datagrams not read yet, as of the last
    /// `recv_batch` (the endpoint stops crediting above a limit: docs/datapath.md).
    pub fn rx_backlog(&self) -> f64 {
        self.rx_backlog
    }

    fn read_backlog(&self) -> f64 {
        // SK_MEMINFO_RMEM_ALLOC and SK_MEMINFO_RCVBUF are its first two entries.
        let mut info = [0u32; 9];
        let mut len = mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` has room for `len` bytes; the kernel writes at most that many.
        let r = unsafe {
            libc::getsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 || info[1] == 0 {
            return 0.0;
        }
        f64::from(info[0]) / f64::from(info[1])
    }

    /// The datagrams of message `slot`: its TOS, and its segment size if coalesced.
    fn split(&mut self, slot: usize) {
        let h = &self.rx_hdrs[slot];
        let len = h.msg_len as usize;
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > RX_SLOT;
        let mut tos = 0u8;
        let mut seg = 0usize;
        // SAFETY: the kernel filled msg_controllen bytes of this message's control buffer
        // with well-formed cmsgs; CMSG_* walk within that length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
            while !c.is_null() {
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) => tos = *libc::CMSG_DATA(c),
                    (libc::SOL_UDP, libc::UDP_GRO) => {
                        let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                        seg = v.max(0) as usize;
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
            }
        }
        let len = len.min(RX_SLOT);
        let seg = if seg == 0 || truncated { len } else { seg };
        let base = slot * RX_STRIDE;
        let mut off = 0;
        loop {
            let n = seg.min(len - off);
            self.rx_segs.push(RxSeg {
                off: base + off,
                len: n,
                slot,
                tos,
                truncated,
            });
            off += n;
            if off >= len {
                break;
            }
        }
    }

    /// Datagrams in the last [`recv_batch`](Self::recv_batch).
    pub fn datagrams(&self) -> usize {
        self.rx_segs.len()
    }

    /// Datagram `i` of the last [`recv_batch`](Self::recv_batch).
    pub fn received(&self, i: usize) -> Received<'_> {
        let d = self.rx_segs[i];
        Received {
            data: &self.rx_buf[d.off..d.off + d.len],
            src: from_sockaddr(&self.rx_names[d.slot]),
            tos: d.tos,
            truncated: d.truncated,
        }
    }

    /// Datagrams queued and not yet flushed.
    pub fn queued(&self) -> usize {
        self.tx_msgs.len()
    }

    /// Queue one datagram, written by `encode` into the batch buffer, with the given TOS.
    pub fn queue(
        &mut self,
        dst: SocketAddr,
        tos: u8,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> io::Result<()> {
        let dst = v4(dst)?;
        let off = self.tx_buf.len();
        encode(&mut self.tx_buf);
        self.tx_msgs.push(TxMsg {
            off,
            len: self.tx_buf.len() - off,
            dst,
            tos,
        });
        Ok(())
    }

    /// Send one datagram now with the given TOS (flushes anything queued first).
    pub fn send_to(&mut self, buf: &[u8], dst: SocketAddr, tos: u8) -> io::Result<usize> {
        self.queue(dst, tos, |out| out.extend_from_slice(buf))?;
        let f = self.flush();
        if f.errors > 0 {
            return Err(io::Error::other("datagram not sent"));
        }
        Ok(buf.len())
    }

    /// Send every queued datagram with as few sendmmsg(2) calls as possible. A datagram the
    /// kernel refuses (full socket buffer, ENOBUFS, no route) is dropped and counted in
    /// `errors`, as a NIC would drop it; the rest are still sent.
    pub fn flush(&mut self) -> Flushed {
        let mut f = Flushed::default();
        let mut i = 0;
        while i < self.tx_msgs.len() {
            i = self.build(i);
            let mut h = 0;
            while h < self.tx_hdrs.len() {
                f.calls += 1;
                // SAFETY: the headers point into tx_buf / tx_names / tx_cmsg / tx_iov,
                // which are not touched until the call returns.
                let r = unsafe {
                    libc::sendmmsg(
                        self.sock.as_raw_fd(),
                        self.tx_hdrs.as_mut_ptr().add(h),
                        (self.tx_hdrs.len() - h) as libc::c_uint,
                        0,
                    )
                };
                if r > 0 {
                    let r = r as usize;
                    f.sent += self.tx_segs[h..h + r].iter().sum::<usize>() as u64;
                    h += r;
                    continue;
                }
                let e = if r == 0 {
                    io::Error::other("sendmmsg sent nothing")
                } else {
                    io::Error::last_os_error()
                };
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if self.tx_segs[h] > 1
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
                    )
                {
                    // The path refuses GSO: off for good, and this run again datagram by
                    // datagram (the rest of the batch is rebuilt without GSO).
                    self.gso = false;
                    i = self.first_msg_of(h);
                    break;
                }
                // This datagram (or GSO run) is lost; go on with the next.
                f.errors += self.tx_segs[h] as u64;
                h += 1;
            }
        }
        self.tx_buf.clear();
        self.tx_msgs.clear();
        f
    }

    /// Index of the first queued datagram of header `h` of the current call.
    fn first_msg_of(&self, h: usize) -> usize {
        self.tx_first + self.tx_segs[..h].iter().sum::<usize>()
    }

    /// Build the headers of one sendmmsg call from queued datagram `from` on (at most BATCH
    /// headers); returns the index of the first datagram not included.
    fn build(&mut self, from: usize) -> usize {
        self.tx_first = from;
        self.tx_names.clear();
        self.tx_cmsg.clear();
        self.tx_iov.clear();
        self.tx_hdrs.clear();
        self.tx_segs.clear();
        let mut i = from;
        while i < self.tx_msgs.len() && self.tx_hdrs.len() < BATCH {
            let m = self.tx_msgs[i];
            // A GSO run: same peer, same TOS, same size (the last may be shorter), back to
            // back in tx_buf.
            let mut segs = 1;
            let mut bytes = m.len;
            if self.gso {
                while i + segs < self.tx_msgs.len() && segs < GSO_MAX_SEGMENTS {
                    let n = self.tx_msgs[i + segs];
                    let prev = self.tx_msgs[i + segs - 1];
                    if n.dst != m.dst
                        || n.tos != m.tos
                        || n.len > m.len
                        || prev.len != m.len
                        || bytes + n.len > GSO_MAX_BYTES
                    {
                        break;
                    }
                    bytes += n.len;
                    segs += 1;
                }
            }
            self.tx_names.push(sockaddr(m.dst));
            self.tx_iov.push(libc::iovec {
                // SAFETY: off + bytes lies inside tx_buf.
                iov_base: unsafe { self.tx_buf.as_mut_ptr().add(m.off) } as *mut libc::c_void,
                iov_len: bytes,
            });
            self.tx_cmsg.push(Cmsg([0; 64]));
            self.tx_segs.push(segs);
            i += segs;
        }
        // Pointers are taken once the vectors are complete (no reallocation after this).
        let mut first = self.tx_first;
        for k in 0..self.tx_segs.len() {
            let segs = self.tx_segs[k];
            let m = self.tx_msgs[first];
            first += segs;
            let mut h = empty_hdr();
            h.msg_hdr.msg_name = &mut self.tx_names[k] as *mut libc::sockaddr_in as *mut _;
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut self.tx_iov[k];
            h.msg_hdr.msg_iovlen = 1;
            let ctl = self.tx_cmsg[k].0.as_mut_ptr();
            h.msg_hdr.msg_control = ctl as *mut libc::c_void;
            // SAFETY: the control buffer (64 bytes, 8-aligned) holds IP_TOS (24 bytes) and
            // UDP_SEGMENT (24 bytes); msg_controllen is exactly what is written.
            unsafe {
                let mut at = put_cmsg(
                    ctl as *mut libc::cmsghdr,
                    libc::IPPROTO_IP,
                    libc::IP_TOS,
                    libc::c_int::from(m.tos),
                );
                if segs > 1 {
                    at = put_cmsg(
                        at as *mut libc::cmsghdr,
                        libc::SOL_UDP,
                        libc::UDP_SEGMENT,
                        m.len as u16,
                    );
                }
                h.msg_hdr.msg_controllen = at.offset_from(ctl) as _;
            }
            self.tx_hdrs.push(h);
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn pair() -> (TosSocket, TosSocket) {
        let a = TosSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = TosSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        (a, b)
    }

    /// Everything `b` receives within a second, up to `n` datagrams: (bytes, source, tos).
    fn drain(b: &mut TosSocket, n: usize) -> Vec<(Vec<u8>, SocketAddr, u8)> {
        drain_counting(b, n).0
    }

    /// `drain`, and the number of messages the datagrams came in.
    fn drain_counting(b: &mut TosSocket, n: usize) -> (Vec<(Vec<u8>, SocketAddr, u8)>, usize) {
        let mut messages = 0;
        let mut got = vec![];
        let end = Instant::now() + Duration::from_secs(1);
        while got.len() < n && Instant::now() < end {
            let k = b.recv_batch(BATCH).unwrap();
            messages += k;
            for i in 0..b.datagrams() {
                let m = b.received(i);
                assert!(!m.truncated);
                got.push((m.data.to_vec(), m.src, m.tos));
            }
            if k == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        (got, messages)
    }

    #[test]
    fn one_batch_keeps_each_datagrams_tos() {
        let (mut a, mut b) = pair();
        let to = b.local_addr().unwrap();
        // 70 datagrams (three sendmmsg calls) with TOS cycling through DSCP/ECN values.
        let tos = |i: usize| [0x00u8, 0x01, 0x02, 0x03, 0xb8, 0x2a, 0x49][i % 7];
        for i in 0..70 {
            a.queue(to, tos(i), |out| out.extend_from_slice(&[i as u8; 40]))
                .unwrap();
        }
        let f = a.flush();
        assert_eq!((f.sent, f.errors), (70, 0));
        assert!(f.calls <= 3, "{f:?}");
        let got = drain(&mut b, 70);
        assert_eq!(got.len(), 70);
        for (i, (data, src, t)) in got.iter().enumerate() {
            assert_eq!(data, &vec![i as u8; 40]);
            assert_eq!(*src, a.local_addr().unwrap());
            assert_eq!(*t, tos(i), "datagram {i}");
        }
    }

    #[test]
    fn gso_runs_arrive_as_the_same_datagrams() {
        gso_case(false);
    }

    #[test]
    fn gso_runs_coalesced_by_gro_are_split_again() {
        gso_case(true);
    }

    fn gso_case(gro: bool) {
        let (mut a, mut b) = pair();
        assert_eq!(b.set_gro(gro), gro, "UDP_GRO");
        if !a.set_gso(true) {
            eprintln!("kernel without UDP_SEGMENT: GSO not tested");
            return;
        }
        let to = b.local_addr().unwrap();
        // Two runs (TOS changes), the first ending with a shorter datagram.
        let sizes = [1000, 1000, 1000, 300, 1000, 1000];
        let toss = [0x02, 0x02, 0x02, 0x02, 0xb9, 0xb9];
        for (i, (&n, &t)) in sizes.iter().zip(&toss).enumerate() {
            a.queue(to, t, |out| out.extend(std::iter::repeat_n(i as u8, n)))
                .unwrap();
        }
        let f = a.flush();
        assert_eq!((f.sent, f.errors, f.calls), (6, 0, 1));
        let (got, messages) = drain_counting(&mut b, 6);
        assert_eq!(got.len(), 6, "gro {gro}");
        // Loopback hands a GSO send to a UDP_GRO socket as it is: one message per run.
        assert_eq!(messages, if gro { 2 } else { 6 });
        for (i, (data, _, t)) in got.iter().enumerate() {
            assert_eq!(data.len(), sizes[i]);
            assert!(data.iter().all(|&x| x == i as u8));
            assert_eq!(*t, toss[i]);
        }
    }

    #[test]
    fn unreachable_datagrams_are_counted_and_the_rest_sent() {
        let (mut a, mut b) = pair();
        let to = b.local_addr().unwrap();
        a.queue(to, 0, |out| out.extend_from_slice(b"one")).unwrap();
        // A broadcast address without SO_BROADCAST: EACCES for this datagram only.
        a.queue("255.255.255.255:9".parse().unwrap(), 0, |out| {
            out.extend_from_slice(b"x")
        })
        .unwrap();
        a.queue(to, 0, |out| out.extend_from_slice(b"two")).unwrap();
        let f = a.flush();
        assert_eq!((f.sent, f.errors), (2, 1));
        let got = drain(&mut b, 2);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].0, b"two");
    }
}

//! The AF_XDP socket itself (built with the XDP program only): the UMEM, one bound socket
//! and its rings per receive queue, multi-buffer chains, the steering program attached
//! through a BPF link, and the kernel UDP socket beside it.

use super::neigh::Neighbours;
use super::*;
use crate::frame::{self, Ends};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use aya::maps::{Array, XskMap};
use aya::programs::{Xdp, XdpMode};
use nix::libc;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

/// UMEM chunk: one frame each (aligned mode; the kernel puts received frames 256 B
/// into the chunk, XDP_PACKET_HEADROOM).
const FRAME: u32 = 4096;
const RX_HEADROOM: usize = 256;
/// Bind flag: frames larger than a chunk come and go as chains of descriptors (Linux
/// 6.6+); every descriptor of a chain but the last carries XDP_PKT_CONTD.
const XDP_USE_SG: u16 = 1 << 4;
const XDP_PKT_CONTD: u32 = 1;
/// Longest chain accepted on receive (a 64 KiB frame in copy mode's 3840-byte buffers).
const MAX_CHAIN: usize = 18;
/// Receive ring entries (split between the bound queues) and transmit frames.
const RX_RING: u32 = 2048;
const TX_FRAMES: u32 = 2048;

/// Each queue's receive ring size and its receive frames (= its fill ring's size).
///
/// Invariant: the fill ring holds every receive frame, and there are two frames per
/// receive ring entry. So with the receive ring full of unread frames (the agent behind)
/// and a batch in the agent's hands, the fill ring still holds a ring's worth minus that
/// batch: the kernel never finds it empty, and drops a frame only for a full receive
/// ring (`rx_ring_full`, as a NIC does), never for want of a buffer. With as many frames
/// as ring entries, a full ring had left the fill ring empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RxSizes {
    ring: u32,
    frames: u32,
}

/// `RxSizes` of each of `n` queues: RX_RING split (a power of two, at least 256), twice
/// as many frames.
fn rx_sizes(n: usize) -> RxSizes {
    let ring = (RX_RING >> (n.max(1).next_power_of_two().trailing_zeros())).max(256);
    RxSizes {
        ring,
        frames: 2 * ring,
    }
}
/// How often (receive calls) the kernel socket is read without a readiness report.
const KERNEL_CHECK_EVERY: u32 = 64;
/// The kernel's socket statistics cost a system call: read at most this often.
const KERNEL_STATS_EVERY: Duration = Duration::from_millis(100);

/// Page-aligned anonymous memory for the UMEM, unmapped on drop.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: anonymous private mapping, no file; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Area {
            ptr: NonNull::new(p as *mut u8).expect("mmap returned null"),
            len,
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; nothing refers to it any more (the rings
        // and the UMEM are dropped first: they are declared before it).
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// The UMEM, one bound AF_XDP socket per receive queue sharing it, and the transmit ring
/// (on the first socket).
struct Rings {
    queues: Vec<QueueRings>,
    tx: RingTx,
    umem: Umem,
    zero_copy: bool,
    /// Each queue's receive ring and frames.
    rx: RxSizes,
}

/// One queue's socket: its receive ring and fill ring (the first's completion ring is
/// the transmit ring's), and its frames of the last batch, back on the fill ring at the
/// next batch.
struct QueueRings {
    rx: RingRx,
    fq_cq: DeviceQueue,
    rx_used: Vec<u64>,
}

/// How many of `descs` (transmit descriptors, chains marked XDP_PKT_CONTD) go on a ring
/// with `room` free slots: the longest prefix that ends with a frame's last descriptor.
fn whole_frames(descs: &[XdpDesc], room: usize) -> usize {
    if descs.len() <= room {
        return descs.len();
    }
    descs[..room]
        .iter()
        .rposition(|d| d.options & XDP_PKT_CONTD == 0)
        .map_or(0, |i| i + 1)
}

/// Reassembles received frames from their buffers, in ring order: a frame is one
/// buffer, or a chain whose buffers but the last carry XDP_PKT_CONTD. A chain is copied
/// into `joined`; it is bad if a buffer was not readable (outside the UMEM) or it had
/// more than MAX_CHAIN buffers, and its copy is then dropped.
#[derive(Default)]
struct Chains {
    /// Buffers of the chain being read (0: none), where its copy starts, whether good.
    buffers: usize,
    start: usize,
    ok: bool,
}

/// What one received buffer completed.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A whole frame in this one buffer (read in place).
    Single,
    /// A chain goes on.
    More,
    /// A chain ended: the frame is `joined[start..]`.
    Joined(usize),
    /// A bad frame ended (a bad single buffer, or a bad chain, its copy dropped).
    Bad,
}

impl Chains {
    /// Take the next buffer: its bytes if readable, and whether the frame goes on.
    fn push(&mut self, joined: &mut Vec<u8>, buf: Option<&[u8]>, more: bool) -> Step {
        if self.buffers == 0 && !more {
            return if buf.is_some() {
                Step::Single
            } else {
                Step::Bad
            };
        }
        if self.buffers == 0 {
            *self = Chains {
                buffers: 0,
                start: joined.len(),
                ok: true,
            };
        }
        self.buffers += 1;
        match buf {
            Some(b) if self.ok && self.buffers <= MAX_CHAIN => joined.extend_from_slice(b),
            _ => self.ok = false,
        }
        if more {
            return Step::More;
        }
        self.buffers = 0;
        if self.ok {
            Step::Joined(self.start)
        } else {
            self.drop_partial(joined);
            Step::Bad
        }
    }

    /// Whether a chain is half read.
    fn open(&self) -> bool {
        self.buffers > 0
    }

    /// Give up the chain being read (its end never came): drop its copy.
    fn drop_partial(&mut self, joined: &mut Vec<u8>) {
        joined.truncate(self.start);
        self.buffers = 0;
    }
}

/// A received datagram: where its payload is (in the UMEM, or in `joined` for a frame
/// that came in several buffers), and whom it came from.
#[derive(Clone, Copy)]
struct RxSeg {
    joined: bool,
    at: usize,
    len: usize,
    src: SocketAddrV4,
    tos: u8,
}

pub struct XskPath {
    info: XdpInfo,
    local: SocketAddrV4,
    mac: [u8; 6],
    max_frame: usize,
    rings: Rings,
    /// The program and its link: dropping it detaches the program.
    _bpf: aya::Ebpf,
    area: Area,
    /// Transmit frames (UMEM offsets) not in flight.
    tx_free: Vec<u64>,
    tx_queued: Vec<XdpDesc>,
    rx_segs: Vec<RxSeg>,
    /// The last batch's multi-buffer frames, each copied whole.
    joined: Vec<u8>,
    /// Queue the next receive batch starts at (round robin).
    next_queue: usize,
    /// Datagrams of the last batch that came through the kernel socket (after rx_segs).
    kernel_segs: usize,
    kernel: TosSocket,
    kernel_readable: bool,
    calls: u32,
    neighbours: Neighbours,
    scratch: Vec<u8>,
    /// A jumbo frame being built before it is spread over transmit frames.
    jumbo: Vec<u8>,
    /// IPv4 identification of the next frame.
    ident: u16,
    counters: XdpCounters,
    kernel_stats_at: Option<Instant>,
}

// SAFETY: the UMEM pointers are owned by this value alone (no sharing between threads);
// moving it moves the sole owner.
unsafe impl Send for XskPath {}

fn program_object() -> &'static [u8] {
    aya::include_bytes_aligned!(env!("FLEXPASS_XSK_OBJ"))
}

fn if_info(ifindex: u32, queue: u32) -> Result<IfInfo, String> {
    let mut info = IfInfo::invalid();
    info.from_ifindex(ifindex)
        .map_err(|e| format!("interface index {ifindex}: {}", e))?;
    info.set_queue(queue);
    Ok(info)
}

/// Create the UMEM on `area` and one socket per queue in `queues`, `rx` receive ring and
/// frames each (the first socket with the transmit ring too), bound with `zero_copy` or
/// copy mode; the others share the UMEM and inherit the mode (the kernel allows no mode
/// flags on them).
fn bind_rings(
    area: &Area,
    ifindex: u32,
    queues: &[u32],
    rx: RxSizes,
    zero_copy: bool,
    multi_buffer: bool,
) -> Result<Rings, String> {
    let cfg = UmemConfig {
        fill_size: rx.frames,
        complete_size: TX_FRAMES,
        frame_size: FRAME,
        headroom: 0,
        flags: 0,
    };
    let mem = NonNull::slice_from_raw_parts(area.ptr, area.len);
    // SAFETY: page-aligned mapping of `area.len` bytes that outlives the UMEM (XskPath
    // drops `rings` before `area`).
    let umem = unsafe { Umem::new(cfg, mem) }.map_err(|e| format!("UMEM registration: {}", e))?;
    let mode = if zero_copy {
        SocketConfig::XDP_BIND_ZEROCOPY
    } else {
        SocketConfig::XDP_BIND_COPY
    };
    let mut rings = Vec::with_capacity(queues.len());
    let mut tx = None;
    for (i, &q) in queues.iter().enumerate() {
        let info = if_info(ifindex, q)?;
        let sock = if i == 0 {
            Socket::with_shared(&info, &umem)
        } else {
            Socket::new(&info)
        }
        .map_err(|e| format!("AF_XDP socket (queue {q}): {}", e))?;
        let fq_cq = umem
            .fq_cq(&sock)
            .map_err(|e| format!("fill/completion rings (queue {q}): {}", e))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(rx.ring),
                    tx_size: if i == 0 {
                        NonZeroU32::new(TX_FRAMES)
                    } else {
                        None
                    },
                    // Sockets sharing the first one's UMEM inherit its flags (the
                    // kernel refuses any of their own).
                    bind_flags: if i == 0 {
                        mode | SocketConfig::XDP_BIND_NEED_WAKEUP
                            | if multi_buffer { XDP_USE_SG } else { 0 }
                    } else {
                        0
                    },
                },
            )
            .map_err(|e| format!("RX/TX rings (queue {q}): {}", e))?;
        let rx_ring = user.map_rx().map_err(|e| format!("RX ring: {}", e))?;
        if i == 0 {
            tx = Some(user.map_tx().map_err(|e| format!("TX ring: {}", e))?);
        }
        umem.bind(&user).map_err(|e| {
            format!(
                "binding the AF_XDP socket of queue {q} ({} mode{}): {}",
                if zero_copy { "zero-copy" } else { "copy" },
                if multi_buffer {
                    ", multi-buffer: needs Linux 6.6+ and, for zero-copy, driver support"
                } else {
                    ""
                },
                e
            )
        })?;
        // Every receive frame of this queue goes on its fill ring (first `recycle`).
        let base = i as u64 * u64::from(rx.frames);
        rings.push(QueueRings {
            rx: rx_ring,
            fq_cq,
            rx_used: (base..base + u64::from(rx.frames))
                .map(|f| f * u64::from(FRAME))
                .collect(),
        });
    }
    Ok(Rings {
        queues: rings,
        tx: tx.ok_or("no queue to bind")?,
        umem,
        zero_copy,
        rx,
    })
}

impl XskPath {
    /// Load and attach the program, bind the AF_XDP socket (zero-copy if the driver can,
    /// else copy mode) and the kernel UDP socket; Err says why AF_XDP is unavailable.
    pub fn open(cfg: &XdpConfig) -> Result<Self, String> {
        let (iface, ip) = choose_iface(cfg)?;
        Self::open_on(cfg, iface.clone(), ip).map_err(|e| format!("on {iface}: {e}"))
    }

    fn open_on(cfg: &XdpConfig, iface: String, ip: Ipv4Addr) -> Result<Self, String> {
        let on = |what: &str, e: &dyn std::error::Error| format!("{what}: {}", error_chain(e));
        let max_frame = cfg.mtu + 14;
        // Frames larger than a receive chunk holds need multi-buffer AF_XDP.
        let multi_buffer = max_frame > FRAME as usize - RX_HEADROOM;
        let prog_name = if multi_buffer {
            "flexpass_xsk_frags"
        } else {
            "flexpass_xsk"
        };
        let mac = std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))
            .ok()
            .and_then(|s| parse_mac(&s))
            .ok_or("no Ethernet address")?;
        let ifindex = nix::net::if_::if_nametoindex(iface.as_str())
            .map_err(|e| format!("interface index: {e}"))?;
        // No GSO here: while a next hop is unresolved the kernel queues these datagrams
        // (unres_qlen_bytes) and drops the oldest first, and a GSO send counts as one
        // large buffer, which pushed out the HELLO in front of it.
        let kernel = TosSocket::bind(cfg.bind).map_err(|e| format!("UDP {}: {e}", cfg.bind))?;
        let port = kernel.local_addr().map_err(|e| e.to_string())?.port();

        let mut bpf =
            aya::Ebpf::load(program_object()).map_err(|e| on("loading the XDP program", &e))?;
        {
            let mut ports: Array<_, u32> = Array::try_from(
                bpf.map_mut("flexpass_port")
                    .ok_or("program has no flexpass_port map")?,
            )
            .map_err(|e| on("flexpass_port map", &e))?;
            ports
                .set(0, u32::from(port), 0)
                .map_err(|e| on("setting the port", &e))?;
        }
        let prog: &mut Xdp = bpf
            .program_mut(prog_name)
            .ok_or_else(|| format!("object has no {prog_name} program"))?
            .try_into()
            .map_err(|e| on(prog_name, &e))?;
        prog.load()
            .map_err(|e| on(&format!("loading {prog_name}"), &e))?;

        let queues = cfg.queues.resolve(rx_queue_count(&iface))?;
        let rx = rx_sizes(queues.len());
        let rx_total = rx.frames * queues.len() as u32;
        let area = Area::new(((rx_total + TX_FRAMES) * FRAME) as usize)
            .map_err(|e| format!("UMEM memory: {e}"))?;
        let bind = |zero_copy| bind_rings(&area, ifindex, &queues, rx, zero_copy, multi_buffer);
        let rings = match bind(true) {
            Ok(r) => r,
            Err(zc) => bind(false).map_err(|copy| format!("{copy} (zero-copy: {zc})"))?,
        };
        {
            let mut xsks: XskMap<_> = XskMap::try_from(
                bpf.map_mut("flexpass_xsks")
                    .ok_or("program has no flexpass_xsks map")?,
            )
            .map_err(|e| on("flexpass_xsks map", &e))?;
            for (&q, r) in queues.iter().zip(&rings.queues) {
                xsks.set(q, r.rx.as_raw_fd(), 0)
                    .map_err(|e| on(&format!("XSKMAP entry for queue {q}"), &e))?;
            }
        }
        let prog: &mut Xdp = bpf
            .program_mut(prog_name)
            .expect("present")
            .try_into()
            .expect("XDP");
        let attach = match prog.attach(&iface, XdpMode::Driver) {
            Ok(_) => "native",
            Err(native) => {
                let native = error_chain(&native);
                prog.attach(&iface, XdpMode::Skb).map_err(|e| {
                    format!(
                        "attaching XDP to {iface}: native: {native}; generic: {}",
                        error_chain(&e)
                    )
                })?;
                "generic"
            }
        };
        let mut path = XskPath {
            info: XdpInfo {
                iface,
                queues,
                attach,
                zero_copy: rings.zero_copy,
                multi_buffer,
            },
            local: SocketAddrV4::new(ip, port),
            mac,
            max_frame,
            tx_free: (rx_total..rx_total + TX_FRAMES)
                .map(|i| u64::from(i) * u64::from(FRAME))
                .collect(),
            tx_queued: Vec::with_capacity(64),
            rx_segs: Vec::with_capacity(64),
            joined: Vec::new(),
            next_queue: 0,
            kernel_segs: 0,
            neighbours: Neighbours::new(
                String::new(),
                nix::ifaddrs::getifaddrs()
                    .map(|all| {
                        all.filter_map(|a| Some(a.address?.as_sockaddr_in()?.ip()))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            rings,
            _bpf: bpf,
            area,
            kernel,
            kernel_readable: true,
            calls: 0,
            scratch: Vec::with_capacity(FRAME as usize),
            jumbo: Vec::new(),
            ident: rand::random(),
            counters: XdpCounters::default(),
            kernel_stats_at: None,
        };
        path.neighbours.iface = path.info.iface.clone();
        // Every receive frame goes on the fill ring.
        path.recycle();
        Ok(path)
    }

    pub fn info(&self) -> &XdpInfo {
        &self.info
    }

    pub fn counters(&mut self) -> XdpCounters {
        if self
            .kernel_stats_at
            .is_none_or(|t| t.elapsed() >= KERNEL_STATS_EVERY)
        {
            self.kernel_stats_at = Some(Instant::now());
            let (mut dropped, mut full, mut empty) = (0, 0, 0);
            for q in &self.rings.queues {
                if let Ok(st) = q.fq_cq.statistics_v2() {
                    // The kernel's rx_dropped counts frames it found no buffer for (fill
                    // ring empty), not those a full receive ring turned away.
                    dropped += st.rx_dropped + st.rx_ring_full;
                    full += st.rx_ring_full;
                    empty += st.rx_fill_ring_empty_descs;
                }
            }
            self.counters.rx_dropped = dropped;
            self.counters.rx_ring_full = full;
            self.counters.rx_fill_ring_empty = empty;
        }
        self.counters
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.kernel.local_addr()
    }

    /// The AF_XDP sockets (one per queue) and the kernel UDP socket, last (poll all for
    /// POLLIN); returns how many.
    pub fn poll_fds(&self, out: &mut [RawFd; MAX_QUEUES + 1]) -> usize {
        use std::os::fd::{AsFd, AsRawFd};
        let n = self.rings.queues.len();
        for (o, q) in out.iter_mut().zip(&self.rings.queues) {
            *o = q.rx.as_raw_fd();
        }
        out[n] = self.kernel.as_fd().as_raw_fd();
        n + 1
    }

    /// Readiness of the `poll_fds` after a poll: the kernel socket is read next time.
    pub fn readable(&mut self, ready: &[bool]) {
        if ready.get(self.rings.queues.len()).copied().unwrap_or(false) {
            self.kernel_readable = true;
        }
    }

    /// Whether a receive ring holds frames (no system call).
    pub fn rx_ready(&self) -> bool {
        self.rings.queues.iter().any(|q| q.rx.available() > 0)
    }

    /// Share of the receive ring holding datagrams not read yet, on the fullest queue
    /// (no system call).
    pub fn rx_backlog(&self) -> f64 {
        let most = self.rings.queues.iter().map(|q| q.rx.available()).max();
        f64::from(most.unwrap_or(0)) / f64::from(self.rings.rx.ring)
    }

    /// Return each queue's frames of the last batch to its fill ring (the endpoint calls
    /// this as soon as it has handled a batch; `recv_batch` does too).
    pub fn recycle(&mut self) {
        for q in &mut self.rings.queues {
            // The fill ring has room for every frame (`RxSizes`), but xdpilone reserves
            // from a cached view of the kernel's consumer index, refreshed only once that
            // view shows the ring full: a first reservation may offer fewer slots than
            // are free, the next one starts from a fresh view.
            let mut put = 0;
            while !q.rx_used.is_empty() {
                let mut fill = q.fq_cq.fill(q.rx_used.len() as u32);
                let n = fill.insert(q.rx_used.iter().copied()) as usize;
                fill.commit();
                drop(fill);
                q.rx_used.drain(..n);
                if n == 0 {
                    break;
                }
                put += n;
            }
            if put > 0 && q.fq_cq.needs_wakeup() {
                q.fq_cq.wake();
            }
        }
    }

    /// Take back transmit frames the kernel has sent.
    fn reap(&mut self) {
        let mut done = self.rings.queues[0].fq_cq.complete(TX_FRAMES);
        while let Some(addr) = done.read() {
            self.tx_free.push(addr);
        }
        done.release();
    }

    /// Receive up to `max` datagrams: from the queues' receive rings, then from the kernel
    /// socket when it was reported readable (or every KERNEL_CHECK_EVERY calls).
    pub fn recv_batch(&mut self, max: usize) -> io::Result<usize> {
        self.recycle();
        self.rx_segs.clear();
        self.joined.clear();
        self.kernel_segs = 0;
        let base = self.area.ptr.as_ptr();
        let (area_len, port) = (self.area.len, self.local.port());
        let nq = self.rings.queues.len();
        let mut taken = 0;
        // Round robin: each batch starts at the next queue, so none starves the others.
        for k in 0..nq {
            if taken >= max {
                break;
            }
            let q = &mut self.rings.queues[(self.next_queue + k) % nq];
            // A multi-buffer frame's descriptors are published together, but a
            // reservation can end inside its chain: then read on, one at a time.
            let mut want = (max - taken) as u32;
            let mut chains = Chains::default();
            loop {
                let mut rx = q.rx.receive(want);
                let mut got = 0;
                while let Some(d) = rx.read() {
                    got += 1;
                    q.rx_used.push(d.addr & !u64::from(FRAME - 1));
                    let (at, len) = (d.addr as usize, d.len as usize);
                    // SAFETY: the kernel handed this frame over (it is ours until it
                    // goes back on the fill ring) and it lies inside the area.
                    let f = (at + len <= area_len)
                        .then(|| unsafe { std::slice::from_raw_parts(base.add(at), len) });
                    let more = d.options & XDP_PKT_CONTD != 0;
                    let (frame, joined, start) = match chains.push(&mut self.joined, f, more) {
                        Step::More => continue,
                        Step::Bad => {
                            taken += 1;
                            self.counters.bad_frames += 1;
                            continue;
                        }
                        Step::Single => (f.expect("readable"), false, at),
                        Step::Joined(s) => (&self.joined[s..], true, s),
                    };
                    taken += 1;
                    match frame::parse(frame, port) {
                        Ok(p) => {
                            self.counters.xsk_rx_multi_buffer += u64::from(joined);
                            self.rx_segs.push(RxSeg {
                                joined,
                                at: start + p.payload.start,
                                len: p.payload.len(),
                                src: p.src,
                                tos: p.tos,
                            })
                        }
                        Err(_) => {
                            self.counters.bad_frames += 1;
                            if joined {
                                self.joined.truncate(start);
                            }
                        }
                    }
                }
                rx.release();
                drop(rx);
                if !chains.open() {
                    break;
                }
                if got == 0 {
                    // The rest of the chain is not there (the kernel publishes a chain
                    // at once, so it never comes): drop the part read.
                    self.counters.bad_frames += 1;
                    chains.drop_partial(&mut self.joined);
                    break;
                }
                want = 1;
            }
        }
        self.next_queue = (self.next_queue + 1) % nq;
        self.counters.xsk_rx += self.rx_segs.len() as u64;
        let mut messages = taken;
        self.calls = self.calls.wrapping_add(1);
        if messages < max && (self.kernel_readable || self.calls.is_multiple_of(KERNEL_CHECK_EVERY))
        {
            let k = self.kernel.recv_batch(max - messages)?;
            if k == 0 {
                self.kernel_readable = false;
            }
            messages += k;
            self.kernel_segs = self.kernel.datagrams();
            self.counters.kernel_rx += self.kernel_segs as u64;
        }
        Ok(messages)
    }

    pub fn datagrams(&self) -> usize {
        self.rx_segs.len() + self.kernel_segs
    }

    pub fn received(&self, i: usize) -> Received<'_> {
        if i >= self.rx_segs.len() {
            return self.kernel.received(i - self.rx_segs.len());
        }
        let s = self.rx_segs[i];
        let data = if s.joined {
            &self.joined[s.at..s.at + s.len]
        } else {
            // SAFETY: inside a received frame not yet returned to the fill ring (that
            // happens in `recycle`, which needs `&mut self`).
            unsafe { std::slice::from_raw_parts(self.area.ptr.as_ptr().add(s.at), s.len) }
        };
        Received {
            data,
            src: SocketAddr::V4(s.src),
            tos: s.tos,
            truncated: false,
        }
    }

    /// Datagrams not handed to the kernel yet: queued, or on the transmit ring unsent.
    pub fn queued(&self) -> usize {
        self.tx_queued.len() + self.kernel.queued() + self.rings.tx.pending() as usize
    }

    /// Queue one datagram: into a transmit frame if the next hop's MAC is known, else
    /// on the kernel socket (which resolves it, or routes it elsewhere: `Neighbours`).
    pub fn queue(
        &mut self,
        dst: SocketAddr,
        tos: u8,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> io::Result<()> {
        let SocketAddr::V4(dst4) = dst else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "FlexPass runs over IPv4 only",
            ));
        };
        let Some(dst_mac) = self.neighbours.mac(*dst4.ip()) else {
            self.counters.kernel_tx += 1;
            return self.kernel.queue(dst, tos, encode);
        };
        if self.tx_free.is_empty() {
            self.reap();
        }
        let no_frame = |c: &mut XdpCounters| {
            c.tx_no_frame += 1;
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "no free AF_XDP frame",
            ))
        };
        if self.tx_free.is_empty() {
            return no_frame(&mut self.counters);
        }
        self.scratch.clear();
        encode(&mut self.scratch);
        let len = frame::HEADERS + self.scratch.len();
        if len > self.max_frame.max(FRAME as usize) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {} B exceeds the frame", self.scratch.len()),
            ));
        }
        let ends = Ends {
            src_mac: self.mac,
            dst_mac,
            src: self.local,
            dst: dst4,
        };
        self.ident = self.ident.wrapping_add(1);
        let base = self.area.ptr.as_ptr();
        // SAFETY: a free transmit frame (not in the kernel's hands), inside the area.
        let frame_at = |addr: u64, len: usize| unsafe {
            std::slice::from_raw_parts_mut(base.add(addr as usize), len)
        };
        if len <= FRAME as usize {
            let addr = self.tx_free.pop().expect("checked above");
            let f = frame_at(addr, len);
            f[frame::HEADERS..].copy_from_slice(&self.scratch);
            frame::write_headers(f, &ends, tos, self.ident, self.scratch.len());
            self.tx_queued.push(XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            });
            return Ok(());
        }
        // A jumbo frame (multi-buffer, `max_frame` allows it only then): built whole,
        // then spread over as many transmit frames, XDP_PKT_CONTD on all but the last.
        let buffers = len.div_ceil(FRAME as usize);
        if self.tx_free.len() < buffers {
            self.reap();
            if self.tx_free.len() < buffers {
                return no_frame(&mut self.counters);
            }
        }
        self.jumbo.clear();
        self.jumbo.resize(frame::HEADERS, 0);
        self.jumbo.extend_from_slice(&self.scratch);
        frame::write_headers(&mut self.jumbo, &ends, tos, self.ident, self.scratch.len());
        for (k, piece) in self.jumbo.chunks(FRAME as usize).enumerate() {
            let addr = self.tx_free.pop().expect("checked above");
            frame_at(addr, piece.len()).copy_from_slice(piece);
            self.tx_queued.push(XdpDesc {
                addr,
                len: piece.len() as u32,
                options: if k + 1 < buffers { XDP_PKT_CONTD } else { 0 },
            });
        }
        self.counters.xsk_tx_multi_buffer += 1;
        Ok(())
    }

    /// Put the queued frames on the transmit ring and kick the kernel until it took them
    /// (copy mode sends up to 32 per kick); flush the kernel socket too.
    pub fn flush(&mut self) -> Flushed {
        let mut f = self.kernel.flush();
        let n = self.tx_queued.len();
        if n > 0 {
            // Whole frames only: a chain cut at the ring's end would leave truncated.
            let room = (TX_FRAMES - self.rings.tx.pending()) as usize;
            let fit = whole_frames(&self.tx_queued, room);
            // xdpilone reserves from its cached view of the kernel's consumer index,
            // refreshed only once that view shows the ring full: it may offer fewer
            // slots than `room` (then half the jumbo frames were dropped here). Insert
            // on: the next reservation starts from a fresh view.
            let mut put = 0;
            while put < fit {
                let mut tx = self.rings.tx.transmit((fit - put) as u32);
                let k = tx.insert(self.tx_queued[put..fit].iter().copied()) as usize;
                tx.commit();
                if k == 0 {
                    break;
                }
                put += k;
            }
            let frames = self.tx_queued[..put]
                .iter()
                .filter(|d| d.options & XDP_PKT_CONTD == 0)
                .count() as u64;
            // Frames the ring had no room for are dropped (as a full NIC queue would).
            for d in self.tx_queued.drain(put..) {
                self.tx_free.push(d.addr);
                if d.options & XDP_PKT_CONTD == 0 {
                    self.counters.tx_ring_full += 1;
                    f.errors += 1;
                }
            }
            self.tx_queued.clear();
            f.sent += frames;
            self.counters.xsk_tx += frames;
        }
        // Copy mode sends up to 32 frames a kick: kick until the ring is empty, a kick
        // sends nothing (the peer cannot take more) or this flush's share of kicks is
        // spent (a long flush delays credits); the rest waits on the ring for the next
        // flush (`queued` counts it, so there is one).
        let mut kicks = 0;
        let mut pending = self.rings.tx.pending();
        while pending > 0 && kicks < n / 32 + 2 {
            if !self.rings.tx.needs_wakeup() && self.rings.zero_copy {
                break;
            }
            self.rings.tx.wake();
            kicks += 1;
            let left = self.rings.tx.pending();
            if left >= pending {
                break;
            }
            pending = left;
        }
        f.calls += kicks as u64;
        self.reap();
        f
    }

    pub fn kernel_mut(&mut self) -> &mut TosSocket {
        &mut self.kernel
    }

    #[allow(dead_code)]
    fn umem(&self) -> &Umem {
        &self.rings.umem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_receive_ring_leaves_frames_on_the_fill_ring() {
        // Between `recv_batch` and `recycle` the agent holds at most one batch of frames
        // (socket BATCH datagrams), of three buffers each at MTU 9000.
        let held = 3 * crate::socket::BATCH as u32;
        for n in [1, 2, 3, 4, 8, 16, 64] {
            let rx = rx_sizes(n);
            assert!(
                rx.ring.is_power_of_two() && rx.frames.is_power_of_two(),
                "{n}: {rx:?}"
            );
            assert!(rx.ring >= 256, "{n}: {rx:?}");
            // The fill ring (rx.frames entries) holds every frame; with the receive ring
            // full and a batch held, at least a quarter ring's worth is still on it.
            assert!(rx.frames >= rx.ring + held + rx.ring / 4, "{n}: {rx:?}");
        }
        assert_eq!(
            rx_sizes(1),
            RxSizes {
                ring: 2048,
                frames: 4096
            }
        );
        assert_eq!(rx_sizes(64).ring, 256);
    }

    #[test]
    fn only_whole_chains_go_on_the_transmit_ring() {
        let d = |options| XdpDesc {
            addr: 0,
            len: 1,
            options,
        };
        // A one-buffer frame, a jumbo frame in three, another one-buffer frame.
        let q = [d(0), d(XDP_PKT_CONTD), d(XDP_PKT_CONTD), d(0), d(0)];
        let fits: Vec<usize> = (0..=6).map(|room| whole_frames(&q, room)).collect();
        assert_eq!(fits, [0, 1, 1, 1, 4, 5, 5]);
        assert_eq!(whole_frames(&q[1..], 2), 0, "a chain is never cut");
    }

    #[test]
    fn chains_are_joined_whole_and_bad_ones_leave_nothing() {
        let mut c = Chains::default();
        let mut joined = b"earlier frame".to_vec();
        let n = joined.len();
        assert_eq!(c.push(&mut joined, Some(b"one"), false), Step::Single);
        assert_eq!(c.push(&mut joined, None, false), Step::Bad);
        for part in [&b"ab"[..], b"cd"] {
            assert_eq!(c.push(&mut joined, Some(part), true), Step::More);
            assert!(c.open());
        }
        assert_eq!(c.push(&mut joined, Some(b"e"), false), Step::Joined(n));
        assert_eq!(&joined[n..], b"abcde");
        assert!(!c.open());
        // A buffer outside the UMEM spoils its chain; the chain's copy goes.
        let n = joined.len();
        c.push(&mut joined, Some(b"xy"), true);
        c.push(&mut joined, None, true);
        assert_eq!(c.push(&mut joined, Some(b"z"), false), Step::Bad);
        assert_eq!(joined.len(), n);
        // Too long a chain.
        for _ in 0..MAX_CHAIN {
            assert_eq!(c.push(&mut joined, Some(b"."), true), Step::More);
        }
        assert_eq!(c.push(&mut joined, Some(b"."), false), Step::Bad);
        assert_eq!(joined.len(), n);
        // A chain given up half read.
        c.push(&mut joined, Some(b"half"), true);
        c.drop_partial(&mut joined);
        assert!(!c.open() && joined.len() == n);
    }

    /// Random buffer sequences against a plain model: every frame the reader calls good
    /// is the concatenation of its buffers, and bad ones leave no bytes behind.
    #[test]
    fn random_buffer_sequences_reassemble_like_the_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let mut c = Chains::default();
            let mut joined = Vec::new();
            let (mut cur, mut cur_ok, mut cur_len) = (Vec::new(), true, 0);
            let mut frame_start = 0;
            for i in 0..rng.gen_range(1..60) {
                let buf: Vec<u8> = (0..rng.gen_range(0..20)).map(|_| i as u8).collect();
                let readable = rng.gen_bool(0.95);
                let more = rng.gen_bool(if cur_len > 0 { 0.9 } else { 0.4 });
                if cur_len == 0 {
                    frame_start = joined.len();
                }
                cur_len += 1;
                cur_ok &= readable && cur_len <= MAX_CHAIN;
                cur.extend_from_slice(&buf);
                let step = c.push(&mut joined, readable.then_some(&buf[..]), more);
                if more {
                    assert_eq!(step, Step::More);
                    continue;
                }
                match step {
                    Step::Single => assert!(cur_len == 1 && readable),
                    Step::Joined(start) => {
                        assert!(cur_len > 1 && cur_ok);
                        assert_eq!(&joined[start..], &cur[..]);
                    }
                    Step::Bad => {
                        assert!(!cur_ok);
                        assert_eq!(joined.len(), frame_start, "a bad frame left bytes");
                    }
                    Step::More => unreachable!(),
                }
                (cur, cur_ok, cur_len) = (Vec::new(), true, 0);
            }
        }
    }
}

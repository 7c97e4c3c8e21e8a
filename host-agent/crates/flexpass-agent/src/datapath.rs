//! The endpoint's datapath (docs/datapath.md): the kernel UDP socket (`TosSocket`) or AF_XDP
//! (`XskPath`), chosen by `DatapathMode`; `auto` tries AF_XDP and falls back to the UDP
//! socket with one log line naming why.

use crate::socket::{Flushed, Received, TosSocket};
use crate::xdp::{XdpConfig, XdpCounters, XdpInfo, XskPath, MAX_QUEUES};

/// Most file descriptors a datapath polls: an AF_XDP socket per queue and the kernel socket.
pub const POLL_FDS: usize = MAX_QUEUES + 1;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};

/// `--datapath`: which datapath an endpoint uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DatapathMode {
    /// AF_XDP if it can be set up, else the UDP socket (logged).
    Auto,
    /// AF_XDP or fail.
    Xdp,
    /// The kernel UDP socket.
    Udp,
}

impl std::str::FromStr for DatapathMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DatapathMode::Auto),
            "xdp" => Ok(DatapathMode::Xdp),
            "udp" => Ok(DatapathMode::Udp),
            _ => Err(format!("--datapath must be auto, xdp or udp, got {s:?}")),
        }
    }
}

// One per endpoint, made once and never moved on a hot path: the sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Datapath {
    Udp(TosSocket),
    Xdp(Box<XskPath>),
}

impl Datapath {
    /// Open the datapath `mode` asks for. `gso` applies to the UDP socket.
    pub fn open(mode: DatapathMode, xdp: &XdpConfig, gso: bool) -> io::Result<Datapath> {
        let udp = || -> io::Result<Datapath> {
            let mut sock = TosSocket::bind(xdp.bind)?;
            sock.set_gso(gso);
            // Coalesced receive only saves work: datagrams are split again before decoding.
            sock.set_gro(true);
            Ok(Datapath::Udp(sock))
        };
        match mode {
            DatapathMode::Udp => udp(),
            DatapathMode::Xdp | DatapathMode::Auto => match XskPath::open(xdp) {
                // Copy mode has no segmentation offload and copies each jumbo frame's
                // buffers on both sides: on veth it ran at 0.49 of kernel TCP where the UDP
                // socket's GSO/GRO reached 1.24 (docs/datapath.md, "Jumbo frames").
                Ok(x)
                    if mode == DatapathMode::Auto
                        && x.info().multi_buffer
                        && !x.info().zero_copy =>
                {
                    log::info!(
                        "flexpass: AF_XDP would need copy-mode multi-buffer frames at MTU {} on {} (slower than the UDP socket's segmentation offload; --datapath xdp uses them); using the UDP socket",
                        xdp.mtu,
                        x.info().iface
                    );
                    // The AF_XDP path holds the port: it goes first.
                    drop(x);
                    udp()
                }
                Ok(x) => {
                    log::info!(
                        "flexpass: datapath {} (UDP port {})",
                        x.info(),
                        xdp_port(&x)
                    );
                    Ok(Datapath::Xdp(Box::new(x)))
                }
                Err(why) if mode == DatapathMode::Auto => {
                    log::info!(
                        "flexpass: AF_XDP unavailable{}; using the UDP socket",
                        unavailable(&why)
                    );
                    udp()
                }
                Err(why) => Err(io::Error::other(format!(
                    "AF_XDP unavailable{}",
                    unavailable(&why)
                ))),
            },
        }
    }

    /// The AF_XDP set-up, if this is the AF_XDP datapath.
    pub fn xdp_info(&self) -> Option<&XdpInfo> {
        match self {
            Datapath::Udp(_) => None,
            Datapath::Xdp(x) => Some(x.info()),
        }
    }

    pub fn xdp_counters(&mut self) -> Option<XdpCounters> {
        match self {
            Datapath::Udp(_) => None,
            Datapath::Xdp(x) => Some(x.counters()),
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Datapath::Udp(s) => s.local_addr(),
            Datapath::Xdp(x) => x.local_addr(),
        }
    }

    /// File descriptors to poll for POLLIN (the UDP socket; or one AF_XDP socket per queue
    /// and the kernel socket); the count is returned.
    pub fn poll_fds(&self, out: &mut [RawFd; POLL_FDS]) -> usize {
        match self {
            Datapath::Udp(s) => {
                out[0] = s.as_fd().as_raw_fd();
                1
            }
            Datapath::Xdp(x) => x.poll_fds(out),
        }
    }

    /// Which of the `poll_fds` a poll reported readable.
    pub fn readable(&mut self, ready: &[bool]) {
        if let Datapath::Xdp(x) = self {
            x.readable(ready)
        }
    }

    /// Whether received datagrams wait without a system call to find out (AF_XDP: frames on
    /// the receive ring); false when only a poll can tell.
    pub fn rx_ready(&self) -> bool {
        match self {
            Datapath::Udp(_) => false,
            Datapath::Xdp(x) => x.rx_ready(),
        }
    }

    /// Share of the receive buffer (AF_XDP: receive frames) holding datagrams not read yet.
    pub fn rx_backlog(&self) -> f64 {
        match self {
            Datapath::Udp(s) => s.rx_backlog(),
            Datapath::Xdp(x) => x.rx_backlog(),
        }
    }

    pub fn recv_batch(&mut self, max: usize) -> io::Result<usize> {
        match self {
            Datapath::Udp(s) => s.recv_batch(max),
            Datapath::Xdp(x) => x.recv_batch(max),
        }
    }

    pub fn datagrams(&self) -> usize {
        match self {
            Datapath::Udp(s) => s.datagrams(),
            Datapath::Xdp(x) => x.datagrams(),
        }
    }

    pub fn received(&self, i: usize) -> Received<'_> {
        match self {
            Datapath::Udp(s) => s.received(i),
            Datapath::Xdp(x) => x.received(i),
        }
    }

    pub fn queued(&self) -> usize {
        match self {
            Datapath::Udp(s) => s.queued(),
            Datapath::Xdp(x) => x.queued(),
        }
    }

    pub fn queue(
        &mut self,
        dst: SocketAddr,
        tos: u8,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> io::Result<()> {
        match self {
            Datapath::Udp(s) => s.queue(dst, tos, encode),
            Datapath::Xdp(x) => x.queue(dst, tos, encode),
        }
    }

    pub fn flush(&mut self) -> Flushed {
        match self {
            Datapath::Udp(s) => s.flush(),
            Datapath::Xdp(x) => x.flush(),
        }
    }
}

fn xdp_port(x: &XskPath) -> u16 {
    x.local_addr().map(|a| a.port()).unwrap_or(0)
}

/// "on IFACE: why" as it comes, anything else as ": why".
fn unavailable(why: &str) -> String {
    if why.starts_with("on ") {
        format!(" {why}")
    } else {
        format!(": {why}")
    }
}

//! The endpoint's datapath (docs/datapath.md): the kernel UDP socket (`TosSocket`) or AF_XDP
//! (`XskPath`), chosen by `DatapathMode`; `auto` sets up AF_XDP and keeps it where it is the
//! faster of the two (`auto_choice`), else it uses the UDP socket; one log line names the
//! choice and why.

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
    /// The faster of AF_XDP (if it can be set up) and the UDP socket (`auto_choice`; logged).
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

/// What `auto` does with an AF_XDP socket it could set up, and why (logged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoChoice {
    Xdp(&'static str),
    Udp(&'static str),
}

/// `auto`'s rule, from the set-up AF_XDP got (`info`) and the credit batch B
/// (`--credit-batch`), measured on veth (docs/datapath.md, "`auto`: the faster path"):
/// - zero-copy: AF_XDP (no copy and no skb per frame; the UDP socket has both);
/// - copy mode: the UDP socket, for the first reason that holds:
///   - multi-buffer frames (MTU > 3826): a 9 kB frame is copied into three transmit
///     buffers, an skb and three receive buffers, then joined; the UDP socket moves a GSO
///     batch as one skb;
///   - credits in batches (B > 1): the UDP socket's GSO/GRO carries a batch of credits,
///     and the batch of data they release, as one skb each way; copy-mode AF_XDP has no
///     segmentation offload and sends every frame alone;
///   - else: copy-mode AF_XDP was no faster than the UDP socket (within noise), and its
///     XDP program slows every other flow of the interface: on veth kernel TCP fell from
///     16.0 to 5.5 Gbit/s and in-process FlexPass from 5.7 to 2.5 with it attached (veth
///     copies each packet for the program).
pub fn auto_choice(info: &XdpInfo, credit_batch: u32) -> AutoChoice {
    if info.zero_copy {
        AutoChoice::Xdp("zero-copy AF_XDP: no copy and no skb per frame")
    } else if info.multi_buffer {
        AutoChoice::Udp(
            "copy-mode AF_XDP would need multi-buffer frames at this MTU, slower than the UDP socket's segmentation offload",
        )
    } else if credit_batch > 1 {
        AutoChoice::Udp(
            "credits paced in batches: the UDP socket's GSO/GRO moves a batch as one buffer, copy-mode AF_XDP moves every frame alone",
        )
    } else {
        AutoChoice::Udp(
            "copy-mode AF_XDP is no faster than the UDP socket, and its XDP program slows every other flow on the interface",
        )
    }
}

// One per endpoint, made once and never moved on a hot path: the sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Datapath {
    Udp(TosSocket),
    Xdp(Box<XskPath>),
}

impl Datapath {
    /// Open the datapath `mode` asks for. `gso` applies to the UDP socket; `credit_batch`
    /// (the endpoint's credit batch B) weighs in `auto`'s choice.
    pub fn open(
        mode: DatapathMode,
        xdp: &XdpConfig,
        gso: bool,
        credit_batch: u32,
    ) -> io::Result<Datapath> {
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
                Ok(x) if mode == DatapathMode::Auto => match auto_choice(x.info(), credit_batch) {
                    AutoChoice::Udp(why) => {
                        log::info!(
                            "flexpass: datapath auto: using the UDP socket, not {} at MTU {}: {why} (--datapath xdp uses it)",
                            x.info(),
                            xdp.mtu,
                        );
                        // The AF_XDP path holds the port (and the program): it goes first.
                        drop(x);
                        udp()
                    }
                    AutoChoice::Xdp(why) => {
                        log::info!(
                            "flexpass: datapath {} (UDP port {}; auto: {why})",
                            x.info(),
                            xdp_port(&x)
                        );
                        Ok(Datapath::Xdp(Box::new(x)))
                    }
                },
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

    /// The datagrams of the last `recv_batch` are handled: AF_XDP puts their frames back
    /// on the fill ring now, not at the next batch.
    pub fn recycle(&mut self) {
        if let Datapath::Xdp(x) = self {
            x.recycle()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(zero_copy: bool, multi_buffer: bool) -> XdpInfo {
        XdpInfo {
            iface: "veth0".into(),
            queues: vec![0],
            attach: "native",
            zero_copy,
            multi_buffer,
        }
    }

    #[test]
    fn auto_keeps_af_xdp_only_where_it_was_measured_faster() {
        let xdp = |c| matches!(c, AutoChoice::Xdp(_));
        // Zero-copy: AF_XDP at any MTU and credit batch.
        for (mb, b) in [(false, 1), (false, 8), (true, 1), (true, 8)] {
            assert!(
                xdp(auto_choice(&info(true, mb), b)),
                "zero-copy, multi-buffer {mb}, B {b}"
            );
        }
        // Copy mode: the UDP socket, with the first reason that holds.
        for (mb, b) in [(false, 1), (false, 2), (false, 8), (true, 1), (true, 8)] {
            assert_eq!(
                auto_choice(&info(false, mb), b),
                AutoChoice::Udp(if mb {
                    "copy-mode AF_XDP would need multi-buffer frames at this MTU, slower than the UDP socket's segmentation offload"
                } else if b > 1 {
                    "credits paced in batches: the UDP socket's GSO/GRO moves a batch as one buffer, copy-mode AF_XDP moves every frame alone"
                } else {
                    "copy-mode AF_XDP is no faster than the UDP socket, and its XDP program slows every other flow on the interface"
                }),
                "copy mode, multi-buffer {mb}, B {b}"
            );
        }
    }
}

//! The AF_XDP datapath (docs/datapath.md): the steering program (bpf/flexpass_xsk.c, loaded
//! and attached with aya) sends the FlexPass UDP port's IPv4 datagrams on each bound receive
//! queue to that queue's AF_XDP socket (one UMEM shared by all, rings with xdpilone); the
//! agent builds and parses the Ethernet/IPv4/UDP headers itself (`frame`).
//!
//! A kernel UDP socket stays bound on the same port: it holds the port, receives what the
//! program did not steer (other receive queues, anything before the program was attached),
//! and sends to peers whose next hop's MAC address is not in the kernel's neighbour table
//! yet — which makes the kernel resolve it (ARP); the next packets to that peer then leave
//! through the AF_XDP socket. It also carries everything for peers the interface does not
//! lead to: this host's own addresses (over `lo`) and destinations the kernel routes through
//! another interface.
//!
//! The program is attached through a BPF link: the kernel detaches it when the link's file
//! descriptor is closed, so also when the agent is killed.

mod neigh;
#[cfg(flexpass_xdp)]
mod xsk;

pub use neigh::{arp_entry, is_local, next_hop, parse_mac, route_to};

use crate::socket::{Flushed, Received, TosSocket};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::RawFd;

/// How the AF_XDP socket was set up, for logs and `status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct XdpInfo {
    pub iface: String,
    /// Receive queues with an AF_XDP socket (`--xdp-queue`).
    pub queues: Vec<u32>,
    /// "native" (driver) or "generic" (skb) XDP.
    pub attach: &'static str,
    pub zero_copy: bool,
    /// Frames larger than a UMEM chunk travel as chains of buffers (XDP_USE_SG).
    pub multi_buffer: bool,
}

impl std::fmt::Display for XdpInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AF_XDP on {} queue{} {} ({} XDP, {} mode{})",
            self.iface,
            if self.queues.len() == 1 { "" } else { "s" },
            self.queues
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.attach,
            if self.zero_copy { "zero-copy" } else { "copy" },
            if self.multi_buffer {
                ", multi-buffer"
            } else {
                ""
            }
        )
    }
}

/// Packet counts of the AF_XDP datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpCounters {
    /// Datagrams received / sent through the AF_XDP socket.
    pub xsk_rx: u64,
    pub xsk_tx: u64,
    /// Datagrams received / sent through the kernel UDP socket beside it (not steered;
    /// next hop not resolved yet).
    pub kernel_rx: u64,
    pub kernel_tx: u64,
    /// Frames the AF_XDP socket received that were not FlexPass datagrams for us.
    pub bad_frames: u64,
    /// Datagrams dropped because every transmit frame was in flight.
    pub tx_no_frame: u64,
    /// Datagrams dropped because the transmit ring was full (also in `send_errors`).
    pub tx_ring_full: u64,
    /// Datagrams received / sent in more than one UMEM chunk (multi-buffer AF_XDP, jumbo
    /// frames; also in `xsk_rx` / `xsk_tx`).
    pub xsk_rx_multi_buffer: u64,
    pub xsk_tx_multi_buffer: u64,
    /// The kernel's counts for this socket (XDP_STATISTICS, read at most every
    /// `KERNEL_STATS_EVERY`): frames dropped on receive (the kernel's rx_dropped, frames
    /// it found no buffer for, plus rx_ring_full), of them because the receive ring was
    /// full (the agent behind), and receive attempts that found the fill ring empty.
    pub rx_dropped: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty: u64,
}

/// What the AF_XDP datapath needs to know to start.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    pub bind: SocketAddr,
    /// Interface to attach to; None: the one holding the bound address, else (wildcard
    /// address) the one of the route to `route_hint`, else the only one that is up with an
    /// IPv4 address (loopback aside).
    pub iface: Option<String>,
    pub queues: XdpQueues,
    pub route_hint: Option<Ipv4Addr>,
    /// Largest IP datagram the flows send (the endpoint's MTU).
    pub mtu: usize,
}

/// Most receive queues one agent binds (one AF_XDP socket each, one shared UMEM; at 64,
/// a 256-entry receive ring and 512 receive frames each: a 136 MiB UMEM with the transmit
/// frames).
pub const MAX_QUEUES: usize = 64;

/// `--xdp-queue`: the receive queues to bind: a list (`0`, `0,2`) or every receive queue
/// of the interface (`all`, at most `MAX_QUEUES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XdpQueues {
    List(Vec<u32>),
    All,
}

impl Default for XdpQueues {
    fn default() -> Self {
        XdpQueues::List(vec![0])
    }
}

impl std::str::FromStr for XdpQueues {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(XdpQueues::All);
        }
        let mut q: Vec<u32> = s
            .split(',')
            .map(|x| {
                x.trim().parse().map_err(|_| {
                    format!("--xdp-queue takes queue numbers (0,1,…) or all, got {s:?}")
                })
            })
            .collect::<Result<_, _>>()?;
        q.sort_unstable();
        q.dedup();
        if q.is_empty() || q.len() > MAX_QUEUES {
            return Err(format!("--xdp-queue: 1 to {MAX_QUEUES} queues, got {s:?}"));
        }
        Ok(XdpQueues::List(q))
    }
}

impl XdpQueues {
    /// The queue numbers on an interface with `rx_queues` receive queues.
    pub fn resolve(&self, rx_queues: u32) -> Result<Vec<u32>, String> {
        let q = match self {
            XdpQueues::All => (0..rx_queues.min(MAX_QUEUES as u32)).collect(),
            XdpQueues::List(q) => q.clone(),
        };
        match q.iter().find(|&&n| n >= rx_queues) {
            Some(n) => Err(format!(
                "no receive queue {n} (the interface has {rx_queues})"
            )),
            None => Ok(q),
        }
    }
}

/// Receive queues of `iface` (/sys/class/net/IFACE/queues/rx-*).
#[cfg_attr(not(flexpass_xdp), allow(dead_code))]
fn rx_queue_count(iface: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// The interface and local IPv4 address AF_XDP would use; Err names why there is none.
pub fn choose_iface(cfg: &XdpConfig) -> Result<(String, Ipv4Addr), String> {
    use nix::net::if_::InterfaceFlags;
    let SocketAddr::V4(bind) = cfg.bind else {
        return Err("FlexPass runs over IPv4 only".into());
    };
    let addrs: Vec<(String, Ipv4Addr, InterfaceFlags)> = nix::ifaddrs::getifaddrs()
        .map_err(|e| format!("getifaddrs: {e}"))?
        .filter_map(|a| {
            let ip = a.address.as_ref()?.as_sockaddr_in()?.ip();
            Some((a.interface_name, ip, a.flags))
        })
        .collect();
    let loopback = |name: &str| {
        addrs
            .iter()
            .any(|(n, _, f)| n == name && f.contains(InterfaceFlags::IFF_LOOPBACK))
            || name == "lo"
    };
    let first_ip = |name: &str| addrs.iter().find(|(n, _, _)| n == name).map(|a| a.1);
    let pick = |name: String| -> Result<(String, Ipv4Addr), String> {
        if loopback(&name) {
            return Err(format!(
                "on {name}: the loopback interface has no XDP path for its own traffic"
            ));
        }
        let ip = if bind.ip().is_unspecified() {
            first_ip(&name).ok_or_else(|| format!("on {name}: no IPv4 address"))?
        } else {
            *bind.ip()
        };
        Ok((name, ip))
    };
    if let Some(name) = &cfg.iface {
        if !std::path::Path::new("/sys/class/net").join(name).exists() {
            return Err(format!("no interface {name}"));
        }
        return pick(name.clone());
    }
    if !bind.ip().is_unspecified() {
        let holder = addrs
            .iter()
            .find(|(_, ip, _)| ip == bind.ip())
            .map(|a| a.0.clone())
            .ok_or_else(|| format!("no interface holds {}", bind.ip()))?;
        return pick(holder);
    }
    if let Some(peer) = cfg.route_hint {
        let own: Vec<Ipv4Addr> = addrs.iter().map(|a| a.1).collect();
        if is_local(peer, &own) {
            return Err(format!(
                "peer {peer} is this host: its datagrams take the loopback interface, which has no XDP path"
            ));
        }
        if let Some((name, _)) = std::fs::read_to_string("/proc/net/route")
            .ok()
            .and_then(|routes| route_to(&routes, peer))
        {
            return pick(name);
        }
    }
    let mut up: Vec<&str> = addrs
        .iter()
        .filter(|(n, _, f)| f.contains(InterfaceFlags::IFF_UP) && !loopback(n))
        .map(|a| a.0.as_str())
        .collect();
    up.dedup();
    match up.as_slice() {
        [one] => pick(one.to_string()),
        [] => Err("no interface but loopback is up".into()),
        many => Err(format!(
            "bound to {} and {} interfaces are up ({}): give --xdp-iface",
            bind.ip(),
            many.len(),
            many.join(", ")
        )),
    }
}

/// `e` and its sources, "a: b: c".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// How the agent binary was built with respect to AF_XDP (clang found or not).
pub const BUILD: &str = env!("FLEXPASS_XSK_BUILD");

#[cfg(flexpass_xdp)]
pub use xsk::XskPath;

#[cfg(not(flexpass_xdp))]
pub struct XskPath(std::convert::Infallible);

#[cfg(not(flexpass_xdp))]
impl XskPath {
    pub fn open(_cfg: &XdpConfig) -> Result<Self, String> {
        Err(format!(
            "the agent was built without the XDP program ({BUILD})"
        ))
    }
    pub fn info(&self) -> &XdpInfo {
        match self.0 {}
    }
    pub fn counters(&mut self) -> XdpCounters {
        match self.0 {}
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self.0 {}
    }
    pub fn poll_fds(&self, _: &mut [RawFd; MAX_QUEUES + 1]) -> usize {
        match self.0 {}
    }
    pub fn readable(&mut self, _: &[bool]) {
        match self.0 {}
    }
    pub fn rx_ready(&self) -> bool {
        match self.0 {}
    }
    pub fn rx_backlog(&self) -> f64 {
        match self.0 {}
    }
    pub fn recv_batch(&mut self, _: usize) -> io::Result<usize> {
        match self.0 {}
    }
    pub fn recycle(&mut self) {
        match self.0 {}
    }
    pub fn datagrams(&self) -> usize {
        match self.0 {}
    }
    pub fn received(&self, _: usize) -> Received<'_> {
        match self.0 {}
    }
    pub fn queued(&self) -> usize {
        match self.0 {}
    }
    pub fn queue(&mut self, _: SocketAddr, _: u8, _: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        match self.0 {}
    }
    pub fn flush(&mut self) -> Flushed {
        match self.0 {}
    }
    pub fn kernel_mut(&mut self) -> &mut TosSocket {
        match self.0 {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_on_this_host_gets_no_xdp_interface() {
        // Bound to the wildcard address, talking to 127.0.0.1: the default route's interface
        // would be wrong (the datagrams take lo); AF_XDP must refuse and name why.
        let cfg = XdpConfig {
            bind: "0.0.0.0:0".parse().unwrap(),
            iface: None,
            queues: XdpQueues::default(),
            route_hint: Some("127.0.0.1".parse().unwrap()),
            mtu: 1500,
        };
        let e = choose_iface(&cfg).unwrap_err();
        assert!(e.contains("127.0.0.1 is this host"), "{e}");
    }

    #[test]
    fn loopback_is_refused_with_a_reason() {
        let cfg = XdpConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            iface: None,
            queues: XdpQueues::default(),
            route_hint: None,
            mtu: 1500,
        };
        let e = choose_iface(&cfg).unwrap_err();
        assert!(e.contains("loopback"), "{e}");
        let e = XskPath::open(&cfg).err().expect("no AF_XDP on loopback");
        assert!(
            e.contains("loopback") || e.contains("without the XDP program"),
            "{e}"
        );
    }

    #[test]
    fn xdp_queues_parse_and_resolve_against_the_interface() {
        let q = |s: &str| s.parse::<XdpQueues>();
        assert_eq!(q("0"), Ok(XdpQueues::List(vec![0])));
        assert_eq!(q("3,1,1"), Ok(XdpQueues::List(vec![1, 3])));
        assert_eq!(q("all"), Ok(XdpQueues::All));
        let too_many = (0..=MAX_QUEUES)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        for bad in ["", "x", "1,,2", "-1", too_many.as_str()] {
            assert!(q(bad).is_err(), "{bad:?}");
        }
        assert_eq!(XdpQueues::All.resolve(4), Ok(vec![0, 1, 2, 3]));
        assert_eq!(XdpQueues::All.resolve(16).unwrap().len(), 16);
        assert_eq!(XdpQueues::All.resolve(100).unwrap().len(), MAX_QUEUES);
        assert!(XdpQueues::List(vec![0, 4])
            .resolve(4)
            .unwrap_err()
            .contains("no receive queue 4"));
    }
}

//! The IP MTU an agent uses when told `--mtu auto` (docs/protocol.md §9, "Frame sizes and
//! MTU"): towards known peers, the smallest MTU of the routes to them (the kernel's path
//! MTU of a connected UDP socket, IP_MTU); without peers, the MTU of the interface holding
//! the bound address, or for a wildcard address the largest MTU of the host's interfaces
//! that are up (loopback excepted). Clamped to what FlexPass runs on (576 ..= 9000: the
//! loopback's 65536 gives 9000).

use nix::libc;
use nix::net::if_::InterfaceFlags;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use flexpass_wire::{DEFAULT_MTU, MAX_MTU, MIN_MTU};

/// The kernel's MTU of the route to `peer` (IP_MTU of a connected UDP socket).
pub fn route_mtu(peer: SocketAddr) -> io::Result<usize> {
    let u = UdpSocket::bind("0.0.0.0:0")?;
    u.connect(peer)?;
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            u.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as usize)
}

/// MTU of the interface holding `ip`, or for an unspecified address the largest MTU of the
/// interfaces that are up (loopback excepted); None if there is none.
pub fn interface_mtu(ip: IpAddr) -> Option<usize> {
    let read = |name: &str| -> Option<usize> {
        std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    let mut best: Option<usize> = None;
    for a in addrs {
        if ip.is_unspecified() {
            if a.flags.contains(InterfaceFlags::IFF_UP)
                && !a.flags.contains(InterfaceFlags::IFF_LOOPBACK)
            {
                if let Some(m) = read(&a.interface_name) {
                    best = Some(best.map_or(m, |b| b.max(m)));
                }
            }
            continue;
        }
        let holds = a
            .address
            .as_ref()
            .and_then(|s| s.as_sockaddr_in())
            .is_some_and(|s| IpAddr::V4(s.ip()) == ip);
        if holds {
            return read(&a.interface_name);
        }
    }
    best
}

/// `--mtu auto`: the MTU to use and how it was found (for the log line).
pub fn detect(bind: SocketAddr, peers: &[SocketAddr]) -> (usize, String) {
    let clamp = |m: usize| m.clamp(MIN_MTU, MAX_MTU);
    if !peers.is_empty() {
        let found: Vec<(SocketAddr, usize)> = peers
            .iter()
            .filter_map(|&p| route_mtu(p).ok().map(|m| (p, m)))
            .collect();
        if let Some(&(p, m)) = found.iter().min_by_key(|(_, m)| *m) {
            return (clamp(m), format!("route to {p}: MTU {m}"));
        }
    }
    match interface_mtu(bind.ip()) {
        Some(m) => (clamp(m), format!("interface of {}: MTU {m}", bind.ip())),
        None => (DEFAULT_MTU, "no interface found: default".into()),
    }
}

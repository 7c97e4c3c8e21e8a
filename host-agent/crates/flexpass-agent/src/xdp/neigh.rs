//! Where datagrams to a peer go: the kernel's routes (/proc/net/route) and neighbour table
//! (/proc/net/arp) parsed, and the cache of next-hop MAC addresses the AF_XDP datapath sends
//! to (peers it does not lead to go through the kernel socket).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// The next hop towards `dst` through `iface` from /proc/net/route's text: the gateway of
/// the longest matching prefix, or `dst` itself for an on-link route; None without a route
/// through `iface`.
pub fn next_hop(routes: &str, iface: &str, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    best_route(routes, Some(iface), dst).map(|(_, hop)| hop)
}

/// The route the kernel takes to `dst` from /proc/net/route's text (the main table: longest
/// prefix over all interfaces): its interface and next hop; None without a route. Addresses
/// of this host are not in that table: see `is_local`.
pub fn route_to(routes: &str, dst: Ipv4Addr) -> Option<(String, Ipv4Addr)> {
    best_route(routes, None, dst).map(|(iface, hop)| (iface.to_string(), hop))
}

/// True when datagrams to `dst` never leave this host (loopback, or an address of one of its
/// interfaces): the kernel carries them over `lo`, where no XDP program sees them.
pub fn is_local(dst: Ipv4Addr, own: &[Ipv4Addr]) -> bool {
    dst.is_loopback() || own.contains(&dst)
}

fn best_route<'a>(
    routes: &'a str,
    iface: Option<&str>,
    dst: Ipv4Addr,
) -> Option<(&'a str, Ipv4Addr)> {
    // Addresses are the kernel's __be32 printed as native hex.
    let ip = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| Ipv4Addr::from(u32::from_be(v)))
    };
    let mut best: Option<(u32, &str, Ipv4Addr)> = None;
    for line in routes.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || iface.is_some_and(|i| f[0] != i) {
            continue;
        }
        let (Some(net), Some(gw), Some(mask)) = (ip(f[1]), ip(f[2]), ip(f[7])) else {
            continue;
        };
        let (net, mask) = (u32::from(net), u32::from(mask));
        if u32::from(dst) & mask != net {
            continue;
        }
        let len = mask.count_ones();
        if best.is_none_or(|(l, _, _)| len > l) {
            let hop = if gw.is_unspecified() { dst } else { gw };
            best = Some((len, f[0], hop));
        }
    }
    best.map(|(_, name, hop)| (name, hop))
}

/// The MAC address of `ip` on `iface` from /proc/net/arp's text, if the entry is complete.
pub fn arp_entry(arp: &str, iface: &str, ip: Ipv4Addr) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x02;
    for line in arp.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[5] != iface || f[0].parse::<Ipv4Addr>().ok() != Some(ip) {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or(0);
        if flags & ATF_COM == 0 {
            return None;
        }
        return parse_mac(f[3]);
    }
    None
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() || mac == [0; 6] {
        return None;
    }
    Some(mac)
}

/// How datagrams to a peer leave: the next hop's MAC address, from the kernel's tables
/// (/proc/net/route, /proc/net/arp).
#[cfg_attr(not(flexpass_xdp), allow(dead_code))]
pub(super) struct Neighbours {
    /// The AF_XDP interface: only next hops through it get a MAC address.
    pub(super) iface: String,
    /// This host's IPv4 addresses (at open): peers among them are reached over `lo`.
    own: Vec<Ipv4Addr>,
    cache: HashMap<Ipv4Addr, (Hop, Instant)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Hop {
    /// Through the AF_XDP socket, to this Ethernet address.
    Mac([u8; 6]),
    /// Through this interface, but the next hop is not in the neighbour table yet.
    Unresolved,
    /// Not through this interface (another route, or this host): the kernel socket.
    Kernel,
}

/// A missing next hop is looked up again after this long (the kernel resolves it meanwhile,
/// prompted by the datagrams sent through the kernel socket). ARP on a LAN takes tens of
/// µs to a few ms; a lookup (two /proc reads) costs about 20 µs, paid only while unresolved.
const NEIGH_RETRY: Duration = Duration::from_micros(200);
/// A known next hop (or route elsewhere) is looked up again after this long (a changed
/// MAC or route is picked up).
const NEIGH_REFRESH: Duration = Duration::from_secs(10);

#[cfg_attr(not(flexpass_xdp), allow(dead_code))]
impl Neighbours {
    pub(super) fn new(iface: String, own: Vec<Ipv4Addr>) -> Self {
        Neighbours {
            iface,
            own,
            cache: HashMap::new(),
        }
    }

    /// The MAC address to send `dst`'s datagrams to; None: send them through the kernel.
    pub(super) fn mac(&mut self, dst: Ipv4Addr) -> Option<[u8; 6]> {
        let now = Instant::now();
        if let Some(&(hop, at)) = self.cache.get(&dst) {
            let ttl = if hop == Hop::Unresolved {
                NEIGH_RETRY
            } else {
                NEIGH_REFRESH
            };
            if now.duration_since(at) < ttl {
                return match hop {
                    Hop::Mac(m) => Some(m),
                    _ => None,
                };
            }
        }
        let mut hop = self.lookup(dst);
        if let (Hop::Unresolved, Some(&(old @ Hop::Mac(_), _))) = (hop, self.cache.get(&dst)) {
            hop = old;
        }
        self.cache.insert(dst, (hop, now));
        match hop {
            Hop::Mac(m) => Some(m),
            _ => None,
        }
    }

    fn lookup(&self, dst: Ipv4Addr) -> Hop {
        if is_local(dst, &self.own) {
            return Hop::Kernel;
        }
        let Ok(routes) = std::fs::read_to_string("/proc/net/route") else {
            return Hop::Unresolved;
        };
        match route_to(&routes, dst) {
            Some((iface, hop)) if iface == self.iface => std::fs::read_to_string("/proc/net/arp")
                .ok()
                .and_then(|arp| arp_entry(&arp, &self.iface, hop))
                .map_or(Hop::Unresolved, Hop::Mac),
            _ => Hop::Kernel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
veth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0
veth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[test]
    fn next_hop_is_the_longest_prefix_on_the_interface() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        // On-link 10.0.0.0/24: the destination itself.
        assert_eq!(
            next_hop(ROUTES, "veth0", ip("10.0.0.7")),
            Some(ip("10.0.0.7"))
        );
        // Elsewhere: the default route's gateway 10.0.0.1.
        assert_eq!(
            next_hop(ROUTES, "veth0", ip("192.0.2.9")),
            Some(ip("10.0.0.1"))
        );
        // 192.168.2.0/24 is on eth1, not veth0 (whose default route still matches).
        assert_eq!(
            next_hop(ROUTES, "eth1", ip("192.168.2.5")),
            Some(ip("192.168.2.5"))
        );
        assert_eq!(next_hop(ROUTES, "eth1", ip("10.0.0.7")), None);
        assert_eq!(next_hop(ROUTES, "veth9", ip("10.0.0.7")), None);
    }

    #[test]
    fn the_route_is_the_longest_prefix_over_all_interfaces() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let route = |d| route_to(ROUTES, ip(d)).map(|(i, h)| (i, h.to_string()));
        assert_eq!(route("10.0.0.7"), Some(("veth0".into(), "10.0.0.7".into())));
        // veth0's default route matches too, but eth1's /24 is longer.
        assert_eq!(
            route("192.168.2.5"),
            Some(("eth1".into(), "192.168.2.5".into()))
        );
        assert_eq!(
            route("192.0.2.9"),
            Some(("veth0".into(), "10.0.0.1".into()))
        );
        assert_eq!(
            route_to(&ROUTES.replace("00000000\t0100000A", "x"), ip("192.0.2.9")),
            None
        );
        // Loopback and the host's own addresses are not in the main table: never a route.
        assert!(is_local(ip("127.0.0.1"), &[]));
        assert!(is_local(ip("127.3.2.1"), &[]));
        assert!(is_local(ip("10.0.0.2"), &[ip("10.0.0.2")]));
        assert!(!is_local(ip("10.0.0.3"), &[ip("10.0.0.2")]));
    }

    #[test]
    fn arp_entries_count_only_when_complete() {
        let arp = "IP address       HW type     Flags       HW address            Mask     Device
10.0.0.2         0x1         0x2         aa:bb:cc:dd:ee:0f     *        veth0
10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        veth0
10.0.0.2         0x1         0x2         11:22:33:44:55:66     *        eth1
";
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            arp_entry(arp, "veth0", ip("10.0.0.2")),
            Some([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x0f])
        );
        assert_eq!(
            arp_entry(arp, "eth1", ip("10.0.0.2")),
            Some([0x11, 0x22, 0x33, 0x44, 0x55, 0x66])
        );
        assert_eq!(arp_entry(arp, "veth0", ip("10.0.0.3")), None, "incomplete");
        assert_eq!(arp_entry(arp, "veth0", ip("10.0.0.4")), None, "absent");
    }

    #[test]
    fn mac_addresses_parse_strictly() {
        assert_eq!(
            parse_mac("02:00:0a:0b:0c:0d\n"),
            Some([2, 0, 0x0a, 0x0b, 0x0c, 0x0d])
        );
        assert_eq!(parse_mac("02:00:0a:0b:0c"), None);
        assert_eq!(parse_mac("02:00:0a:0b:0c:0d:0e"), None);
        assert_eq!(parse_mac("00:00:00:00:00:00"), None);
        assert_eq!(parse_mac("zz:00:0a:0b:0c:0d"), None);
    }
}

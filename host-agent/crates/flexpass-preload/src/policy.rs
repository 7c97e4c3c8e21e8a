//! FLEXPASS_POLICY: which connections go over FlexPass (no allocation: fixed tables).
//!
//! `ports=5201,8000-8010;nets=10.0.0.0/8,192.168.1.0/24`
//! * `ports`: TCP ports — the destination port of a client's `connect`, the port of a
//!   server's `listen`. `*` (or no `ports` key) = every port.
//! * `nets`: IPv4 destinations of clients (CIDR; a bare address is /32). `*` (or no `nets`
//!   key) = every address. Loopback destinations never use FlexPass.
//! * `off`: nothing uses FlexPass (the library only passes calls through).
//! * `loopback`: loopback destinations too (single-host tests; normally they stay kernel
//!   TCP).

use std::net::{Ipv4Addr, SocketAddrV4};

const MAX_PORTS: usize = 64;
const MAX_NETS: usize = 32;

pub struct Policy {
    off: bool,
    loopback: bool,
    any_port: bool,
    ports: [(u16, u16); MAX_PORTS],
    nports: usize,
    any_net: bool,
    nets: [(u32, u32); MAX_NETS],
    nnets: usize,
}

fn num(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    u32::try_from(v).ok()
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

pub fn parse_ip(s: &[u8]) -> Option<Ipv4Addr> {
    let mut o = [0u8; 4];
    let mut n = 0;
    for part in s.split(|&c| c == b'.') {
        if n == 4 {
            return None;
        }
        o[n] = u8::try_from(num(part)?).ok()?;
        n += 1;
    }
    (n == 4).then(|| Ipv4Addr::from(o))
}

impl Policy {
    pub fn all() -> Policy {
        Policy {
            off: false,
            loopback: false,
            any_port: true,
            ports: [(0, 0); MAX_PORTS],
            nports: 0,
            any_net: true,
            nets: [(0, 0); MAX_NETS],
            nnets: 0,
        }
    }

    pub fn none() -> Policy {
        Policy {
            off: true,
            ..Policy::all()
        }
    }

    pub fn parse(s: &[u8]) -> Option<Policy> {
        let mut p = Policy::all();
        for clause in s.split(|&c| c == b';') {
            let clause = trim(clause);
            if clause.is_empty() {
                continue;
            }
            if clause == b"off" {
                p.off = true;
                continue;
            }
            if clause == b"loopback" {
                p.loopback = true;
                continue;
            }
            let eq = clause.iter().position(|&c| c == b'=')?;
            let (key, val) = (trim(&clause[..eq]), trim(&clause[eq + 1..]));
            match key {
                b"ports" => {
                    p.any_port = false;
                    for item in val
                        .split(|&c| c == b',')
                        .map(trim)
                        .filter(|i| !i.is_empty())
                    {
                        if item == b"*" {
                            p.any_port = true;
                            continue;
                        }
                        let (lo, hi) = match item.iter().position(|&c| c == b'-') {
                            Some(d) => (num(trim(&item[..d]))?, num(trim(&item[d + 1..]))?),
                            None => (num(item)?, num(item)?),
                        };
                        if lo == 0 || hi > 65535 || lo > hi || p.nports == MAX_PORTS {
                            return None;
                        }
                        p.ports[p.nports] = (lo as u16, hi as u16);
                        p.nports += 1;
                    }
                }
                b"nets" => {
                    p.any_net = false;
                    for item in val
                        .split(|&c| c == b',')
                        .map(trim)
                        .filter(|i| !i.is_empty())
                    {
                        if item == b"*" {
                            p.any_net = true;
                            continue;
                        }
                        let (ip, bits) = match item.iter().position(|&c| c == b'/') {
                            Some(d) => (parse_ip(&item[..d])?, num(&item[d + 1..])?),
                            None => (parse_ip(item)?, 32),
                        };
                        if bits > 32 || p.nnets == MAX_NETS {
                            return None;
                        }
                        let mask = if bits == 0 {
                            0
                        } else {
                            u32::MAX << (32 - bits)
                        };
                        p.nets[p.nnets] = (u32::from(ip) & mask, mask);
                        p.nnets += 1;
                    }
                }
                _ => return None,
            }
        }
        Some(p)
    }

    fn port(&self, port: u16) -> bool {
        self.any_port
            || self.ports[..self.nports]
                .iter()
                .any(|&(lo, hi)| lo <= port && port <= hi)
    }

    /// A client's connect to `dst` goes over FlexPass.
    pub fn client(&self, dst: SocketAddrV4) -> bool {
        let ip = *dst.ip();
        !self.off
            && (!ip.is_loopback() || self.loopback)
            && !ip.is_unspecified()
            && !ip.is_multicast()
            && !ip.is_broadcast()
            && self.port(dst.port())
            && (self.any_net
                || self.nets[..self.nnets]
                    .iter()
                    .any(|&(net, mask)| u32::from(ip) & mask == net))
    }

    /// A server's listening port is served over FlexPass.
    pub fn server(&self, port: u16) -> bool {
        !self.off && port != 0 && self.port(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn default_policy_takes_every_remote_ipv4_destination() {
        let p = Policy::all();
        assert!(p.client(a("10.0.0.2:5201")));
        assert!(!p.client(a("127.0.0.1:5201")));
        assert!(p.server(80));
    }

    #[test]
    fn ports_and_nets() {
        let p = Policy::parse(b"ports=5201,8000-8010; nets=10.0.0.0/8,192.168.1.7").unwrap();
        assert!(p.client(a("10.1.2.3:5201")));
        assert!(p.client(a("10.1.2.3:8005")));
        assert!(!p.client(a("10.1.2.3:8011")));
        assert!(!p.client(a("11.1.2.3:5201")));
        assert!(p.client(a("192.168.1.7:8000")));
        assert!(!p.client(a("192.168.1.8:8000")));
        assert!(p.server(5201) && p.server(8010) && !p.server(22));
        let p = Policy::parse(b"nets=10.0.0.0/8").unwrap();
        assert!(p.client(a("10.0.0.1:1")) && p.server(1234));
        let p = Policy::parse(b"ports=*;nets=*").unwrap();
        assert!(p.client(a("8.8.8.8:53")));
        assert!(!Policy::parse(b"off").unwrap().client(a("10.0.0.1:1")));
        assert!(Policy::parse(b"ports=80;loopback")
            .unwrap()
            .client(a("127.0.0.1:80")));
    }

    #[test]
    fn bad_policies_are_refused() {
        for bad in [
            &b"ports=0"[..],
            b"ports=70000",
            b"ports=9-3",
            b"nets=10.0.0/8",
            b"nets=1.2.3.4/33",
            b"bogus=1",
            b"ports",
        ] {
            assert!(
                Policy::parse(bad).is_none(),
                "{:?}",
                std::str::from_utf8(bad)
            );
        }
    }
}

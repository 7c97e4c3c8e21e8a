//! Ethernet + IPv4 + UDP framing for the AF_XDP datapath (docs/datapath.md, "Frames"). The
//! frames carry exactly what the kernel's UDP socket would send (docs/protocol.md §2): IPv4
//! without options, DF set, an identification counter (the kernel too numbers its DF
//! datagrams), TTL 64, the TOS byte of the message (DSCP + ECN), the UDP checksum
//! computed. No VLAN tag.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

/// Ethernet (14) + IPv4 (20) + UDP (8) header bytes in front of every FlexPass message.
pub const HEADERS: usize = 14 + 20 + 8;
const ETH_P_IP: u16 = 0x0800;
const IPPROTO_UDP: u8 = 17;
const TTL: u8 = 64;
const IP_DF: u16 = 0x4000;

/// The two ends of a frame: link-layer and UDP/IPv4 addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ends {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

/// Why a received frame is not a FlexPass datagram for us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    Short,
    NotIpv4,
    BadIpHeader,
    IpChecksum,
    Fragment,
    NotUdp,
    BadUdpLength,
    WrongPort,
}

/// A received FlexPass datagram: where its UDP payload is in the frame, who sent it, and the
/// IPv4 TOS byte (DSCP + ECN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub payload: Range<usize>,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub tos: u8,
}

/// One's-complement sum of `data` (as big-endian 16-bit words, an odd last byte padded with
/// zero) added to `acc`, not folded. 32-bit words into a 64-bit accumulator: no carry is lost
/// for any frame size.
fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_be_bytes(tail))
}

/// Fold a one's-complement accumulator to 16 bits and complement it.
fn finish(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data, 0))
}

/// UDP checksum over the IPv4 pseudo-header and `udp` (header with a zero checksum field +
/// payload); 0 is sent as 0xffff (RFC 768).
fn udp_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    let mut acc = sum(&src.octets(), 0);
    acc = sum(&dst.octets(), acc);
    acc += u64::from(IPPROTO_UDP) + udp.len() as u64;
    match finish(sum(udp, acc)) {
        0 => 0xffff,
        c => c,
    }
}

/// Write the headers of a frame carrying `payload_len` bytes of UDP payload into
/// `frame[..HEADERS]`; the payload must already be at `frame[HEADERS..HEADERS + payload_len]`
/// (the UDP checksum covers it). Returns the frame length.
///
/// Panics if `frame` is shorter than `HEADERS + payload_len` or the datagram exceeds 65 535
/// bytes (callers size frames by the MTU).
pub fn write_headers(
    frame: &mut [u8],
    ends: &Ends,
    tos: u8,
    ident: u16,
    payload_len: usize,
) -> usize {
    let ip_len = 20 + 8 + payload_len;
    assert!(ip_len <= 0xffff, "IPv4 datagram of {ip_len} bytes");
    let len = 14 + ip_len;
    let f = &mut frame[..len];
    f[0..6].copy_from_slice(&ends.dst_mac);
    f[6..12].copy_from_slice(&ends.src_mac);
    f[12..14].copy_from_slice(&ETH_P_IP.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&IP_DF.to_be_bytes());
    ip[8] = TTL;
    ip[9] = IPPROTO_UDP;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&ends.src.ip().octets());
    ip[16..20].copy_from_slice(&ends.dst.ip().octets());
    let c = checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut f[34..];
    udp[0..2].copy_from_slice(&ends.src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&ends.dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let c = udp_checksum(*ends.src.ip(), *ends.dst.ip(), udp);
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    len
}

/// Parse a received frame: an untagged Ethernet frame with an unfragmented IPv4 UDP datagram
/// to `port`, valid IPv4 header checksum, consistent lengths (Ethernet padding after the IP
/// datagram is ignored). The UDP checksum is not checked: on veth, datagrams sent by the
/// kernel carry only the pseudo-header part (checksum offload), which the kernel's own
/// receive path accepts as verified (docs/datapath.md, "Limits").
pub fn parse(frame: &[u8], port: u16) -> Result<Parsed, FrameError> {
    if frame.len() < HEADERS {
        return Err(FrameError::Short);
    }
    if u16::from_be_bytes([frame[12], frame[13]]) != ETH_P_IP {
        return Err(FrameError::NotIpv4);
    }
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip[0] >> 4 != 4 || ihl < 20 || total < ihl + 8 || total > ip.len() {
        return Err(FrameError::BadIpHeader);
    }
    if checksum(&ip[..ihl]) != 0 {
        return Err(FrameError::IpChecksum);
    }
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(FrameError::Fragment);
    }
    if ip[9] != IPPROTO_UDP {
        return Err(FrameError::NotUdp);
    }
    let udp = &ip[ihl..total];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 || udp_len > udp.len() {
        return Err(FrameError::BadUdpLength);
    }
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    if dport != port {
        return Err(FrameError::WrongPort);
    }
    let addr = |o: usize| Ipv4Addr::new(ip[o], ip[o + 1], ip[o + 2], ip[o + 3]);
    let start = 14 + ihl + 8;
    Ok(Parsed {
        payload: start..start + udp_len - 8,
        src: SocketAddrV4::new(addr(12), u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(addr(16), dport),
        tos: ip[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends() -> Ends {
        Ends {
            src_mac: [0x02, 0, 0, 0, 0, 0x0a],
            dst_mac: [0x02, 0, 0, 0, 0, 0x0b],
            src: "10.0.0.1:7890".parse().unwrap(),
            dst: "10.0.0.2:7890".parse().unwrap(),
        }
    }

    fn frame(payload: &[u8], tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; HEADERS + payload.len()];
        f[HEADERS..].copy_from_slice(payload);
        let n = write_headers(&mut f, &ends(), tos, 0x1234, payload.len());
        assert_eq!(n, f.len());
        f
    }

    /// Reference checksum: 16-bit words one by one (RFC 1071's loop).
    fn reference(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
            s += u32::from(w);
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn ipv4_header_checksum_matches_the_textbook_example() {
        // The classic example header (checksum field zeroed): 0xb861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn checksum_agrees_with_the_word_by_word_reference() {
        for len in [0usize, 1, 2, 3, 7, 8, 63, 1444, 1445, 8944] {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8 ^ 0xa5).collect();
            assert_eq!(checksum(&data), reference(&data), "len {len}");
        }
        // All-ones data: many carries.
        assert_eq!(checksum(&[0xff; 9001]), reference(&[0xff; 9001]));
    }

    #[test]
    fn built_frame_has_the_kernel_header_fields() {
        let f = frame(b"hello flexpass", 0xb9);
        assert_eq!(&f[0..6], &ends().dst_mac);
        assert_eq!(&f[6..12], &ends().src_mac);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!(ip[0], 0x45);
        assert_eq!(ip[1], 0xb9, "TOS");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 20 + 8 + 14);
        assert_eq!(&ip[4..8], &[0x12, 0x34, 0x40, 0], "id, DF, no offset");
        assert_eq!((ip[8], ip[9]), (64, 17));
        assert_eq!(checksum(ip), 0, "IPv4 header checksum verifies");
        assert_eq!(&ip[12..16], &[10, 0, 0, 1]);
        assert_eq!(&ip[16..20], &[10, 0, 0, 2]);
        let udp = &f[34..];
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 7890);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 7890);
        assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), 8 + 14);
        // The UDP checksum verifies over pseudo-header + datagram (sum of all = 0xffff).
        let mut pseudo = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17];
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(udp);
        assert_eq!(reference(&pseudo), 0);
        assert_ne!(u16::from_be_bytes([udp[6], udp[7]]), 0);
    }

    #[test]
    fn parse_returns_what_was_built() {
        for len in [0usize, 1, 17, 1444, 3000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let f = frame(&payload, 0x03);
            let p = parse(&f, 7890).unwrap();
            assert_eq!(&f[p.payload.clone()], &payload[..]);
            assert_eq!(p.src, ends().src);
            assert_eq!(p.dst, ends().dst);
            assert_eq!(p.tos, 0x03);
        }
    }

    #[test]
    fn parse_ignores_ethernet_padding_and_ip_options() {
        // A 1-byte payload padded to the 60-byte Ethernet minimum.
        let mut f = frame(b"x", 0);
        f.resize(60, 0);
        let p = parse(&f, 7890).unwrap();
        assert_eq!(&f[p.payload], b"x");
        // The same datagram with a 4-byte IPv4 option (IHL 6).
        let g = frame(b"opt", 0x2a);
        let mut h = g[..34].to_vec();
        h.extend_from_slice(&[1, 1, 1, 0]);
        h.extend_from_slice(&g[34..]);
        h[14] = 0x46;
        let total = u16::from_be_bytes([h[16], h[17]]) + 4;
        h[16..18].copy_from_slice(&total.to_be_bytes());
        h[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&h[14..38]);
        h[24..26].copy_from_slice(&c.to_be_bytes());
        let p = parse(&h, 7890).unwrap();
        assert_eq!(&h[p.payload], b"opt");
        assert_eq!(p.tos, 0x2a);
    }

    #[test]
    fn parse_rejects_what_is_not_ours() {
        let good = frame(b"payload", 0);
        assert_eq!(parse(&good[..41], 7890), Err(FrameError::Short));
        assert_eq!(parse(&good, 7891), Err(FrameError::WrongPort));
        let mut f = good.clone();
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(parse(&f, 7890), Err(FrameError::NotIpv4));
        let mut f = good.clone();
        f[14 + 10] ^= 1;
        assert_eq!(parse(&f, 7890), Err(FrameError::IpChecksum));
        let mut f = good.clone();
        f[14 + 2..14 + 4].copy_from_slice(&2000u16.to_be_bytes());
        assert_eq!(parse(&f, 7890), Err(FrameError::BadIpHeader));
        // A first fragment (MF) and a TCP segment, headers re-checksummed.
        for (field, value, want) in [
            (6usize, 0x20u8, FrameError::Fragment),
            (9, 6, FrameError::NotUdp),
        ] {
            let mut f = good.clone();
            f[14 + field] = value;
            f[24..26].copy_from_slice(&[0, 0]);
            let c = checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            assert_eq!(parse(&f, 7890), Err(want));
        }
        let mut f = good.clone();
        f[38..40].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(parse(&f, 7890), Err(FrameError::BadUdpLength));
    }
}

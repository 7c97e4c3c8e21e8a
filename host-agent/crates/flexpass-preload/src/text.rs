//! Stack-only text: a fixed buffer with core::fmt::Write, and the few parsers the hooks
//! need (reply fields, socket names). Nothing here allocates.

use crate::policy::parse_ip;
use std::net::SocketAddrV4;

pub struct Buf<const N: usize> {
    b: [u8; N],
    n: usize,
}

impl<const N: usize> Buf<N> {
    pub fn new() -> Self {
        Buf { b: [0; N], n: 0 }
    }
    pub fn clear(&mut self) {
        self.n = 0;
    }
    /// Append (silently truncated at capacity).
    pub fn push(&mut self, s: &[u8]) {
        let k = s.len().min(N - self.n);
        self.b[self.n..self.n + k].copy_from_slice(&s[..k]);
        self.n += k;
    }
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.b[..self.n]
    }
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("?")
    }
    /// One write(2) to stderr.
    pub fn stderr(&self) {
        unsafe {
            libc::write(2, self.b.as_ptr().cast(), self.n);
        }
    }
}

impl<const N: usize> core::fmt::Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).find(|&i| &hay[i..i + needle.len()] == needle)
}

/// The string value after `key` (e.g. `"peer":"`) up to the closing quote.
pub fn json_str<'a>(r: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = find(r, key)? + key.len();
    let end = r[at..].iter().position(|&c| c == b'"')?;
    Some(&r[at..at + end])
}

/// The unsigned number after `key` (e.g. `"flow_id":`).
pub fn json_u64(r: &[u8], key: &[u8]) -> Option<u64> {
    let at = find(r, key)? + key.len();
    let end = r[at..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(r.len() - at);
    std::str::from_utf8(&r[at..at + end]).ok()?.parse().ok()
}

/// The number after `key` (e.g. `"w_q":`), as JSON writes it.
pub fn json_f64(r: &[u8], key: &[u8]) -> Option<f64> {
    let at = find(r, key)? + key.len();
    let end = r[at..]
        .iter()
        .position(|c| !(c.is_ascii_digit() || b".eE+-".contains(c)))
        .unwrap_or(r.len() - at);
    std::str::from_utf8(&r[at..at + end]).ok()?.parse().ok()
}

/// `a.b.c.d:port`.
pub fn parse_v4(s: &[u8]) -> Option<SocketAddrV4> {
    let colon = s.iter().rposition(|&c| c == b':')?;
    let ip = parse_ip(&s[..colon])?;
    let port = std::str::from_utf8(&s[colon + 1..]).ok()?.parse().ok()?;
    Some(SocketAddrV4::new(ip, port))
}

/// The abstract name of a client socket after the prefix: `F/LOCAL/REMOTE/PID.SEQ` with
/// F = 4 (AF_INET) or 6 (AF_INET6, v4-mapped).
pub fn parse_client_name(name: &[u8]) -> Option<(bool, SocketAddrV4, SocketAddrV4)> {
    let mut it = name.split(|&c| c == b'/');
    let v6 = match it.next()? {
        b"4" => false,
        b"6" => true,
        _ => return None,
    };
    let local = parse_v4(it.next()?)?;
    let remote = parse_v4(it.next()?)?;
    Some((v6, local, remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names_round_trip() {
        let mut b: Buf<100> = Buf::new();
        let l: SocketAddrV4 = "10.0.0.1:43210".parse().unwrap();
        let r: SocketAddrV4 = "10.0.0.2:5201".parse().unwrap();
        let _ = core::fmt::Write::write_fmt(&mut b, format_args!("6/{l}/{r}/{}.{}", 1234, 7));
        assert_eq!(parse_client_name(b.as_bytes()), Some((true, l, r)));
        assert_eq!(parse_client_name(b"5/1.2.3.4:1/1.2.3.4:2/x"), None);
    }

    #[test]
    fn reply_fields() {
        let r = br#"{"ok":true,"peer":"10.0.0.1:40000","local":"10.0.0.2:80"}"#;
        assert!(contains(r, b"\"ok\":true"));
        assert_eq!(
            json_str(r, b"\"peer\":\"").and_then(parse_v4),
            "10.0.0.1:40000".parse().ok()
        );
        assert_eq!(
            json_str(r, b"\"local\":\"").and_then(parse_v4),
            "10.0.0.2:80".parse().ok()
        );
        assert_eq!(json_str(r, b"\"nope\":\""), None);
    }

    #[test]
    fn buffer_truncates() {
        let mut b: Buf<4> = Buf::new();
        b.push(b"abcdef");
        assert_eq!(b.as_bytes(), b"abcd");
    }
}

//! The agent API requests the library sends (docs/agent-api.md; their one definition is
//! flexpass_agent::api::Request, which the tests below parse them with), written into
//! stack buffers: nothing here allocates.

use crate::text::Buf;
use core::fmt::Write;
use std::net::SocketAddrV4;

/// `tcp_connect`: carry the connection from `src` to `dst` over `transport`.
pub fn tcp_connect<const N: usize>(
    out: &mut Buf<N>,
    dst: SocketAddrV4,
    src: SocketAddrV4,
    transport: &str,
) {
    let _ = writeln!(
        out,
        "{{\"op\":\"tcp_connect\",\"dst\":\"{dst}\",\"src\":\"{src}\",\"transport\":\"{transport}\"}}"
    );
}

/// `tcp_listen`: serve `port`, whose listener is bound to `addr` (an IP address).
pub fn tcp_listen<const N: usize>(out: &mut Buf<N>, port: u16, addr: &str) {
    let _ = writeln!(
        out,
        "{{\"op\":\"tcp_listen\",\"port\":{port},\"addr\":\"{addr}\"}}"
    );
}

/// `settings`: what this host's in-process flows take from the agent.
pub fn settings<const N: usize>(out: &mut Buf<N>) {
    let _ = writeln!(out, "{{\"op\":\"settings\"}}");
}

/// `tcp_record`: an in-process connection ended (docs/agent-api.md, "In-process connections
/// in `status`").
#[allow(clippy::too_many_arguments)]
pub fn tcp_record<const N: usize>(
    out: &mut Buf<N>,
    client: bool,
    remote: SocketAddrV4,
    local: SocketAddrV4,
    transport: &str,
    (bytes_sent, bytes_received): (u64, u64),
    duration_us: u64,
    outcome: &str,
) {
    let side = if client { "client" } else { "server" };
    let _ = writeln!(
        out,
        "{{\"op\":\"tcp_record\",\"side\":\"{side}\",\"remote\":\"{remote}\",\"local\":\"{local}\",\
         \"transport\":\"{transport}\",\"bytes_sent\":{bytes_sent},\"bytes_received\":{bytes_received},\
         \"duration_us\":{duration_us},\"outcome\":\"{outcome}\"}}"
    );
}

/// `tcp_peer`: the application-visible addresses of the agent's loopback connection from
/// `port`.
pub fn tcp_peer<const N: usize>(out: &mut Buf<N>, port: u16) {
    let _ = writeln!(out, "{{\"op\":\"tcp_peer\",\"port\":{port}}}");
}

/// `tcp_listen` with `inproc`: this API connection becomes the port's registration
/// (docs/agent-api.md, "In-process listeners").
pub fn tcp_listen_inproc<const N: usize>(out: &mut Buf<N>, port: u16, addr: &str) {
    let _ = writeln!(
        out,
        "{{\"op\":\"tcp_listen\",\"port\":{port},\"addr\":\"{addr}\",\"inproc\":true}}"
    );
}

/// An answer to a `tcp_hello` on a registration: `op` is `tcp_taken` (with `reply_flow_id`),
/// `tcp_refused` or `tcp_closed`.
pub fn hello_answer<const N: usize>(
    out: &mut Buf<N>,
    op: &str,
    peer: SocketAddrV4,
    flow_id: u32,
    reply_flow_id: Option<u32>,
) {
    let _ = write!(
        out,
        "{{\"op\":\"{op}\",\"peer\":\"{peer}\",\"flow_id\":{flow_id}"
    );
    if let Some(r) = reply_flow_id {
        let _ = write!(out, ",\"reply_flow_id\":{r}");
    }
    let _ = writeln!(out, "}}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{contains, json_str, parse_v4};
    use flexpass_agent::api::{PeerNames, Reply, Request, TcpVerdict};
    use flexpass_wire::TransportKind;

    /// Every request the library can send parses as the agent's API says, in the buffer
    /// sizes the hooks use.
    #[test]
    fn requests_parse_with_the_agents_api() {
        let dst: SocketAddrV4 = "255.255.255.255:65535".parse().unwrap();
        let src: SocketAddrV4 = "255.255.255.254:65534".parse().unwrap();
        for t in TransportKind::ALL {
            let mut b: Buf<200> = Buf::new();
            tcp_connect(&mut b, dst, src, t.name());
            assert_eq!(
                Request::parse(b.as_bytes()),
                Ok(Request::TcpConnect {
                    dst,
                    src: src.into(),
                    transport: t
                }),
                "{}",
                b.as_str()
            );
        }
        for addr in [
            "0.0.0.0",
            "10.0.0.2",
            "::",
            "::ffff:10.0.0.2",
            "1111:2222:3333:4444:5555:6666:7777:8888",
        ] {
            let mut b: Buf<160> = Buf::new();
            tcp_listen(&mut b, 65535, addr);
            assert_eq!(
                Request::parse(b.as_bytes()),
                Ok(Request::TcpListen {
                    port: 65535,
                    addr: addr.parse().unwrap(),
                    inproc: false
                }),
                "{}",
                b.as_str()
            );
        }
        let mut b: Buf<160> = Buf::new();
        tcp_listen_inproc(&mut b, 5201, "0.0.0.0");
        assert_eq!(
            Request::parse(b.as_bytes()),
            Ok(Request::TcpListen {
                port: 5201,
                addr: "0.0.0.0".parse().unwrap(),
                inproc: true
            })
        );
        let peer: SocketAddrV4 = "255.255.255.255:65535".parse().unwrap();
        for (op, reply) in [
            ("tcp_taken", Some(u32::MAX)),
            ("tcp_refused", None),
            ("tcp_closed", None),
        ] {
            let mut b: Buf<160> = Buf::new();
            hello_answer(&mut b, op, peer, u32::MAX, reply);
            let r = Request::parse(b.as_bytes());
            assert!(r.is_ok(), "{}: {r:?}", b.as_str());
        }
        let mut b: Buf<96> = Buf::new();
        tcp_peer(&mut b, 40312);
        assert_eq!(
            Request::parse(b.as_bytes()),
            Ok(Request::TcpPeer { port: 40312 })
        );
        let mut b: Buf<32> = Buf::new();
        settings(&mut b);
        assert_eq!(Request::parse(b.as_bytes()), Ok(Request::Settings));
        // The longest record the timer thread writes fits its 400-byte buffer.
        let mut b: Buf<400> = Buf::new();
        tcp_record(
            &mut b,
            false,
            dst,
            src,
            "expresspass",
            (u64::MAX, u64::MAX),
            u64::MAX,
            "closed",
        );
        assert_eq!(
            Request::parse(b.as_bytes()),
            Ok(Request::TcpRecord(flexpass_agent::api::InprocRecord {
                side: flexpass_agent::api::Side::Server,
                remote: dst.into(),
                local: src.into(),
                transport: TransportKind::ExpressPass,
                bytes_sent: u64::MAX,
                bytes_received: u64::MAX,
                duration_us: u64::MAX,
                outcome: "closed".into(),
            })),
            "{}",
            b.as_str()
        );
    }

    /// The settings reply's numbers, read as the library reads them (whole numbers too:
    /// JSON may write 10.0 as 10 elsewhere).
    #[test]
    fn the_settings_reply_reads_back() {
        use crate::text::json_f64;
        let r = Reply::Settings(flexpass_agent::api::Settings {
            link_gbps: 25.0,
            rtt_us: 12.5,
            w_q: 0.3,
            credit_batch: 8,
            mtu: 9000,
            t_wait_us: 4000.0,
            flashpass_unscheduled: false,
        })
        .to_line();
        assert_eq!(json_f64(&r, b"\"link_gbps\":"), Some(25.0));
        assert_eq!(json_f64(&r, b"\"rtt_us\":"), Some(12.5));
        assert_eq!(json_f64(&r, b"\"w_q\":"), Some(0.3));
        assert_eq!(json_f64(&r, b"\"credit_batch\":"), Some(8.0));
        assert_eq!(json_f64(&r, b"\"t_wait_us\":"), Some(4000.0));
        assert!(contains(&r, b"\"flashpass_unscheduled\":false"));
        assert_eq!(json_f64(b"{\"w_q\":1e-1}", b"\"w_q\":"), Some(0.1));
        assert_eq!(json_f64(b"{\"w_q\":\"x\"}", b"\"w_q\":"), None);
        assert_eq!(json_f64(b"{}", b"\"w_q\":"), None);
    }

    /// The agent's replies carry the fields the hooks look for.
    #[test]
    fn replies_have_the_fields_the_library_reads() {
        let r = Reply::TcpVerdict(TcpVerdict::FlexPass {
            conn_id: 1,
            transport: TransportKind::FlexPass,
        })
        .to_line();
        assert!(contains(&r, b"\"mode\":\"flexpass\""));
        let r = Reply::TcpVerdict(TcpVerdict::Direct {
            reason: "peer does not speak FlexPass (cached)".into(),
            peer_has_no_agent: true,
        })
        .to_line();
        assert!(contains(&r, b"\"mode\":\"direct\""));
        assert_eq!(
            json_str(&r, b"\"reason\":\""),
            Some(&b"peer does not speak FlexPass (cached)"[..])
        );
        let (peer, local) = ("10.0.0.1:43210", "10.0.0.2:5201");
        let r = Reply::PeerNames(PeerNames {
            peer: peer.parse().unwrap(),
            local: local.parse().unwrap(),
        })
        .to_line();
        assert!(contains(&r, b"\"ok\":true"));
        assert_eq!(
            json_str(&r, b"\"peer\":\"").and_then(parse_v4),
            peer.parse().ok()
        );
        assert_eq!(
            json_str(&r, b"\"local\":\"").and_then(parse_v4),
            local.parse().ok()
        );
    }
}

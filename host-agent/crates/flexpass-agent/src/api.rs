//! The agent's local API (docs/agent-api.md): every request and reply, and the one parser of
//! request lines. The daemon serves it; libflexpass.so speaks it (its requests are tested
//! against `Request::parse`).
//!
//! A request is one JSON object on one line with an `"op"`; unknown fields are ignored and
//! `null` counts as absent. A field of the wrong type or out of range is an error naming the
//! op and the field. A reply is one JSON line with `"ok"`: true with the fields below, false
//! with `"error"` (keys in sorted order).

pub use crate::edge::{CreditLimitStatus, EdgeCounters, NicEdge};
use crate::stats::EndpointStats;
use crate::xdp::XdpInfo;
use flexpass_core::SenderStats;
use flexpass_wire::TransportKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

/// Longest request line (bytes, without its `\n`).
pub const MAX_REQUEST_LINE: usize = 4096;

/// One request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Send one flow: the client's bytes until it shuts its write side down.
    /// Replies: `Connected`, then `FlowSent` (or an error) once all is acknowledged.
    Connect {
        peer: SocketAddr,
        /// Default flexpass.
        transport: TransportKind,
        /// Flow size hint in bytes (0: unknown, the default).
        size: u64,
    },
    /// Receive the next flow that arrives. Reply: `Accepted`, then the flow's bytes.
    Accept,
    /// Carry an application's TCP connection to `dst` over FlexPass (libflexpass.so).
    /// Reply: `TcpVerdict`; on FlexPass the API connection then is the connection.
    TcpConnect {
        dst: SocketAddrV4,
        /// The address the application sees locally (default 0.0.0.0:0).
        src: SocketAddr,
        /// Default flexpass.
        transport: TransportKind,
    },
    /// Serve local TCP port `port` (1..65535) to FlexPass peers; its listener is bound to
    /// `addr` (default 0.0.0.0). Reply: `Listening`.
    TcpListen { port: u16, addr: IpAddr },
    /// The application-visible addresses of the agent's loopback connection from `port`.
    /// Reply: `PeerNames`.
    TcpPeer { port: u16 },
    /// Counters, tables and connection records. Reply: `Status`.
    Status,
}

/// The ops, as they appear in `"op"`.
pub const OPS: [&str; 6] = [
    "connect",
    "accept",
    "tcp_connect",
    "tcp_listen",
    "tcp_peer",
    "status",
];

/// Why a request line was refused (its message is the reply's `"error"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError(pub String);

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RequestError {}

/// The fields of one request object, read for `op`.
struct Fields<'a> {
    op: &'static str,
    obj: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    fn bad(&self, name: &str, expected: &str, got: Option<&Value>) -> RequestError {
        RequestError(match got {
            Some(v) => format!("{} needs \"{name}\": {expected}, got {v}", self.op),
            None => format!("{} needs \"{name}\": {expected}", self.op),
        })
    }

    /// A string field parsed with `parse`; None when absent.
    fn parsed<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, RequestError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        v.as_str()
            .and_then(parse)
            .map(Some)
            .ok_or_else(|| self.bad(name, expected, Some(v)))
    }

    fn required<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, RequestError> {
        self.parsed(name, expected, parse)?
            .ok_or_else(|| self.bad(name, expected, None))
    }

    fn transport(&self) -> Result<TransportKind, RequestError> {
        let names = TransportKind::ALL.map(TransportKind::name).join(" | ");
        Ok(self
            .parsed("transport", &names, TransportKind::from_name)?
            .unwrap_or(TransportKind::FlexPass))
    }

    /// An integer field in `lo..=hi`; None when absent.
    fn integer(&self, name: &str, lo: u64, hi: u64) -> Result<Option<u64>, RequestError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        v.as_u64()
            .filter(|n| (lo..=hi).contains(n))
            .map(Some)
            .ok_or_else(|| self.bad(name, &format!("an integer {lo}..{hi}"), Some(v)))
    }

    fn port(&self, lo: u16) -> Result<u16, RequestError> {
        let port = self.integer("port", lo.into(), u16::MAX.into())?;
        port.map(|p| p as u16)
            .ok_or_else(|| self.bad("port", &format!("an integer {lo}..{}", u16::MAX), None))
    }
}

fn unknown_op(what: String) -> RequestError {
    RequestError(format!(
        "unknown op{what}: \"op\" is one of {}",
        OPS.join(", ")
    ))
}

impl Request {
    /// Parse one request line (without or with its `\n`).
    pub fn parse(line: &[u8]) -> Result<Request, RequestError> {
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| RequestError(format!("request is not JSON: {e}")))?;
        let Value::Object(obj) = &v else {
            return Err(unknown_op(format!(
                " (a request is a JSON object, got {v})"
            )));
        };
        let op = match obj.get("op") {
            Some(Value::String(s)) => OPS.into_iter().find(|o| o == s),
            _ => None,
        };
        let Some(op) = op else {
            return Err(unknown_op(match obj.get("op") {
                Some(o) => format!(" {o}"),
                None => " (no \"op\")".into(),
            }));
        };
        let f = Fields { op, obj };
        Ok(match op {
            "connect" => Request::Connect {
                peer: f.required("peer", "\"IP:PORT\"", |s| s.parse().ok())?,
                transport: f.transport()?,
                size: f.integer("size", 0, u64::MAX)?.unwrap_or(0),
            },
            "accept" => Request::Accept,
            "tcp_connect" => Request::TcpConnect {
                dst: f.required("dst", "\"IPv4:PORT\"", |s| s.parse().ok())?,
                src: f
                    .parsed("src", "\"IP:PORT\"", |s| s.parse().ok())?
                    .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)),
                transport: f.transport()?,
            },
            "tcp_listen" => Request::TcpListen {
                port: f.port(1)?,
                addr: f
                    .parsed("addr", "an IP address", |s| s.parse().ok())?
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            },
            "tcp_peer" => Request::TcpPeer { port: f.port(0)? },
            "status" => Request::Status,
            _ => unreachable!("every op in OPS is parsed"),
        })
    }

    /// The request's `"op"`.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Connect { .. } => "connect",
            Request::Accept => "accept",
            Request::TcpConnect { .. } => "tcp_connect",
            Request::TcpListen { .. } => "tcp_listen",
            Request::TcpPeer { .. } => "tcp_peer",
            Request::Status => "status",
        }
    }

    /// The request as a line (every field written out), `\n` included.
    pub fn to_line(&self) -> String {
        let mut v = match self {
            Request::Connect {
                peer,
                transport,
                size,
            } => serde_json::json!({"peer": peer, "transport": transport, "size": size}),
            Request::TcpConnect {
                dst,
                src,
                transport,
            } => serde_json::json!({"dst": dst, "src": src, "transport": transport}),
            Request::TcpListen { port, addr } => serde_json::json!({"port": port, "addr": addr}),
            Request::TcpPeer { port } => serde_json::json!({ "port": port }),
            Request::Accept | Request::Status => serde_json::json!({}),
        };
        v["op"] = self.op().into();
        format!("{v}\n")
    }
}

/// `connect`: the flow is open (the client now writes its bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Connected {
    pub flow_id: u32,
}

/// `connect`: everything was acknowledged (`"event": "flow_sent"`); the agent then closes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowSent {
    pub flow_id: u32,
    pub bytes: u64,
    pub fct_us: f64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub credits_received: u64,
    pub credits_wasted: u64,
}

/// `accept`: a flow arrived; its bytes follow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub flow_id: u32,
    pub peer: SocketAddr,
    pub transport: Option<TransportKind>,
}

/// `tcp_connect`: over FlexPass (the API connection is the connection from now on), or
/// "direct": use kernel TCP to `dst` (the agent then closes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum TcpVerdict {
    FlexPass {
        conn_id: u32,
        transport: TransportKind,
    },
    Direct {
        reason: String,
        /// The peer does not speak FlexPass (else: it does not serve the port).
        peer_has_no_agent: bool,
    },
}

/// `tcp_listen`: the port is served.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Listening {
    pub port: u16,
}

/// `tcp_peer`: the remote application's address and the local one it connected to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerNames {
    pub peer: SocketAddr,
    pub local: SocketAddr,
}

/// `status`: counters, tables and connection records. This struct and its parts are the
/// definition of docs/agent-api.md, "Counters and records" (a test checks that page's
/// example has exactly these keys). Only serialized: the agent writes it, clients read JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub flows: FlowCounts,
    pub tcp: TcpStatus,
    /// The endpoint's counters (docs/agent-api.md lists the half-open ones).
    pub endpoint: EndpointStats,
    pub datapath: DatapathStatus,
    /// Who limits the host's credits: the agent or the NIC edge (crate::edge).
    pub credit_limit: CreditLimitStatus,
    pub api: ApiStatus,
    pub memory: Memory,
    pub tables: Tables,
}

/// `status` → `flows`: the endpoint's flows now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounts {
    pub senders: usize,
    pub receivers: usize,
}

/// `status` → `tcp`: the TCP connections of unmodified applications (`tcp_connect`,
/// `tcp_listen`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpStatus {
    /// Connections carrying bytes now (set up, and not a "direct" verdict being written).
    pub open: usize,
    pub opened_flexpass: u64,
    pub accepted_flexpass: u64,
    pub direct: u64,
    pub refused: u64,
    pub aborted: u64,
    /// Ports served over FlexPass (`tcp_listen`), ascending.
    pub listening: Vec<u16>,
    /// Peers taken not to speak FlexPass (connections to them use kernel TCP for a while).
    pub no_agent_peers: Vec<IpAddr>,
    /// The `open` connections' records (`outcome` "open").
    pub conns: Vec<ConnRecord>,
    /// The last closed connections' records, oldest first.
    pub closed: Vec<ConnRecord>,
}

/// Which end of a TCP connection this host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// This host opened the connection (the application called connect).
    Client,
    /// This host answers it (the application listens).
    Server,
}

/// One TCP connection's record (`status` → `tcp.conns`, `tcp.closed`; logged at debug level
/// when the connection ends): `{"event": "tcp_conn", …}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename = "tcp_conn")]
pub struct ConnRecord {
    pub side: Side,
    pub conn_id: u32,
    /// The remote application's address (its host, its port as it sees it).
    pub remote: SocketAddr,
    /// This side's application-visible address.
    pub local: SocketAddr,
    pub transport: TransportKind,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub duration_s: f64,
    /// "open", "closed" or "aborted: " and why.
    pub outcome: String,
    /// The outgoing flow's statistics, while that flow exists (else the key is absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<SenderStats>,
}

/// `status` → `datapath` (docs/datapath.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DatapathStatus {
    /// "udp" or "xdp".
    pub kind: &'static str,
    /// The AF_XDP set-up; null on UDP.
    pub xdp: Option<XdpInfo>,
}

/// `status` → `api`: this API's clients and what it refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApiStatus {
    /// API connections open now.
    pub clients: usize,
    /// Connections refused by the peer-credential check (docs/agent-api.md, "Access").
    pub refused: u64,
    /// Requests answered with an error.
    pub bad_requests: u64,
    /// accept(2) failures of the API socket.
    pub accept_errors: u64,
}

/// `status` → `memory`: the agent's memory as the kernel counts it (/proc/self/status), in
/// KiB; null where the kernel did not say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// VmRSS: resident now.
    pub rss_kb: Option<u64>,
    /// VmHWM: resident at most so far.
    pub rss_peak_kb: Option<u64>,
    /// VmSize.
    pub virtual_kb: Option<u64>,
}

/// `status` → `tables`: the size of every table that grows with traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tables {
    pub endpoint: EndpointTables,
    /// The daemon's: accepted flows no client has claimed yet, TCP connections and their
    /// kept records, flow owners, `accept` clients waiting, request lines awaited, the
    /// answering side's remembered addresses (`tcp_peer`), peers without an agent.
    pub unclaimed: usize,
    pub conns: usize,
    pub records: usize,
    pub owners: usize,
    pub accepting: usize,
    pub handshakes: usize,
    pub peers: usize,
    pub no_agent: usize,
}

/// `status` → `tables.endpoint` (`Endpoint::table_sizes`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EndpointTables {
    pub senders: usize,
    pub receivers: usize,
    /// Half-open flows and the entries of their age order.
    pub half_open: usize,
    pub half_open_order: usize,
    /// Accepted flows not handed out yet.
    pub accepted: usize,
    /// Finished receivers lingering to re-acknowledge.
    pub retired: usize,
    /// Timer heap entries, and flows to look at next turn.
    pub timers: usize,
    pub dirty: usize,
    /// Dropped flows remembered (RESET answers).
    pub forgotten: usize,
    /// Connection extensions of accepted flows' HELLOs.
    pub hello_conn: usize,
    /// Senders waiting for their HELLO_ACK, and senders whose peer moved to the port their
    /// HELLO_ACK came from (docs/protocol.md §11, "The peer of a flow").
    pub awaiting_hello_ack: usize,
    pub moved: usize,
    /// Flows handed to the process serving their port (docs/datapath.md, "Hand-over").
    pub handed: usize,
}

/// One reply line.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `{"ok": false, "error": …}`: the agent closes the connection after it.
    Error(String),
    Connected(Connected),
    FlowSent(FlowSent),
    Accepted(Accepted),
    TcpVerdict(TcpVerdict),
    Listening(Listening),
    PeerNames(PeerNames),
    /// Boxed: by far the largest reply.
    Status(Box<Status>),
}

impl Reply {
    pub fn error(e: impl fmt::Display) -> Reply {
        Reply::Error(e.to_string())
    }

    /// The reply as a JSON line, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let body = match self {
            Reply::Error(e) => serde_json::json!({ "error": e }),
            Reply::Connected(r) => serde_json::to_value(r).expect("serializable"),
            Reply::FlowSent(r) => {
                let mut v = serde_json::to_value(r).expect("serializable");
                v["event"] = "flow_sent".into();
                v
            }
            Reply::Accepted(r) => serde_json::to_value(r).expect("serializable"),
            Reply::TcpVerdict(r) => serde_json::to_value(r).expect("serializable"),
            Reply::Listening(r) => serde_json::to_value(r).expect("serializable"),
            Reply::PeerNames(r) => serde_json::to_value(r).expect("serializable"),
            Reply::Status(r) => serde_json::to_value(r).expect("serializable"),
        };
        let mut v = body;
        v["ok"] = (!matches!(self, Reply::Error(_))).into();
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Request, String> {
        Request::parse(s.as_bytes()).map_err(|e| e.0)
    }

    /// The requests of docs/agent-api.md, with their defaults.
    #[test]
    fn the_documented_requests_parse() {
        let flexpass = TransportKind::FlexPass;
        assert_eq!(
            parse(
                r#"{"op": "connect", "peer": "10.0.0.2:7890", "transport": "flexpass", "size": 123456}"#
            ),
            Ok(Request::Connect {
                peer: "10.0.0.2:7890".parse().unwrap(),
                transport: flexpass,
                size: 123456
            })
        );
        assert_eq!(
            parse(r#"{"op":"connect","peer":"10.0.0.2:7890","transport":"ppt"}"#),
            Ok(Request::Connect {
                peer: "10.0.0.2:7890".parse().unwrap(),
                transport: TransportKind::Ppt,
                size: 0
            })
        );
        assert_eq!(parse(r#"{"op": "accept"}"#), Ok(Request::Accept));
        assert_eq!(
            parse(
                r#"{"op": "tcp_connect", "dst": "10.0.0.2:5201", "src": "10.0.0.1:43210", "transport": "flexpass"}"#
            ),
            Ok(Request::TcpConnect {
                dst: "10.0.0.2:5201".parse().unwrap(),
                src: "10.0.0.1:43210".parse().unwrap(),
                transport: flexpass
            })
        );
        assert_eq!(
            parse(r#"{"op":"tcp_connect","dst":"127.0.0.1:9","src":null}"#),
            Ok(Request::TcpConnect {
                dst: "127.0.0.1:9".parse().unwrap(),
                src: "0.0.0.0:0".parse().unwrap(),
                transport: flexpass
            })
        );
        assert_eq!(
            parse(r#"{"op": "tcp_listen", "port": 5201, "addr": "0.0.0.0"}"#),
            Ok(Request::TcpListen {
                port: 5201,
                addr: "0.0.0.0".parse().unwrap()
            })
        );
        assert_eq!(
            parse(r#"{"op":"tcp_listen","port":80,"addr":"::","extra":[1]}"#),
            Ok(Request::TcpListen {
                port: 80,
                addr: "::".parse().unwrap()
            })
        );
        assert_eq!(
            parse(r#"{"op": "tcp_peer", "port": 40312}"#),
            Ok(Request::TcpPeer { port: 40312 })
        );
        assert_eq!(parse("{\"op\": \"status\"}\n"), Ok(Request::Status));
    }

    /// docs/agent-api.md and this module agree: every request shown there parses, and its
    /// table lists every op.
    #[test]
    fn the_requests_in_docs_agent_api_parse() {
        let doc = agent_api_md();
        let mut ops = vec![];
        for l in doc.lines() {
            if let Some(req) = l.strip_prefix("→ {") {
                let r = Request::parse(format!("{{{req}").as_bytes());
                ops.push(r.unwrap_or_else(|e| panic!("{l}: {e}")).op());
            }
        }
        assert_eq!(ops, OPS, "one example per op, in this order");
        for op in OPS {
            assert!(
                doc.contains(&format!("| `{op}` |")),
                "{op} not in the table"
            );
        }
    }

    fn agent_api_md() -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/agent-api.md");
        std::fs::read_to_string(p).unwrap()
    }

    /// The JSON in docs/agent-api.md from `marker` (a reply's `← ` left out) to the end of
    /// its fenced block: a placeholder `…text…` (an object documented elsewhere) is dropped,
    /// leaving `{ }`.
    fn doc_json(doc: &str, marker: &str) -> Value {
        let at = doc
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} not in the doc"));
        let block = doc[at..].trim_start_matches("← ");
        let block = &block[..block.find("```").expect("closing fence")];
        let mut text = String::new();
        let mut in_placeholder = false;
        for c in block.chars() {
            if c == '…' {
                in_placeholder = !in_placeholder;
            } else if !in_placeholder {
                text.push(c);
            }
        }
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{marker}…: {e}\n{text}"))
    }

    /// `doc` and `got` have the same keys at every level and the same kinds of values; an
    /// empty object in `doc` is a placeholder, each element of an array is compared with
    /// the doc's first one.
    fn same_shape(path: &str, doc: &Value, got: &Value, diffs: &mut Vec<String>) {
        match (doc, got) {
            (Value::Object(d), Value::Object(g)) => {
                if d.is_empty() {
                    return;
                }
                let mut dk: Vec<_> = d.keys().collect();
                let mut gk: Vec<_> = g.keys().collect();
                dk.sort();
                gk.sort();
                if dk != gk {
                    diffs.push(format!("{path}: doc has keys {dk:?}, the type {gk:?}"));
                }
                for (k, dv) in d {
                    if let Some(gv) = g.get(k) {
                        same_shape(&format!("{path}.{k}"), dv, gv, diffs);
                    }
                }
            }
            (Value::Array(d), Value::Array(g)) => {
                assert!(!g.is_empty(), "{path}: fill the test's arrays");
                for gv in g {
                    same_shape(&format!("{path}[]"), &d[0], gv, diffs);
                }
            }
            (Value::Number(_), Value::Number(_))
            | (Value::String(_), Value::String(_))
            | (Value::Bool(_), Value::Bool(_))
            | (Value::Null, Value::Null) => {}
            _ => diffs.push(format!("{path}: doc shows {doc}, the type writes {got}")),
        }
    }

    /// The keys of a set written `{"a", "b": x | y, …}` in the doc's prose.
    fn key_set(set: &str) -> Vec<String> {
        let inner = set.trim().trim_start_matches('{').trim_end_matches('}');
        let mut keys: Vec<String> = inner
            .split(',')
            .map(|part| part.split('"').nth(1).expect("a quoted key").to_string())
            .collect();
        keys.sort();
        keys
    }

    fn sample_record(outcome: &str) -> ConnRecord {
        ConnRecord {
            side: Side::Server,
            conn_id: 7,
            remote: "10.0.0.1:43210".parse().unwrap(),
            local: "10.0.0.2:5201".parse().unwrap(),
            transport: TransportKind::PFabric,
            bytes_sent: 512,
            bytes_received: 1 << 20,
            duration_s: 0.25,
            outcome: outcome.into(),
            sender: Some(SenderStats::default()),
        }
    }

    /// A status with every array filled and every optional value present but `xdp` (null
    /// on UDP, as the doc's example shows).
    fn sample_status() -> Status {
        Status {
            flows: FlowCounts {
                senders: 1,
                receivers: 2,
            },
            tcp: TcpStatus {
                open: 1,
                listening: vec![5201],
                no_agent_peers: vec!["10.0.0.3".parse().unwrap()],
                conns: vec![sample_record("open")],
                closed: vec![sample_record("aborted: reset by the peer")],
                ..TcpStatus::default()
            },
            endpoint: EndpointStats::default(),
            datapath: DatapathStatus {
                kind: "udp",
                xdp: None,
            },
            credit_limit: CreditLimitStatus {
                policed_by: "edge",
                nic_edge: NicEdge::Ebpf,
                agent_bytes_per_s: None,
                edge: Some(EdgeCounters {
                    maps: Some("/sys/fs/bpf/flexpass-edge/eth0/tc/globals".into()),
                    dev: None,
                    swx_cli: None,
                    credit_rate_bytes_per_s: Some(23_119),
                    credit_burst_bytes: Some(120),
                    credits_passed: 38_511,
                    credits_dropped: 4_107,
                    pna: None,
                }),
                edge_error: None,
            },
            api: ApiStatus::default(),
            memory: Memory {
                rss_kb: Some(10664),
                rss_peak_kb: Some(10828),
                virtual_kb: Some(17148),
            },
            tables: Tables::default(),
        }
    }

    /// docs/agent-api.md and `Status` agree: the status example, the connection record, the
    /// table's reply keys and the AF_XDP set-up keys are exactly those the types write.
    #[test]
    fn the_status_in_docs_agent_api_is_the_type() {
        let doc = agent_api_md();
        let line = String::from_utf8(Reply::Status(Box::new(sample_status())).to_line()).unwrap();
        let got: Value = serde_json::from_str(&line).unwrap();
        let mut diffs = vec![];
        let doc_status = doc_json(&doc, "← {\"ok\": true, \"flows\"");
        same_shape("status", &doc_status, &got, &mut diffs);
        let record = serde_json::to_value(sample_record("closed")).unwrap();
        let doc_record = doc_json(&doc, "{\"event\": \"tcp_conn\"");
        same_shape("record", &doc_record, &record, &mut diffs);
        assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
        // The record's typed values are those the daemon wrote as JSON before.
        assert_eq!(record["event"], "tcp_conn");
        assert_eq!(record["side"], "server");
        assert_eq!(record["transport"], "pfabric");
        assert_eq!(record["remote"], "10.0.0.1:43210");
        assert!(record["sender"].is_object());
        let mut no_sender = sample_record("open");
        no_sender.sender = None;
        let v = serde_json::to_value(no_sender).unwrap();
        assert!(v.get("sender").is_none(), "absent, not null: {v}");

        let row = doc
            .lines()
            .find(|l| l.starts_with("| `status` |"))
            .expect("status in the table");
        let cell = row.trim_end_matches('|').rsplit('|').next().unwrap();
        let mut top: Vec<String> = got.as_object().unwrap().keys().cloned().collect();
        top.sort();
        assert_eq!(key_set(cell.trim().trim_matches('`')), top, "{row}");

        let prose = doc.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = prose
            .find("`xdp`: `{")
            .expect("the xdp set-up in the prose")
            + 8;
        let set = &prose[at..at + prose[at..].find('`').unwrap()];
        let xdp = XdpInfo {
            iface: "eth0".into(),
            queues: vec![0],
            attach: "native",
            zero_copy: false,
            multi_buffer: true,
        };
        let xdp = serde_json::to_value(xdp).unwrap();
        let mut keys: Vec<String> = xdp.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(key_set(set), keys, "{set}");
    }

    #[test]
    fn every_request_survives_its_own_line() {
        let all = [
            Request::Connect {
                peer: "[::1]:7890".parse().unwrap(),
                transport: TransportKind::FlashPass,
                size: u64::MAX,
            },
            Request::Accept,
            Request::TcpConnect {
                dst: "10.0.0.2:5201".parse().unwrap(),
                src: "10.0.0.1:43210".parse().unwrap(),
                transport: TransportKind::Dctcp,
            },
            Request::TcpListen {
                port: 65535,
                addr: "10.0.0.2".parse().unwrap(),
            },
            Request::TcpPeer { port: 0 },
            Request::Status,
        ];
        for (r, op) in all.iter().zip(OPS) {
            assert_eq!(r.op(), op);
            assert_eq!(Request::parse(r.to_line().as_bytes()).as_ref(), Ok(r));
        }
    }

    /// Each refusal names the op and the field (and what came instead).
    #[test]
    fn bad_requests_name_the_op_and_the_field() {
        let cases = [
            ("hello", "request is not JSON"),
            ("[1,2,3]", "unknown op (a request is a JSON object, got [1,2,3])"),
            ("{}", "unknown op (no \"op\")"),
            (r#"{"op":5}"#, "unknown op 5: \"op\" is one of connect, accept,"),
            (r#"{"op":"format_disk"}"#, "unknown op \"format_disk\""),
            (r#"{"op":"connect"}"#, "connect needs \"peer\": \"IP:PORT\""),
            (
                r#"{"op":"connect","peer":7890}"#,
                "connect needs \"peer\": \"IP:PORT\", got 7890",
            ),
            (
                r#"{"op":"connect","peer":"127.0.0.1:1","transport":"tcp"}"#,
                "connect needs \"transport\": flexpass | expresspass | dctcp | ppt | flashpass | pfabric | pase, got \"tcp\"",
            ),
            (
                r#"{"op":"connect","peer":"127.0.0.1:1","transport":1}"#,
                "connect needs \"transport\"",
            ),
            (
                r#"{"op":"connect","peer":"127.0.0.1:1","size":-1}"#,
                "connect needs \"size\": an integer 0..18446744073709551615, got -1",
            ),
            (
                r#"{"op":"tcp_connect","dst":"[::1]:80"}"#,
                "tcp_connect needs \"dst\": \"IPv4:PORT\", got \"[::1]:80\"",
            ),
            (
                r#"{"op":"tcp_connect","dst":"127.0.0.1:80","src":"x"}"#,
                "tcp_connect needs \"src\": \"IP:PORT\", got \"x\"",
            ),
            (
                r#"{"op":"tcp_listen","port":70000}"#,
                "tcp_listen needs \"port\": an integer 1..65535, got 70000",
            ),
            (
                r#"{"op":"tcp_listen","port":0}"#,
                "tcp_listen needs \"port\": an integer 1..65535, got 0",
            ),
            (
                r#"{"op":"tcp_listen","port":"80"}"#,
                "tcp_listen needs \"port\": an integer 1..65535, got \"80\"",
            ),
            (
                r#"{"op":"tcp_listen","port":80,"addr":"localhost"}"#,
                "tcp_listen needs \"addr\": an IP address, got \"localhost\"",
            ),
            (
                r#"{"op":"tcp_peer","port":-1}"#,
                "tcp_peer needs \"port\": an integer 0..65535, got -1",
            ),
            (r#"{"op":"tcp_peer"}"#, "tcp_peer needs \"port\": an integer 0..65535"),
        ];
        for (line, want) in cases {
            let e = parse(line).expect_err(line);
            assert!(
                e.starts_with(want),
                "{line}: {e:?} does not start with {want:?}"
            );
        }
    }

    /// Reply lines as the daemon wrote them before the types existed (sorted keys).
    #[test]
    fn replies_keep_their_wire_format() {
        let line = |r: Reply| String::from_utf8(r.to_line()).unwrap();
        assert_eq!(
            line(Reply::error("not a FlexPass connection")),
            "{\"error\":\"not a FlexPass connection\",\"ok\":false}\n"
        );
        assert_eq!(
            line(Reply::Connected(Connected { flow_id: 7 })),
            "{\"flow_id\":7,\"ok\":true}\n"
        );
        assert_eq!(
            line(Reply::FlowSent(FlowSent {
                flow_id: 7,
                bytes: 100,
                fct_us: 12.5,
                retransmissions: 1,
                timeouts: 0,
                credits_received: 3,
                credits_wasted: 2
            })),
            "{\"bytes\":100,\"credits_received\":3,\"credits_wasted\":2,\"event\":\"flow_sent\",\
             \"fct_us\":12.5,\"flow_id\":7,\"ok\":true,\"retransmissions\":1,\"timeouts\":0}\n"
        );
        assert_eq!(
            line(Reply::Accepted(Accepted {
                flow_id: 7,
                peer: "10.0.0.1:7890".parse().unwrap(),
                transport: Some(TransportKind::ExpressPass)
            })),
            "{\"flow_id\":7,\"ok\":true,\"peer\":\"10.0.0.1:7890\",\"transport\":\"expresspass\"}\n"
        );
        assert_eq!(
            line(Reply::TcpVerdict(TcpVerdict::FlexPass {
                conn_id: 9,
                transport: TransportKind::FlexPass
            })),
            "{\"conn_id\":9,\"mode\":\"flexpass\",\"ok\":true,\"transport\":\"flexpass\"}\n"
        );
        assert_eq!(
            line(Reply::TcpVerdict(TcpVerdict::Direct {
                reason: "peer does not speak FlexPass (cached)".into(),
                peer_has_no_agent: true
            })),
            "{\"mode\":\"direct\",\"ok\":true,\"peer_has_no_agent\":true,\
             \"reason\":\"peer does not speak FlexPass (cached)\"}\n"
        );
        assert_eq!(
            line(Reply::Listening(Listening { port: 5201 })),
            "{\"ok\":true,\"port\":5201}\n"
        );
        assert_eq!(
            line(Reply::PeerNames(PeerNames {
                peer: "10.0.0.1:43210".parse().unwrap(),
                local: "10.0.0.2:5201".parse().unwrap()
            })),
            "{\"local\":\"10.0.0.2:5201\",\"ok\":true,\"peer\":\"10.0.0.1:43210\"}\n"
        );
        // The typed replies read back (clients in Rust).
        let v: TcpVerdict = serde_json::from_str(
            r#"{"mode":"direct","ok":true,"peer_has_no_agent":false,"reason":"x"}"#,
        )
        .unwrap();
        assert_eq!(
            v,
            TcpVerdict::Direct {
                reason: "x".into(),
                peer_has_no_agent: false
            }
        );
    }
}

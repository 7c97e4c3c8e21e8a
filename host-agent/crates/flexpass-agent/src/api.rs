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
    /// `addr` (default 0.0.0.0). Reply: `Listening`. With `inproc` (agent run with
    /// `--inproc-listen`) the API connection stays open as the port's registration: the
    /// agent writes a `TcpHello` event per connection, the process answers each with
    /// `tcp_taken` or `tcp_refused` (docs/agent-api.md, "In-process listeners").
    TcpListen {
        port: u16,
        addr: IpAddr,
        inproc: bool,
    },
    /// On a registration: the process answered the HELLO of (`peer`, `flow_id`) from its own
    /// UDP socket, whose descriptor comes with the line (SCM_RIGHTS); `reply_flow_id`: the id
    /// of its reply flow, reset with the open flow if the process dies.
    TcpTaken {
        peer: SocketAddr,
        flow_id: u32,
        reply_flow_id: Option<u32>,
    },
    /// On a registration: the process does not take the flow (RESET from the agent's port).
    TcpRefused { peer: SocketAddr, flow_id: u32 },
    /// On a registration: a taken connection ended; the agent closes its descriptor.
    TcpClosed { peer: SocketAddr, flow_id: u32 },
    /// The application-visible addresses of the agent's loopback connection from `port`.
    /// Reply: `PeerNames`.
    TcpPeer { port: u16 },
    /// Counters, tables and connection records. Reply: `Status`.
    Status,
    /// The settings an in-process flow of this host takes from its agent. Reply: `Settings`.
    Settings,
    /// A connection that ran in a program's own process ended: its record, for `status`
    /// (`tcp.closed`, with `in_process`). Reply: `{"ok": true}`.
    TcpRecord(InprocRecord),
}

/// `tcp_record`: an in-process connection's record as its library counted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InprocRecord {
    pub side: Side,
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub transport: TransportKind,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub duration_us: u64,
    /// "closed", or "reset" and why (at most MAX_OUTCOME bytes).
    pub outcome: String,
}

/// Longest `outcome` of a `tcp_record`.
pub const MAX_OUTCOME: usize = 200;

/// The ops, as they appear in `"op"`.
pub const OPS: [&str; 11] = [
    "connect",
    "accept",
    "tcp_connect",
    "tcp_listen",
    "tcp_peer",
    "status",
    "tcp_taken",
    "tcp_refused",
    "tcp_closed",
    "settings",
    "tcp_record",
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

    fn flow_id(&self, name: &str) -> Result<u32, RequestError> {
        self.integer(name, 0, u32::MAX.into())?
            .map(|n| n as u32)
            .ok_or_else(|| self.bad(name, &format!("an integer 0..{}", u32::MAX), None))
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
                inproc: match f.get("inproc") {
                    None => false,
                    Some(v) => v
                        .as_bool()
                        .ok_or_else(|| f.bad("inproc", "true | false", Some(v)))?,
                },
            },
            "tcp_taken" => Request::TcpTaken {
                peer: f.required("peer", "\"IP:PORT\"", |s| s.parse().ok())?,
                flow_id: f.flow_id("flow_id")?,
                reply_flow_id: f
                    .integer("reply_flow_id", 0, u32::MAX.into())?
                    .map(|n| n as u32),
            },
            "tcp_refused" => Request::TcpRefused {
                peer: f.required("peer", "\"IP:PORT\"", |s| s.parse().ok())?,
                flow_id: f.flow_id("flow_id")?,
            },
            "tcp_closed" => Request::TcpClosed {
                peer: f.required("peer", "\"IP:PORT\"", |s| s.parse().ok())?,
                flow_id: f.flow_id("flow_id")?,
            },
            "tcp_peer" => Request::TcpPeer { port: f.port(0)? },
            "status" => Request::Status,
            "settings" => Request::Settings,
            "tcp_record" => {
                let addr = "\"IP:PORT\"";
                let count = |name| f.integer(name, 0, u64::MAX).map(Option::unwrap_or_default);
                Request::TcpRecord(InprocRecord {
                    side: f.required("side", "\"client\" | \"server\"", |s| match s {
                        "client" => Some(Side::Client),
                        "server" => Some(Side::Server),
                        _ => None,
                    })?,
                    remote: f.required("remote", addr, |s| s.parse().ok())?,
                    local: f.required("local", addr, |s| s.parse().ok())?,
                    transport: f.transport()?,
                    bytes_sent: count("bytes_sent")?,
                    bytes_received: count("bytes_received")?,
                    duration_us: count("duration_us")?,
                    outcome: f.required("outcome", "a string of at most 200 bytes", |s| {
                        (s.len() <= MAX_OUTCOME).then(|| s.to_string())
                    })?,
                })
            }
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
            Request::Settings => "settings",
            Request::TcpRecord(_) => "tcp_record",
            Request::TcpTaken { .. } => "tcp_taken",
            Request::TcpRefused { .. } => "tcp_refused",
            Request::TcpClosed { .. } => "tcp_closed",
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
            Request::TcpListen { port, addr, inproc } => {
                serde_json::json!({"port": port, "addr": addr, "inproc": inproc})
            }
            Request::TcpTaken {
                peer,
                flow_id,
                reply_flow_id,
            } => {
                serde_json::json!({"peer": peer, "flow_id": flow_id, "reply_flow_id": reply_flow_id})
            }
            Request::TcpRefused { peer, flow_id } | Request::TcpClosed { peer, flow_id } => {
                serde_json::json!({"peer": peer, "flow_id": flow_id})
            }
            Request::TcpPeer { port } => serde_json::json!({ "port": port }),
            Request::Accept | Request::Status | Request::Settings => serde_json::json!({}),
            Request::TcpRecord(r) => serde_json::json!({
                "side": r.side, "remote": r.remote, "local": r.local, "transport": r.transport,
                "bytes_sent": r.bytes_sent, "bytes_received": r.bytes_received,
                "duration_us": r.duration_us, "outcome": r.outcome,
            }),
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

/// On an in-process registration (`tcp_listen` with `inproc`): a connection for the port
/// (`"event": "tcp_hello"`), admission done. `hello`: the HELLO datagram in hex, for the
/// process's `Receiver`; the process answers `tcp_taken` or `tcp_refused` with the same
/// `peer` and `flow_id` (a retransmitted HELLO comes again with the same ones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename = "tcp_hello")]
pub struct TcpHello {
    pub peer: SocketAddr,
    pub flow_id: u32,
    pub transport: TransportKind,
    pub conn_id: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub idle: bool,
    pub hello: String,
}

/// `tcp_peer`: the remote application's address and the local one it connected to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerNames {
    pub peer: SocketAddr,
    pub local: SocketAddr,
}

/// `settings`: what an in-process flow of this host takes from its agent (the agent's
/// flags; docs/agent-api.md, "The host's settings"): the link rate, the path's base RTT,
/// w_q, the credit batch, the MTU, and FlashPass's T_wait and pre-credit phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub link_gbps: f64,
    pub rtt_us: f64,
    pub w_q: f64,
    pub credit_batch: u32,
    pub mtu: usize,
    pub t_wait_us: f64,
    pub flashpass_unscheduled: bool,
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
    /// Ports registered by in-process listeners (`tcp_listen` with `inproc`), ascending.
    pub inproc_listening: Vec<u16>,
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
    /// The connection ran in the program's own process (`tcp_record`; else the key is
    /// absent): its counts are the library's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_process: bool,
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
    Settings(Settings),
    /// `{"ok": true}` alone (`tcp_record`).
    Done,
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
            Reply::Settings(r) => serde_json::to_value(r).expect("serializable"),
            Reply::Done => serde_json::json!({}),
        };
        let mut v = body;
        v["ok"] = (!matches!(self, Reply::Error(_))).into();
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;

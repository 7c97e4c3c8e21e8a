//! Generates docs/protocol-vectors.json.
//!
//! One piece (over 1 000 lines): data written as code, one vector per case of
//! docs/protocol.md in its order.
//!
//! ```text
//! cd host-agent
//! cargo run -p flexpass-wire --example gen_vectors > ../docs/protocol-vectors.json
//! ```
//!
//! The committed JSON is the artifact; tests only *verify* it (Rust:
//! tests/vectors.rs, Python: control-plane/tests/test_protocol_vectors.py).
//! This generator is only needed when the vectors are deliberately changed.
//! Invalid vectors are hand-built byte strings; the generator checks that the
//! Rust decoder returns the declared error kind before emitting them.

use bytes::Bytes;
use flexpass_wire::*;
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Serialize)]
struct VectorFile {
    description: &'static str,
    spec: &'static str,
    protocol_version: u8,
    default_udp_port: u16,
    error_kinds: Vec<&'static str>,
    valid: Vec<ValidVector>,
    valid_noncanonical: Vec<NonCanonicalVector>,
    invalid: Vec<InvalidVector>,
}

#[derive(Serialize)]
struct Header {
    version: u8,
    type_code: u8,
    type_name: &'static str,
    flags: u8,
    length: usize,
    flow_id: u32,
}

#[derive(Serialize)]
struct ValidVector {
    name: &'static str,
    description: &'static str,
    hex: String,
    wire_len: usize,
    header: Header,
    packet: Value,
}

#[derive(Serialize)]
struct NonCanonicalVector {
    name: &'static str,
    description: &'static str,
    hex: String,
    canonical_hex: String,
    packet: Value,
}

#[derive(Serialize)]
struct InvalidVector {
    name: &'static str,
    description: &'static str,
    hex: String,
    error: &'static str,
}

fn subflow_str(s: SubFlow) -> &'static str {
    match s {
        SubFlow::Proactive => "proactive",
        SubFlow::Reactive => "reactive",
    }
}

fn transport_str(t: TransportKind) -> &'static str {
    match t {
        TransportKind::FlexPass => "flexpass",
        TransportKind::ExpressPass => "expresspass",
        TransportKind::Dctcp => "dctcp",
        TransportKind::Ppt => "ppt",
        TransportKind::FlashPass => "flashpass",
        TransportKind::PFabric => "pfabric",
        TransportKind::Pase => "pase",
    }
}

/// JSON form of a packet (schema documented in docs/protocol.md, "Test vectors").
fn packet_json(p: &Packet) -> Value {
    match p {
        Packet::Credit(c) => json!({
            "type": "credit", "flow_id": c.flow_id, "credit_seq": c.credit_seq, "padding": c.padding,
        }),
        Packet::Data(d) => {
            let mut v = json!({
                "type": "data", "flow_id": d.flow_id, "subflow": subflow_str(d.subflow),
                "flow_seq": d.flow_seq, "subflow_seq": d.subflow_seq, "credit_seq": d.credit_seq,
                "tsval": d.tsval, "fin": d.fin, "retransmission": d.retransmission,
                "payload": hex::encode(&d.payload),
            });
            // Present exactly with flag PRIO.
            if let Some(p) = d.priority {
                v["priority"] = json!(p);
            }
            v
        }
        Packet::Ack(a) => json!({
            "type": "ack", "flow_id": a.flow_id, "subflow": subflow_str(a.subflow), "ece": a.ece,
            "cum_ack": a.cum_ack, "ack_seq": a.ack_seq, "tsecr": a.tsecr, "flow_ack": a.flow_ack,
            "sack": a.sack.iter().map(|&(s, e)| json!([s, e])).collect::<Vec<_>>(),
        }),
        Packet::CreditRequest(r) => json!({
            "type": "credit_request", "flow_id": r.flow_id, "pending_bytes": r.pending_bytes,
        }),
        Packet::CreditStop { flow_id } => json!({ "type": "credit_stop", "flow_id": flow_id }),
        Packet::Hello(h) => {
            let mut v = json!({
                "type": "hello", "flow_id": h.flow_id, "transport": transport_str(h.transport),
                "flow_size": h.flow_size,
            });
            if let Some(c) = &h.conn {
                v["conn"] = json!({
                    "conn_id": c.conn_id, "src_port": c.src_port, "dst_port": c.dst_port,
                    "role": match c.role { ConnRole::Open => "open", ConnRole::Reply => "reply" },
                });
            }
            if let Some(c) = h.cookie {
                v["cookie"] = json!(c);
            }
            if h.idle {
                v["idle"] = json!(true);
            }
            v
        }
        Packet::HelloAck(h) => {
            let mut v = json!({
                "type": "hello_ack", "flow_id": h.flow_id, "transport": transport_str(h.transport),
                "status": match h.status {
                    HelloStatus::Accepted => "accepted",
                    HelloStatus::UnsupportedTransport => "unsupported_transport",
                    HelloStatus::Refused => "refused",
                    HelloStatus::Retry { .. } => "retry",
                },
            });
            if let Some(c) = h.status.cookie() {
                v["cookie"] = json!(c);
            }
            v
        }
        Packet::Emulation(e) => json!({
            "type": "emulation", "flow_id": e.flow_id, "emu_seq": e.emu_seq,
            "timestamp": e.timestamp, "hold": e.hold,
        }),
        Packet::EmulationCredit(c) => json!({
            "type": "emulation_credit", "flow_id": c.flow_id,
            "grants": c.grants.iter().map(|g| json!([g.emu_seq, g.timestamp])).collect::<Vec<_>>(),
        }),
        Packet::ArbitrationRequest(r) => json!({
            "type": "arbitration_request", "flow_id": r.flow_id, "arb_seq": r.arb_seq,
            "remaining": r.remaining, "demand_bps": r.demand_bps,
        }),
        Packet::ArbitrationResponse(r) => json!({
            "type": "arbitration_response", "flow_id": r.flow_id, "arb_seq": r.arb_seq,
            "queue": r.queue, "reference_rate_bps": r.reference_rate_bps,
        }),
        Packet::Reset(r) => json!({
            "type": "reset", "flow_id": r.flow_id,
            "reason": match r.reason {
                ResetReason::Unspecified => "unspecified",
                ResetReason::UnknownFlow => "unknown_flow",
                ResetReason::ProtocolViolation => "protocol_violation",
                ResetReason::Shutdown => "shutdown",
            },
        }),
    }
}

fn credit(flow_id: u32, credit_seq: u32, padding: u8) -> Packet {
    Packet::Credit(Credit {
        flow_id,
        credit_seq,
        padding,
    })
}

#[allow(clippy::too_many_arguments)]
fn data(
    flow_id: u32,
    subflow: SubFlow,
    flow_seq: u64,
    subflow_seq: u32,
    credit_seq: u32,
    tsval: u32,
    fin: bool,
    retransmission: bool,
    payload: &[u8],
) -> Packet {
    Packet::Data(Data {
        flow_id,
        subflow,
        flow_seq,
        subflow_seq,
        credit_seq,
        tsval,
        fin,
        retransmission,
        priority: None,
        payload: Bytes::copy_from_slice(payload),
    })
}

/// A pFabric data packet: REACTIVE_DATA with flag PRIO and its `priority`.
fn pfabric_data(
    flow_id: u32,
    flow_seq: u64,
    subflow_seq: u32,
    priority: u32,
    fin: bool,
    payload: &[u8],
) -> Packet {
    let Packet::Data(mut d) = data(
        flow_id,
        SubFlow::Reactive,
        flow_seq,
        subflow_seq,
        0,
        4242,
        fin,
        false,
        payload,
    ) else {
        unreachable!()
    };
    d.priority = Some(priority);
    Packet::Data(d)
}

#[allow(clippy::too_many_arguments)]
fn ack(
    flow_id: u32,
    subflow: SubFlow,
    ece: bool,
    cum_ack: u32,
    ack_seq: u32,
    tsecr: u32,
    flow_ack: u64,
    sack: &[(u32, u32)],
) -> Packet {
    Packet::Ack(Ack {
        flow_id,
        subflow,
        ece,
        cum_ack,
        ack_seq,
        tsecr,
        flow_ack,
        sack: SackBlocks::from_slice(sack).expect("<= 4 blocks"),
    })
}

fn valid_packets() -> Vec<(&'static str, &'static str, Packet)> {
    use SubFlow::{Proactive, Reactive};
    let full: Vec<u8> = (0..MAX_PAYLOAD_1500).map(|i| (i % 251) as u8).collect();
    vec![
        (
            "credit_min",
            "CREDIT, 6 padding bytes: 18 B message = 84 B on the wire",
            credit(0x0102_0304, 1, 6),
        ),
        (
            "credit_mid",
            "CREDIT, 10 padding bytes: 22 B message",
            credit(42, 0x8000_0000, 10),
        ),
        (
            "credit_max",
            "CREDIT, 14 padding bytes: 26 B message = 92 B on the wire",
            credit(0xffff_ffff, 0xffff_ffff, 14),
        ),
        (
            "proactive_data",
            "PROACTIVE_DATA carrying 8 bytes, echoing credit_seq 17",
            data(
                0x0a0b_0c0d,
                Proactive,
                0,
                0,
                17,
                1_000_000,
                false,
                false,
                b"FlexPass",
            ),
        ),
        (
            "proactive_data_fin",
            "PROACTIVE_DATA, last segment (FIN): flow length = 2888 + 5",
            data(
                7,
                Proactive,
                2888,
                2,
                19,
                0xffff_fff0,
                true,
                false,
                b"tail!",
            ),
        ),
        (
            "proactive_data_fin_empty",
            "PROACTIVE_DATA with FIN and empty payload (flow length = flow_seq)",
            data(7, Proactive, 2893, 3, 20, 5, true, false, b""),
        ),
        (
            "proactive_data_retx",
            "PROACTIVE_DATA retransmission (RETX flag)",
            data(
                7,
                Proactive,
                1444,
                9,
                31,
                77,
                false,
                true,
                &[0x00, 0xff, 0x55],
            ),
        ),
        (
            "proactive_data_max_1500",
            "PROACTIVE_DATA with a full 1444 B payload: 1500 B IP packet, 1538 B on the wire",
            data(
                1,
                Proactive,
                1444 * 1000,
                1000,
                1001,
                123_456,
                false,
                false,
                &full,
            ),
        ),
        (
            "reactive_data",
            "REACTIVE_DATA (credit_seq must be 0)",
            data(
                0x0a0b_0c0d,
                Reactive,
                4096,
                0,
                0,
                999,
                false,
                false,
                b"reactive",
            ),
        ),
        (
            "reactive_data_fin_retx",
            "REACTIVE_DATA with FIN and RETX",
            data(
                3,
                Reactive,
                1 << 40,
                0xffff_fffe,
                0,
                0,
                true,
                true,
                &[0xde, 0xad, 0xbe, 0xef],
            ),
        ),
        (
            "data_seq_max",
            "PROACTIVE_DATA ending exactly at 2^64-1 (flow_seq + len does not overflow)",
            data(9, Proactive, u64::MAX - 2, 1, 1, 1, true, false, &[1, 2]),
        ),
        (
            "ppt_lcp_data_tail",
            "PPT opportunistic (LCP) packet: PROACTIVE_DATA with credit_seq 0, the last 4 bytes of a 1 MiB flow with FIN, sent first from the tail of the send buffer (LCP packet 0)",
            data(21, Proactive, (1 << 20) - 4, 0, 0, 77, true, false, b"tail"),
        ),
        (
            "pfabric_data",
            "pFabric REACTIVE_DATA with flag PRIO: priority 98556 (the flow's remaining bytes) at offset 28, the payload at 32",
            pfabric_data(31, 1444, 1, 98_556, false, b"pFabric"),
        ),
        (
            "pase_probe",
            "PASE probe (§3.3 probing): REACTIVE_DATA with flag PROBE, no payload, subflow_seq PROBE_SEQ = 2^32-1; 28 B",
            data(33, Reactive, 4000, flexpass_wire::PROBE_SEQ, 0, 4242, false, false, b""),
        ),
        (
            "pfabric_probe",
            "pFabric probe mode (§4.2): REACTIVE_DATA with flags PROBE and PRIO, priority 98556, no payload, subflow_seq PROBE_SEQ; 32 B",
            pfabric_data(35, 1444, flexpass_wire::PROBE_SEQ, 98_556, false, b""),
        ),
        (
            "pfabric_data_fin_priority_max",
            "pFabric REACTIVE_DATA with PRIO and FIN, priority 2^32-1 (a remaining size that saturates)",
            pfabric_data(31, 0, 0, u32::MAX, true, b"end"),
        ),
        (
            "pfabric_data_fin_empty_priority_0",
            "pFabric REACTIVE_DATA with PRIO, FIN and an empty payload: 32 B, priority 0 (nothing remains)",
            pfabric_data(31, 100_000, 70, 0, true, b""),
        ),
        (
            "ack_no_sack",
            "ACK for the proactive sub-flow, no SACK blocks, no ECE",
            ack(0x0a0b_0c0d, Proactive, false, 1, 0, 1_000_000, 8, &[]),
        ),
        (
            "ack_reactive_ece",
            "ACK for the reactive sub-flow with ECE (triggering packet carried CE)",
            ack(0x0a0b_0c0d, Reactive, true, 5, 4, 999, 4104, &[]),
        ),
        (
            "ack_one_sack",
            "ACK with one SACK block [7, 9)",
            ack(11, Proactive, false, 5, 8, 42, 7220, &[(7, 9)]),
        ),
        (
            "ack_four_sack_ece",
            "ACK with four SACK blocks and ECE",
            ack(
                11,
                Reactive,
                true,
                100,
                180,
                0xdead_beef,
                144_400,
                &[(170, 181), (150, 160), (120, 130), (102, 110)],
            ),
        ),
        (
            "ppt_low_priority_ack",
            "PPT low-priority ACK (sub-flow 0) sent when the second of LCP packets 4 and 5 arrived (0 and 1 received, 2 and 3 lost): cum_ack 2, SACK [4, 6); flow_ack 8664 from the HCP",
            ack(21, Proactive, false, 2, 5, 1234, 8664, &[(4, 6)]),
        ),
        (
            "ppt_low_priority_ack_ece",
            "PPT low-priority ACK with ECE: one of the two opportunistic packets it acknowledges carried CE (it releases no new LCP packet)",
            ack(21, Proactive, true, 2, 1, 1300, 0, &[]),
        ),
        (
            "ack_sack_max_values",
            "ACK with extreme values: block [u32::MAX-1, u32::MAX)",
            ack(
                u32::MAX,
                Proactive,
                false,
                u32::MAX - 2,
                u32::MAX - 1,
                u32::MAX,
                u64::MAX,
                &[(u32::MAX - 1, u32::MAX)],
            ),
        ),
        (
            "credit_request",
            "CREDIT_REQUEST with 1 MB pending",
            Packet::CreditRequest(CreditRequest {
                flow_id: 5,
                pending_bytes: 1_000_000,
            }),
        ),
        (
            "credit_request_unknown",
            "CREDIT_REQUEST with pending_bytes 0 (unknown)",
            Packet::CreditRequest(CreditRequest {
                flow_id: 6,
                pending_bytes: 0,
            }),
        ),
        (
            "credit_stop",
            "CREDIT_STOP (empty body)",
            Packet::CreditStop {
                flow_id: 0x1234_5678,
            },
        ),
        (
            "hello_flexpass",
            "HELLO, transport flexpass, 1 MiB flow",
            Packet::Hello(Hello {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::FlexPass,
                flow_size: 1 << 20,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_expresspass_stream",
            "HELLO, transport expresspass, unknown size (stream)",
            Packet::Hello(Hello {
                flow_id: 2,
                transport: TransportKind::ExpressPass,
                flow_size: 0,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_dctcp",
            "HELLO, transport dctcp",
            Packet::Hello(Hello {
                flow_id: 3,
                transport: TransportKind::Dctcp,
                flow_size: u64::MAX,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_conn_open",
            "HELLO with the connection extension (flag CONN): opening flow of connection 0x0a0b0c0d, client port 43210 → service port 5201",
            Packet::Hello(Hello {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::FlexPass,
                flow_size: 0,
                conn: Some(HelloConn {
                    conn_id: 0x0a0b_0c0d,
                    src_port: 43210,
                    dst_port: 5201,
                    role: ConnRole::Open,
                }),
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_conn_reply",
            "HELLO with the connection extension: the reverse flow (server → client) of connection 0x0a0b0c0d, extreme values",
            Packet::Hello(Hello {
                flow_id: 0xffff_ffff,
                transport: TransportKind::FlexPass,
                flow_size: u64::MAX,
                conn: Some(HelloConn {
                    conn_id: 0x0a0b_0c0d,
                    src_port: 0xffff,
                    dst_port: 1,
                    role: ConnRole::Reply,
                }),
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_cookie",
            "HELLO sent again with the cookie of a HELLO_ACK retry (flag COOKIE): 28 bytes",
            Packet::Hello(Hello {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::ExpressPass,
                flow_size: 1 << 20,
                conn: None,
                cookie: Some(0x0123_4567_89ab_cdef),
                idle: false,
            }),
        ),
        (
            "hello_idle_conn",
            "HELLO of a connection with no data yet (flags CONN | IDLE): 32 bytes; the receiver credits only after a CREDIT_REQUEST",
            Packet::Hello(Hello {
                flow_id: 0x0a0b_0c0e,
                transport: TransportKind::FlexPass,
                flow_size: 0,
                conn: Some(HelloConn {
                    conn_id: 0x0a0b_0c0d,
                    src_port: 6379,
                    dst_port: 43210,
                    role: ConnRole::Reply,
                }),
                cookie: None,
                idle: true,
            }),
        ),
        (
            "hello_conn_cookie",
            "HELLO with the connection extension and a cookie (flags CONN | COOKIE): 40 bytes, the cookie last",
            Packet::Hello(Hello {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::FlexPass,
                flow_size: 0,
                conn: Some(HelloConn {
                    conn_id: 0x0a0b_0c0d,
                    src_port: 43210,
                    dst_port: 5201,
                    role: ConnRole::Open,
                }),
                cookie: Some(u64::MAX),
                idle: false,
            }),
        ),
        (
            "hello_ppt",
            "HELLO, transport ppt (4), 64 kB flow",
            Packet::Hello(Hello {
                flow_id: 21,
                transport: TransportKind::Ppt,
                flow_size: 64_000,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_pfabric",
            "HELLO, transport pfabric (6), 100 kB flow",
            Packet::Hello(Hello {
                flow_id: 31,
                transport: TransportKind::PFabric,
                flow_size: 100_000,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_ack_pfabric",
            "HELLO_ACK accepted, transport pfabric",
            Packet::HelloAck(HelloAck {
                flow_id: 31,
                transport: TransportKind::PFabric,
                status: HelloStatus::Accepted,
            }),
        ),
        (
            "hello_pase",
            "HELLO, transport pase (7), 300 kB flow",
            Packet::Hello(Hello {
                flow_id: 32,
                transport: TransportKind::Pase,
                flow_size: 300_000,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_ack_pase",
            "HELLO_ACK accepted, transport pase",
            Packet::HelloAck(HelloAck {
                flow_id: 32,
                transport: TransportKind::Pase,
                status: HelloStatus::Accepted,
            }),
        ),
        (
            "hello_ack_accepted",
            "HELLO_ACK accepted",
            Packet::HelloAck(HelloAck {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::FlexPass,
                status: HelloStatus::Accepted,
            }),
        ),
        (
            "hello_ack_unsupported",
            "HELLO_ACK unsupported transport",
            Packet::HelloAck(HelloAck {
                flow_id: 3,
                transport: TransportKind::Dctcp,
                status: HelloStatus::UnsupportedTransport,
            }),
        ),
        (
            "hello_ack_ppt",
            "HELLO_ACK accepted, transport ppt",
            Packet::HelloAck(HelloAck {
                flow_id: 21,
                transport: TransportKind::Ppt,
                status: HelloStatus::Accepted,
            }),
        ),
        (
            "hello_ack_refused",
            "HELLO_ACK refused/busy",
            Packet::HelloAck(HelloAck {
                flow_id: 2,
                transport: TransportKind::ExpressPass,
                status: HelloStatus::Refused,
            }),
        ),
        (
            "hello_ack_retry",
            "HELLO_ACK retry with a cookie (flag COOKIE, status 3): 20 bytes; the receiver kept no state",
            Packet::HelloAck(HelloAck {
                flow_id: 0x0a0b_0c0d,
                transport: TransportKind::ExpressPass,
                status: HelloStatus::Retry {
                    cookie: 0x0123_4567_89ab_cdef,
                },
            }),
        ),
        (
            "hello_flashpass",
            "HELLO, transport flashpass (5), 65 MB flow",
            Packet::Hello(Hello {
                flow_id: 22,
                transport: TransportKind::FlashPass,
                flow_size: 65_000_000,
                conn: None,
                cookie: None,
                idle: false,
            }),
        ),
        (
            "hello_ack_flashpass",
            "HELLO_ACK accepted, transport flashpass",
            Packet::HelloAck(HelloAck {
                flow_id: 22,
                transport: TransportKind::FlashPass,
                status: HelloStatus::Accepted,
            }),
        ),
        (
            "emulation",
            "FlashPass EMULATION: emu_seq 7, T = 123456789 ns, credit returned at once (84 B on the wire)",
            Packet::Emulation(Emulation {
                flow_id: 22,
                emu_seq: 7,
                timestamp: 123_456_789,
                hold: 0,
            }),
        ),
        (
            "emulation_hold_max",
            "EMULATION with extreme values: the credit may be held 655.35 ms for batching",
            Packet::Emulation(Emulation {
                flow_id: u32::MAX,
                emu_seq: u32::MAX,
                timestamp: u32::MAX,
                hold: u16::MAX,
            }),
        ),
        (
            "emulation_credit_one",
            "EMULATION_CREDIT with one grant (86 B on the wire)",
            Packet::EmulationCredit(EmulationCredit {
                flow_id: 22,
                grants: vec![EmulationGrant {
                    emu_seq: 7,
                    timestamp: 123_456_789,
                }],
            }),
        ),
        (
            "emulation_credit_batch",
            "EMULATION_CREDIT with three batched grants (delayed credit feedback), one seq missing (emulation packet 9 lost)",
            Packet::EmulationCredit(EmulationCredit {
                flow_id: 22,
                grants: vec![
                    EmulationGrant { emu_seq: 8, timestamp: 123_458_089 },
                    EmulationGrant { emu_seq: 10, timestamp: 123_460_689 },
                    EmulationGrant { emu_seq: 11, timestamp: 123_461_989 },
                ],
            }),
        ),
        (
            "emulation_credit_max",
            "EMULATION_CREDIT with the most grants, 32 (268 bytes)",
            Packet::EmulationCredit(EmulationCredit {
                flow_id: 1,
                grants: (0..32)
                    .map(|i| EmulationGrant { emu_seq: i, timestamp: u32::MAX - i })
                    .collect(),
            }),
        ),
        (
            "arbitration_request",
            "ARBITRATION_REQUEST (PASE): 100 kB left, demand 10 Gbit/s (the host's line rate)",
            Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: 42,
                arb_seq: 0,
                remaining: 100_000,
                demand_bps: 10_000_000_000,
            }),
        ),
        (
            "arbitration_request_release",
            "ARBITRATION_REQUEST with remaining 0: the flow ended, the arbitrator releases it",
            Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: 42,
                arb_seq: 7,
                remaining: 0,
                demand_bps: 10_000_000_000,
            }),
        ),
        (
            "arbitration_request_extremes",
            "ARBITRATION_REQUEST with every field at its maximum",
            Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: u32::MAX,
                arb_seq: u32::MAX,
                remaining: u64::MAX,
                demand_bps: u64::MAX,
            }),
        ),
        (
            "arbitration_response_top",
            "ARBITRATION_RESPONSE: top queue (P0), reference rate 4 Gbit/s",
            Packet::ArbitrationResponse(ArbitrationResponse {
                flow_id: 42,
                arb_seq: 0,
                queue: 0,
                reference_rate_bps: 4_000_000_000,
            }),
        ),
        (
            "arbitration_response_lowest",
            "ARBITRATION_RESPONSE: lowest queue (P7), the smallest rate (1 bit/s), extreme ids",
            Packet::ArbitrationResponse(ArbitrationResponse {
                flow_id: u32::MAX,
                arb_seq: u32::MAX,
                queue: 7,
                reference_rate_bps: 1,
            }),
        ),
        (
            "reset_unspecified",
            "RESET, reason unspecified",
            Packet::Reset(Reset {
                flow_id: 1,
                reason: ResetReason::Unspecified,
            }),
        ),
        (
            "reset_unknown_flow",
            "RESET, reason unknown flow",
            Packet::Reset(Reset {
                flow_id: 2,
                reason: ResetReason::UnknownFlow,
            }),
        ),
        (
            "reset_protocol_violation",
            "RESET, reason protocol violation",
            Packet::Reset(Reset {
                flow_id: 3,
                reason: ResetReason::ProtocolViolation,
            }),
        ),
        (
            "reset_shutdown",
            "RESET, reason shutdown",
            Packet::Reset(Reset {
                flow_id: 4,
                reason: ResetReason::Shutdown,
            }),
        ),
    ]
}

/// Sets the 16-bit length field to the buffer length.
fn fix_len(mut b: Vec<u8>) -> Vec<u8> {
    let n = b.len() as u16;
    b[2..4].copy_from_slice(&n.to_be_bytes());
    b
}

fn with(mut b: Vec<u8>, off: usize, bytes: &[u8]) -> Vec<u8> {
    b[off..off + bytes.len()].copy_from_slice(bytes);
    b
}

fn invalid_vectors() -> Vec<(&'static str, &'static str, Vec<u8>, &'static str)> {
    use SubFlow::{Proactive, Reactive};
    let enc = |p: &Packet| p.encode_to_vec();
    let cr = enc(&credit(0x0102_0304, 1, 6));
    let pd = enc(&data(7, Proactive, 0, 0, 17, 5, false, false, b"FlexPass"));
    let rd = enc(&data(7, Reactive, 0, 0, 0, 5, false, false, b"FlexPass"));
    let pf = enc(&pfabric_data(31, 0, 0, 7, false, b"pFabric"));
    let ack0 = enc(&ack(11, Proactive, false, 5, 8, 42, 7220, &[]));
    let ack2 = enc(&ack(
        11,
        Proactive,
        false,
        5,
        8,
        42,
        7220,
        &[(7, 9), (10, 12)],
    ));
    let ack4 = enc(&ack(
        11,
        Reactive,
        true,
        100,
        180,
        1,
        2,
        &[(170, 181), (150, 160), (120, 130), (102, 110)],
    ));
    let creq = enc(&Packet::CreditRequest(CreditRequest {
        flow_id: 5,
        pending_bytes: 1_000_000,
    }));
    let stop = enc(&Packet::CreditStop { flow_id: 5 });
    let hello = enc(&Packet::Hello(Hello {
        flow_id: 5,
        transport: TransportKind::FlexPass,
        flow_size: 4096,
        conn: None,
        cookie: None,
        idle: false,
    }));
    let hconn = enc(&Packet::Hello(Hello {
        flow_id: 5,
        transport: TransportKind::FlexPass,
        flow_size: 0,
        conn: Some(HelloConn {
            conn_id: 5,
            src_port: 40000,
            dst_port: 80,
            role: ConnRole::Open,
        }),
        cookie: None,
        idle: false,
    }));
    let hack = enc(&Packet::HelloAck(HelloAck {
        flow_id: 5,
        transport: TransportKind::FlexPass,
        status: HelloStatus::Accepted,
    }));
    let hcookie = enc(&Packet::Hello(Hello {
        flow_id: 5,
        transport: TransportKind::FlexPass,
        flow_size: 4096,
        conn: None,
        cookie: Some(0x1122_3344_5566_7788),
        idle: false,
    }));
    let hretry = enc(&Packet::HelloAck(HelloAck {
        flow_id: 5,
        transport: TransportKind::FlexPass,
        status: HelloStatus::Retry {
            cookie: 0x1122_3344_5566_7788,
        },
    }));
    let areq = enc(&Packet::ArbitrationRequest(ArbitrationRequest {
        flow_id: 9,
        arb_seq: 3,
        remaining: 5000,
        demand_bps: 1_000_000_000,
    }));
    let aresp = enc(&Packet::ArbitrationResponse(ArbitrationResponse {
        flow_id: 9,
        arb_seq: 3,
        queue: 2,
        reference_rate_bps: 500_000_000,
    }));
    let emu = enc(&Packet::Emulation(Emulation {
        flow_id: 5,
        emu_seq: 1,
        timestamp: 2,
        hold: 3,
    }));
    let ecred = enc(&Packet::EmulationCredit(EmulationCredit {
        flow_id: 5,
        grants: vec![
            EmulationGrant {
                emu_seq: 1,
                timestamp: 2,
            },
            EmulationGrant {
                emu_seq: 2,
                timestamp: 3,
            },
        ],
    }));
    let rst = enc(&Packet::Reset(Reset {
        flow_id: 5,
        reason: ResetReason::Shutdown,
    }));

    vec![
        // --- Truncated: shorter than the common header --------------------------------
        ("truncated_empty", "empty buffer", vec![], "Truncated"),
        ("truncated_1", "only the version/type byte", cr[..1].to_vec(), "Truncated"),
        ("truncated_4", "common header cut after the length field", cr[..4].to_vec(), "Truncated"),
        ("truncated_7", "common header missing its last byte", cr[..7].to_vec(), "Truncated"),
        ("truncated_bad_version_short", "7 bytes with a bad version: the header-length check comes first",
            with(cr[..7].to_vec(), 0, &[0x21]), "Truncated"),
        // --- Truncated: length field consistent, but shorter than the type needs -------
        ("truncated_data_header", "PROACTIVE_DATA whose length (and buffer) is 20 < 28",
            fix_len(pd[..20].to_vec()), "Truncated"),
        ("truncated_data_common_only", "REACTIVE_DATA with only the common header",
            fix_len(rd[..8].to_vec()), "Truncated"),
        ("truncated_ack_base", "ACK of 24 bytes < 32", fix_len(ack0[..24].to_vec()), "Truncated"),
        ("truncated_data_priority", "REACTIVE_DATA with flag PRIO of 30 bytes < 32 (the priority field cut)",
            fix_len(pf[..30].to_vec()), "Truncated"),
        ("truncated_data_priority_28", "REACTIVE_DATA with flag PRIO of 28 bytes: a valid header without PRIO, but no priority field",
            fix_len(pf[..28].to_vec()), "Truncated"),
        ("data_priority_empty_no_fin", "REACTIVE_DATA with flag PRIO, a priority and no payload without FIN",
            fix_len(pf[..32].to_vec()), "EmptyPayload"),
        ("data_priority_credit_seq", "REACTIVE_DATA with flag PRIO and credit_seq 1",
            with(pf.clone(), 20, &[0, 0, 0, 1]), "NonZeroCreditSeq"),
        ("pase_probe_with_payload", "REACTIVE_DATA with flag PROBE and a payload (a probe is the bare 28-byte header)",
            with(rd.clone(), 1, &[0x80]), "LengthMismatch"),
        ("pfabric_probe_with_payload", "REACTIVE_DATA with flags PROBE and PRIO and a payload (a pFabric probe is the bare 32-byte header)",
            with(pf.clone(), 1, &[0xC0]), "LengthMismatch"),
        ("pase_probe_with_fin", "REACTIVE_DATA with flags PROBE and FIN (a probe sets no other flag but PRIO)",
            with(fix_len(rd[..28].to_vec()), 1, &[0x81]), "InvalidFlags"),
        ("pase_probe_on_proactive", "PROACTIVE_DATA with flag PROBE (probes are REACTIVE_DATA only)",
            with(fix_len(pd[..28].to_vec()), 1, &[0x80]), "InvalidFlags"),
        ("flags_prio_on_ack", "PRIO is not allowed on ACK", with(ack0.clone(), 1, &[0x40]), "InvalidFlags"),
        ("truncated_ack_sack", "ACK with sack_count 2 but only one SACK block (40 bytes)",
            fix_len(ack2[..40].to_vec()), "Truncated"),
        ("truncated_credit_request", "CREDIT_REQUEST of 12 bytes < 16", fix_len(creq[..12].to_vec()), "Truncated"),
        ("truncated_hello", "HELLO of 16 bytes < 20", fix_len(hello[..16].to_vec()), "Truncated"),
        ("truncated_hello_ack", "HELLO_ACK of 10 bytes < 12", fix_len(hack[..10].to_vec()), "Truncated"),
        ("truncated_reset", "RESET of 8 bytes < 12", fix_len(rst[..8].to_vec()), "Truncated"),
        // --- Version / type ----------------------------------------------------------------
        ("bad_version_0", "version nibble 0", with(cr.clone(), 0, &[0x01]), "UnsupportedVersion"),
        ("bad_version_2", "version nibble 2", with(pd.clone(), 0, &[0x22]), "UnsupportedVersion"),
        ("bad_version_15", "version nibble 15, also wrong length: version is checked first",
            with(with(stop.clone(), 0, &[0xf6]), 2, &[0, 99]), "UnsupportedVersion"),
        ("unknown_type_0", "type 0", with(stop.clone(), 0, &[0x10]), "UnknownType"),
        ("unknown_type_14", "type 0xe (0xa, 0xb are FlashPass's, 0xc, 0xd PASE's)", with(stop.clone(), 0, &[0x1e]), "UnknownType"),
        ("unknown_type_15", "type 0xf", with(cr.clone(), 0, &[0x1f]), "UnknownType"),
        // --- Length mismatch -----------------------------------------------------------------
        ("length_field_too_big", "PROACTIVE_DATA buffer one byte shorter than its length field (truncated in transit)",
            pd[..pd.len() - 1].to_vec(), "LengthMismatch"),
        ("length_field_too_small", "CREDIT with one trailing byte beyond its length field",
            [cr.as_slice(), &[0]].concat(), "LengthMismatch"),
        ("length_truncated_ack", "ACK with 4 SACK blocks cut in the last block (length field still 64)",
            ack4[..60].to_vec(), "LengthMismatch"),
        ("length_zero_field", "CREDIT_STOP whose length field is 0", with(stop.clone(), 2, &[0, 0]), "LengthMismatch"),
        ("credit_stop_with_body", "CREDIT_STOP of 12 bytes (must be exactly 8)",
            fix_len([stop.as_slice(), &[0, 0, 0, 0]].concat()), "LengthMismatch"),
        ("credit_request_too_long", "CREDIT_REQUEST of 17 bytes", fix_len([creq.as_slice(), &[0]].concat()), "LengthMismatch"),
        ("hello_ack_too_long", "HELLO_ACK of 16 bytes", fix_len([hack.as_slice(), &[0; 4]].concat()), "LengthMismatch"),
        ("ack_extra_bytes", "ACK with sack_count 0 but 40 bytes long",
            fix_len([ack0.as_slice(), &[0; 8]].concat()), "LengthMismatch"),
        ("ack_count_too_small", "ACK with 2 blocks of bytes but sack_count 1",
            with(ack2.clone(), 9, &[1]), "LengthMismatch"),
        // --- Flags --------------------------------------------------------------------------------
        ("flags_unknown_bit_data", "PROACTIVE_DATA with unknown flag bit 0x80",
            with(pd.clone(), 1, &[0x80]), "InvalidFlags"),
        ("flags_unknown_bit_0x08", "REACTIVE_DATA with unknown flag bit 0x08 (plus FIN)",
            with(rd.clone(), 1, &[0x09]), "InvalidFlags"),
        ("flags_ece_on_data", "ECE is not allowed on data", with(pd.clone(), 1, &[0x02]), "InvalidFlags"),
        ("flags_fin_on_ack", "FIN is not allowed on ACK", with(ack0.clone(), 1, &[0x01]), "InvalidFlags"),
        ("flags_retx_on_ack", "RETX is not allowed on ACK", with(ack0.clone(), 1, &[0x06]), "InvalidFlags"),
        ("flags_on_credit", "CREDIT must have no flags", with(cr.clone(), 1, &[0x01]), "InvalidFlags"),
        ("flags_on_hello", "HELLO must have no flags", with(hello.clone(), 1, &[0x02]), "InvalidFlags"),
        ("flags_on_reset", "RESET must have no flags", with(rst.clone(), 1, &[0x40]), "InvalidFlags"),
        ("flags_before_body_checks", "CREDIT with a flag and a bad size: flags are checked before the body",
            fix_len(with([cr.as_slice(), &[0; 9]].concat(), 1, &[0x04])), "InvalidFlags"),
        ("length_before_flags", "bad flags and a length mismatch: length is checked before flags",
            with(with(stop.clone(), 1, &[0xff]), 2, &[0, 9]), "LengthMismatch"),
        // --- CREDIT size ------------------------------------------------------------------------
        ("credit_too_short_17", "CREDIT of 17 bytes (5 padding)", fix_len(cr[..17].to_vec()), "BadCreditSize"),
        ("credit_no_padding_12", "CREDIT of 12 bytes (no padding)", fix_len(cr[..12].to_vec()), "BadCreditSize"),
        ("credit_header_only_8", "CREDIT of 8 bytes (no credit_seq): size rule, not Truncated",
            fix_len(cr[..8].to_vec()), "BadCreditSize"),
        ("credit_too_long_27", "CREDIT of 27 bytes (15 padding)",
            fix_len([cr.as_slice(), &[0; 9]].concat()), "BadCreditSize"),
        // --- DATA body ----------------------------------------------------------------------------
        ("reactive_nonzero_credit_seq", "REACTIVE_DATA with credit_seq 1",
            with(rd.clone(), 20, &[0, 0, 0, 1]), "NonZeroCreditSeq"),
        ("reactive_nonzero_credit_seq_empty", "REACTIVE_DATA with credit_seq != 0 and empty payload without FIN: credit_seq checked first",
            fix_len(with(rd[..28].to_vec(), 20, &[0x80, 0, 0, 0])), "NonZeroCreditSeq"),
        ("data_empty_payload_no_fin", "PROACTIVE_DATA with empty payload and no FIN",
            fix_len(pd[..28].to_vec()), "EmptyPayload"),
        ("reactive_empty_payload_retx", "REACTIVE_DATA with empty payload, RETX but no FIN",
            with(fix_len(rd[..28].to_vec()), 1, &[0x04]), "EmptyPayload"),
        ("data_seq_overflow", "PROACTIVE_DATA with flow_seq 2^64-1 and 8 payload bytes",
            with(pd.clone(), 8, &u64::MAX.to_be_bytes()), "SeqOverflow"),
        ("data_seq_overflow_by_one", "PROACTIVE_DATA with flow_seq 2^64-8 and 8 payload bytes (end = 2^64)",
            with(pd.clone(), 8, &(u64::MAX - 7).to_be_bytes()), "SeqOverflow"),
        // --- ACK body -----------------------------------------------------------------------------
        ("ack_bad_subflow_2", "ACK subflow byte 2", with(ack0.clone(), 8, &[2]), "BadSubflow"),
        ("ack_bad_subflow_255", "ACK subflow byte 255", with(ack0.clone(), 8, &[0xff]), "BadSubflow"),
        ("ack_sack_count_5", "ACK with sack_count 5 and 5 blocks (72 bytes)",
            fix_len(with([ack4.as_slice(), &[0, 0, 0, 200, 0, 0, 0, 201]].concat(), 9, &[5])), "TooManySackBlocks"),
        ("ack_sack_count_255", "ACK with sack_count 255 (32 bytes)", with(ack0.clone(), 9, &[0xff]), "TooManySackBlocks"),
        ("ack_reserved_nonzero", "ACK reserved field 0x0001", with(ack0.clone(), 10, &[0, 1]), "NonZeroReserved"),
        ("ack_sack_empty_block", "SACK block with start == end", with(ack2.clone(), 32, &[0, 0, 0, 9]), "BadSackBlock"),
        ("ack_sack_reversed_block", "SACK block with start > end", with(ack2.clone(), 40, &[0, 0, 0, 13]), "BadSackBlock"),
        ("ack_sack_at_cum_ack", "SACK block starting at cum_ack (cum_ack itself cannot have been received)",
            with(ack2.clone(), 32, &[0, 0, 0, 5]), "BadSackBlock"),
        ("ack_sack_below_cum_ack", "fourth SACK block lies below cum_ack",
            with(ack4.clone(), 56, &[0, 0, 0, 50, 0, 0, 0, 60]), "BadSackBlock"),
        // --- HELLO / HELLO_ACK / RESET ---------------------------------------------------------------
        ("hello_unknown_transport_0", "HELLO transport 0", with(hello.clone(), 8, &[0]), "UnknownTransport"),
        ("hello_unknown_transport_8", "HELLO transport 8 (7 is pase)", with(hello.clone(), 8, &[8]), "UnknownTransport"),
        ("hello_reserved_nonzero", "HELLO reserved byte 11 = 1", with(hello.clone(), 11, &[1]), "NonZeroReserved"),
        ("hello_conn_role_0", "HELLO (CONN) role 0", with(hconn.clone(), 28, &[0]), "BadConnRole"),
        ("hello_conn_role_3", "HELLO (CONN) role 3", with(hconn.clone(), 28, &[3]), "BadConnRole"),
        ("hello_conn_reserved_nonzero", "HELLO (CONN) reserved byte 31 = 1", with(hconn.clone(), 31, &[1]), "NonZeroReserved"),
        ("hello_conn_role_before_reserved", "HELLO (CONN) with role 9 and reserved byte 29 = 1: the role is checked first",
            with(with(hconn.clone(), 28, &[9]), 29, &[1]), "BadConnRole"),
        ("hello_conn_reserved_before_role", "HELLO (CONN) with reserved byte 9 = 1 and role 0: the HELLO reserved bytes are checked first",
            with(with(hconn.clone(), 9, &[1]), 28, &[0]), "NonZeroReserved"),
        ("hello_conn_flag_short", "flag CONN on a 20-byte HELLO (the extension is missing)",
            with(hello.clone(), 1, &[0x08]), "Truncated"),
        ("hello_conn_flag_missing", "32-byte HELLO without flag CONN", with(hconn.clone(), 1, &[0]), "LengthMismatch"),
        ("hello_flag_0x40", "HELLO with flag 0x40 (only CONN, 0x08, COOKIE, 0x10, and IDLE, 0x20, are allowed)", with(hello.clone(), 1, &[0x40]), "InvalidFlags"),
        ("hello_cookie_flag_short", "flag COOKIE on a 20-byte HELLO (the cookie is missing)",
            with(hello.clone(), 1, &[0x10]), "Truncated"),
        ("hello_conn_cookie_flag_short", "flags CONN | COOKIE on a 32-byte HELLO (the cookie is missing)",
            with(hconn.clone(), 1, &[0x18]), "Truncated"),
        ("hello_cookie_flag_missing", "28-byte HELLO (with a cookie) without flag COOKIE",
            with(hcookie.clone(), 1, &[0]), "LengthMismatch"),
        ("hello_cookie_as_conn", "28-byte HELLO with flag CONN instead of COOKIE: 32 bytes expected",
            with(hcookie.clone(), 1, &[0x08]), "Truncated"),
        ("hello_cookie_reserved_nonzero", "HELLO with a cookie and reserved byte 10 = 1", with(hcookie.clone(), 10, &[1]), "NonZeroReserved"),
        ("hello_ack_unknown_transport", "HELLO_ACK transport 0xff", with(hack.clone(), 8, &[0xff]), "UnknownTransport"),
        ("hello_ack_bad_status", "HELLO_ACK status 3 (retry) without flag COOKIE", with(hack.clone(), 9, &[3]), "BadStatus"),
        ("hello_ack_bad_status_4", "HELLO_ACK status 4", with(hack.clone(), 9, &[4]), "BadStatus"),
        ("hello_ack_cookie_not_retry", "HELLO_ACK with flag COOKIE and a cookie but status 0 (accepted)",
            with(hretry.clone(), 9, &[0]), "BadStatus"),
        ("hello_ack_cookie_short", "flag COOKIE on a 12-byte HELLO_ACK (the cookie is missing)",
            with(hack.clone(), 1, &[0x10]), "Truncated"),
        ("hello_ack_retry_flag_missing", "20-byte HELLO_ACK retry without flag COOKIE: length is checked before status",
            with(hretry.clone(), 1, &[0]), "LengthMismatch"),
        ("hello_ack_flag_conn", "HELLO_ACK with flag CONN (0x08; only COOKIE is allowed)", with(hack.clone(), 1, &[0x08]), "InvalidFlags"),
        ("hello_ack_retry_reserved_nonzero", "HELLO_ACK retry with reserved byte 11 = 1", with(hretry.clone(), 11, &[1]), "NonZeroReserved"),
        ("hello_ack_retry_status_before_reserved", "HELLO_ACK with flag COOKIE, status 2 and reserved byte 10 = 1: the status is checked first",
            with(with(hretry.clone(), 9, &[2]), 10, &[1]), "BadStatus"),
        ("hello_ack_reserved_nonzero", "HELLO_ACK reserved 0x8000", with(hack.clone(), 10, &[0x80, 0]), "NonZeroReserved"),
        // --- EMULATION / EMULATION_CREDIT (FlashPass) ------------------------------------------
        ("emulation_short", "EMULATION of 16 bytes < 18", fix_len(emu[..16].to_vec()), "Truncated"),
        ("emulation_long", "EMULATION of 20 bytes > 18", fix_len([emu.clone(), vec![0, 0]].concat()), "LengthMismatch"),
        ("emulation_flag", "EMULATION with flag FIN (no flag is allowed)", with(emu.clone(), 1, &[0x01]), "InvalidFlags"),
        ("emulation_credit_truncated", "EMULATION_CREDIT of 8 bytes < 12", fix_len(ecred[..8].to_vec()), "Truncated"),
        ("emulation_credit_count_0", "EMULATION_CREDIT with count 0", with(ecred.clone(), 8, &[0]), "BadGrantCount"),
        ("emulation_credit_count_33", "EMULATION_CREDIT with count 33 (max 32)", with(ecred.clone(), 8, &[33]), "BadGrantCount"),
        ("emulation_credit_reserved", "EMULATION_CREDIT reserved byte 10 = 1", with(ecred.clone(), 10, &[1]), "NonZeroReserved"),
        ("emulation_credit_count_before_reserved", "EMULATION_CREDIT with count 0 and reserved byte 9 = 1: the count is checked first",
            with(with(ecred.clone(), 8, &[0]), 9, &[1]), "BadGrantCount"),
        ("emulation_credit_missing_grant", "EMULATION_CREDIT with count 3 but two grants (28 bytes)", with(ecred.clone(), 8, &[3]), "Truncated"),
        ("emulation_credit_extra_grant", "EMULATION_CREDIT with count 1 but two grants (28 bytes)", with(ecred.clone(), 8, &[1]), "LengthMismatch"),
        // --- ARBITRATION_REQUEST / ARBITRATION_RESPONSE (PASE) --------------------------------
        ("arbitration_request_short", "ARBITRATION_REQUEST of 20 bytes < 28", fix_len(areq[..20].to_vec()), "Truncated"),
        ("arbitration_request_long", "ARBITRATION_REQUEST of 29 bytes > 28", fix_len([areq.clone(), vec![0]].concat()), "LengthMismatch"),
        ("arbitration_request_flag", "ARBITRATION_REQUEST with flag FIN (no flag is allowed)", with(areq.clone(), 1, &[0x01]), "InvalidFlags"),
        ("arbitration_request_demand_0", "ARBITRATION_REQUEST with demand 0", with(areq.clone(), 20, &[0; 8]), "BadRate"),
        ("arbitration_response_short", "ARBITRATION_RESPONSE of 16 bytes < 24", fix_len(aresp[..16].to_vec()), "Truncated"),
        ("arbitration_response_long", "ARBITRATION_RESPONSE of 28 bytes > 24", fix_len([aresp.clone(), vec![0; 4]].concat()), "LengthMismatch"),
        ("arbitration_response_flag", "ARBITRATION_RESPONSE with flag ECE", with(aresp.clone(), 1, &[0x02]), "InvalidFlags"),
        ("arbitration_response_queue_8", "ARBITRATION_RESPONSE queue 8 (P0..P7 only)", with(aresp.clone(), 12, &[8]), "BadQueue"),
        ("arbitration_response_queue_255", "ARBITRATION_RESPONSE queue 255", with(aresp.clone(), 12, &[255]), "BadQueue"),
        ("arbitration_response_reserved", "ARBITRATION_RESPONSE reserved byte 15 = 1", with(aresp.clone(), 15, &[1]), "NonZeroReserved"),
        ("arbitration_response_rate_0", "ARBITRATION_RESPONSE reference rate 0", with(aresp.clone(), 16, &[0; 8]), "BadRate"),
        ("arbitration_response_queue_before_reserved", "ARBITRATION_RESPONSE queue 9 and reserved byte 13 = 1: the queue is checked first",
            with(with(aresp.clone(), 12, &[9]), 13, &[1]), "BadQueue"),
        ("arbitration_response_reserved_before_rate", "ARBITRATION_RESPONSE reserved byte 14 = 1 and rate 0: the reserved bytes are checked first",
            with(with(aresp.clone(), 14, &[1]), 16, &[0; 8]), "NonZeroReserved"),
        ("reset_bad_reason", "RESET reason 4", with(rst.clone(), 8, &[4]), "BadReason"),
        ("reset_reserved_nonzero", "RESET reserved byte 9 = 1", with(rst.clone(), 9, &[1]), "NonZeroReserved"),
    ]
}

fn main() {
    let mut valid = Vec::new();
    for (name, description, p) in valid_packets() {
        p.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = p.encode_to_vec();
        assert_eq!(Packet::decode(&bytes).as_ref(), Ok(&p), "{name}");
        valid.push(ValidVector {
            name,
            description,
            hex: hex::encode(&bytes),
            wire_len: p.wire_len(),
            header: Header {
                version: VERSION,
                type_code: p.packet_type().to_wire(),
                type_name: p.packet_type().name(),
                flags: p.flags(),
                length: bytes.len(),
                flow_id: p.flow_id(),
            },
            packet: packet_json(&p),
        });
    }

    // Non-canonical but valid: CREDIT padding content is ignored by the decoder.
    let mut valid_noncanonical = Vec::new();
    for (name, description, pad) in [
        (
            "credit_nonzero_padding",
            "CREDIT whose 6 padding bytes are 0xaa: decodes, re-encodes with zero padding",
            6u8,
        ),
        (
            "credit_nonzero_padding_max",
            "CREDIT whose 14 padding bytes are 0xff",
            14u8,
        ),
    ] {
        let p = credit(0x0102_0304, 77, pad);
        let canonical = p.encode_to_vec();
        let mut b = canonical.clone();
        let fill = if pad == 6 { 0xaa } else { 0xff };
        for x in &mut b[CREDIT_HEADER_LEN..] {
            *x = fill;
        }
        assert_eq!(Packet::decode(&b).as_ref(), Ok(&p), "{name}");
        valid_noncanonical.push(NonCanonicalVector {
            name,
            description,
            hex: hex::encode(&b),
            canonical_hex: hex::encode(&canonical),
            packet: packet_json(&p),
        });
    }

    let mut invalid = Vec::new();
    for (name, description, bytes, error) in invalid_vectors() {
        match Packet::decode(&bytes) {
            Err(e) if e.kind() == error => {}
            other => panic!("{name}: expected {error}, got {other:?}"),
        }
        invalid.push(InvalidVector {
            name,
            description,
            hex: hex::encode(&bytes),
            error,
        });
    }
    for kind in DecodeError::KINDS {
        assert!(
            invalid.iter().any(|v| v.error == kind),
            "no invalid vector for {kind}"
        );
    }

    let file = VectorFile {
        description: "FlexPass wire-protocol test vectors. Generated by `cargo run -p flexpass-wire --example gen_vectors`; verified by host-agent/crates/flexpass-wire/tests/vectors.rs and control-plane/tests/test_protocol_vectors.py.",
        spec: "docs/protocol.md",
        protocol_version: VERSION,
        default_udp_port: DEFAULT_UDP_PORT,
        error_kinds: DecodeError::KINDS.to_vec(),
        valid,
        valid_noncanonical,
        invalid,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&file).expect("serialisable")
    );
}

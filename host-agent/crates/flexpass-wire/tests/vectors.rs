//! Verifies docs/protocol-vectors.json against the Rust implementation.
//!
//! The JSON is the shared artifact (Python checks the same file); this test
//! never regenerates it. To change the vectors, edit
//! `examples/gen_vectors.rs` and regenerate deliberately.

use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::Bytes;
use flexpass_wire::*;
use serde_json::{Map, Value};

fn vectors_path() -> PathBuf {
    // crates/flexpass-wire -> crates -> host-agent -> repo root
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../docs/protocol-vectors.json")
}

fn load() -> Value {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("vectors file is valid JSON")
}

fn array<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("missing array {key}"))
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("missing string {key} in {v}"))
}

fn hex_field(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(str_field(v, key)).unwrap_or_else(|e| panic!("bad hex in {key}: {e}"))
}

/// Strict reader for a JSON object: every key must be consumed exactly once
/// (`finish` fails on leftovers), so no field in the JSON goes unchecked.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    seen: BTreeSet<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value) -> Self {
        Obj {
            map: v.as_object().expect("object"),
            seen: BTreeSet::new(),
        }
    }
    fn get(&mut self, key: &'static str) -> &'a Value {
        self.seen.insert(key);
        self.map
            .get(key)
            .unwrap_or_else(|| panic!("missing key {key} in {:?}", self.map))
    }
    fn opt(&mut self, key: &'static str) -> Option<&'a Value> {
        let v = self.map.get(key)?;
        self.seen.insert(key);
        Some(v)
    }
    fn u64(&mut self, key: &'static str) -> u64 {
        self.get(key)
            .as_u64()
            .unwrap_or_else(|| panic!("{key} not a u64"))
    }
    fn u32(&mut self, key: &'static str) -> u32 {
        u32::try_from(self.u64(key)).unwrap_or_else(|_| panic!("{key} > u32"))
    }
    fn u8(&mut self, key: &'static str) -> u8 {
        u8::try_from(self.u64(key)).unwrap_or_else(|_| panic!("{key} > u8"))
    }
    fn bool(&mut self, key: &'static str) -> bool {
        self.get(key)
            .as_bool()
            .unwrap_or_else(|| panic!("{key} not a bool"))
    }
    fn str(&mut self, key: &'static str) -> &'a str {
        self.get(key)
            .as_str()
            .unwrap_or_else(|| panic!("{key} not a string"))
    }
    fn finish(self) {
        let extra: Vec<_> = self
            .map
            .keys()
            .filter(|k| !self.seen.contains(k.as_str()))
            .collect();
        assert!(extra.is_empty(), "unchecked JSON keys: {extra:?}");
    }
}

fn subflow(s: &str) -> SubFlow {
    match s {
        "proactive" => SubFlow::Proactive,
        "reactive" => SubFlow::Reactive,
        _ => panic!("bad subflow {s}"),
    }
}

fn transport(s: &str) -> TransportKind {
    // The JSON names are the serde names of TransportKind.
    serde_json::from_value(Value::String(s.to_owned())).expect("transport name")
}

/// Builds the expected `Packet` from its JSON description (independent of
/// the generator's Packet → JSON direction).
fn packet_from_json(v: &Value) -> Packet {
    let mut o = Obj::new(v);
    let flow_id = o.u32("flow_id");
    let p = match o.str("type") {
        "credit" => Packet::Credit(Credit {
            flow_id,
            credit_seq: o.u32("credit_seq"),
            padding: o.u8("padding"),
        }),
        "data" => Packet::Data(Data {
            flow_id,
            subflow: subflow(o.str("subflow")),
            flow_seq: o.u64("flow_seq"),
            subflow_seq: o.u32("subflow_seq"),
            credit_seq: o.u32("credit_seq"),
            tsval: o.u32("tsval"),
            fin: o.bool("fin"),
            retransmission: o.bool("retransmission"),
            priority: o
                .opt("priority")
                .map(|p| u32::try_from(p.as_u64().expect("priority u64")).expect("u32")),
            payload: Bytes::from(hex::decode(o.str("payload")).expect("payload hex")),
        }),
        "ack" => {
            let mut sack = SackBlocks::new();
            for b in o.get("sack").as_array().expect("sack array") {
                let b = b.as_array().expect("block is [start, end]");
                assert_eq!(b.len(), 2);
                let n = |x: &Value| u32::try_from(x.as_u64().expect("u64")).expect("u32");
                assert!(sack.push(n(&b[0]), n(&b[1])), "more than 4 blocks");
            }
            Packet::Ack(Ack {
                flow_id,
                subflow: subflow(o.str("subflow")),
                ece: o.bool("ece"),
                cum_ack: o.u32("cum_ack"),
                ack_seq: o.u32("ack_seq"),
                tsecr: o.u32("tsecr"),
                flow_ack: o.u64("flow_ack"),
                sack,
            })
        }
        "credit_request" => Packet::CreditRequest(CreditRequest {
            flow_id,
            pending_bytes: o.u64("pending_bytes"),
        }),
        "credit_stop" => Packet::CreditStop { flow_id },
        "hello" => Packet::Hello(Hello {
            flow_id,
            transport: transport(o.str("transport")),
            flow_size: o.u64("flow_size"),
            // Optional: present exactly when the HELLO has flag CONN.
            conn: o.opt("conn").map(|c| {
                let mut c = Obj::new(c);
                let conn = HelloConn {
                    conn_id: c.u32("conn_id"),
                    src_port: u16::try_from(c.u64("src_port")).expect("src_port u16"),
                    dst_port: u16::try_from(c.u64("dst_port")).expect("dst_port u16"),
                    role: match c.str("role") {
                        "open" => ConnRole::Open,
                        "reply" => ConnRole::Reply,
                        r => panic!("bad role {r}"),
                    },
                };
                c.finish();
                conn
            }),
            // Optional: present exactly when the HELLO has flag COOKIE.
            cookie: o.opt("cookie").map(|c| c.as_u64().expect("cookie u64")),
            // Optional: true exactly when the HELLO has flag IDLE.
            idle: o
                .opt("idle")
                .is_some_and(|b| b.as_bool().expect("idle bool")),
        }),
        "hello_ack" => Packet::HelloAck(HelloAck {
            flow_id,
            transport: transport(o.str("transport")),
            status: match o.str("status") {
                "accepted" => HelloStatus::Accepted,
                "unsupported_transport" => HelloStatus::UnsupportedTransport,
                "refused" => HelloStatus::Refused,
                // The cookie is present exactly with status retry (flag COOKIE).
                "retry" => HelloStatus::Retry {
                    cookie: o.u64("cookie"),
                },
                s => panic!("bad status {s}"),
            },
        }),
        "emulation" => Packet::Emulation(Emulation {
            flow_id,
            emu_seq: o.u32("emu_seq"),
            timestamp: o.u32("timestamp"),
            hold: u16::try_from(o.u64("hold")).expect("hold u16"),
        }),
        "emulation_credit" => Packet::EmulationCredit(EmulationCredit {
            flow_id,
            grants: o
                .get("grants")
                .as_array()
                .expect("grants array")
                .iter()
                .map(|g| {
                    let g = g.as_array().expect("grant is [emu_seq, timestamp]");
                    assert_eq!(g.len(), 2);
                    let n = |x: &Value| u32::try_from(x.as_u64().expect("u64")).expect("u32");
                    EmulationGrant {
                        emu_seq: n(&g[0]),
                        timestamp: n(&g[1]),
                    }
                })
                .collect(),
        }),
        "arbitration_request" => Packet::ArbitrationRequest(ArbitrationRequest {
            flow_id,
            arb_seq: o.u32("arb_seq"),
            remaining: o.u64("remaining"),
            demand_bps: o.u64("demand_bps"),
        }),
        "arbitration_response" => Packet::ArbitrationResponse(ArbitrationResponse {
            flow_id,
            arb_seq: o.u32("arb_seq"),
            queue: o.u8("queue"),
            reference_rate_bps: o.u64("reference_rate_bps"),
        }),
        "reset" => Packet::Reset(Reset {
            flow_id,
            reason: match o.str("reason") {
                "unspecified" => ResetReason::Unspecified,
                "unknown_flow" => ResetReason::UnknownFlow,
                "protocol_violation" => ResetReason::ProtocolViolation,
                "shutdown" => ResetReason::Shutdown,
                s => panic!("bad reason {s}"),
            },
        }),
        t => panic!("unknown packet type {t}"),
    };
    o.finish();
    p
}

#[test]
fn file_metadata() {
    let v = load();
    let mut o = Obj::new(&v);
    o.str("description");
    assert_eq!(o.str("spec"), "docs/protocol.md");
    assert_eq!(o.u8("protocol_version"), VERSION);
    assert_eq!(o.u64("default_udp_port"), u64::from(DEFAULT_UDP_PORT));
    let kinds: Vec<&str> = o
        .get("error_kinds")
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kinds, DecodeError::KINDS);
    o.get("valid");
    o.get("valid_noncanonical");
    o.get("invalid");
    o.finish();
}

#[test]
fn valid_vectors_decode_and_reencode_exactly() {
    let v = load();
    let valid = array(&v, "valid");
    assert!(valid.len() >= 20);
    let mut types = BTreeSet::new();
    for vec in valid {
        let mut o = Obj::new(vec);
        let name = o.str("name");
        o.str("description");
        let bytes = hex::decode(o.str("hex")).expect("hex");
        let expected = packet_from_json(o.get("packet"));

        let decoded = Packet::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            decoded, expected,
            "{name}: decoded packet differs from JSON"
        );
        assert_eq!(
            Packet::decode_bytes(&Bytes::from(bytes.clone())).as_ref(),
            Ok(&expected),
            "{name}: decode_bytes"
        );
        assert_eq!(decoded.validate(), Ok(()), "{name}");
        assert_eq!(
            decoded.encode_to_vec(),
            bytes,
            "{name}: re-encoding differs"
        );
        assert_eq!(decoded.encoded_len(), bytes.len(), "{name}");
        assert_eq!(
            o.u64("wire_len") as usize,
            decoded.wire_len(),
            "{name}: wire_len"
        );

        // Common header, checked both against the raw bytes and the decoded value.
        let mut h = Obj::new(o.get("header"));
        let version = h.u8("version");
        let type_code = h.u8("type_code");
        assert_eq!(version, VERSION, "{name}");
        assert_eq!(bytes[0], (version << 4) | type_code, "{name}: byte 0");
        assert_eq!(type_code, decoded.packet_type().to_wire(), "{name}");
        assert_eq!(h.str("type_name"), decoded.packet_type().name(), "{name}");
        let flags = h.u8("flags");
        assert_eq!(bytes[1], flags, "{name}: flags byte");
        assert_eq!(flags, decoded.flags(), "{name}");
        let length = h.u64("length") as usize;
        assert_eq!(length, bytes.len(), "{name}: length");
        assert_eq!(
            u16::from_be_bytes([bytes[2], bytes[3]]) as usize,
            length,
            "{name}"
        );
        let flow_id = h.u32("flow_id");
        assert_eq!(
            u32::from_be_bytes(bytes[4..8].try_into().unwrap()),
            flow_id,
            "{name}"
        );
        assert_eq!(decoded.flow_id(), flow_id, "{name}");
        h.finish();
        o.finish();
        types.insert(type_code);
    }
    assert_eq!(
        types,
        (1..=13).collect(),
        "every packet type has a valid vector"
    );
}

#[test]
fn noncanonical_vectors_decode_to_canonical() {
    let v = load();
    let nc = array(&v, "valid_noncanonical");
    assert!(!nc.is_empty());
    for vec in nc {
        let mut o = Obj::new(vec);
        let name = o.str("name");
        o.str("description");
        let bytes = hex::decode(o.str("hex")).unwrap();
        let canonical = hex::decode(o.str("canonical_hex")).unwrap();
        let expected = packet_from_json(o.get("packet"));
        o.finish();
        assert_ne!(bytes, canonical, "{name}");
        let decoded = Packet::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, expected, "{name}");
        assert!(
            matches!(decoded, Packet::Credit(_)),
            "{name}: only credit padding may differ"
        );
        assert_eq!(decoded.encode_to_vec(), canonical, "{name}");
    }
}

#[test]
fn invalid_vectors_fail_with_expected_kind() {
    let v = load();
    let invalid = array(&v, "invalid");
    assert!(invalid.len() >= 15);
    let mut kinds = BTreeSet::new();
    let mut names = BTreeSet::new();
    for vec in invalid {
        let mut o = Obj::new(vec);
        let name = o.str("name");
        assert!(names.insert(name), "duplicate vector name {name}");
        o.str("description");
        let bytes = hex::decode(o.str("hex")).unwrap();
        let kind = o.str("error");
        o.finish();
        assert!(
            DecodeError::KINDS.contains(&kind),
            "{name}: unknown kind {kind}"
        );
        match Packet::decode(&bytes) {
            Err(e) => assert_eq!(e.kind(), kind, "{name}: got {e}"),
            Ok(p) => panic!("{name}: decoded as {p:?}, expected {kind}"),
        }
        kinds.insert(kind);
    }
    for k in DecodeError::KINDS {
        assert!(kinds.contains(k), "no invalid vector exercises {k}");
    }
}

/// Byte values tried at every position: extremes, small/large, neighbours of
/// the original and every single-bit flip.
fn mutation_values(orig: u8) -> Vec<u8> {
    let mut vals = vec![
        0x00, 0xff, 0x01, 0x02, 0x05, 0x09, 0x0a, 0x10, 0x1f, 0x7f, 0x80,
    ];
    vals.push(orig.wrapping_add(1));
    vals.push(orig.wrapping_sub(1));
    vals.extend((0..8).map(|bit| orig ^ (1 << bit)));
    vals.retain(|&v| v != orig);
    vals.sort_unstable();
    vals.dedup();
    vals
}

/// Decodes a mutated buffer (must not panic) and, if it is accepted, checks
/// that its re-encoding is exactly the input — except the content of CREDIT
/// padding bytes, which the encoder always writes as zeros.
fn check_canonical(bytes: &[u8], context: &str) -> bool {
    let Ok(p) = Packet::decode(bytes) else {
        return false;
    };
    assert_eq!(
        p.validate(),
        Ok(()),
        "{context}: decoded value fails validate()"
    );
    let re = p.encode_to_vec();
    match p {
        Packet::Credit(_) => {
            assert_eq!(re.len(), bytes.len(), "{context}");
            assert_eq!(re[..12], bytes[..12], "{context}: credit header");
            assert!(
                re[12..].iter().all(|&b| b == 0),
                "{context}: padding not zero"
            );
        }
        _ => assert_eq!(re, bytes, "{context}: accepted non-canonical encoding"),
    }
    assert_eq!(Packet::decode(&re).as_ref(), Ok(&p), "{context}");
    true
}

#[test]
fn mutations_and_truncations_never_panic_and_stay_canonical() {
    let v = load();
    let mut accepted = 0usize;
    let mut tried = 0usize;
    for vec in array(&v, "valid") {
        let name = str_field(vec, "name");
        let bytes = hex_field(vec, "hex");
        // Every single-byte mutation.
        for pos in 0..bytes.len() {
            for val in mutation_values(bytes[pos]) {
                let mut m = bytes.clone();
                m[pos] = val;
                tried += 1;
                if check_canonical(&m, &format!("{name} byte {pos} = {val:#04x}")) {
                    accepted += 1;
                }
            }
        }
        // Every truncation (including empty), raw and with the length field
        // patched to match, and one-byte extensions.
        for cut in 0..bytes.len() {
            let t = &bytes[..cut];
            tried += 1;
            // The length field no longer matches (or is absent): always an error.
            let err = Packet::decode(t).expect_err("truncated buffer accepted");
            let want = if cut < COMMON_HEADER_LEN {
                "Truncated"
            } else {
                "LengthMismatch"
            };
            assert_eq!(err.kind(), want, "{name}: cut {cut}");
            if cut >= 4 {
                let mut f = t.to_vec();
                f[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
                tried += 1;
                if check_canonical(&f, &format!("{name} truncated to {cut}, length fixed")) {
                    accepted += 1;
                }
            }
        }
        for extra in [0x00u8, 0xff] {
            let mut e = bytes.clone();
            e.push(extra);
            let n = e.len() as u16;
            e[2..4].copy_from_slice(&n.to_be_bytes());
            tried += 1;
            if check_canonical(&e, &format!("{name} extended by {extra:#04x}")) {
                accepted += 1;
            }
        }
    }
    // Sanity: the loop really exercised both outcomes.
    assert!(tried > 10_000, "tried {tried}");
    assert!(accepted > 1_000, "accepted {accepted}");
}

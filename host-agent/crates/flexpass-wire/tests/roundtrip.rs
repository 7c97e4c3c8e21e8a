//! Property tests: encode/decode round trips and panic freedom.

use bytes::Bytes;
use flexpass_wire::*;
use proptest::prelude::*;

fn subflow() -> impl Strategy<Value = SubFlow> {
    prop_oneof![Just(SubFlow::Proactive), Just(SubFlow::Reactive)]
}

fn transport() -> impl Strategy<Value = TransportKind> {
    prop_oneof![
        Just(TransportKind::FlexPass),
        Just(TransportKind::ExpressPass),
        Just(TransportKind::Dctcp)
    ]
}

fn status() -> impl Strategy<Value = HelloStatus> {
    prop_oneof![
        Just(HelloStatus::Accepted),
        Just(HelloStatus::UnsupportedTransport),
        Just(HelloStatus::Refused),
        any::<u64>().prop_map(|cookie| HelloStatus::Retry { cookie })
    ]
}

fn conn() -> impl Strategy<Value = HelloConn> {
    (
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        prop_oneof![Just(ConnRole::Open), Just(ConnRole::Reply)],
    )
        .prop_map(|(conn_id, src_port, dst_port, role)| HelloConn {
            conn_id,
            src_port,
            dst_port,
            role,
        })
}

fn reason() -> impl Strategy<Value = ResetReason> {
    prop_oneof![
        Just(ResetReason::Unspecified),
        Just(ResetReason::UnknownFlow),
        Just(ResetReason::ProtocolViolation),
        Just(ResetReason::Shutdown)
    ]
}

/// u32 biased towards the edges of the range.
fn any_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        0u32..16,
        any::<u32>()
    ]
}

fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), 0u64..1 << 20, any::<u64>()]
}

fn valid_data() -> impl Strategy<Value = Packet> {
    (
        any_u32(),
        subflow(),
        any_u64(),
        any_u32(),
        any_u32(),
        any_u32(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..=MAX_PAYLOAD_1500),
    )
        .prop_map(
            |(flow_id, subflow, flow_seq, subflow_seq, credit_seq, tsval, fin, retx, payload)| {
                let len = payload.len() as u64;
                Packet::Data(Data {
                    flow_id,
                    subflow,
                    // Clamp so that flow_seq + len does not overflow.
                    flow_seq: flow_seq.min(u64::MAX - len),
                    subflow_seq,
                    credit_seq: if subflow == SubFlow::Reactive {
                        0
                    } else {
                        credit_seq
                    },
                    tsval,
                    fin: fin || payload.is_empty(),
                    retransmission: retx,
                    priority: None,
                    payload: Bytes::from(payload),
                })
            },
        )
}

fn valid_ack() -> impl Strategy<Value = Packet> {
    (
        any_u32(),
        subflow(),
        any::<bool>(),
        prop_oneof![
            Just(0u32),
            Just(u32::MAX - 2),
            any::<u32>().prop_map(|x| x / 2)
        ],
        any_u32(),
        any_u32(),
        any_u64(),
        prop::collection::vec((any::<u32>(), any::<u32>()), 0..=MAX_SACK_BLOCKS),
    )
        .prop_map(
            |(flow_id, subflow, ece, cum_ack, ack_seq, tsecr, flow_ack, raw)| {
                // cum_ack <= u32::MAX - 2, so there is room for a block above it.
                let cum_ack = cum_ack.min(u32::MAX - 2);
                let mut sack = SackBlocks::new();
                for (a, b) in raw {
                    // Map arbitrary numbers into cum_ack < start < end <= u32::MAX.
                    let room = u32::MAX - cum_ack - 1; // number of possible starts - 1
                    let start = cum_ack + 1 + a % room.max(1);
                    let end = start + 1 + b % (u32::MAX - start);
                    sack.push(start, end);
                }
                Packet::Ack(Ack {
                    flow_id,
                    subflow,
                    ece,
                    cum_ack,
                    ack_seq,
                    tsecr,
                    flow_ack,
                    sack,
                })
            },
        )
}

fn valid_packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        (any_u32(), any_u32(), 6u8..=14).prop_map(|(flow_id, credit_seq, padding)| Packet::Credit(
            Credit {
                flow_id,
                credit_seq,
                padding
            }
        )),
        valid_data(),
        valid_ack(),
        (any_u32(), any_u64()).prop_map(|(flow_id, pending_bytes)| Packet::CreditRequest(
            CreditRequest {
                flow_id,
                pending_bytes
            }
        )),
        any_u32().prop_map(|flow_id| Packet::CreditStop { flow_id }),
        (
            any_u32(),
            transport(),
            any_u64(),
            proptest::option::of(conn()),
            proptest::option::of(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(flow_id, transport, flow_size, conn, cookie, idle)| {
                Packet::Hello(Hello {
                    flow_id,
                    transport,
                    flow_size,
                    conn,
                    cookie,
                    idle,
                })
            }),
        (any_u32(), transport(), status()).prop_map(|(flow_id, transport, status)| {
            Packet::HelloAck(HelloAck {
                flow_id,
                transport,
                status,
            })
        }),
        (any_u32(), reason())
            .prop_map(|(flow_id, reason)| Packet::Reset(Reset { flow_id, reason })),
        (any_u32(), any_u32(), any_u64(), any_u64()).prop_map(
            |(flow_id, arb_seq, remaining, demand)| {
                Packet::ArbitrationRequest(ArbitrationRequest {
                    flow_id,
                    arb_seq,
                    remaining,
                    demand_bps: demand.max(1),
                })
            }
        ),
        (any_u32(), any_u32(), 0u8..8, any_u64()).prop_map(|(flow_id, arb_seq, queue, rate)| {
            Packet::ArbitrationResponse(ArbitrationResponse {
                flow_id,
                arb_seq,
                queue,
                reference_rate_bps: rate.max(1),
            })
        }),
    ]
}

/// Arbitrary packets, including ones that violate the encoding rules.
fn any_packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        valid_packet(),
        (any_u32(), any_u32(), any::<u8>()).prop_map(|(flow_id, credit_seq, padding)| {
            Packet::Credit(Credit {
                flow_id,
                credit_seq,
                padding,
            })
        }),
        (
            any_u32(),
            subflow(),
            any_u64(),
            any_u32(),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(
                |(flow_id, subflow, flow_seq, credit_seq, fin, retx, payload)| Packet::Data(Data {
                    flow_id,
                    subflow,
                    flow_seq,
                    subflow_seq: 1,
                    credit_seq,
                    tsval: 2,
                    fin,
                    retransmission: retx,
                    priority: None,
                    payload: Bytes::from(payload),
                })
            ),
        (
            any_u32(),
            prop::collection::vec((any_u32(), any_u32()), 0..=MAX_SACK_BLOCKS)
        )
            .prop_map(|(cum_ack, blocks)| Packet::Ack(Ack {
                flow_id: 1,
                subflow: SubFlow::Proactive,
                ece: false,
                cum_ack,
                ack_seq: 0,
                tsecr: 0,
                flow_ack: 0,
                sack: SackBlocks::from_slice(&blocks).unwrap(),
            })),
        // Queues beyond P7 and zero rates have no encoding (BadQueue, BadRate).
        (any::<u8>(), prop_oneof![Just(0u64), any_u64()]).prop_map(|(queue, rate)| {
            Packet::ArbitrationResponse(ArbitrationResponse {
                flow_id: 3,
                arb_seq: 4,
                queue,
                reference_rate_bps: rate,
            })
        }),
        prop_oneof![Just(0u64), any_u64()].prop_map(|demand_bps| {
            Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: 3,
                arb_seq: 4,
                remaining: 5,
                demand_bps,
            })
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Every valid Packet round-trips through encode → decode.
    #[test]
    fn valid_packet_roundtrip(p in valid_packet()) {
        prop_assert_eq!(p.validate(), Ok(()));
        let bytes = p.encode_to_vec();
        prop_assert_eq!(bytes.len(), p.encoded_len());
        prop_assert_eq!(Packet::decode(&bytes), Ok(p.clone()));
        prop_assert_eq!(Packet::decode_bytes(&Bytes::from(bytes)), Ok(p));
    }

    /// `validate()` accepts exactly the values that round-trip; encode never panics.
    #[test]
    fn validate_matches_roundtrip(p in any_packet()) {
        let bytes = p.encode_to_vec();
        let back = Packet::decode(&bytes);
        if p.validate().is_ok() {
            prop_assert_eq!(back, Ok(p));
        } else {
            prop_assert!(back.as_ref() != Ok(&p), "invalid value round-tripped: {:?}", p);
        }
    }

    /// Arbitrary bytes never panic the decoder; accepted input is canonical.
    #[test]
    fn decode_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..96), fix_len in any::<bool>(), hdr in 0x11u8..=0x1d) {
        let mut bytes = bytes;
        // Bias towards plausible headers so that bodies get exercised.
        if fix_len && bytes.len() >= 8 {
            bytes[0] = hdr;
            let n = bytes.len() as u16;
            bytes[2..4].copy_from_slice(&n.to_be_bytes());
        }
        if let Ok(p) = Packet::decode(&bytes) {
            let re = p.encode_to_vec();
            if matches!(p, Packet::Credit(_)) {
                prop_assert_eq!(&re[..12], &bytes[..12]);
                prop_assert_eq!(re.len(), bytes.len());
            } else {
                prop_assert_eq!(re, bytes);
            }
        }
    }
}

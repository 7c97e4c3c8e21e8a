//! Seeds of the `decode` target: one canonical message of every type (docs/protocol.md §4),
//! PASE's ARBITRATION_REQUEST and ARBITRATION_RESPONSE included, so libFuzzer starts from
//! every body layout instead of finding each type nibble and length by chance.

use bytes::Bytes;
use flexpass_wire::*;

/// (file name, message bytes); `tests/seeds.rs` checks that every type is here and decodes.
pub fn decode_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let data = |subflow, fin, priority| {
        Packet::Data(Data {
            flow_id: 7,
            subflow,
            flow_seq: 1444,
            subflow_seq: 1,
            credit_seq: 0,
            tsval: 99,
            fin,
            retransmission: false,
            priority,
            payload: Bytes::from_static(b"FlexPass"),
        })
    };
    let packets = [
        (
            "credit",
            Packet::Credit(Credit {
                flow_id: 7,
                credit_seq: 3,
                padding: 6,
            }),
        ),
        ("proactive_data", data(SubFlow::Proactive, false, None)),
        (
            "reactive_data_prio_fin",
            data(SubFlow::Reactive, true, Some(5000)),
        ),
        (
            "ack_sack",
            Packet::Ack(Ack {
                flow_id: 7,
                subflow: SubFlow::Reactive,
                ece: true,
                cum_ack: 2,
                ack_seq: 4,
                tsecr: 99,
                flow_ack: 2888,
                sack: SackBlocks::from_slice(&[(4, 5)]).expect("one block"),
            }),
        ),
        (
            "credit_request",
            Packet::CreditRequest(CreditRequest {
                flow_id: 7,
                pending_bytes: 1,
            }),
        ),
        ("credit_stop", Packet::CreditStop { flow_id: 7 }),
        (
            "hello_conn_cookie",
            Packet::Hello(Hello {
                flow_id: 7,
                transport: TransportKind::Pase,
                flow_size: 100_000,
                conn: Some(HelloConn {
                    conn_id: 7,
                    src_port: 1,
                    dst_port: 2,
                    role: ConnRole::Open,
                }),
                cookie: Some(42),
                idle: false,
            }),
        ),
        (
            "hello_ack_retry",
            Packet::HelloAck(HelloAck {
                flow_id: 7,
                transport: TransportKind::Pase,
                status: HelloStatus::Retry { cookie: 42 },
            }),
        ),
        (
            "reset",
            Packet::Reset(Reset {
                flow_id: 7,
                reason: ResetReason::Shutdown,
            }),
        ),
        (
            "emulation",
            Packet::Emulation(Emulation {
                flow_id: 7,
                emu_seq: 1,
                timestamp: 2,
                hold: 3,
            }),
        ),
        (
            "emulation_credit",
            Packet::EmulationCredit(EmulationCredit {
                flow_id: 7,
                grants: vec![EmulationGrant {
                    emu_seq: 1,
                    timestamp: 2,
                }],
            }),
        ),
        (
            "arbitration_request",
            Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: 7,
                arb_seq: 1,
                remaining: 100_000,
                demand_bps: 10_000_000_000,
            }),
        ),
        (
            "arbitration_response",
            Packet::ArbitrationResponse(ArbitrationResponse {
                flow_id: 7,
                arb_seq: 1,
                queue: 3,
                reference_rate_bps: 2_500_000_000,
            }),
        ),
    ];
    packets
        .into_iter()
        .map(|(name, p)| (name, p.encode_to_vec()))
        .collect()
}

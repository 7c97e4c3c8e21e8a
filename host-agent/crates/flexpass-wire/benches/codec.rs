//! Encode / decode cost of the three per-packet messages: a full-size (1444-byte payload)
//! data packet, an ACK with 4 SACK blocks, and a credit.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use flexpass_wire::{
    Ack, Credit, Data, Packet, SackBlocks, SubFlow, CREDIT_PADDING_MIN, MAX_PAYLOAD_1500,
};
use std::time::Duration;

fn messages() -> Vec<(&'static str, Packet)> {
    let data = Packet::Data(Data {
        flow_id: 0x0102_0304,
        subflow: SubFlow::Proactive,
        flow_seq: 1_234_567_890,
        subflow_seq: 854_321,
        credit_seq: 854_400,
        tsval: 0xdead_beef,
        fin: false,
        retransmission: false,
        priority: None,
        payload: Bytes::from((0..MAX_PAYLOAD_1500).map(|i| i as u8).collect::<Vec<u8>>()),
    });
    let sack = SackBlocks::from_slice(&[(1010, 1012), (1020, 1025), (1030, 1031), (1040, 1048)])
        .expect("4 blocks fit");
    let ack = Packet::Ack(Ack {
        flow_id: 0x0102_0304,
        subflow: SubFlow::Reactive,
        ece: true,
        cum_ack: 1000,
        ack_seq: 1047,
        tsecr: 0xdead_beef,
        flow_ack: 1_234_567_890,
        sack,
    });
    let credit = Packet::Credit(Credit {
        flow_id: 0x0102_0304,
        credit_seq: 854_400,
        padding: CREDIT_PADDING_MIN,
    });
    vec![("data_1444", data), ("ack_4sack", ack), ("credit", credit)]
}

fn codec(c: &mut Criterion) {
    for (name, p) in messages() {
        p.validate().expect("benchmark messages are valid");
        let wire = Bytes::from(p.encode_to_vec());
        assert_eq!(Packet::decode(&wire).as_ref(), Ok(&p), "{name} round-trips");
        let mut g = c.benchmark_group(format!("codec/{name}"));
        g.measurement_time(Duration::from_secs(3))
            .warm_up_time(Duration::from_secs(1));
        g.throughput(Throughput::Bytes(wire.len() as u64));
        let mut out = Vec::with_capacity(wire.len());
        g.bench_function("encode", |b| {
            b.iter(|| {
                out.clear();
                black_box(&p).encode(&mut out);
                black_box(out.len())
            })
        });
        g.bench_function("decode", |b| b.iter(|| Packet::decode(black_box(&wire))));
        if matches!(p, Packet::Data(_)) {
            // Zero-copy: the payload shares the receive buffer.
            g.bench_function("decode_bytes", |b| {
                b.iter(|| Packet::decode_bytes(black_box(&wire)))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, codec);
criterion_main!(benches);

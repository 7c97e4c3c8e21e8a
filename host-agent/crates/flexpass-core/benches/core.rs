//! Per-packet costs of the sans-IO core:
//! - `sender/per_credit`: a FlexPass sender handles one CREDIT and `poll_transmit` turns it
//!   into a proactive data packet (the credit-to-data decision of the sub-flow scheduler).
//! - `receiver/per_data_packet`: a FlexPass receiver handles one in-order 1444-byte proactive
//!   data packet, produces its ACK and hands the payload to the application.
//!
//! Both keep the state machines in a steady state: the sender's data is ACKed (through a
//! real `Receiver`) and its buffer refilled between timed chunks, outside the measurement.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use flexpass_core::wire::{
    Credit, Data, Hello, HelloAck, HelloStatus, Packet, SubFlow, TransportKind, MAX_PAYLOAD_1500,
};
use flexpass_core::{CreditConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig};
use std::time::{Duration, Instant};

const FLOW: u32 = 7;
/// Application bytes written at a time (shared storage: re-writing is a refcount bump).
const CHUNK_BYTES: usize = 16 << 20;
/// Credits per timed chunk: about one bandwidth-delay product of credits in flight at
/// 10 Gbit/s, 25 µs RTT; the sender's data is ACKed between chunks.
const CREDITS_PER_CHUNK: u64 = 32;
/// Credit spacing at 10 Gbit/s with w_q = 0.5: one 1538-byte frame per 2.46 µs.
const CREDIT_GAP: Nanos = 2_460;

fn receiver_config() -> ReceiverConfig {
    ReceiverConfig::new(CreditConfig::for_link(10e9, 0.5, 25_000))
}

/// A FlexPass sender with an established flow, plenty of data, and the receiver that ACKs it.
struct SenderBench {
    tx: Sender,
    rx: Receiver,
    data: Bytes,
    now: Nanos,
    credit_seq: u32,
    sent: Vec<Packet>,
}

impl SenderBench {
    fn new() -> Self {
        let now = 1_000_000;
        let mut tx = Sender::new(FLOW, SenderConfig::new(TransportKind::FlexPass), 0, now)
            .expect("sender config");
        // The receiver never sees HELLO, so it never paces credits itself: its
        // poll_transmit yields only the ACKs the benchmark asks for.
        let rx = Receiver::new(FLOW, TransportKind::FlexPass, &receiver_config())
            .expect("receiver config");
        let data = Bytes::from(vec![0x5a; CHUNK_BYTES]);
        assert!(tx.write(data.clone()));
        let hello_ack = Packet::HelloAck(HelloAck {
            flow_id: FLOW,
            transport: TransportKind::FlexPass,
            status: HelloStatus::Accepted,
        });
        tx.handle_packet(now, &hello_ack)
            .expect("HELLO_ACK accepted");
        let mut b = SenderBench {
            tx,
            rx,
            data,
            now,
            credit_seq: 0,
            sent: Vec::with_capacity(4 * CREDITS_PER_CHUNK as usize),
        };
        // HELLO, the reactive sub-flow's initial window: out of the way before timing.
        while let Some(t) = b.tx.poll_transmit(now) {
            b.sent.push(t.packet);
        }
        b.settle();
        b
    }

    /// Untimed: deliver everything sent to the receiver, ACK it, refill the send buffer.
    fn settle(&mut self) {
        for p in self.sent.drain(..) {
            if matches!(p, Packet::Data(_)) {
                self.rx
                    .handle_packet(self.now, &p, false)
                    .expect("data accepted");
            }
        }
        while let Some(t) = self.rx.poll_transmit(self.now) {
            self.tx
                .handle_packet(self.now, &t.packet)
                .expect("ACK accepted");
        }
        while self.rx.read().is_some() {}
        // Packets the ACKs released (control, the reactive sub-flow's window) are sent now
        // too, at most as many as credits per chunk: the reactive sub-flow of a lone
        // FlexPass flow gets about the proactive one's share, and its slow start must not
        // grow the untimed work without bound.
        for _ in 0..CREDITS_PER_CHUNK {
            match self.tx.poll_transmit(self.now) {
                Some(t) => self.sent.push(t.packet),
                None => break,
            }
        }
        if self.tx.pending_bytes() < (CHUNK_BYTES / 2) as u64 {
            assert!(self.tx.write(self.data.clone()));
        }
    }

    /// Timed: `n` credits, each handled and answered with one `poll_transmit`.
    fn credits(&mut self, n: u64) -> Duration {
        let start = Instant::now();
        for _ in 0..n {
            self.now += CREDIT_GAP;
            self.credit_seq = self.credit_seq.wrapping_add(1);
            let credit = Packet::Credit(Credit {
                flow_id: FLOW,
                credit_seq: self.credit_seq,
                padding: 6,
            });
            let _ = self.tx.handle_packet(self.now, black_box(&credit));
            if let Some(t) = self.tx.poll_transmit(self.now) {
                self.sent.push(black_box(t).packet);
            }
        }
        start.elapsed()
    }
}

fn sender(c: &mut Criterion) {
    let mut g = c.benchmark_group("sender");
    g.measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(1));
    let mut b = SenderBench::new();
    g.bench_function("per_credit", |bencher| {
        bencher.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(CREDITS_PER_CHUNK);
                total += b.credits(n);
                b.settle();
                done += n;
            }
            total
        })
    });
    let st = b.tx.stats();
    assert!(
        st.packets_proactive > 0 && st.credits_wasted == 0,
        "credits must turn into data: {st:?}"
    );
    g.finish();
}

fn receiver(c: &mut Criterion) {
    let mut g = c.benchmark_group("receiver");
    g.measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Bytes(MAX_PAYLOAD_1500 as u64));
    let mut rx =
        Receiver::new(FLOW, TransportKind::FlexPass, &receiver_config()).expect("receiver config");
    let hello = Packet::Hello(Hello {
        flow_id: FLOW,
        transport: TransportKind::FlexPass,
        flow_size: 0,
        conn: None,
        cookie: None,
        idle: false,
    });
    rx.handle_packet(0, &hello, false).expect("HELLO accepted");
    assert!(matches!(
        rx.poll_transmit(0).map(|t| t.packet),
        Some(Packet::HelloAck(_))
    ));
    let payload = Bytes::from(vec![0xa5; MAX_PAYLOAD_1500]);
    let mut seq: u32 = 0;
    let mut now: Nanos = 0;
    g.bench_function("per_data_packet", |bencher| {
        bencher.iter_batched(
            || {
                let d = Data {
                    flow_id: FLOW,
                    subflow: SubFlow::Proactive,
                    flow_seq: u64::from(seq) * MAX_PAYLOAD_1500 as u64,
                    subflow_seq: seq,
                    credit_seq: seq,
                    tsval: (now / 1_000) as u32,
                    fin: false,
                    retransmission: false,
                    priority: None,
                    payload: payload.clone(),
                };
                seq += 1;
                now += CREDIT_GAP;
                (now, Packet::Data(d))
            },
            |(now, pkt)| {
                let _ = rx.handle_packet(now, &pkt, false);
                let ack = rx.poll_transmit(now);
                let read = rx.read();
                (ack, read, pkt)
            },
            BatchSize::SmallInput,
        )
    });
    assert_eq!(
        rx.delivered_bytes(),
        u64::from(seq) * MAX_PAYLOAD_1500 as u64,
        "every packet delivered in order"
    );
    assert_eq!(rx.stats().rejected_packets, 0);
    g.finish();
}

criterion_group!(benches, sender, receiver);
criterion_main!(benches);

//! PPT (SIGCOMM'24) sender and receiver over a simple channel (fixed or random delay, loss,
//! CE marks): the LCP's exponential window decrease, its reaction to ECE, the priority tags,
//! and byte-exact delivery when both loops lose and reorder packets.

use bytes::Bytes;
use flexpass_core::{
    CreditConfig, Nanos, PptConfig, Receiver, ReceiverConfig, Sender, SenderConfig, Transmit,
    MICROS, MILLIS,
};
use flexpass_wire::{Packet, SubFlow, TrafficClass, TransportKind};
use harness::{pattern, Dir, Fate, Pair};
use rand::{Rng, SeedableRng};

mod harness;

const MSS: u64 = 1444;

fn ppt_config(rtt: Nanos, i: u64) -> SenderConfig {
    let mut c = SenderConfig::new(TransportKind::Ppt);
    c.ppt = PptConfig {
        base_rtt: rtt,
        // I = BDP − initial window = `i` packets.
        bdp_bytes: (i + c.dctcp.init_cwnd as u64) * MSS,
        ..PptConfig::for_link(10e9, rtt)
    };
    c
}

fn receiver() -> Receiver {
    Receiver::new(
        7,
        TransportKind::Ppt,
        &ReceiverConfig::new(CreditConfig::for_link(10e9, 1.0, 20 * MICROS)),
    )
    .unwrap()
}

/// A sent data packet: (time, sub-flow, flow offset, class).
type DataSent = (Nanos, SubFlow, u64, TrafficClass);

/// Run one flow from `s` until the receiver has it all and the sender knows (or `limit`),
/// over `path`.
fn run<'a>(
    s: Sender,
    limit: Nanos,
    path: impl FnMut(&Transmit, Dir, Nanos) -> Fate + 'a,
) -> Pair<'a> {
    let mut p = Pair::new(s, receiver()).with_path(path);
    p.run(limit, |p| p.r.is_finished() && p.s.is_complete());
    p
}

/// The data packets the sender sent.
fn data_sent(p: &Pair) -> Vec<DataSent> {
    p.log
        .iter()
        .filter(|x| x.dir == Dir::ToReceiver)
        .filter_map(|x| match &x.transmit.packet {
            Packet::Data(d) => Some((x.at, d.subflow, d.flow_seq, x.transmit.class)),
            _ => None,
        })
        .collect()
}

fn lcp_per_rtt(sent: &[DataSent], rtt: Nanos, rounds: usize) -> Vec<usize> {
    let lcp: Vec<Nanos> = sent
        .iter()
        .filter(|x| x.1 == SubFlow::Proactive)
        .map(|x| x.0)
        .collect();
    let t0 = lcp[0];
    (0..rounds)
        .map(|k| {
            lcp.iter()
                .filter(|&&t| t >= t0 + k as Nanos * rtt && t < t0 + (k as Nanos + 1) * rtt)
                .count()
        })
        .collect()
}

#[test]
fn ewd_halves_the_lcp_window_every_rtt() {
    // One-way delay 10 µs, no bandwidth limit, no marks: the LCP opens with the flow
    // (first RTT, not large... the flow is written in small pieces, so not identified) with
    // I = 64 paced over one RTT; the receiver returns one low-priority ACK per two
    // opportunistic packets and each releases one: 64, 32, 16, 8, 4, 2, 1 per RTT.
    let rtt = 20 * MICROS;
    let mut cfg = ppt_config(rtt, 64);
    cfg.ppt.large_flow_threshold = u64::MAX;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    let data = pattern(20 << 20);
    s.write(Bytes::from(data.clone()));
    s.finish();
    let p = run(s, 10 * rtt, move |_, _, _| Fate::after(rtt / 2));
    let sent = data_sent(&p);
    let per_rtt = lcp_per_rtt(&sent, rtt, 8);
    assert_eq!(per_rtt, vec![64, 32, 16, 8, 4, 2, 1, 0], "{per_rtt:?}");
    // Opportunistic packets come from the tail of the buffer, downwards, and never
    // overlap what the HCP sent from the head.
    let lcp: Vec<u64> = sent
        .iter()
        .filter(|x| x.1 == SubFlow::Proactive)
        .map(|x| x.2)
        .collect();
    assert_eq!(
        lcp[0],
        (data.len() as u64 - 1) / MSS * MSS,
        "the last segment first"
    );
    assert!(lcp.windows(2).all(|w| w[1] < w[0]));
    // The HCP sends again only the one opportunistic packet still unacknowledged when the
    // loop closed (the receiver waits for its pair).
    let resent = sent
        .iter()
        .filter(|x| x.1 == SubFlow::Reactive && lcp.contains(&x.2))
        .count();
    assert!(resent <= 1, "{resent}");
    // The loop closed 2 RTTs after its last low-priority ACK.
    let st = &p.s.stats().lcp;
    assert_eq!((st.loops_case1, st.closed), (1, 1), "{st:?}");
    assert_eq!(st.initial_window_packets, 64);
    assert_eq!(
        p.r.stats().lp_acks_sent,
        63,
        "one per two opportunistic packets"
    );
}

#[test]
fn without_ewd_the_window_holds() {
    let rtt = 20 * MICROS;
    let mut cfg = ppt_config(rtt, 16);
    cfg.ppt.large_flow_threshold = u64::MAX;
    cfg.ppt.ewd = false;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from(pattern(20 << 20)));
    s.finish();
    let p = run(s, 8 * rtt, move |_, _, _| Fate::after(rtt / 2));
    let sent = data_sent(&p);
    let per_rtt = lcp_per_rtt(&sent, rtt, 6);
    assert_eq!(per_rtt, vec![16; 6], "{per_rtt:?}");
    // The whole initial window leaves at once (line rate), not paced.
    let lcp: Vec<Nanos> = sent
        .iter()
        .filter(|x| x.1 == SubFlow::Proactive)
        .map(|x| x.0)
        .collect();
    assert!(lcp[..16].iter().all(|&t| t == lcp[0]));
}

#[test]
fn marked_low_priority_acks_release_nothing() {
    // Every opportunistic packet is CE-marked: the low-priority ACKs carry ECE and the LCP
    // sends its initial window only; the HCP is untouched (its packets are not marked).
    let rtt = 20 * MICROS;
    let mut cfg = ppt_config(rtt, 32);
    cfg.ppt.large_flow_threshold = u64::MAX;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    let data = pattern(3 << 20);
    s.write(Bytes::from(data.clone()));
    s.finish();
    let p = run(s, 100 * MILLIS, move |t, _, _| {
        let lcp = matches!(&t.packet, Packet::Data(d) if d.subflow == SubFlow::Proactive);
        Fate::Deliver {
            delay: rtt / 2,
            ce: lcp,
        }
    });
    let sent = data_sent(&p);
    assert_eq!(p.delivered, data);
    let lcp = sent.iter().filter(|x| x.1 == SubFlow::Proactive).count();
    assert_eq!(lcp, 32, "the initial window, nothing released");
    assert_eq!(p.s.stats().lcp.lp_acks_ece, 16);
}

#[test]
fn priorities_mirror_between_the_loops_and_large_flows_wait_a_rtt() {
    let rtt = 20 * MICROS;
    // A small flow (50 kB ≤ 100 kB identification threshold): HCP P0, LCP P4, LCP from
    // the first RTT.
    let mut s = Sender::new(7, ppt_config(rtt, 20), 50_000, 0).unwrap();
    s.write(Bytes::from(pattern(50_000)));
    s.finish();
    let p = run(s, 100 * MILLIS, move |_, _, _| Fate::after(rtt / 2));
    let sent = data_sent(&p);
    assert!(!p.s.stats().identified_large);
    let first_lcp = sent.iter().find(|x| x.1 == SubFlow::Proactive).unwrap();
    assert_eq!(first_lcp.0, 0, "first RTT");
    for x in &sent {
        let want = match x.1 {
            SubFlow::Reactive => 0,
            SubFlow::Proactive => 4,
        };
        assert_eq!(x.3, TrafficClass::Priority(want), "{x:?}");
    }
    // A large one (first write 2 MB > 100 kB): HCP P3, LCP P7, LCP from the second RTT.
    let mut s = Sender::new(7, ppt_config(rtt, 20), 0, 0).unwrap();
    s.write(Bytes::from(pattern(2_000_000)));
    s.finish();
    let p = run(s, 100 * MILLIS, move |_, _, _| Fate::after(rtt / 2));
    let sent = data_sent(&p);
    assert!(p.s.stats().identified_large);
    let first_lcp = sent.iter().find(|x| x.1 == SubFlow::Proactive).unwrap();
    assert_eq!(first_lcp.0, rtt, "second RTT: with the HELLO_ACK");
    for x in &sent {
        let want = match x.1 {
            SubFlow::Reactive => 3,
            SubFlow::Proactive => 7,
        };
        assert_eq!(x.3, TrafficClass::Priority(want), "{x:?}");
    }
    // A stream written in small pieces is not identified; its priority drops with bytes sent.
    let mut s = Sender::new(7, ppt_config(rtt, 20), 0, 0).unwrap();
    s.write(Bytes::from(pattern(1000)));
    // The first look at the send buffer finds 1000 bytes (the HELLO and this first packet
    // are lost here: they go again after their timeouts).
    for _ in 0..1000 {
        if s.poll_transmit(0).is_none() {
            break;
        }
    }
    for _ in 0..2000 {
        s.write(Bytes::from(pattern(1000)));
    }
    s.finish();
    let p = run(s, 500 * MILLIS, move |_, _, _| Fate::after(rtt / 2));
    let sent = data_sent(&p);
    let levels: Vec<u8> = sent
        .iter()
        .filter(|x| x.1 == SubFlow::Reactive)
        .map(|x| x.3.priority().unwrap())
        .collect();
    assert_eq!(levels[0], 0);
    assert_eq!(*levels.last().unwrap(), 2, "past 1 MB sent: P2");
    assert!(levels.windows(2).all(|w| w[1] >= w[0]));
}

#[test]
fn byte_exact_delivery_with_loss_and_reordering_on_both_loops() {
    for seed in 0..24u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let size = [1usize, 1444, 30_000, 150_000, 700_000][seed as usize % 5] + seed as usize;
        let rtt = 20 * MICROS;
        let mut cfg = ppt_config(rtt, 40);
        cfg.dctcp.rto_min = MILLIS;
        let mut s = Sender::new(7, cfg, size as u64, 0).unwrap();
        let data = pattern(size);
        s.write(Bytes::from(data.clone()));
        s.finish();
        let loss = 0.02 + 0.02 * (seed % 3) as f64;
        let p = run(s, 20_000 * MILLIS, move |_, _, _| {
            if rng.gen_bool(loss) {
                return Fate::Lost;
            }
            let delay = rtt / 2 + rng.gen_range(0..rtt);
            Fate::Deliver {
                delay,
                ce: rng.gen_bool(0.05),
            }
        });
        assert_eq!(p.delivered.len(), data.len(), "seed {seed}");
        assert!(p.delivered == data, "seed {seed}: corrupted");
        assert!(p.s.is_complete(), "seed {seed}: {:?}", p.s.stats());
    }
}

//! pFabric's end host (SIGCOMM'13 §4) driven directly: every data packet carries the flow's
//! remaining size, the first window is the BDP (line rate), the RTO is about 3 RTTs, and a
//! receiver rejects data whose PRIO field does not match its transport.

use bytes::Bytes;
use flexpass_core::pfabric::RTO_RTTS;
use flexpass_core::receiver::Rejected;
use flexpass_core::{PFabricConfig, Sender, SenderConfig, MICROS};
use flexpass_wire::{Packet, SubFlow, TransportKind, PRIORITY_LEN};
use harness::{drain, receiver, Fate, Pair};

mod harness;

fn config() -> SenderConfig {
    let mut c = SenderConfig::new(TransportKind::PFabric);
    c.pfabric = PFabricConfig {
        bdp_bytes: 12 * 1440,
        base_rtt: 20 * MICROS,
    };
    c
}

#[test]
fn line_rate_start_and_remaining_size_priorities() {
    let size = 100 * 1440u64;
    let mut s = Sender::new(7, config(), size, 0).unwrap();
    s.write(Bytes::from(vec![1u8; size as usize]));
    s.finish();
    let out = drain(&mut s, 0);
    assert!(matches!(out[0], Packet::Hello(_)));
    let data: Vec<_> = out
        .iter()
        .filter_map(|p| match p {
            Packet::Data(d) => Some(d),
            _ => None,
        })
        .collect();
    // The BDP (12 full packets) leaves at once, before any ACK.
    assert_eq!(data.len(), 12);
    for d in &data {
        assert_eq!(d.subflow, SubFlow::Reactive);
        // Nothing acknowledged yet: the whole flow remains.
        assert_eq!(d.priority, Some(size as u32));
        // The PRIO field takes 4 bytes of the segment: the packet still fits the MTU.
        assert_eq!(d.payload.len(), s.config().mss - PRIORITY_LEN);
        assert!(
            Packet::Data((*d).clone()).encoded_len() <= flexpass_wire::max_message_for_mtu(1500)
        );
    }
}

#[test]
fn the_flow_completes_and_priorities_fall_as_bytes_are_acknowledged() {
    let size = 300_000u64;
    let mut s = Sender::new(7, config(), size, 0).unwrap();
    s.write(Bytes::from(vec![3u8; size as usize]));
    s.finish();
    let mut seen = vec![];
    let done = Pair::new(s, receiver(TransportKind::PFabric))
        .with_path(|t, _, _| {
            if let Packet::Data(d) = &t.packet {
                seen.push(d.priority.expect("every pfabric data packet has one"));
            }
            Fate::Deliver {
                delay: 5 * MICROS,
                ce: false,
            }
        })
        .run(50_000 * MICROS, |p| p.s.is_complete());
    assert!(done, "the flow completes");
    assert!(seen.windows(2).any(|w| w[1] < w[0]), "priorities fall");
    assert!(seen.iter().all(|&p| u64::from(p) <= size));
}

#[test]
fn the_rto_is_about_three_rtts() {
    let mut s = Sender::new(7, config(), 50_000, 0).unwrap();
    s.write(Bytes::from(vec![1u8; 50_000]));
    drain(&mut s, 0);
    // No answer: the first timer to fire is the RTO, RTO_RTTS base RTTs after the send
    // (the HELLO's timer is 10 ms).
    assert_eq!(s.poll_timeout(), Some(RTO_RTTS * 20 * MICROS));
}

#[test]
fn data_with_a_priority_that_does_not_match_the_transport_is_rejected() {
    let payload = Bytes::from_static(b"pFabric");
    let data = |priority| {
        Packet::Data(flexpass_wire::Data {
            flow_id: 7,
            subflow: SubFlow::Reactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: false,
            retransmission: false,
            priority,
            payload: payload.clone(),
        })
    };
    let mut dctcp = receiver(TransportKind::Dctcp);
    let e = dctcp.handle_packet(0, &data(Some(5)), false).unwrap_err();
    assert!(matches!(e, Rejected::Priority { .. }), "{e}");
    assert!(e.to_string().contains("PRIO"), "a clear error: {e}");
    let mut pf = receiver(TransportKind::PFabric);
    assert!(matches!(
        pf.handle_packet(0, &data(None), false),
        Err(Rejected::Priority { .. })
    ));
    // Neither was delivered; the right one is.
    pf.handle_packet(1, &data(Some(5)), false).unwrap();
    assert_eq!(pf.flow_ack(), payload.len() as u64);
}

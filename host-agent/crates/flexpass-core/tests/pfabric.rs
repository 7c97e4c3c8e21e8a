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
        ..PFabricConfig::default()
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

/// §4.2 probe mode: the path drops everything sender → receiver for 5 ms (higher-priority
/// traffic holding the queue). With probe mode (5 consecutive timeouts) the flow sends only
/// header-only probes, one per base RTO, and resumes within one RTO of the path's return;
/// without it, it resends data at each backed-off RTO and comes back only when the next one
/// fires. Both complete byte-exact.
#[test]
fn probe_mode_after_consecutive_timeouts_probes_and_resumes_at_once() {
    let size = 60 * 1440u64;
    let outage_end = 5_000 * MICROS;
    let run = |probe_after_timeouts: u32| {
        let mut c = config();
        c.pfabric.probe_after_timeouts = probe_after_timeouts;
        let mut s = Sender::new(7, c, size, 0).unwrap();
        let data = harness::pattern(size as usize);
        s.write(Bytes::from(data.clone()));
        s.finish();
        let mut pair = Pair::new(s, receiver(TransportKind::PFabric)).with_path(|t, dir, now| {
            let is_data = matches!(t.packet, Packet::Data(_));
            if dir == harness::Dir::ToReceiver && is_data && now >= 40 * MICROS && now < outage_end
            {
                Fate::Lost
            } else {
                Fate::after(10 * MICROS)
            }
        });
        assert!(
            pair.run(100_000 * MICROS, |p| p.s.is_complete()),
            "the flow completes"
        );
        assert_eq!(pair.delivered, data, "byte-exact");
        // What the sender put on the wire during the outage, and when data got through again.
        let during: Vec<_> = pair
            .sent(harness::Dir::ToReceiver)
            .filter_map(|(at, p)| match p {
                Packet::Data(d) if at >= 40 * MICROS && at < outage_end => Some(d.clone()),
                _ => None,
            })
            .collect();
        let back = pair
            .sent(harness::Dir::ToReceiver)
            .find_map(|(at, p)| match p {
                Packet::Data(d) if at >= outage_end && !d.payload.is_empty() => Some(at),
                _ => None,
            })
            .unwrap();
        (pair.s.stats().clone(), during, back - outage_end)
    };
    let (st, during, resumed_after) = run(5);
    assert!(st.pfabric_probe_modes >= 1, "{st:?}");
    let probes: Vec<_> = during.iter().filter(|d| d.payload.is_empty()).collect();
    assert!(probes.len() as u64 >= 10 && st.pfabric_probes >= probes.len() as u64);
    for p in &probes {
        assert_eq!(p.subflow_seq, flexpass_wire::PROBE_SEQ);
        assert!(
            p.priority.is_some_and(|x| u64::from(x) <= size),
            "a probe has the flow's PRIO"
        );
    }
    // Once in probe mode, only probes: the data sent in the outage is the first window and
    // one packet per timeout before the fifth.
    let resent = during.iter().filter(|d| !d.payload.is_empty()).count();
    assert!(resent <= 12 + 5, "{resent} data packets in the outage");
    let rto = RTO_RTTS * 20 * MICROS;
    assert!(
        resumed_after <= rto + 20 * MICROS,
        "data again {resumed_after} ns after the outage"
    );
    let (off, during_off, resumed_off) = run(0);
    assert_eq!((off.pfabric_probe_modes, off.pfabric_probes), (0, 0));
    assert!(
        during_off.iter().all(|d| !d.payload.is_empty()),
        "no probes when off"
    );
    assert!(
        resumed_off > 4 * resumed_after,
        "without probe mode data comes back after the backed-off RTO: {resumed_off} vs {resumed_after} ns"
    );
}

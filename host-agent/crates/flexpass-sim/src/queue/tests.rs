//! The port's queues packet by packet: priorities, shaping, DWRR, ECN, selective dropping,
//! buffers, and each profile.

use super::*;
use crate::packet::test_packet;

pub(super) fn cfg(profile: Profile) -> PortConfig {
    PortConfig {
        profile,
        link_bps: 10e9,
        w_q: 0.5,
        credit_rate_bps: flexpass_core::config::credit_queue_bps(10e9, 0.5),
        credit_burst_bytes: 2.0 * 84.0,
        credit_capacity: 8,
        ecn_k: [u64::MAX, 60_000, 60_000, 0, 0, 0, 0, 0],
        ecn_on_port: false,
        lcp_drop: u64::MAX,
        lcp_pushout: false,
        red_threshold: 100_000,
        red_counts_red_only: false,
        emulation_threshold: if profile == Profile::FlashPass {
            2
        } else {
            usize::MAX
        },
        feedback_priority: false,
        buffer: BufferLimit::PerPort { bytes: 1_000_000 },
    }
}

#[test]
fn flashpass_feedback_priority_sends_control_before_queued_data() {
    // FlashPass footnote 4: feedback on a high-priority queue. Without it, an ACK or
    // EMULATION_CREDIT waits behind the data queued before it; with it, it goes next
    // (after the emulation queue), and data keeps its order behind it.
    for priority in [false, true] {
        let mut c = cfg(Profile::FlashPass);
        c.feedback_priority = priority;
        let mut pq = PortQueue::new(c);
        for _ in 0..3 {
            pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
        }
        pq.enqueue(test_packet(TrafficClass::Control, 84), None);
        pq.enqueue(test_packet(TrafficClass::Credit, 84), None);
        let order: Vec<TrafficClass> = (0..5)
            .map(|_| match pq.dequeue(0, None) {
                Dequeued::Packet(p, _) => p.class,
                _ => panic!("a packet was queued"),
            })
            .collect();
        use TrafficClass::*;
        let want = if priority {
            [Credit, Control, ProactiveData, ProactiveData, ProactiveData]
        } else {
            [Credit, ProactiveData, ProactiveData, ProactiveData, Control]
        };
        assert_eq!(order, want, "feedback_priority {priority}");
    }
}

#[test]
fn flashpass_over_provisioned_emulation_is_dropped_before_ordinary() {
    // FlashPass §III-C: above 2 packets in the emulation queue, Not-ECT (over-provisioned)
    // emulation packets are dropped, ECT (ordinary) ones marked and kept up to 8.
    let mut pq = PortQueue::new(cfg(Profile::FlashPass));
    let emu = |ecn| {
        let mut p = test_packet(TrafficClass::Credit, 84);
        p.ecn = ecn;
        p
    };
    for _ in 0..2 {
        assert_eq!(pq.enqueue(emu(Ecn::NotEct), None), Enqueued::Accepted);
    }
    assert_eq!(
        pq.enqueue(emu(Ecn::NotEct), None),
        Enqueued::Dropped(Refused::SelectiveDrop)
    );
    for _ in 2..8 {
        assert_eq!(pq.enqueue(emu(Ecn::Ect0), None), Enqueued::Accepted);
    }
    assert_eq!(
        pq.enqueue(emu(Ecn::Ect0), None),
        Enqueued::Dropped(Refused::CreditQueueFull)
    );
    let st = pq.stats()[0];
    assert_eq!((st.dropped_red, st.dropped_full, st.ecn_marked), (1, 1, 6));
    // Everything that is not emulation shares the one data queue.
    assert_eq!(pq.cfg.queue_of(TrafficClass::Legacy), 1);
    assert_eq!(pq.cfg.queue_of(TrafficClass::ProactiveData), 1);
    assert!(pq.cfg.is_red(TrafficClass::ReactiveData));
}

#[test]
fn dwrr_shares_follow_weights() {
    for w_q in [0.5, 0.25, 0.8] {
        let mut c = cfg(Profile::FlexPass);
        c.w_q = w_q;
        c.buffer = BufferLimit::PerPort { bytes: u64::MAX };
        let mut pq = PortQueue::new(c);
        for _ in 0..4000 {
            pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
            pq.enqueue(test_packet(TrafficClass::Legacy, 800), None);
        }
        let mut sent = [0u64; 3];
        for _ in 0..3000 {
            if let Dequeued::Packet(p, _) = pq.dequeue(0, None) {
                sent[pq.cfg.queue_of(p.class)] += u64::from(p.wire_len);
            }
        }
        let share = sent[1] as f64 / (sent[1] + sent[2]) as f64;
        assert!((share - w_q).abs() < 0.02, "w_q {w_q}: share {share}");
    }
}

#[test]
fn credits_are_strict_priority_but_shaped() {
    let mut pq = PortQueue::new(cfg(Profile::FlexPass));
    for _ in 0..8 {
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Credit, 84), None),
            Enqueued::Accepted
        );
    }
    assert_eq!(
        pq.enqueue(test_packet(TrafficClass::Credit, 84), None),
        Enqueued::Dropped(Refused::CreditQueueFull)
    );
    pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
    // Burst of two credits, then data while tokens refill.
    assert!(
        matches!(pq.dequeue(0, None), Dequeued::Packet(p, _) if p.class == TrafficClass::Credit)
    );
    assert!(
        matches!(pq.dequeue(0, None), Dequeued::Packet(p, _) if p.class == TrafficClass::Credit)
    );
    assert!(
        matches!(pq.dequeue(0, None), Dequeued::Packet(p, _) if p.class == TrafficClass::ProactiveData)
    );
    match pq.dequeue(0, None) {
        Dequeued::WaitUntil(t) => {
            let expect = 84.0 * 8.0 / pq.cfg.credit_rate_bps * 1e9;
            assert!((t as f64 - expect).abs() <= 1.0, "{t} vs {expect}");
        }
        _ => panic!("credits must wait for tokens"),
    }
}

#[test]
fn ecn_above_k_and_selective_drop_of_red_only() {
    let mut pq = PortQueue::new(cfg(Profile::FlexPass));
    let mut marked = 0;
    for _ in 0..80 {
        let mut p = test_packet(TrafficClass::ReactiveData, 1538);
        p.ecn = Ecn::Ect0;
        pq.enqueue(p, None);
    }
    // Red packets stop being admitted at the red threshold (100 kB ≈ 66 frames).
    assert_eq!(pq.queues[1].len(), 66);
    for p in &pq.queues[1] {
        if p.pkt.ecn == Ecn::Ce {
            marked += 1;
        }
    }
    assert_eq!(
        marked,
        66 - 40,
        "marked once the queue exceeds K = 60 kB (39 frames)"
    );
    // Green packets still get in above the red threshold.
    assert_eq!(
        pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None),
        Enqueued::Accepted
    );
    assert_eq!(pq.stats[1].dropped_red, 14);
}

#[test]
fn selective_drop_counts_red_bytes_only_when_asked() {
    // 80 green frames (123 kB) in Q1, above the 100 kB threshold: by Q1's depth (the
    // default) a red packet is dropped; counting red bytes only (the FlexPass artifact)
    // it is admitted, and red packets stop at 100 kB of red (66 frames) on top.
    for red_only in [false, true] {
        let mut c = cfg(Profile::FlexPass);
        c.red_counts_red_only = red_only;
        let mut pq = PortQueue::new(c);
        for _ in 0..80 {
            pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
        }
        let admitted = (0..80)
            .filter(|_| {
                pq.enqueue(test_packet(TrafficClass::ReactiveData, 1538), None)
                    == Enqueued::Accepted
            })
            .count();
        assert_eq!(
            admitted,
            if red_only { 66 } else { 0 },
            "red_only {red_only}"
        );
        assert_eq!(pq.red_bytes(), admitted as u64 * 1538);
    }
}

#[test]
fn naive_profile_shares_one_data_queue() {
    let c = cfg(Profile::Naive);
    assert_eq!(c.queue_of(TrafficClass::Legacy), 1);
    assert_eq!(c.queue_of(TrafficClass::ProactiveData), 1);
    assert!(!c.is_red(TrafficClass::ReactiveData));
}

#[test]
fn shared_buffer_dynamic_threshold() {
    // Broadcom-style dynamic threshold with α = 1/4: one congested queue settles at
    // α/(1+α) = 20 % of the buffer; two congested queues at α/(1+2α) ≈ 16.7 % each.
    let size = 4_500_000;
    let mut shared = SharedBuffer::new(size, 0.25);
    let mut c = cfg(Profile::FlexPass);
    c.buffer = BufferLimit::Shared;
    c.red_threshold = u64::MAX;
    let mut a = PortQueue::new(c.clone());
    let mut b = PortQueue::new(c);
    let fill = |q: &mut PortQueue, shared: &mut SharedBuffer| {
        while q.enqueue(test_packet(TrafficClass::ProactiveData, 1538), Some(shared))
            == Enqueued::Accepted
        {}
    };
    fill(&mut a, &mut shared);
    let one = a.bytes(1) as f64 / size as f64;
    assert!((one - 0.2).abs() < 0.001, "one queue: {one}");
    // A second queue takes its share of what is free; draining the first frees buffer.
    fill(&mut b, &mut shared);
    for _ in 0..2000 {
        a.dequeue(0, Some(&mut shared));
        fill(&mut a, &mut shared);
        fill(&mut b, &mut shared);
        b.dequeue(0, Some(&mut shared));
        fill(&mut b, &mut shared);
        fill(&mut a, &mut shared);
    }
    for q in [&a, &b] {
        let share = q.bytes(1) as f64 / size as f64;
        assert!((share - 1.0 / 6.0).abs() < 0.005, "two queues: {share}");
    }
    assert_eq!(shared.used, a.bytes(1) + b.bytes(1));
    // Refusals are counted as buffer drops, never as selective drops.
    assert!(a.stats[1].dropped_full > 0 && a.stats[1].dropped_red == 0);
}

fn ppt_cfg() -> PortConfig {
    let mut c = cfg(Profile::Ppt);
    c.ecn_k = [
        96_000, 96_000, 96_000, 96_000, 86_000, 86_000, 86_000, 86_000,
    ];
    c.buffer = BufferLimit::PerPort { bytes: 120_000 };
    c
}

#[test]
fn ppt_lcp_packets_never_leave_before_hcp_packets() {
    // PPT §4.2 / §4.3: the LCP (P4–P7) never delays the HCP (P0–P3). Packets of every
    // priority arrive interleaved; whatever the arrival order, no LCP packet leaves
    // while an HCP packet waits, and within each half a higher priority goes first.
    let mut pq = PortQueue::new(ppt_cfg());
    let mut rng = 12345u64;
    let mut order = vec![];
    for round in 0..2000 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let p = (rng >> 61) as u8;
        let len = if rng & 1 == 0 { 1538 } else { 98 };
        pq.enqueue(test_packet(TrafficClass::Priority(p), len), None);
        // Serve roughly one packet per two arrivals, so the queues build up.
        if round % 2 == 0 {
            if let Dequeued::Packet(pkt, _) = pq.dequeue(0, None) {
                let served = pkt.class.priority().unwrap() as usize;
                assert!(
                    (0..served).all(|q| pq.bytes(q) == 0),
                    "P{served} left while a higher priority waited"
                );
                order.push(served);
            }
        }
    }
    // Served one per two arrivals, the lowest priorities starved; drained, they leave
    // highest first.
    let mut drained = vec![];
    while let Dequeued::Packet(pkt, _) = pq.dequeue(0, None) {
        drained.push(pkt.class.priority().unwrap() as usize);
    }
    assert!(drained.windows(2).all(|w| w[0] <= w[1]), "{drained:?}");
    assert!(order.contains(&0) && drained.contains(&7));
    // Legacy traffic goes with the large flows' HCP (P3), above every LCP queue.
    assert_eq!(pq.cfg.queue_of(TrafficClass::Legacy), 3);
    assert_eq!(pq.stats().len(), 8);
}

#[test]
fn ppt_hcp_waits_at_most_the_lcp_frame_on_the_wire_and_lcp_drop() {
    let mut c = ppt_cfg();
    c.link_bps = 40e9;
    c.lcp_drop = 86_000;
    let mut pq = PortQueue::new(c);
    // An LCP frame goes on the wire at t = 0 (307.6 ns at 40 Gbit/s); an HCP packet
    // arriving 100 ns later waits the remaining 208 ns, one arriving after it none.
    pq.enqueue_at(0, test_packet(TrafficClass::Priority(6), 1538), None);
    assert!(matches!(pq.dequeue(0, None), Dequeued::Packet(..)));
    pq.enqueue_at(100, test_packet(TrafficClass::Priority(1), 1538), None);
    pq.enqueue_at(400, test_packet(TrafficClass::Priority(2), 1538), None);
    // An LCP packet behind an LCP frame is not counted (the wait is among LCP packets).
    pq.enqueue_at(200, test_packet(TrafficClass::Priority(7), 1538), None);
    assert_eq!(pq.stats()[1].arrived_behind_lcp, 1);
    assert_eq!(pq.stats()[1].max_wait_behind_lcp_ns, 208);
    assert_eq!(pq.stats()[2].arrived_behind_lcp, 0);
    assert_eq!(pq.stats()[7].arrived_behind_lcp, 0);
    // lcp_drop: LCP packets are refused once the port would hold more than 86 kB; HCP
    // packets still fit up to the buffer, and a refused HCP packet while LCP bytes are
    // held is counted as such.
    let mut pq = PortQueue::new(pq.cfg.clone());
    let mut lcp_ok = 0;
    while pq.enqueue(test_packet(TrafficClass::Priority(5), 1538), None) == Enqueued::Accepted {
        lcp_ok += 1;
    }
    assert_eq!(lcp_ok, 86_000 / 1538);
    assert_eq!(pq.stats()[5].dropped_red, 1);
    while pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None) == Enqueued::Accepted {}
    assert_eq!(pq.data_bytes(), 120_000 / 1538 * 1538);
    assert_eq!(pq.stats()[0].dropped_full, 1);
    assert_eq!(pq.stats()[0].dropped_full_lcp_held, 1);
    assert_eq!(pq.stats()[0].dropped_full_lower_held, 1);
}

#[test]
fn ppt_pushout_evicts_lcp_packets_for_hcp_packets_only() {
    let mut c = ppt_cfg();
    c.lcp_pushout = true;
    let mut pq = PortQueue::new(c);
    // The 120 kB buffer full of LCP frames: 30 in P7, then 48 in P4.
    for i in 0..78 {
        let p = if i < 30 { 7 } else { 4 };
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Priority(p), 1538), None),
            Enqueued::Accepted
        );
    }
    // Another LCP packet is refused (no push-out among LCP packets).
    assert_eq!(
        pq.enqueue(test_packet(TrafficClass::Priority(4), 1538), None),
        Enqueued::Dropped(Refused::BufferFull)
    );
    // HCP packets push LCP packets out, lowest priority (P7) first, one frame each.
    for _ in 0..31 {
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Priority(2), 1538), None),
            Enqueued::Accepted
        );
    }
    assert_eq!(pq.stats()[7].dropped_pushout, 30);
    assert_eq!(pq.stats()[4].dropped_pushout, 1);
    assert_eq!((pq.bytes(7), pq.bytes(4)), (0, 47 * 1538));
    // Once the HCP alone fills the buffer, HCP packets are dropped and nothing is evicted.
    for _ in 0..47 {
        pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None);
    }
    assert_eq!(pq.bytes(4), 0);
    assert_eq!(pq.data_bytes(), 78 * 1538);
    assert_eq!(
        pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None),
        Enqueued::Dropped(Refused::BufferFull)
    );
    assert_eq!(pq.stats()[0].dropped_full_lcp_held, 0);
    // Off (the paper's switch): the same HCP packet is refused while LCP bytes are held.
    let mut pq = PortQueue::new(ppt_cfg());
    for _ in 0..78 {
        pq.enqueue(test_packet(TrafficClass::Priority(7), 1538), None);
    }
    assert_eq!(
        pq.enqueue(test_packet(TrafficClass::Priority(2), 1538), None),
        Enqueued::Dropped(Refused::BufferFull)
    );
    assert_eq!(pq.stats()[2].dropped_full_lcp_held, 1);
}

#[test]
fn ppt_per_queue_ecn_and_one_port_buffer() {
    let mut pq = PortQueue::new(ppt_cfg());
    let ect = |p: u8| {
        let mut pkt = test_packet(TrafficClass::Priority(p), 1538);
        pkt.ecn = Ecn::Ect0;
        pkt
    };
    // 60 LCP frames (92 kB): marked above K_LCP = 86 kB.
    for _ in 0..60 {
        assert_eq!(pq.enqueue(ect(5), None), Enqueued::Accepted);
    }
    assert_eq!(pq.stats()[5].ecn_marked, 60 - 56);
    // The buffer (120 kB) is one for all queues: 18 more frames fit, the 19th does not.
    for _ in 0..18 {
        assert_eq!(pq.enqueue(ect(0), None), Enqueued::Accepted);
    }
    assert_eq!(pq.stats()[0].ecn_marked, 0, "P0 holds 27 kB < K_HCP");
    assert_eq!(
        pq.enqueue(ect(0), None),
        Enqueued::Dropped(Refused::BufferFull)
    );
    // Marking on the port's occupancy: the first P0 packet behind 92 kB of LCP packets is
    // not marked (92 kB ≤ K_HCP 96 kB), the fourth is; an LCP packet is at once (> 86 kB).
    let mut c = ppt_cfg();
    c.ecn_on_port = true;
    let mut pq = PortQueue::new(c);
    for _ in 0..60 {
        pq.enqueue(ect(5), None);
    }
    for _ in 0..4 {
        pq.enqueue(ect(0), None);
    }
    assert_eq!(pq.stats()[0].ecn_marked, 1);
    pq.enqueue(ect(6), None);
    assert_eq!(pq.stats()[6].ecn_marked, 1);
}

#[test]
fn owf_separates_legacy_without_selective_drop() {
    let c = cfg(Profile::Owf);
    assert_eq!(c.queue_of(TrafficClass::Legacy), 2);
    assert_eq!(c.queue_of(TrafficClass::ProactiveData), 1);
    assert!(!c.is_red(TrafficClass::ReactiveData));
    let l = cfg(Profile::Layering);
    assert_eq!(l.queue_of(TrafficClass::Legacy), 1);
}

//! The seed generator's exchanges complete, their inputs round-trip through the codec, and
//! replaying each seed in its target reproduces the recorded exchange.

use flexpass_fuzz_harness::codec::decode_input;
use flexpass_fuzz_harness::pair::{PairHeader, PairOp};
use flexpass_fuzz_harness::receiver::{ReceiverHeader, ReceiverOp};
use flexpass_fuzz_harness::seeds::{record, specs};
use flexpass_fuzz_harness::sender::{SenderHeader, SenderOp};
use flexpass_fuzz_harness::{pair, receiver, sender};

#[test]
fn seeds_round_trip_and_replay_their_exchange() {
    for spec in specs() {
        let s = record(&spec);
        let h = &s.harness;
        let name = spec.name;
        // The recorded exchange itself.
        assert!(h.s.s.error().is_none(), "{name}: {:?}", h.s.s.error());
        let r = h.r.as_ref().expect("receiver created");
        assert_eq!(h.s.written, spec.bytes, "{name}");
        assert_eq!(r.delivered, spec.bytes, "{name}: everything read");
        if spec.stream {
            assert_eq!(h.s.s.unacked_bytes(), 0, "{name}");
        } else {
            assert!(h.s.s.is_complete() && r.r.is_finished(), "{name}");
        }
        if spec.loss >= 50 {
            assert!(
                h.s.s.stats().retransmissions > 0
                    || h.s.s.stats().losses_reactive > 0
                    || h.s.s.stats().losses_proactive > 0,
                "{name}: the link lost something"
            );
        }
        // Codec round trips.
        assert_eq!(
            decode_input::<PairHeader, PairOp>(&s.pair),
            s.pair_ops,
            "{name}"
        );
        assert_eq!(
            decode_input::<SenderHeader, SenderOp>(&s.sender),
            s.sender_ops,
            "{name}"
        );
        assert_eq!(
            decode_input::<ReceiverHeader, ReceiverOp>(&s.receiver),
            s.receiver_ops,
            "{name}"
        );
        // Replays.
        let p = pair::replay(&s.pair);
        assert_eq!(p.s.s.stats(), h.s.s.stats(), "{name}: pair replay");
        assert_eq!(p.s.s.acked_bytes(), spec.bytes, "{name}");
        // The fuzz target's run: the eventual-consistency phase finishes streams too.
        let p = pair::run(&s.pair);
        assert!(p.s.s.is_complete(), "{name}");
        let sr = sender::run(&s.sender);
        assert_eq!(sr.sut.s.stats(), h.s.s.stats(), "{name}: sender replay");
        assert_eq!(sr.sut.s.is_complete(), h.s.s.is_complete(), "{name}");
        let rr = receiver::run(&s.receiver);
        assert_eq!(rr.sut.r.stats(), r.r.stats(), "{name}: receiver replay");
        assert_eq!(rr.sut.delivered, spec.bytes, "{name}");
        assert_eq!(rr.sut.r.is_finished(), r.r.is_finished(), "{name}");
    }
}

#[test]
fn seeds_are_small() {
    let total: usize = specs()
        .iter()
        .map(|spec| {
            let s = record(spec);
            s.pair.len() + s.sender.len() + s.receiver.len()
        })
        .sum();
    assert!(total < 1 << 20, "{total} B of seeds");
}

/// The `decode` target's seeds: one canonical message of every type (1..=13), each decoding
/// and re-encoding exactly.
#[test]
fn decode_seeds_cover_every_type() {
    let mut types = std::collections::BTreeSet::new();
    for (name, bytes) in flexpass_fuzz_harness::decode_seeds::decode_seeds() {
        let p = flexpass_wire::Packet::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.encode_to_vec(), bytes, "{name}");
        types.insert(p.packet_type().to_wire());
    }
    assert_eq!(types, (1..=13).collect());
}

/// The `api` target's seeds: every op of the agent's API (flexpass_agent::api::OPS) has a
/// request line in docs/agent-api.md, in-process hand-over included.
#[test]
fn api_seeds_have_every_op() {
    use flexpass_fuzz_harness::text_seeds::{api_seeds, doc_requests};
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/agent-api.md"),
    )
    .expect("docs/agent-api.md");
    let lines = doc_requests(&doc);
    for op in flexpass_agent::api::OPS {
        let key = format!("\"op\": \"{op}\"");
        assert!(
            lines.iter().any(|l| l.contains(&key)),
            "no {op} line in the doc"
        );
    }
    assert!(lines.iter().any(|l| l.contains("\"inproc\": true")));
    assert!(api_seeds(&doc).len() > lines.len());
}

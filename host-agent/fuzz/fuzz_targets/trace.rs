//! Fuzz target: the flow-trace parser (`FlowTrace::parse`, the FlexPass artifact's
//! flowfile format that `[trace]` replays) never panics, and every trace it accepts keeps
//! its invariants: flows in start order, sizes of at least one byte, two distinct hosts;
//! written back in the same format it parses to the same flows.
#![no_main]

use flexpass_workload::FlowTrace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(t) = FlowTrace::parse(&text) else {
        return;
    };
    assert!(!t.flows.is_empty());
    for w in t.flows.windows(2) {
        assert!(w[0].start_s <= w[1].start_s);
    }
    for f in &t.flows {
        assert!(f.bytes >= 1 && f.src != f.dst && f.start_s >= 0.0);
    }
    let back: String = t
        .flows
        .iter()
        .map(|f| format!("{} {:?} {} {} {}\n", f.id, f.start_s, f.src, f.dst, f.bytes))
        .collect();
    assert_eq!(FlowTrace::parse(&back).expect("written back"), t);
});

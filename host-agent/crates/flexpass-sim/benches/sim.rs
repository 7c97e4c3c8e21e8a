//! Simulated events per second: the flexpass-vs-dctcp experiment (5 ms of simulated time on
//! a 10 Gbit/s star), reported by criterion as events/s.

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use flexpass_sim::{Override, Source};
use std::time::Duration;

fn sim(c: &mut Criterion) {
    let o = vec![Override::parse("duration_ms=5").unwrap()];
    let exp = Source::load("flexpass-vs-dctcp")
        .unwrap()
        .experiment(&o)
        .unwrap();
    let run = || flexpass_sim::run(&exp, &o, &mut |_| {}).unwrap();
    // The model is deterministic: every run processes the same events.
    let events = run().events;
    assert!(events > 0, "the experiment processed no events");
    let mut g = c.benchmark_group("sim");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(events));
    g.bench_function("flexpass_vs_dctcp_5ms", |b| {
        b.iter(|| {
            let r = run();
            debug_assert_eq!(r.events, events);
            r
        })
    });
    g.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);

//! Traffic entries as a soak writes them (mininet-topos/experiments/soak.toml): several
//! workloads with their own hosts and transport, incast bursts until the end cycling their
//! transports, and kernel TCP, which the model reads (for an emulation) but refuses to run.

use flexpass_core::MICROS;
use flexpass_sim::experiment::Source;

fn src(text: &str) -> Source {
    Source {
        name: "t".into(),
        text: text.into(),
        path: None,
    }
}

const TWO_WORKLOADS: &str = r#"
duration_ms = 50
[topology]
kind = "star"
hosts = 4
[[workload]]
cdf = "search"
src = ["h0"]
dst = ["h2", "h3"]
transport = "dctcp"
load = 0.3
[[workload]]
cdf = "search"
src = ["h1"]
dst = ["h0"]
transport = "expresspass"
load = 0.1
[[incast]]
receiver = "h3"
senders = ["h0", "h1"]
flows = 2
bytes = 10000
start_us = 1000
repeat = 0
repeat_step_us = 20000
transports = ["flexpass", "dctcp"]
"#;

#[test]
fn workloads_keep_their_own_hosts_and_transport_and_incasts_cycle_theirs() {
    use flexpass_sim::net::FlowKind;
    use flexpass_wire::TransportKind;
    let e = src(TWO_WORKLOADS).experiment(&[]).unwrap();
    assert_eq!(e.workload.len(), 2);
    let flows = flexpass_sim::build::flows(&e).unwrap();
    let bg: Vec<_> = flows
        .iter()
        .filter(|f| f.kind == FlowKind::Background)
        .collect();
    // Without `flows`, arrivals until duration_ms; each flow from its own workload's hosts.
    assert!(bg.iter().all(|f| f.start < 50 * flexpass_core::MILLIS));
    for f in &bg {
        match f.entry {
            0 => assert!(
                f.src == 0 && [2, 3].contains(&f.dst) && f.transport == TransportKind::Dctcp,
                "{f:?}"
            ),
            1 => assert!(
                (f.src, f.dst, f.transport) == (1, 0, TransportKind::ExpressPass),
                "{f:?}"
            ),
            n => panic!("entry {n}"),
        }
    }
    // Load on the source's link: three times the load, about three times the arrivals.
    let n = |i| bg.iter().filter(|f| f.entry == i).count() as f64;
    assert!(n(0) > 1.5 * n(1), "{} vs {}", n(0), n(1));
    // repeat = 0: at 1, 21 and 41 ms, cycling flexpass, dctcp, flexpass.
    let incast: Vec<_> = flows
        .iter()
        .filter(|f| f.kind == FlowKind::Incast)
        .map(|f| (f.start / MICROS, f.transport))
        .collect();
    assert_eq!(
        incast,
        vec![
            (1000, TransportKind::FlexPass),
            (1000, TransportKind::FlexPass),
            (21000, TransportKind::Dctcp),
            (21000, TransportKind::Dctcp),
            (41000, TransportKind::FlexPass),
            (41000, TransportKind::FlexPass),
        ]
    );
    // One `[workload]` table still reads as one workload.
    let one = "[topology]\nkind = \"star\"\nhosts = 4\n[workload]\ncdf = \"search\"\nload = 0.5\nflows = 10\n";
    assert_eq!(src(one).experiment(&[]).unwrap().workload.len(), 1);
}

#[test]
fn workload_and_kernel_tcp_mistakes_are_named() {
    let err = |text: &str| src(text).experiment(&[]).unwrap_err();
    let no_end = TWO_WORKLOADS.replace("duration_ms = 50\n", "");
    let e = err(&no_end);
    assert!(
        e.contains("incast[0].repeat = 0 (until the end) needs duration_ms"),
        "{e}"
    );
    let e = err(&no_end[..no_end.find("[[incast]]").unwrap()]);
    assert!(
        e.contains("workload[0].flows: give the number of flows, or duration_ms"),
        "{e}"
    );
    let e = err(&TWO_WORKLOADS.replace("dst = [\"h0\"]", "dst = [\"h1\"]"));
    assert!(
        e.contains("workload[1]: no destination differs from a source"),
        "{e}"
    );
    let e = err(&TWO_WORKLOADS.replace("src = [\"h0\"]", "src = [\"h9\"]"));
    assert!(e.contains("workload[0].src: host 9 does not exist"), "{e}");
    let e = err(&TWO_WORKLOADS.replace("transport = \"dctcp\"", "transport = \"cubic\""));
    assert!(
        e.contains("unknown transport \"cubic\"") && e.contains("\"tcp\" (kernel TCP"),
        "{e}"
    );
    let e = err(&TWO_WORKLOADS.replace("flows = 2\n", "flows = 2\ntransport = \"dctcp\"\n"));
    assert!(
        e.contains("incast[0]: give transport or transports, not both"),
        "{e}"
    );
    // Kernel TCP is read (an emulation runs it) but the model refuses to run it, by name.
    let tcp = TWO_WORKLOADS.replace("transport = \"expresspass\"", "transport = \"tcp\"");
    let e = src(&tcp).experiment(&[]).unwrap();
    let refused = flexpass_sim::run::run(&e, &[], &mut |_| {}).unwrap_err();
    assert!(
        refused.contains(
            "workload[1].transport = \"tcp\": kernel TCP runs only on an emulation backend"
        ),
        "{refused}"
    );
}

/// `load_on = "destinations"` (PASE's testbed: 9 clients -> 1 server): the load is offered
/// on the destinations' links, so with one destination the arrival rate is 1/9 of what the
/// same load on the nine sources' links draws.
#[test]
fn load_on_destinations_offers_the_load_on_the_destinations_links() {
    const MANY_TO_ONE: &str = r#"
duration_ms = 100000
[topology]
kind = "star"
hosts = 10
link_gbps = 1
[workload]
cdf = "pase-100-500kb"
src = [0, 1, 2, 3, 4, 5, 6, 7, 8]
dst = [9]
load = 0.5
flows = 900
"#;
    let span = |text: &str| {
        let e = src(text).experiment(&[]).unwrap();
        let flows = flexpass_sim::build::flows(&e).unwrap();
        assert!(flows.iter().all(|f| f.dst == 9 && f.src < 9));
        flows.iter().map(|f| f.start).max().unwrap() as f64
    };
    let on_sources = span(MANY_TO_ONE);
    let on_dst = span(&MANY_TO_ONE.replace("load = 0.5", "load = 0.5\nload_on = \"destinations\""));
    // Same seed, same draws: the gaps scale with 1 / capacity (up to their rounding to ns).
    assert!(
        (on_dst / on_sources - 9.0).abs() < 1e-3,
        "{on_dst} / {on_sources}"
    );
    // And the server's link is offered 0.5: 900 flows of mean 300 kB (on the wire) at 0.5 Gbit/s.
    let expect = 900.0 * 300e3 * 1538.0 / 1448.0 * 8.0 / 0.5e9 * 1e9;
    assert!((on_dst / expect - 1.0).abs() < 0.15, "{on_dst} vs {expect}");
    let bad = src(&MANY_TO_ONE.replace("load = 0.5", "load = 0.5\nload_on = \"servers\""))
        .experiment(&[])
        .unwrap_err();
    assert!(
        bad.contains("load_on must be") && bad.contains("destinations"),
        "{bad}"
    );
}

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

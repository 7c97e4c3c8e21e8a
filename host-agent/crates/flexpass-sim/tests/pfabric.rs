//! pFabric (Alizadeh et al., SIGCOMM'13) on the model: the properties the paper claims, on a
//! small star (tests/experiments/small-pfabric.toml): a long flow and two short ones to one
//! receiver. The figure-size runs are experiments/pase/.

mod common;

use flexpass_sim::RunReport;
use flexpass_wire::TransportKind;

fn run(sets: &[&str]) -> RunReport {
    common::run_small("small-pfabric.toml", sets)
}

fn fct(r: &RunReport, bytes: u64) -> f64 {
    let f = r
        .flows
        .iter()
        .find(|f| f.size == Some(bytes))
        .expect("the flow");
    f.fct_us
        .unwrap_or_else(|| panic!("flow of {bytes} B did not complete"))
}

/// §3 / §4.1: the short flows overtake the long one at the shared bottleneck (they finish
/// close to their size at line rate, where DCTCP on a FIFO shares the link), and the long
/// flow is not starved: every flow completes, byte for byte.
#[test]
fn short_flows_overtake_a_long_one_and_nothing_starves() {
    let pf = run(&[]);
    let dctcp = run(&["switch.profile=\"naive\"", "deployment.fraction=0.0"]);
    assert!(pf
        .flows
        .iter()
        .all(|f| f.transport == TransportKind::PFabric));
    assert!(dctcp
        .flows
        .iter()
        .all(|f| f.transport == TransportKind::Dctcp));
    for r in [&pf, &dctcp] {
        for f in &r.flows {
            assert!(f.fct_us.is_some(), "flow {} did not complete", f.id);
            assert_eq!(Some(f.delivered_bytes), f.size, "flow {}", f.id);
        }
    }
    // 50 kB at 10 Gbit/s is 40 us on the wire (43 with headers), plus the path.
    let (short_pf, short_dctcp) = (fct(&pf, 50_000), fct(&dctcp, 50_000));
    let (mid_pf, long_pf) = (fct(&pf, 100_000), fct(&pf, 2_000_000));
    eprintln!(
        "pfabric: 50 kB {short_pf:.0} us, 100 kB {mid_pf:.0} us, 2 MB {long_pf:.0} us; dctcp: 50 kB {short_dctcp:.0} us, 2 MB {:.0} us",
        fct(&dctcp, 2_000_000)
    );
    assert!(
        short_pf < 0.6 * short_dctcp,
        "pFabric's short flow {short_pf} us vs DCTCP's {short_dctcp} us"
    );
    // Shortest remaining first: 50 kB before 100 kB before the rest of the 2 MB.
    assert!(short_pf < mid_pf && mid_pf < long_pf);
    // The short flow is hardly slowed by the long one: within 3x its time alone on the link.
    let alone = run(&["flow.0.start_us=100000", "flow.2.start_us=100000"]);
    let short_alone = fct(&alone, 50_000);
    assert!(
        short_pf < 3.0 * short_alone,
        "short flow {short_pf} us with the long one, {short_alone} us alone"
    );
}

/// §4.1: when the buffer is full the switch drops the lowest priority: the long flow (the
/// largest remaining size) takes the losses, the short flows next to none.
#[test]
fn drops_hit_the_lowest_priority() {
    let pf = run(&[]);
    let long = pf.flows.iter().find(|f| f.size == Some(2_000_000)).unwrap();
    let short: u64 = pf
        .flows
        .iter()
        .filter(|f| f.size != Some(2_000_000))
        .map(|f| f.retransmissions)
        .sum();
    eprintln!(
        "retransmissions: long {}, short {short}",
        long.retransmissions
    );
    assert!(
        long.retransmissions > 0,
        "the 36 kB buffer must overflow in this case"
    );
    assert!(
        short * 10 <= long.retransmissions,
        "short {short} vs long {}",
        long.retransmissions
    );
}

//! The experiment platform: topologies, symmetric ECMP, deployment by rack, workload load
//! calibration, and FlexPass §6.2's deployment trends on a scaled-down Clos (24 hosts, 600
//! web-search flows; the full 192-host runs are the figure runners, docs/results-large-scale.md).

use flexpass_sim::experiment::{Experiment, FaultKind};
use flexpass_sim::traffic::{enabled_racks, wire_factor};
use flexpass_sim::{prepare, FlowKind, Override, RunReport, Source};
use flexpass_wire::TransportKind;
use std::collections::BTreeMap;

const SMALL_CLOS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/experiments/small-clos.toml"
);

fn exp(name: &str, sets: &[&str]) -> (Experiment, Vec<Override>) {
    let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let e = Source::load(name)
        .unwrap()
        .experiment(&o)
        .unwrap_or_else(|e| panic!("{e}"));
    (e, o)
}

fn run(name: &str, sets: &[&str]) -> RunReport {
    let (e, o) = exp(name, sets);
    flexpass_sim::run(&e, &o, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn clos3_is_the_papers_fabric() {
    // FlexPass §6.2: 8 core, 16 aggregation, 32 ToR switches, 192 hosts; every switch has
    // eight 40 Gbit/s ports; 3:1 at the ToR; 28 µs one way across the core.
    let (e, _) = exp("clos-websearch", &[]);
    let p = prepare(&e).unwrap();
    let r = &p.built;
    assert_eq!(r.rack_of.len(), 192);
    assert_eq!(r.racks, 32);
    assert_eq!(r.switches.len(), 56);
    let mut ports: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (_, _, node, _) in p.net.ports() {
        ports.entry(node).or_default().push(0.0);
    }
    for s in &r.switches {
        assert_eq!(ports[s.as_str()].len(), 8, "{s}");
    }
    assert_eq!(r.groups["tor-up"].len(), 64);
    assert_eq!(
        r.load_capacity_bps,
        64.0 * 40e9,
        "ToR uplinks: 192·40/3 Gbit/s"
    );
    assert_eq!(r.diameter(), 6);
    assert_eq!(r.one_way_delay(0, 191), 28_000);
    assert_eq!(r.one_way_delay(0, 1), 2 * 4_000 + 2 * 2_000, "same rack");
    // Base RTT: 2·28 µs plus a data frame and a credit serialised per hop.
    assert_eq!(p.stack.base_rtt, 56_000 + 6 * (307 + 16));
}

#[test]
fn other_shapes() {
    let base = "[[flow]]\nsrc = 0\ndst = 1\nbytes = 1000\n";
    let build = |topo: &str| {
        let dir =
            std::env::temp_dir().join(format!("fp-shape-{}-{}", std::process::id(), topo.len()));
        std::fs::write(&dir, format!("[topology]\n{topo}\n{base}")).unwrap();
        let e = Source::load(dir.to_str().unwrap())
            .unwrap()
            .experiment(&[])
            .unwrap();
        std::fs::remove_file(&dir).unwrap();
        prepare(&e).unwrap()
    };
    // Leaf-spine: oversubscription sets the uplink rate (4 hosts · 10 / (2 spines · 2)).
    let p = build(
        "kind = \"leaf-spine\"\nleaves = 3\nspines = 2\nhosts_per_leaf = 4\noversubscription = 2.0",
    );
    assert_eq!(p.built.racks, 3);
    let up = &p.built.groups["tor-up"];
    assert_eq!(up.len(), 6);
    assert!(up
        .iter()
        .all(|&(n, port)| p.net.port_link_bps(n, port) == 10e9));
    assert_eq!(p.built.diameter(), 4);
    // Parking lot: N bottlenecks in a chain.
    let p =
        build("kind = \"parking-lot\"\nbottlenecks = 3\nhosts_per_switch = 2\nbottleneck_gbps = 5");
    assert_eq!(p.built.rack_of.len(), 8);
    assert_eq!(p.built.groups["bottleneck"].len(), 3);
    assert_eq!(p.built.hops(0, 7), 5, "host, 3 bottlenecks, host");
    // Dumbbell.
    let p = build("kind = \"dumbbell\"\nleft = 2\nright = 3\nbottleneck_gbps = 1");
    let &(n, port) = &p.built.groups["bottleneck"][0];
    assert_eq!(p.net.port_link_bps(n, port), 1e9);
    assert_eq!(p.net.port_name(n, port), "s1->s2");
}

#[test]
fn three_dc_is_flashpass_wan() {
    // FlashPass §IV-B2 / Fig. 13: 3 DCs × 20 hosts at 1 Gbit/s (10 µs links) behind border
    // routers joined by 10 Gbit/s WAN links of 20, 30, 40 ms; §IV-A's 20 kB per port per
    // Gbit/s; inter-DC random pairs with the load on the WAN links.
    let path = std::env::temp_dir().join(format!("fp-three-dc-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "[topology]\nkind = \"three-dc\"\n[switch]\nprofile = \"flashpass\"\nbuffer_kb_per_gbps = 20\n\
         [workload]\ncdf = \"alibaba-wan\"\nload = 0.8\nflows = 4000\npairs = \"inter-rack\"\n",
    )
    .unwrap();
    let (e, _) = exp(path.to_str().unwrap(), &[]);
    std::fs::remove_file(&path).unwrap();
    let p = prepare(&e).unwrap();
    let b = &p.built;
    assert_eq!(b.rack_of.len(), 60);
    assert_eq!(b.racks, 3);
    assert!((0..60).all(|h| b.rack_of[h] == h / 20), "h0–h19 in dc0, …");
    assert_eq!(b.switches, ["dc0", "dc1", "dc2"]);
    let mut wan: Vec<String> = b.groups["wan"]
        .iter()
        .map(|&(n, port)| {
            assert_eq!(p.net.port_link_bps(n, port), 10e9);
            p.net.port_name(n, port)
        })
        .collect();
    wan.sort();
    assert_eq!(
        wan,
        ["dc0->dc1", "dc0->dc2", "dc1->dc0", "dc1->dc2", "dc2->dc0", "dc2->dc1"]
    );
    assert!(b.groups["host-down"]
        .iter()
        .all(|&(n, port)| p.net.port_link_bps(n, port) == 1e9));
    // Paths: inside a DC two host links; across, the direct WAN link (3 links, never the
    // 4-link detour over the third DC).
    let (ms, us) = (1_000_000, 1_000);
    assert_eq!(b.hops(0, 19), 2);
    assert_eq!(b.one_way_delay(0, 19), 20 * us);
    for (a, z, wan_ms) in [
        (0, 20, 20),
        (20, 40, 30),
        (40, 0, 40),
        (5, 59, 40),
        (39, 21, 0),
    ] {
        let same_dc = wan_ms == 0;
        assert_eq!(b.hops(a, z), if same_dc { 2 } else { 3 }, "h{a}->h{z}");
        assert_eq!(b.one_way_delay(a, z), wan_ms * ms + 20 * us, "h{a}->h{z}");
        assert_eq!(b.one_way_delay(z, a), b.one_way_delay(a, z));
    }
    assert_eq!(b.longest_path(), (3, 40 * ms + 20 * us));
    // Base RTT (T_wait's default): the dc0–dc2 round trip, 80.04 ms, plus a 1538-byte frame
    // and an 84-byte credit serialised at 1 Gbit/s on each of the 3 hops.
    assert_eq!(p.stack.base_rtt, 80_040_000 + 3 * (12_304 + 672));
    assert_eq!(p.stack.flashpass_config().t_wait, p.stack.base_rtt);
    // Buffers: 20 kB on the hosts' 1 Gbit/s ports, 200 kB on the WAN ports.
    use flexpass_sim::queue::BufferLimit;
    use flexpass_sim::topology::PortFactory;
    assert_eq!(
        p.stack.switch_port(1e9).buffer,
        BufferLimit::PerPort { bytes: 20_000 }
    );
    assert_eq!(
        p.stack.switch_port(10e9).buffer,
        BufferLimit::PerPort { bytes: 200_000 }
    );
    // Traffic: every flow between DCs, each ordered DC pair about a sixth of them, and the
    // offered load on the six directed WAN links (60 Gbit/s) the target.
    assert_eq!(b.load_capacity_bps, 60e9);
    let mut per_pair = BTreeMap::new();
    for f in &p.net.flows {
        let (s, d) = (b.rack_of[f.spec.src], b.rack_of[f.spec.dst]);
        assert_ne!(s, d, "flow {} stays in DC {s}", f.spec.id);
        *per_pair.entry((s, d)).or_insert(0usize) += 1;
    }
    assert_eq!(per_pair.len(), 6);
    for (&k, &n) in &per_pair {
        assert!((n as f64 / 4000.0 - 1.0 / 6.0).abs() < 0.03, "{k:?}: {n}");
    }
    let bytes: f64 = p
        .net
        .flows
        .iter()
        .map(|f| f.spec.size.unwrap() as f64)
        .sum();
    let span = p.net.flows.iter().map(|f| f.spec.start).max().unwrap() as f64 / 1e9;
    let load = bytes * wire_factor(1500) * 8.0 / span / b.load_capacity_bps;
    assert!((load - 0.8).abs() < 0.1, "offered load {load}");
    // The WAN CDF: Table V's 15.8 % below 10 MB.
    let small = p
        .net
        .flows
        .iter()
        .filter(|f| f.spec.size.unwrap() < 10_000_000)
        .count();
    assert!((small as f64 / 4000.0 - 0.158).abs() < 0.02, "{small}");
}

#[test]
fn deployment_by_rack_and_workload_load() {
    // Half the racks: a flow is new only when both ends are in racks 0..16.
    let (e, _) = exp("clos-websearch", &["deployment.fraction=0.5"]);
    let p = prepare(&e).unwrap();
    let n = enabled_racks(0.5, p.built.racks);
    assert_eq!(n, 16);
    let mut new = 0;
    for f in &p.net.flows {
        let both = p.built.rack_of[f.spec.src] < n && p.built.rack_of[f.spec.dst] < n;
        let want = if both {
            TransportKind::FlexPass
        } else {
            TransportKind::Dctcp
        };
        assert_eq!(f.spec.transport, want, "flow {}", f.spec.id);
        new += usize::from(both);
    }
    // Random pairs: about a quarter of the flows.
    let frac = new as f64 / p.net.flows.len() as f64;
    assert!((frac - 0.25).abs() < 0.02, "{frac}");
    // The offered load on the ToR uplinks is the target (bytes on the wire over the
    // arrival span), within the sampling noise of 10 000 heavy-tailed sizes.
    let bytes: f64 = p
        .net
        .flows
        .iter()
        .map(|f| f.spec.size.unwrap() as f64)
        .sum();
    let span = p.net.flows.iter().map(|f| f.spec.start).max().unwrap() as f64 / 1e9;
    let load = bytes * wire_factor(1500) * 8.0 / span / p.built.load_capacity_bps;
    assert!((load - 0.5).abs() < 0.05, "offered load {load}");
    // Mixed traffic: 10 % of the volume is foreground incast of 8 kB flows.
    let (e, _) = exp(
        "clos-websearch",
        &[
            "workload.foreground={ volume_fraction = 0.1 }",
            "workload.flows=3000",
        ],
    );
    let p = prepare(&e).unwrap();
    let vol = |k: FlowKind| -> f64 {
        p.net
            .flows
            .iter()
            .filter(|f| f.spec.kind == k)
            .map(|f| f.spec.size.unwrap() as f64)
            .sum()
    };
    let (fg, bg) = (vol(FlowKind::Foreground), vol(FlowKind::Background));
    assert!(fg > 0.0);
    let share = fg / (fg + bg);
    assert!((share - 0.1).abs() < 0.04, "foreground share {share}");
    assert!(p
        .net
        .flows
        .iter()
        .filter(|f| f.spec.kind == FlowKind::Foreground)
        .all(|f| f.spec.size == Some(8000)));
}

/// Runs on the scaled-down Clos, two at a time.
fn small_clos_runs(points: &[(&str, f64)]) -> Vec<RunReport> {
    let out = std::sync::Mutex::new(vec![None; points.len()]);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(profile, fraction)) = points.get(i) else {
                    break;
                };
                let r = run(
                    SMALL_CLOS,
                    &[
                        &format!("switch.profile={profile}"),
                        &format!("deployment.fraction={fraction}"),
                    ],
                );
                out.lock().unwrap()[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn deployment_trends_on_a_scaled_clos() {
    // FlexPass §6.2 / the acceptance, at a size a test can afford: 24 hosts (4 ToRs
    // in 2 pods, 3:1), 600 web-search flows at load 0.5. The 192-host numbers are in
    // docs/results-large-scale.md.
    let runs = small_clos_runs(&[
        ("flexpass", 0.0),
        ("flexpass", 0.5),
        ("flexpass", 1.0),
        ("naive", 0.5),
        ("owf", 0.5),
        ("layering", 1.0),
    ]);
    let [zero, fp50, fp100, naive50, owf50, ly100] = &runs[..] else {
        unreachable!()
    };
    for r in &runs {
        let what = format!("{} at {}", r.profile.name(), r.deployment_fraction);
        assert_eq!(r.fct.overall.incomplete, 0, "{what}");
        assert_eq!(r.corrupted_bytes, 0, "{what}");
        assert_eq!(
            r.paths.mismatches, 0,
            "{what}: credits and data on different paths"
        );
        let credit_flows = r
            .flows
            .iter()
            .filter(|f| f.transport != TransportKind::Dctcp)
            .count();
        assert_eq!(r.paths.flows_checked, credit_flows, "{what}");
    }
    let avg = |r: &RunReport| r.fct.overall.buckets.all.avg_us;
    let p99 = |r: &RunReport| r.fct.overall.buckets.small.p99_us;
    let legacy_p99 = |r: &RunReport| r.fct.legacy.buckets.small.p99_us;
    // 1. FlexPass at 100 % cuts the p99 FCT of small flows (paper: up to −44 %) and keeps the
    //    average FCT of all flows within 10 % of 0 % at every step.
    assert!(
        p99(fp100) < 0.7 * p99(zero),
        "p99 {} vs {}",
        p99(fp100),
        p99(zero)
    );
    for r in [fp50, fp100] {
        assert!(avg(r) <= 1.1 * avg(zero), "avg {} vs {}", avg(r), avg(zero));
    }
    // 2. Naive ExpressPass hurts legacy flows during deployment; FlexPass far less, and
    //    without timeouts.
    assert!(
        legacy_p99(naive50) > 1.5 * legacy_p99(zero),
        "naive legacy p99 {}",
        legacy_p99(naive50)
    );
    assert!(
        legacy_p99(fp50) < 0.6 * legacy_p99(naive50),
        "FlexPass legacy p99 {}",
        legacy_p99(fp50)
    );
    assert_eq!(fp50.fct.legacy.timeouts, 0);
    // 3. FlexPass ≈ oWF during deployment; layering degrades (its window wastes credits).
    assert!(
        avg(fp50) <= 1.1 * avg(owf50),
        "avg {} vs oWF {}",
        avg(fp50),
        avg(owf50)
    );
    assert!(
        p99(fp50) <= 1.5 * p99(owf50),
        "p99 {} vs oWF {}",
        p99(fp50),
        p99(owf50)
    );
    assert!(
        avg(ly100) > 1.15 * avg(fp100),
        "LY avg {} vs FlexPass {}",
        avg(ly100),
        avg(fp100)
    );
}

#[test]
fn symmetric_ecmp_uses_every_path() {
    // Every aggregation→core and ToR→aggregation port carries traffic (the per-tier hash
    // salts avoid polarisation), while each flow's credits follow its data.
    let r = run(
        SMALL_CLOS,
        &[
            "switch.profile=naive",
            "deployment.fraction=1.0",
            "workload.flows=200",
        ],
    );
    assert_eq!(r.paths.mismatches, 0);
    assert_eq!(r.paths.flows_checked, 200);
    for p in &r.ports {
        let up = (p.node.starts_with("agg") && p.towards.starts_with("core"))
            || (p.node.starts_with("tor") && p.towards.starts_with("agg"));
        if up {
            assert!(
                p.tx_bytes > 1_000_000,
                "{}->{} carried {} B",
                p.node,
                p.towards,
                p.tx_bytes
            );
        }
    }
}

#[test]
fn flows_survive_a_link_failure_and_repair() {
    // Issue #14 on the model: a spine link fails under FlexPass, ExpressPass and DCTCP flows;
    // 1 ms later the routes drop it (every leaf's ECMP group in the same order), then it
    // comes back. Nothing is lost or corrupted, credits stay on their data's path, and no
    // flow stalls for long.
    let base = Source::load("link-failure").unwrap();
    let dir = std::env::temp_dir().join(format!("fp-fault-{}.toml", std::process::id()));
    std::fs::write(
        &dir,
        format!(
            "extends = {:?}\n[[fault]]\nat_ms = 5\nlink = \"leaf0->spine0\"\nreroute_after_ms = 1\n[[fault]]\nat_ms = 12\nlink = \"spine0->leaf0\"\nup = true\nreroute_after_ms = 1\n",
            base.name
        ),
    )
    .unwrap();
    let r = run(dir.to_str().unwrap(), &[]);
    std::fs::remove_file(&dir).unwrap();
    assert_eq!(r.reroutes, 2);
    assert!(r.link_drops > 0, "the failure hit no traffic");
    assert!(r.paths.changes > 0, "no flow moved");
    assert_eq!(r.paths.mismatches, 0);
    assert_eq!(r.fct.overall.incomplete, 0);
    assert_eq!(r.corrupted_bytes, 0);
    for f in &r.flows {
        assert_eq!(f.delivered_bytes, 10_000_000, "flow {}", f.id);
        assert!(
            f.max_stall_us < 20_000.0,
            "flow {} stalled {} µs",
            f.id,
            f.max_stall_us
        );
    }
}

#[test]
fn flows_survive_a_multi_second_outage_within_the_give_up_timeout() {
    // The control plane takes 3 s to drop the failed spine link from the routes (a failure
    // noticed late): flows hashed onto it get nothing through for 3 s, more than the old
    // give-up bound (16 recovery timeouts, ~1.4 s). Within the give-up timeout (default
    // 30 s) they keep re-requesting credits and complete byte-exact once rerouted; with a
    // 1 s give-up timeout the credit-based ones among them fail.
    let outage = ["duration_ms=5000", "fault.0.reroute_after_ms=3000"];
    let r = run("link-failure", &outage);
    assert_eq!(r.reroutes, 1);
    assert!(r.link_drops > 0, "the failure hit no traffic");
    assert_eq!(r.fct.overall.incomplete, 0);
    assert_eq!(r.corrupted_bytes, 0);
    assert_eq!(r.paths.mismatches, 0);
    let stalled: Vec<_> = r.flows.iter().filter(|f| f.max_stall_us > 2.9e6).collect();
    assert!(!stalled.is_empty(), "no flow crossed the failed link");
    for f in &r.flows {
        assert_eq!(f.delivered_bytes, 10_000_000, "flow {}", f.id);
        assert!(
            f.max_stall_us < 3.5e6,
            "flow {} stalled {} µs",
            f.id,
            f.max_stall_us
        );
    }
    let mut short = outage.to_vec();
    short.push("host.give_up_ms=1000");
    let r = run("link-failure", &short);
    let failed = r.flows.iter().filter(|f| f.delivered_bytes < 10_000_000);
    assert!(
        failed.clone().any(|f| f.transport != TransportKind::Dctcp),
        "a 1 s give-up timeout should end the credit-based flows on the failed link"
    );
    assert!(r.fct.overall.incomplete > 0);
    assert_eq!(r.corrupted_bytes, 0);
}

#[test]
fn ppt_on_a_scaled_fabric() {
    // PPT §6.2's fabric scaled down: 24 hosts (4 leaves × 6, 2 spines, 40/100 Gbit/s, 120 kB
    // per port, K 96 kB HCP / 86 kB LCP), 600 web-search flows at load 0.5; DCTCP and PPT on
    // the same switches (8 strict priorities). The 144-host runs are in docs/results-ppt.md.
    let points = ["0.0", "1.0"];
    let runs: Vec<RunReport> = std::thread::scope(|s| {
        let handles: Vec<_> = points
            .iter()
            .map(|f| {
                s.spawn(move || {
                    run(
                        "ppt-websearch",
                        &[
                            "topology.leaves=4",
                            "topology.hosts_per_leaf=6",
                            "topology.spines=2",
                            "workload.flows=600",
                            &format!("deployment.fraction={f}"),
                        ],
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let [dctcp, ppt] = &runs[..] else {
        unreachable!()
    };
    for r in &runs {
        assert_eq!(r.fct.overall.incomplete, 0);
        assert_eq!(r.corrupted_bytes, 0);
    }
    assert!(dctcp
        .flows
        .iter()
        .all(|f| f.transport == TransportKind::Dctcp));
    assert!(ppt.flows.iter().all(|f| f.transport == TransportKind::Ppt));
    let lcp = ppt
        .ppt
        .as_ref()
        .expect("PPT flows: the report's ppt section");
    assert_eq!(lcp.flows, 600);
    assert!(lcp.lcp_packets > 0 && lcp.lcp_byte_share > 0.0, "{lcp:?}");
    // 1. Small flows (≤ 100 kB) finish faster: the LCP sends their tail in the first RTT, and
    //    their HCP packets leave before every large flow's (P0 vs P3). Compared on the median
    //    and on the average over the flows without a retransmission timeout (a 10 ms RTO
    //    dominates the average of a few hundred flows either way).
    let small = |r: &RunReport| -> Vec<f64> {
        r.flows
            .iter()
            .filter(|f| f.size.unwrap() <= 100_000 && f.timeouts == 0)
            .map(|f| f.fct_us.unwrap())
            .collect()
    };
    let avg = |v: Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    let p50 = |r: &RunReport| r.fct.overall.buckets.small.p50_us;
    assert!(
        p50(ppt) < 0.75 * p50(dctcp),
        "small-flow median: PPT {} µs, DCTCP {} µs",
        p50(ppt),
        p50(dctcp)
    );
    let (a_ppt, a_dctcp) = (avg(small(ppt)), avg(small(dctcp)));
    assert!(
        a_ppt < 0.75 * a_dctcp,
        "small-flow average without RTOs: PPT {a_ppt} µs, DCTCP {a_dctcp} µs"
    );
    // 2. LCP never delays HCP packets: strict priority sends an LCP packet only when no HCP
    //    packet is queued, so an HCP packet waits for an LCP packet only when it arrives while
    //    one is already on the wire — at most one full frame's serialization on the slowest
    //    link (1538 B at 40 Gbit/s) — on every switch port and NIC.
    let frame_ns = (1538.0 * 8.0 / 40.0f64).ceil() as u64;
    assert!(
        lcp.hcp_arrivals_behind_lcp > 0,
        "no contention at all: {lcp:?}"
    );
    assert!(
        lcp.hcp_max_wait_behind_lcp_ns <= frame_ns,
        "an HCP packet waited {} ns behind LCP packets (one frame: {frame_ns} ns)",
        lcp.hcp_max_wait_behind_lcp_ns
    );
    // Both loops' queues were used: HCP packets in P0–P3, LCP packets in P4–P7.
    assert!(lcp.switch_max_bytes[..4].iter().any(|&b| b > 0));
    assert!(lcp.switch_max_bytes[4..].iter().any(|&b| b > 0));
}

#[test]
fn tail_loss_probe_and_lcp_pushout_on_a_scaled_fabric() {
    // The scaled fabric of `ppt_on_a_scaled_fabric`, PPT without and with DCTCP's tail-loss
    // probe (host.tlp) and push-out admission (switch.lcp_pushout): the probe turns tail
    // losses into fast recoveries (fewer flows wait for the 10 ms RTO), and with push-out no
    // HCP packet is ever refused while LCP packets hold buffer.
    let base = [
        "topology.leaves=4",
        "topology.hosts_per_leaf=6",
        "topology.spines=2",
        "workload.flows=600",
        "deployment.fraction=1.0",
    ];
    let sets = [vec![], vec!["host.tlp=true", "switch.lcp_pushout=true"]];
    let runs: Vec<RunReport> = std::thread::scope(|s| {
        let handles: Vec<_> = sets
            .iter()
            .map(|extra| {
                let all: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
                s.spawn(move || run("ppt-websearch", &all))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let [plain, better] = &runs[..] else {
        unreachable!()
    };
    for r in &runs {
        assert_eq!(r.fct.overall.incomplete, 0);
        assert_eq!(r.corrupted_bytes, 0);
    }
    let (p, b) = (plain.ppt.as_ref().unwrap(), better.ppt.as_ref().unwrap());
    let rto_flows = |r: &RunReport| r.flows.iter().filter(|f| f.timeouts > 0).count();
    eprintln!(
        "RTO flows {} -> {}, HCP drops with LCP held {} -> {}, pushed out {}, probes {} ({} recovered)",
        rto_flows(plain),
        rto_flows(better),
        p.hcp_drops_lcp_held,
        b.hcp_drops_lcp_held,
        b.lcp_pushed_out,
        better.tlp_probes,
        better.tlp_recoveries
    );
    assert_eq!((plain.tlp_probes, p.lcp_pushed_out), (0, 0));
    assert!(p.hcp_drops_lcp_held > 0, "the drop-tail switch: {p:?}");
    // With push-out an HCP packet is refused while LCP packets are queued only when they hold
    // less than it needs (the HCP itself filled the buffer): a handful, not thousands.
    assert!(
        b.hcp_drops_lcp_held * 20 < p.hcp_drops_lcp_held,
        "push-out: {} HCP drops with LCP bytes held, drop-tail {}",
        b.hcp_drops_lcp_held,
        p.hcp_drops_lcp_held
    );
    assert!(b.lcp_pushed_out > 0);
    assert!(better.tlp_probes > 0);
    assert!(
        2 * rto_flows(better) < rto_flows(plain),
        "flows with an RTO: {} with the probe and push-out, {} without",
        rto_flows(better),
        rto_flows(plain)
    );
}

/// mininet-topos/experiments/faults-quick.toml, the file the Mininet tier runs: six flows
/// pinned to the two spines (`via`), a spine link down and up, leaf1 restarted (20 ms
/// down), the controller restarted.
fn faults_quick(sets: &[&str]) -> RunReport {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../mininet-topos/experiments/faults-quick.toml"
    );
    run(path, sets)
}

#[test]
fn a_restarted_switch_stalls_its_flows_for_its_down_time_and_a_controller_restart_none() {
    let r = faults_quick(&[]);
    assert_eq!(r.fct.overall.incomplete, 0);
    assert_eq!(r.corrupted_bytes, 0);
    assert!(r.flows.iter().all(|f| f.delivered_bytes == 200_000_000));
    // One sample per interval (run_until runs in 1 ms slices: one sampling chain).
    let dt = r.sample_interval_us;
    assert!(r
        .samples
        .windows(2)
        .all(|w| (w[1].t_us - w[0].t_us - dt).abs() < 1e-6));
    let kinds: Vec<FaultKind> = r.faults.iter().map(|f| f.kind).collect();
    use FaultKind::*;
    assert_eq!(kinds, [Link, Link, SwitchRestart, ControllerRestart]);
    for f in &r.faults {
        assert_eq!(f.recovery.len(), 6, "{}: every flow under way", f.event);
    }
    // Every flow ends at leaf1: all stall while it is down (20 ms, less a sample interval)
    // and resume within a backed-off RTO of its return.
    let restart = &r.faults[2];
    for g in &restart.recovery {
        assert!(
            (18_000.0..=60_000.0).contains(&g.gap_us),
            "flow {}: gap {} µs",
            g.flow,
            g.gap_us
        );
    }
    // The switches keep forwarding while the controller is away.
    assert_eq!(r.faults[3].max_gap_us, Some(0.0));
}

#[test]
fn a_flow_pinned_through_a_spine_stays_there() {
    // The link to spine0 fails and the routes keep it for 10 ms: the flows pinned through
    // spine0 get nothing through meanwhile, those through spine1 never notice.
    let r = faults_quick(&["fault.0.reroute_after_ms=10"]);
    let via = |id: u32| {
        if [1, 2, 3].contains(&id) {
            "spine0"
        } else {
            "spine1"
        }
    };
    for g in &r.faults[0].recovery {
        if via(g.flow) == "spine0" {
            assert!(
                g.gap_us >= 8_000.0,
                "flow {} via spine0: gap {} µs",
                g.flow,
                g.gap_us
            );
        } else {
            assert_eq!(g.gap_us, 0.0, "flow {} via spine1 stalled", g.flow);
        }
    }
    // A switch that is no equal-cost next hop of the flow's first switch is refused.
    let (e, _) = exp(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../mininet-topos/experiments/faults-quick.toml"
        ),
        &["flow.0.via=leaf1"],
    );
    let err = prepare(&e).err().expect("via a leaf is refused");
    assert!(err.contains("flow[0].via = 'leaf1'"), "{err}");
}

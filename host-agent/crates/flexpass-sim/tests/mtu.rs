//! The model at an MTU (topology.mtu): segment size, the credit queues' rates and the
//! receivers' max_rate follow docs/mtu-vectors.json (shared with the wire crate, the core,
//! the agent and Python), and a FlexPass flow on jumbo frames still takes w_q of the link
//! proactively.

use flexpass_sim::topology::PortFactory;
use flexpass_sim::{prepare, Override, Source};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

#[test]
fn credit_rates_and_segments_follow_the_mtu_vectors() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/mtu-vectors.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mut checked = 0;
    for r in v["credit_rates"].as_array().unwrap() {
        let mtu = r["mtu"].as_u64().unwrap();
        let link = r["link_bps"].as_f64().unwrap();
        let share = r["share"].as_f64().unwrap();
        // FlexPass: credits fill w_q of the link; naive ExpressPass: all of it.
        let profile = if share == 1.0 { "naive" } else { "flexpass" };
        let sets = [
            format!("topology.mtu={mtu}"),
            format!("topology.link_gbps={}", link / 1e9),
            format!("switch.w_q={}", if share == 1.0 { 0.5 } else { share }),
            format!("switch.profile=\"{profile}\""),
        ];
        let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let e = Source::load("single-flexpass")
            .unwrap()
            .experiment(&o)
            .unwrap();
        let p = prepare(&e).unwrap();
        let port = p.stack.switch_port(link);
        assert!(
            close(
                port.credit_rate_bps,
                r["credit_queue_bps"].as_f64().unwrap()
            ),
            "{r}"
        );
        let f = &p.net.flows[0].spec;
        let rc = p.stack.receiver_config(f);
        assert!(
            close(
                rc.credit.max_rate,
                r["credits_per_second"].as_f64().unwrap()
            ),
            "{r}"
        );
        let sc = p.stack.sender_config(f);
        assert_eq!(
            sc.mss,
            flexpass_wire::max_payload_for_mtu(mtu as usize),
            "{r}"
        );
        checked += 1;
    }
    assert!(checked >= 4);
}

#[test]
fn one_flexpass_flow_on_jumbo_frames_takes_w_q_proactively() {
    let o = [Override::parse("topology.mtu=9000").unwrap()];
    let e = Source::load("single-flexpass")
        .unwrap()
        .experiment(&o)
        .unwrap();
    let r = flexpass_sim::run(&e, &o, &mut |_| {}).unwrap();
    let f = &r.flows[0];
    assert!(f.error.is_none(), "{:?}", f.error);
    // FlexPass Fig. 7a at 9000 B: proactive ≈ w_q · C, reactive fills the rest.
    assert!(
        (f.proactive_share - 0.5).abs() < 0.05,
        "proactive {}",
        f.proactive_share
    );
    assert!(f.proactive_share + f.reactive_share > 0.9, "{f:?}");
    assert_eq!(r.data_drops_full, 0);
    assert_eq!(r.timeouts, 0);
}

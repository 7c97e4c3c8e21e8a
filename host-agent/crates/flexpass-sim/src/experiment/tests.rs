//! The experiment schema as users meet it: files, overrides and the errors they get.

use super::*;
use crate::queue::Profile;
use flexpass_core::MICROS;

fn src(text: &str) -> Source {
    Source {
        name: "t".into(),
        text: text.into(),
        path: None,
    }
}

const STAR: &str = r#"
[topology]
kind = "star"
hosts = 3
[[flow]]
src = 1
dst = "h0"
transport = "flexpass"
"#;

#[test]
fn a_flow_entry_with_count_lists_consecutive_senders() {
    let many = "[topology]\nkind = \"star\"\nhosts = 5\n[[flow]]\nsrc = \"h1\"\ndst = 0\n\
                start_us = 10\ncount = 3\nstart_step_us = 5\n";
    let e = src(many).experiment(&[]).unwrap();
    assert_eq!(
        e.flows[0].expand(5).unwrap(),
        vec![(1, 10.0), (2, 15.0), (3, 20.0)]
    );
    let err = src(&many.replace("count = 3", "count = 5"))
        .experiment(&[])
        .unwrap_err();
    assert!(
        err.contains("flow[0].src: count = 5 from host 1 needs host 5"),
        "{err}"
    );
    let err = src(&many.replace("count = 3", "count = 0"))
        .experiment(&[])
        .unwrap_err();
    assert!(err.contains("flow[0].count must be >= 1"), "{err}");
    let err = src(&many.replace("dst = 0", "dst = 2"))
        .experiment(&[])
        .unwrap_err();
    assert!(err.contains("src and dst are the same host"), "{err}");
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let e = src(&format!("{STAR}\n[switch]\nwq = 0.5\n"))
        .experiment(&[])
        .unwrap_err();
    assert!(
        e.contains("unknown field `wq`") && e.contains("line"),
        "{e}"
    );
    let e = src(STAR)
        .experiment(&[Override::parse("switch.w_q=1.5").unwrap()])
        .unwrap_err();
    assert!(e.contains("switch.w_q must be in (0, 1), got 1.5"), "{e}");
    let e = src(STAR)
        .experiment(&[Override::parse("switch.w_q=high").unwrap()])
        .unwrap_err();
    assert!(
        e.contains("switch.w_q") && e.contains("invalid type"),
        "{e}"
    );
    let e = src(STAR)
        .experiment(&[Override::parse("topology.spines=2").unwrap()])
        .unwrap_err();
    assert!(
        e.contains("topology.spines does not apply to kind 'star'"),
        "{e}"
    );
    let e = src(&STAR.replace("dst = \"h0\"", "dst = \"h9\""))
        .experiment(&[])
        .unwrap_err();
    assert!(e.contains("flow[0].dst: host 9 does not exist"), "{e}");
    let e = src(STAR)
        .experiment(&[Override::parse("switch.red_kb=1").unwrap()])
        .unwrap_err();
    assert!(
        e.contains("switch.red_kb (1) must hold at least one frame"),
        "{e}"
    );
    let e = src(STAR)
        .experiment(&[Override::parse("switch.feedback_priority=true").unwrap()])
        .unwrap_err();
    assert!(
        e.contains("switch.feedback_priority applies to profile \"flashpass\" only"),
        "{e}"
    );
    let e = src("[topology]\nkind = \"ring\"\nhosts = 2\n[[flow]]\nsrc = 0\ndst = 1\n")
        .experiment(&[])
        .unwrap_err();
    assert!(e.contains("topology.kind 'ring'"), "{e}");
}

#[test]
fn three_dc_keys_and_values_are_checked() {
    const WAN: &str = "[topology]\nkind = \"three-dc\"\n[[flow]]\nsrc = 0\ndst = 59\n";
    let err = |sets: &[&str]| {
        let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        src(WAN).experiment(&o).unwrap_err()
    };
    let e = src(WAN).experiment(&[]).unwrap();
    assert_eq!(
        e.num_hosts().unwrap(),
        60,
        "20 hosts in each of 3 DCs by default"
    );
    assert_eq!(e.topology.link_bps(), 1e9);
    assert_eq!(e.topology.link_delay(), 10 * MICROS);
    let e = err(&["topology.wan_delay_us=[20000, 30000]"]);
    assert!(
        e.contains("topology.wan_delay_us must be three one-way delays") && e.contains("got 2"),
        "{e}"
    );
    let e = err(&["topology.wan_delay_us=[20000, -1, 40000]"]);
    assert!(
        e.contains("topology.wan_delay_us[1] (dc1–dc2) must be >= 0, got -1"),
        "{e}"
    );
    let e = err(&["topology.wan_gbps=0"]);
    assert!(e.contains("topology.wan_gbps must be > 0, got 0"), "{e}");
    let e = err(&["topology.hosts_per_dc=0"]);
    assert!(
        e.contains("topology.hosts_per_dc must be >= 1, got 0"),
        "{e}"
    );
    let e = err(&["topology.hosts=4"]);
    assert!(
        e.contains("topology.hosts does not apply to kind 'three-dc'")
            && e.contains("hosts_per_dc, wan_gbps, wan_delay_us"),
        "{e}"
    );
    let e = err(&["topology.wan_gbps=\"fast\""]);
    assert!(e.contains("wan_gbps") && e.contains("invalid type"), "{e}");
    let e = src(STAR)
        .experiment(&[Override::parse("topology.wan_gbps=10").unwrap()])
        .unwrap_err();
    assert!(
        e.contains("topology.wan_gbps does not apply to kind 'star'"),
        "{e}"
    );
    let e = err(&["switch.buffer_kb_per_gbps=-20"]);
    assert!(
        e.contains("switch.buffer_kb_per_gbps must be > 0, got -20"),
        "{e}"
    );
    let e = err(&[
        "workload.cdf=\"alibaba-wan\"",
        "workload.load=0.4",
        "workload.flows=3",
        "workload.pairs=\"cross\"",
    ]);
    assert!(
        e.contains("workload.pairs must be \"any\" or \"inter-rack\", got \"cross\""),
        "{e}"
    );
}

#[test]
fn overrides_reach_nested_keys_and_lists() {
    let s = src(STAR);
    let e = s
        .experiment(&[
            Override::parse("flow.0.bytes=1000").unwrap(),
            Override::parse("switch.profile=naive").unwrap(),
            Override::parse("topology.hosts=5").unwrap(),
        ])
        .unwrap();
    assert_eq!(e.flows[0].bytes, Some(1000));
    assert_eq!(e.switch.profile, Profile::Naive);
    assert_eq!(e.num_hosts().unwrap(), 5);
    assert!(s
        .experiment(&[Override::parse("flow.3.bytes=1").unwrap()])
        .unwrap_err()
        .contains("no index 3"));
    assert!(Override::parse("novalue").is_err());
}

#[test]
fn extends_merges_the_base_under_the_file() {
    let dir = std::env::temp_dir().join(format!("fp-extends-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("base.toml"), STAR).unwrap();
    let top = dir.join("top.toml");
    std::fs::write(
        &top,
        "extends = \"base.toml\"\ndescription = \"top\"\n[switch]\nprofile = \"naive\"\n",
    )
    .unwrap();
    let e = Source::load(top.to_str().unwrap())
        .unwrap()
        .experiment(&[])
        .unwrap();
    assert_eq!(e.switch.profile, Profile::Naive);
    assert_eq!(e.switch.w_q, 0.5);
    assert_eq!(e.flows.len(), 1);
    assert_eq!(e.description, "top");
    std::fs::write(&top, "extends = \"top.toml\"\n").unwrap();
    assert!(Source::load(top.to_str().unwrap())
        .unwrap()
        .experiment(&[])
        .unwrap_err()
        .contains("8 levels"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_kind_reads_its_own_keys_and_names_the_others() {
    for kind in [
        "star",
        "dumbbell",
        "parking-lot",
        "leaf-spine",
        "clos3",
        "three-dc",
    ] {
        let t: TopologySpec = toml::from_str(&format!("kind = \"{kind}\"")).unwrap();
        assert_eq!(t.kind.name(), kind);
    }
    // In the file as written, the error has the line of [topology].
    let e = src(&STAR.replace("hosts = 3", "hosts = 3\nspines = 2"))
        .experiment(&[])
        .unwrap_err();
    assert!(
        e.contains("topology.spines does not apply to kind 'star' (its keys: hosts, link_gbps")
            && e.contains("line 2"),
        "{e}"
    );
    let e = src(&STAR.replace("hosts = 3", "hosts = \"three\""))
        .experiment(&[])
        .unwrap_err();
    assert!(
        e.contains("topology.hosts: invalid type: string \"three\""),
        "{e}"
    );
}

/// Reports (`params`) keep the flat table with every kind's keys, in the order they had.
#[test]
fn the_topology_is_reported_as_one_flat_table() {
    let e = src(STAR).experiment(&[]).unwrap();
    let json = serde_json::to_value(&e.topology).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    let mut expected = [
        "kind",
        "link_gbps",
        "link_delay_us",
        "host_delay_us",
        "hosts",
        "left",
        "right",
        "bottleneck_gbps",
        "left_delay_us",
        "bottleneck_delay_us",
        "bottlenecks",
        "hosts_per_switch",
        "leaves",
        "spines",
        "hosts_per_leaf",
        "uplink_gbps",
        "oversubscription",
        "cores",
        "aggs",
        "tors",
        "aggs_per_pod",
        "core_gbps",
        "hosts_per_dc",
        "wan_gbps",
        "wan_delay_us",
        "mtu",
        "routing",
    ];
    let text = serde_json::to_string(&e.topology).unwrap();
    let order: Vec<usize> = expected
        .iter()
        .map(|k| text.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    expected.sort();
    assert_eq!(sorted, expected);
    assert_eq!(json["kind"], "star");
    assert_eq!(json["hosts"], 3);
    assert!(json["spines"].is_null() && json["mtu"].is_null());
}

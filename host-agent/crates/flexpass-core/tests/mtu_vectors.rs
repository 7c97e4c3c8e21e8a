//! Verifies docs/mtu-vectors.json (frame sizes of an MTU, credit rates) against the wire
//! crate and the core. The same file is checked by Python (control-plane/tests/
//! test_mtu_vectors.py), the agent and the model; this test never regenerates it
//! (`cargo run -p flexpass-core --example gen_mtu_vectors`).

use flexpass_core::config::{
    credit_limit_frame_bytes_per_s, credit_queue_bps, credit_queue_bps_mtu, credit_rate_for_link,
    credit_rate_for_link_mtu, MAX_DATA_WIRE,
};
use flexpass_core::CreditConfig;
use flexpass_wire::*;
use serde_json::Value;

fn load() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/mtu-vectors.json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("docs/mtu-vectors.json")).unwrap()
}

fn u(v: &Value, k: &str) -> usize {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}")) as usize
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

#[test]
fn frame_sizes_match_the_wire_crate() {
    let v = load();
    assert_eq!(u(&v, "credit_wire_bytes"), MIN_ETHERNET_WIRE);
    assert_eq!(u(&v, "wire_bytes_not_in_frame"), WIRE_BYTES_NOT_IN_FRAME);
    assert_eq!(
        (u(&v, "default_mtu"), u(&v, "min_mtu"), u(&v, "max_mtu")),
        (DEFAULT_MTU, MIN_MTU, MAX_MTU)
    );
    let frames = v["frames"].as_array().unwrap();
    assert!(
        frames.iter().any(|f| u(f, "mtu") == 1500) && frames.iter().any(|f| u(f, "mtu") == 9000)
    );
    for f in frames {
        let mtu = u(f, "mtu");
        assert_eq!(u(f, "max_message"), max_message_for_mtu(mtu), "{f}");
        assert_eq!(u(f, "max_payload"), max_payload_for_mtu(mtu), "{f}");
        assert_eq!(u(f, "max_frame_wire"), max_frame_wire(mtu), "{f}");
    }
    assert_eq!(MAX_DATA_WIRE, max_frame_wire(1500));
}

#[test]
fn credit_rates_match_the_core() {
    let v = load();
    let rates = v["credit_rates"].as_array().unwrap();
    assert!(rates.len() >= 4);
    for r in rates {
        let (mtu, link, share) = (
            u(r, "mtu"),
            r["link_bps"].as_f64().unwrap(),
            r["share"].as_f64().unwrap(),
        );
        let bps = r["credit_queue_bps"].as_f64().unwrap();
        let cps = r["credits_per_second"].as_f64().unwrap();
        assert!(close(credit_queue_bps_mtu(link, share, mtu), bps), "{r}");
        // The edges' and the agent's unit: frame bytes, a minimum credit 60 B.
        let frame_bps = r["credit_limit_frame_bytes_per_s"].as_f64().unwrap();
        assert!(
            close(credit_limit_frame_bytes_per_s(link, share, mtu), frame_bps),
            "{r}"
        );
        assert!(
            close(cps * ethernet_frame_len(CREDIT_MSG_MIN) as f64, frame_bps),
            "{r}"
        );
        assert!(
            close(credit_rate_for_link_mtu(link, share, mtu), cps),
            "{r}"
        );
        assert!(
            close(
                CreditConfig::for_link_mtu(link, share, 100_000, mtu).max_rate,
                cps
            ),
            "{r}"
        );
        // A credit of 84 B at the queue rate: the two forms agree.
        assert!(close(bps / (8.0 * MIN_ETHERNET_WIRE as f64), cps), "{r}");
        if mtu == DEFAULT_MTU {
            assert!(
                close(credit_queue_bps(link, share), bps)
                    && close(credit_rate_for_link(link, share), cps)
            );
            assert!(close(
                CreditConfig::for_link(link, share, 100_000).max_rate,
                cps
            ));
        }
    }
}

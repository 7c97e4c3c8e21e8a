//! `SenderConfig::fit_to_path`: the per-transport parameters a host's flows take from its
//! path, the one place for the agent's flows and a program's in-process ones.

use flexpass_core::{
    FlashPassConfig, HostPath, PptConfig, SenderConfig, FLASHPASS_MIN_RATE_FRACTION,
    FLASHPASS_MIN_UPDATE_SAMPLES,
};
use flexpass_wire::{max_payload_for_mtu, TransportKind};

fn path(mtu: usize, unscheduled: bool) -> HostPath {
    HostPath {
        link_bps: 25e9,
        base_rtt: 40_000,
        mtu,
        t_wait: 3_000_000,
        flashpass_unscheduled: unscheduled,
    }
}

fn fitted(t: TransportKind, p: &HostPath) -> SenderConfig {
    let mut c = SenderConfig::new(t);
    c.fit_to_path(p);
    c.validate().expect("a fitted config is valid");
    c
}

#[test]
fn segments_fill_the_paths_mtu_for_every_transport() {
    for t in TransportKind::ALL {
        for mtu in [1500, 9000] {
            assert_eq!(
                fitted(t, &path(mtu, true)).mss,
                max_payload_for_mtu(mtu),
                "{t:?} {mtu}"
            );
        }
    }
}

#[test]
fn ppt_pfabric_and_pase_take_the_host_links_bdp_and_rate() {
    let p = path(1500, true);
    let bdp = (25e9 / 8.0 * 40e-6_f64).ceil() as u64; // 125 000 bytes
    let ppt = fitted(TransportKind::Ppt, &p).ppt;
    let want = PptConfig::for_link(p.link_bps, p.base_rtt);
    assert_eq!(
        (ppt.bdp_bytes, ppt.base_rtt),
        (want.bdp_bytes, want.base_rtt)
    );
    assert!(
        ppt.bdp_bytes.abs_diff(bdp) <= 1,
        "{} vs {bdp}",
        ppt.bdp_bytes
    );
    let pf = fitted(TransportKind::PFabric, &p).pfabric;
    assert_eq!((pf.bdp_bytes, pf.base_rtt), (bdp, 40_000));
    let pase = fitted(TransportKind::Pase, &p).pase;
    assert_eq!((pase.line_rate_bps, pase.base_rtt), (25e9, 40_000));
}

#[test]
fn flashpass_emulates_at_the_links_share_with_the_hosts_floors() {
    let p = path(9000, true);
    let fp = fitted(TransportKind::FlashPass, &p).flashpass;
    let want = FlashPassConfig::for_link_mtu(p.link_bps, p.base_rtt, p.t_wait, p.mtu);
    assert_eq!(fp.max_emulation_rate, want.max_emulation_rate);
    assert_eq!(fp.t_wait, 3_000_000);
    assert!(fp.min_update_samples >= FLASHPASS_MIN_UPDATE_SAMPLES);
    assert!(fp.min_rate_fraction >= FLASHPASS_MIN_RATE_FRACTION);
    // The template's Algorithm 1 band stays.
    let t = SenderConfig::new(TransportKind::FlashPass).flashpass;
    assert_eq!(
        (fp.min_target_loss, fp.max_target_loss),
        (t.min_target_loss, t.max_target_loss)
    );
    // The pre-credit phase: on only if both the template and the host allow it.
    assert_eq!(fp.unscheduled, t.unscheduled);
    assert!(
        !fitted(TransportKind::FlashPass, &path(9000, false))
            .flashpass
            .unscheduled
    );
}

//! `flexpass arbitrator`: PASE's arbitrator of one link as a process
//! (flexpass_agent::arbitrator; docs/protocol.md §11, "PASE arbitration").

use flexpass_agent::arbitrator::{Arbitrator, ArbitratorConfig};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

#[derive(clap::Args)]
pub struct ArbitratorArgs {
    /// UDP address to answer on (the agents' --arbitrator).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// C: the capacity of the arbitrated link, Mbit/s.
    #[arg(long, value_name = "N")]
    pub link_mbit: f64,
    /// Priority queues of the link's switch port (1..=8; PASE §5: 4 capture most of the
    /// gain, the eight-priority profile has 8).
    #[arg(long, default_value_t = 8)]
    pub queues: u8,
    /// Base RTT of the link's paths, µs: a flow that does not fit gets Algorithm 1's base
    /// rate, one maximum frame (MTU + 38 bytes) per base RTT.
    #[arg(long, default_value_t = 100.0)]
    pub rtt_us: f64,
    /// IP MTU of the paths, bytes (for the base rate).
    #[arg(long, default_value_t = flexpass_wire::DEFAULT_MTU)]
    pub mtu: usize,
    /// A flow not heard from for this long is dropped (its sender vanished), ms.
    #[arg(long, default_value_t = 100.0)]
    pub expire_ms: f64,
    /// Stop after this many seconds (default: at SIGINT / SIGTERM).
    #[arg(long)]
    pub duration_s: Option<f64>,
}

pub fn arbitrator(a: ArbitratorArgs) -> Result<(), String> {
    if !(a.rtt_us.is_finite() && a.rtt_us > 0.0) {
        return Err(format!("--rtt-us must be > 0, got {}", a.rtt_us));
    }
    if !flexpass_wire::mtu_supported(a.mtu) {
        return Err(format!("--mtu must be in 576..=9000, got {}", a.mtu));
    }
    if !(a.expire_ms.is_finite() && a.expire_ms > 0.0) {
        return Err(format!("--expire-ms must be > 0, got {}", a.expire_ms));
    }
    let cfg = ArbitratorConfig {
        listen: a.listen,
        capacity_bps: a.link_mbit * 1e6,
        queues: a.queues,
        base_rate_bps: flexpass_wire::max_frame_wire(a.mtu) as f64 * 8.0 / (a.rtt_us * 1e-6),
        expire: (a.expire_ms * 1e6) as u64,
    };
    cfg.validate().map_err(|e| format!("arbitrator: {e}"))?;
    let mut arb =
        Arbitrator::bind(cfg).map_err(|e| format!("cannot open UDP {}: {e}", a.listen))?;
    let local = arb.local_addr().map_err(|e| e.to_string())?;
    log::info!("flexpass arbitrator: listening on {local}");
    let stop = crate::agent_cmd::stop_flag()?;
    if let Some(s) = a.duration_s {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs_f64(s.max(0.0)));
            stop.store(true, Ordering::Relaxed);
        });
    }
    arb.run(&stop).map_err(|e| format!("arbitrator: {e}"))?;
    println!(
        "{}",
        serde_json::json!({ "arbitrator": local.to_string(), "stats": arb.link.stats })
    );
    Ok(())
}

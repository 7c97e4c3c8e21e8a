//! The checks the schema cannot express: ranges, keys that apply to one profile only, and
//! keys that depend on each other (hosts that exist, a sweep for a figure). Each error names
//! its key.

use super::schema::{
    Experiment, FaultKind, FlowTransport, HostRef, HostSpec, ImpairmentSpec, MeasureSpec,
    SwitchSpec, WorkloadSpec,
};
use super::topology::TopologySpec;
use crate::queue::Profile;
use flexpass_wire::TransportKind;

pub(super) fn check(ok: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(msg())
    }
}

pub(super) fn positive(v: f64, key: &str) -> Result<f64, String> {
    check(v.is_finite() && v > 0.0, || {
        format!("{key} must be > 0, got {v}")
    })?;
    Ok(v)
}

pub(super) fn non_negative(v: f64, key: &str) -> Result<f64, String> {
    check(v.is_finite() && v >= 0.0, || {
        format!("{key} must be >= 0, got {v}")
    })?;
    Ok(v)
}

impl Experiment {
    /// Everything the schema cannot say by itself.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(d) = self.duration_ms {
            positive(d, "duration_ms")?;
        }
        if let Some(v) = self.emulation.link_mbps {
            positive(v, "emulation.link_mbps")?;
        }
        if let Some(v) = self.emulation.rtt_us {
            positive(v, "emulation.rtt_us")?;
        }
        self.topology.validate()?;
        self.switch.validate(self.topology.mtu())?;
        self.host.validate()?;
        self.validate_traffic()?;
        check((0.0..=1.0).contains(&self.deployment.fraction), || {
            format!(
                "deployment.fraction must be in [0, 1], got {}",
                self.deployment.fraction
            )
        })?;
        if let Some(t) = self.deployment.transport {
            check(t != TransportKind::Dctcp, || {
                "deployment.transport is the new transport: flexpass, expresspass, ppt, flashpass, pfabric or pase"
                    .into()
            })?;
        }
        let pase = &self.host.pase;
        check(
            matches!(pase.arbitration.as_str(), "end-to-end" | "local"),
            || {
                format!(
                    "host.pase.arbitration must be \"end-to-end\" or \"local\", got {:?}",
                    pase.arbitration
                )
            },
        )?;
        check(
            matches!(pase.messages.as_str(), "packets" | "counted"),
            || {
                format!(
                    "host.pase.messages must be \"packets\" or \"counted\", got {:?}",
                    pase.messages
                )
            },
        )?;
        check((1..=8).contains(&pase.queues), || {
            format!("host.pase.queues must be 1..=8, got {}", pase.queues)
        })?;
        check(!pase.delegation || pase.arbitration == "end-to-end", || {
            "host.pase.delegation needs host.pase.arbitration = \"end-to-end\" (local-only \
             arbitration has no parent arbitrator)"
                .to_string()
        })?;
        check(pase.delegation || pase.delegation_period_us == 0, || {
            "host.pase.delegation_period_us is set but host.pase.delegation is off".to_string()
        })?;
        check(!pase.probing || pase.queues > 1, || {
            "host.pase.probing needs host.pase.queues > 1 (a lowest queue below the others)"
                .to_string()
        })?;
        check(pase.early_pruning_queues < pase.queues, || {
            format!(
                "host.pase.early_pruning_queues must be below host.pase.queues ({}; 0: off), got {}",
                pase.queues, pase.early_pruning_queues
            )
        })?;
        self.measure.validate()?;
        check(
            !self.flows.is_empty()
                || !self.incast.is_empty()
                || !self.workload.is_empty()
                || self.trace.is_some(),
            || {
                "the experiment has no traffic: add [[flow]], [[incast]], [workload] or [trace]"
                    .into()
            },
        )?;
        if let Some(c) = &self.convergence {
            positive(c.join_ms, "convergence.join_ms")?;
            positive(c.after_ms, "convergence.after_ms")?;
            check(
                self.flows.iter().map(|f| f.count).sum::<usize>() >= 2,
                || "convergence needs two listed flows: the last one joins".into(),
            )?;
        }
        for (i, f) in self.faults.iter().enumerate() {
            non_negative(f.at_ms, &format!("fault[{i}].at_ms"))?;
            non_negative(f.reroute_after_ms, &format!("fault[{i}].reroute_after_ms"))?;
            non_negative(f.down_ms, &format!("fault[{i}].down_ms"))?;
            // Each kind takes its own keys; another kind's key is a mistake, named.
            let (needs, refuses): (&[&str], &[&str]) = match f.kind {
                FaultKind::Link => (&["link"], &["switch", "down_ms"]),
                FaultKind::SwitchRestart => (&["switch"], &["link", "up", "reroute_after_ms"]),
                FaultKind::ControllerRestart => {
                    (&[], &["link", "switch", "up", "reroute_after_ms"])
                }
            };
            let given = |k: &str| match k {
                "link" => f.link.is_some(),
                "switch" => f.switch.is_some(),
                "up" => f.up,
                "reroute_after_ms" => f.reroute_after_ms != 0.0,
                _ => f.down_ms != 0.0,
            };
            let kind = serde_json::to_value(f.kind).unwrap_or_default();
            for k in needs {
                check(given(k), || format!("fault[{i}] (kind {kind}) needs `{k}`"))?;
            }
            for k in refuses {
                check(!given(k), || {
                    format!("fault[{i}].{k}: not a key of kind {kind}")
                })?;
            }
            if let Some(link) = &f.link {
                check(link.contains("->"), || {
                    format!("fault[{i}].link '{link}' must name a port: \"node->peer\"")
                })?;
            }
        }
        if let Some(i) = &self.impairment {
            i.validate()?;
        }
        for (i, f) in self.figures.iter().enumerate() {
            check(!f.panels.is_empty(), || {
                format!(
                    "figure[{i}] ({}): add at least one [[figure.panel]]",
                    f.name
                )
            })?;
            check(
                !f.name.is_empty()
                    && f.name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                || {
                    format!(
                        "figure[{i}].name '{}' must be letters, digits, - or _",
                        f.name
                    )
                },
            )?;
            check(self.sweep.is_some(), || {
                format!("figure[{i}] ({}) needs a [sweep] to draw from", f.name)
            })?;
        }
        Ok(())
    }

    /// Flows, incast groups, the workload and the trace.
    fn validate_traffic(&self) -> Result<(), String> {
        let hosts = self.num_hosts()?;
        for (i, f) in self.flows.iter().enumerate() {
            check(f.count >= 1, || format!("flow[{i}].count must be >= 1"))?;
            non_negative(f.start_step_us, &format!("flow[{i}].start_step_us"))?;
            let srcs = f.expand(hosts).map_err(|e| format!("flow[{i}].src: {e}"))?;
            let dst = f
                .dst
                .resolve(hosts)
                .map_err(|e| format!("flow[{i}].dst: {e}"))?;
            check(srcs.iter().all(|&(src, _)| src != dst), || {
                format!("flow[{i}]: src and dst are the same host")
            })?;
            non_negative(f.start_us, &format!("flow[{i}].start_us"))?;
            check(f.bytes != Some(0), || {
                format!("flow[{i}].bytes must be > 0")
            })?;
        }
        for (i, g) in self.incast.iter().enumerate() {
            let r = g
                .receiver
                .resolve(hosts)
                .map_err(|e| format!("incast[{i}].receiver: {e}"))?;
            if let Some(ss) = &g.senders {
                check(!ss.is_empty(), || format!("incast[{i}].senders is empty"))?;
                for s in ss {
                    let s = s
                        .resolve(hosts)
                        .map_err(|e| format!("incast[{i}].senders: {e}"))?;
                    check(s != r, || {
                        format!("incast[{i}]: the receiver is also a sender")
                    })?;
                }
            }
            check(g.flows >= 1, || format!("incast[{i}].flows must be >= 1"))?;
            check(g.bytes >= 1, || format!("incast[{i}].bytes must be >= 1"))?;
            non_negative(g.start_us, &format!("incast[{i}].start_us"))?;
            non_negative(g.repeat_step_us, &format!("incast[{i}].repeat_step_us"))?;
            check(g.repeat == 1 || g.repeat_step_us > 0.0, || {
                format!("incast[{i}].repeat_step_us must be > 0 when repeat is not 1")
            })?;
            check(g.repeat >= 1 || self.duration_ms.is_some(), || {
                format!("incast[{i}].repeat = 0 (until the end) needs duration_ms")
            })?;
            check(g.transport.is_none() || g.transports.is_empty(), || {
                format!("incast[{i}]: give transport or transports, not both")
            })?;
        }
        for (i, w) in self.workload.iter().enumerate() {
            // One workload keeps the plain name of its keys (`workload.load`).
            let at = if self.workload.len() == 1 {
                "workload".to_string()
            } else {
                format!("workload[{i}]")
            };
            w.validate(&at, hosts, self.duration_ms)?;
        }
        if let Some(t) = &self.trace {
            flexpass_workload::FlowTrace::load(&t.file).map_err(|e| format!("trace.file: {e}"))?;
            non_negative(t.start_ms, "trace.start_ms")?;
        }
        Ok(())
    }
}

impl TopologySpec {
    /// The kind's shape and the keys every kind takes.
    pub fn validate(&self) -> Result<(), String> {
        self.shape()?;
        check(
            matches!(
                self.common.routing.as_deref(),
                None | Some("ecmp") | Some("single-path")
            ),
            || {
                format!(
                    "topology.routing must be \"ecmp\" or \"single-path\", got {:?}",
                    self.common.routing.as_deref().unwrap_or("")
                )
            },
        )?;
        let mtu = self.mtu();
        check(flexpass_wire::mtu_supported(mtu), || {
            format!(
                "topology.mtu must be in {}..={} bytes, got {mtu}",
                flexpass_wire::MIN_MTU,
                flexpass_wire::MAX_MTU
            )
        })?;
        Ok(())
    }
}

impl SwitchSpec {
    /// `mtu`: the links' MTU (the red threshold holds at least one frame).
    fn validate(&self, mtu: usize) -> Result<(), String> {
        let s = self;
        check(s.w_q > 0.0 && s.w_q < 1.0, || {
            format!("switch.w_q must be in (0, 1), got {}", s.w_q)
        })?;
        let k = positive(s.k_kb, "switch.k_kb")?;
        positive(s.k_q1_kb.unwrap_or(k), "switch.k_q1_kb")?;
        // FlexPass sets the selective-drop threshold above Q1's K (reactive sub-flows react to
        // ECN first); FlexPass Fig. 17 also explores thresholds below it, so that is allowed.
        let frame = flexpass_wire::max_frame_wire(mtu);
        let red = positive(s.red_kb, "switch.red_kb")?;
        check(red * 1000.0 >= frame as f64, || {
            format!("switch.red_kb ({red}) must hold at least one frame ({frame} B)")
        })?;
        if let Some(v) = s.k_lcp_kb {
            positive(v, "switch.k_lcp_kb")?;
        }
        if let Some(v) = s.lcp_drop_kb {
            positive(v, "switch.lcp_drop_kb")?;
        }
        for (key, v) in [("lambda_hcp", s.lambda_hcp), ("lambda_lcp", s.lambda_lcp)] {
            if let Some(v) = v {
                check(v > 0.0 && v.is_finite(), || {
                    format!("switch.{key} must be > 0, got {v}")
                })?;
            }
        }
        check(
            matches!(s.ecn_basis.as_deref(), None | Some("port") | Some("queue")),
            || {
                format!(
                    "switch.ecn_basis must be \"port\" or \"queue\", got {:?}",
                    s.ecn_basis.as_deref().unwrap_or("")
                )
            },
        )?;
        for (key, set) in [
            ("ecn_basis", s.ecn_basis.is_some()),
            ("lcp_drop_kb", s.lcp_drop_kb.is_some()),
            ("lcp_pushout", s.lcp_pushout),
            ("k_lcp_kb", s.k_lcp_kb.is_some()),
            ("lambda_hcp", s.lambda_hcp.is_some()),
            ("lambda_lcp", s.lambda_lcp.is_some()),
        ] {
            check(!set || s.profile == Profile::Ppt, || {
                format!("switch.{key} applies to profile \"ppt\" only")
            })?;
        }
        if let Some(v) = s.port_credit_share {
            check(v > 0.0 && v <= 1.0, || {
                format!("switch.port_credit_share must be in (0, 1], got {v}")
            })?;
        }
        check(
            matches!(s.red_basis.as_deref(), None | Some("queue") | Some("red")),
            || {
                format!(
                    "switch.red_basis must be \"queue\" or \"red\", got {:?}",
                    s.red_basis.as_deref().unwrap_or("")
                )
            },
        )?;
        check(
            !s.feedback_priority || s.profile == Profile::FlashPass,
            || "switch.feedback_priority applies to profile \"flashpass\" only".into(),
        )?;
        check(
            !(s.profile == Profile::PFabric && s.shared_buffer_mb.is_some()),
            || {
                "switch.profile \"pfabric\" needs per-port buffers (no switch.shared_buffer_mb)"
                    .into()
            },
        )?;
        check(!(s.lcp_pushout && s.shared_buffer_mb.is_some()), || {
            "switch.lcp_pushout needs per-port buffers (no switch.shared_buffer_mb)".into()
        })?;
        positive(s.buffer_kb, "switch.buffer_kb")?;
        if let Some(b) = s.buffer_kb_per_gbps {
            positive(b, "switch.buffer_kb_per_gbps")?;
            check(s.shared_buffer_mb.is_none(), || {
                "switch.buffer_kb_per_gbps sizes per-port buffers: it does not apply with shared_buffer_mb".into()
            })?;
        }
        if let Some(b) = s.shared_buffer_mb {
            positive(b, "switch.shared_buffer_mb")?;
        }
        check(s.buffer_alpha > 0.0 && s.buffer_alpha.is_finite(), || {
            format!("switch.buffer_alpha must be > 0, got {}", s.buffer_alpha)
        })?;
        if let Some(b) = s.nic_buffer_kb {
            positive(b, "switch.nic_buffer_kb")?;
        }
        check(s.credit_queue >= 1, || {
            "switch.credit_queue must be >= 1 credit".into()
        })?;
        check(s.credit_burst >= 1.0 && s.credit_burst.is_finite(), || {
            format!(
                "switch.credit_burst must be >= 1 credit, got {}",
                s.credit_burst
            )
        })?;
        if let Some(v) = s.nic_credit_share {
            check(v > 0.0 && v <= 1.0, || {
                format!("switch.nic_credit_share must be in (0, 1], got {v}")
            })?;
        }
        if let Some(v) = s.owf_weight {
            check(v > 0.0 && v < 1.0, || {
                format!("switch.owf_weight must be in (0, 1), got {v}")
            })?;
        }
        Ok(())
    }
}

impl HostSpec {
    fn validate(&self) -> Result<(), String> {
        let h = self;
        positive(h.rto_min_ms, "host.rto_min_ms")?;
        positive(h.give_up_ms, "host.give_up_ms")?;
        for (key, w) in [
            ("init_cwnd", h.init_cwnd),
            ("reactive_init_cwnd", h.reactive_init_cwnd),
        ] {
            if let Some(w) = w {
                check(w >= 1.0 && w.is_finite(), || {
                    format!("host.{key} must be >= 1 packet, got {w}")
                })?;
            }
        }
        if let Some(w) = h.max_cwnd {
            check(w >= h.init_cwnd.unwrap_or(1.0) && w.is_finite(), || {
                format!("host.max_cwnd must be a number of packets >= host.init_cwnd, got {w}")
            })?;
        }
        if let Some(j) = h.credit_jitter {
            check((0.0..1.0).contains(&j), || {
                format!("host.credit_jitter must be in [0, 1), got {j}")
            })?;
        }
        if let Some(a) = h.dctcp_alpha_init {
            check((0.0..=1.0).contains(&a), || {
                format!("host.dctcp_alpha_init must be in [0, 1], got {a}")
            })?;
        }
        let batches = 1..=flexpass_core::config::MAX_CREDIT_BATCH;
        check(batches.contains(&h.credit_batch), || {
            format!(
                "host.credit_batch must be in 1..={} credits, got {}",
                batches.end(),
                h.credit_batch
            )
        })?;
        check(h.alpha > 0.0 && h.alpha <= 1.0, || {
            format!("host.alpha must be in (0, 1], got {}", h.alpha)
        })?;
        if let Some(w) = h.w_init {
            check((0.01..=0.5).contains(&w), || {
                format!("host.w_init must be in [w_min, w_max] = [0.01, 0.5], got {w}")
            })?;
        }
        let pp = &h.ppt;
        positive(pp.large_flow_kb, "host.ppt.large_flow_kb")?;
        check(
            pp.demotion_kb.iter().all(|v| *v >= 0.0 && v.is_finite())
                && pp.demotion_kb[0] <= pp.demotion_kb[1]
                && pp.demotion_kb[1] <= pp.demotion_kb[2],
            || {
                format!(
                    "host.ppt.demotion_kb must be three non-decreasing sizes, got {:?}",
                    pp.demotion_kb
                )
            },
        )?;
        check(pp.alpha_history >= 1, || {
            "host.ppt.alpha_history must be >= 1".into()
        })?;
        self.rule()?;
        Ok(())
    }
}

impl WorkloadSpec {
    /// `at`: how errors name the entry; `duration_ms`: the experiment's (a workload without
    /// `flows` runs until then).
    fn validate(&self, at: &str, hosts: usize, duration_ms: Option<f64>) -> Result<(), String> {
        let w = self;
        flexpass_workload::FlowSizeCdf::load(&w.cdf).map_err(|e| format!("{at}.cdf: {e}"))?;
        check(w.load > 0.0 && w.load <= 1.0, || {
            format!("{at}.load must be in (0, 1], got {}", w.load)
        })?;
        match w.flows {
            Some(n) => check(n >= 1, || format!("{at}.flows must be >= 1"))?,
            None => {
                check(duration_ms.is_some(), || {
                    format!("{at}.flows: give the number of flows, or duration_ms for arrivals until then")
                })?
            }
        }
        check(
            matches!(
                w.load_on.as_deref(),
                None | Some("uplinks") | Some("hosts") | Some("destinations")
            ),
            || {
                format!(
                    "{at}.load_on must be \"uplinks\", \"hosts\" or \"destinations\", got {:?}",
                    w.load_on.as_deref().unwrap_or("")
                )
            },
        )?;
        check(
            matches!(w.pairs.as_deref(), None | Some("any") | Some("inter-rack")),
            || {
                format!(
                    "{at}.pairs must be \"any\" or \"inter-rack\", got {:?}",
                    w.pairs.as_deref().unwrap_or("")
                )
            },
        )?;
        let srcs = resolve_hosts(w.src.as_deref(), hosts, &format!("{at}.src"))?;
        let dsts = resolve_hosts(w.dst.as_deref(), hosts, &format!("{at}.dst"))?;
        check(srcs.iter().any(|s| dsts.iter().any(|d| d != s)), || {
            format!("{at}: no destination differs from a source")
        })?;
        check(
            w.pairs.is_none() || (w.src.is_none() && w.dst.is_none()),
            || format!("{at}: pairs and src/dst: give one"),
        )?;
        non_negative(w.start_ms, &format!("{at}.start_ms"))?;
        if let Some(fg) = &w.foreground {
            check(fg.volume_fraction > 0.0 && fg.volume_fraction < 1.0, || {
                format!(
                    "{at}.foreground.volume_fraction must be in (0, 1), got {}",
                    fg.volume_fraction
                )
            })?;
            check(fg.bytes >= 1 && fg.flows_per_sender >= 1, || {
                format!("{at}.foreground: bytes and flows_per_sender must be >= 1")
            })?;
        }
        Ok(())
    }
}

/// The hosts of a `src`/`dst` list (default: every host), checked.
pub fn resolve_hosts(
    list: Option<&[HostRef]>,
    hosts: usize,
    at: &str,
) -> Result<Vec<usize>, String> {
    match list {
        None => Ok((0..hosts).collect()),
        Some([]) => Err(format!("{at} is empty")),
        Some(l) => l
            .iter()
            .map(|h| h.resolve(hosts).map_err(|e| format!("{at}: {e}")))
            .collect(),
    }
}

impl Experiment {
    /// What only an emulation backend can run, refused by the model by name: kernel TCP.
    pub fn refuse_emulation_only(&self) -> Result<(), String> {
        let tcp = Some(FlowTransport::KernelTcp);
        let mut keys = vec![];
        for (i, f) in self.flows.iter().enumerate() {
            if f.transport == tcp {
                keys.push(format!("flow[{i}].transport"));
            }
        }
        for (i, g) in self.incast.iter().enumerate() {
            if g.transport == tcp || g.transports.contains(&FlowTransport::KernelTcp) {
                keys.push(format!("incast[{i}].transport"));
            }
        }
        for (i, w) in self.workload.iter().enumerate() {
            if w.transport == tcp {
                keys.push(format!("workload[{i}].transport"));
            }
        }
        check(keys.is_empty(), || {
            format!(
                "{} = \"tcp\": kernel TCP runs only on an emulation backend (flexpass emulate); \
                 the model has no kernel TCP stack (dctcp is its window transport)",
                keys.join(", ")
            )
        })
    }
}

impl MeasureSpec {
    fn validate(&self) -> Result<(), String> {
        let m = self;
        non_negative(m.sample_us, "measure.sample_us")?;
        non_negative(m.warmup_ms, "measure.warmup_ms")?;
        positive(m.small_flow_kb, "measure.small_flow_kb")?;
        check(
            matches!(
                m.tcp_fct.as_deref(),
                None | Some("delivered") | Some("acked")
            ),
            || {
                format!(
                    "measure.tcp_fct must be \"delivered\" or \"acked\", got {:?}",
                    m.tcp_fct.as_deref().unwrap_or("")
                )
            },
        )?;
        Ok(())
    }
}

impl ImpairmentSpec {
    fn validate(&self) -> Result<(), String> {
        let i = self;
        for (k, v) in [
            ("loss", i.loss),
            ("duplicate", i.duplicate),
            ("reorder", i.reorder),
        ] {
            check((0.0..1.0).contains(&v), || {
                format!("impairment.{k} must be a probability in [0, 1), got {v}")
            })?;
        }
        non_negative(i.reorder_delay_us, "impairment.reorder_delay_us")?;
        Ok(())
    }
}

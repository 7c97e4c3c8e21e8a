//! Fuzz target: the NIC edge's text readers (issue 27) never panic and never turn a count
//! that does not fit into a wrapped or clamped number. Every input is fed to both:
//! * `flexpass_agent::edge::parse_htb_class` (`tc -s class show` of the qdisc edge): an
//!   error always names the netdev; a rate or burst past 64 bits is an error, not
//!   u64::MAX; the answer does not depend on the classes listed before htb class 1:10.
//! * the DPDK SWX pipeline CLI reader (crates/flexpass-agent/src/edge/swx.rs):
//!   `regrd_answer` for 0, k − 1, k and k + 1 reads (k: the answer's `0x` lines): once
//!   the prompt has come, k − 1 reads are an error (out of step), k give k values and
//!   k + 1 wait for more (None), unless a line is named as bad; values written back as
//!   the CLI writes them read back the same. Then `edge_from_registers` over every
//!   register array filled with the values read (array r of 6 with values r, r + 6, …,
//!   repeated over its cells): credits dropped are the exact sum of `credit_dropped` and
//!   passed the credit/green cell, each flow slot with credits is listed with its id — or,
//!   when the sum passes 2⁶⁴ − 1 or a slot's cell its 32 bits, an error naming the
//!   register.
#![no_main]

use flexpass_agent::edge::parse_htb_class;
use flexpass_agent::edge::swx::{edge_from_registers, regrd_answer, SWX_REGISTERS};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

const PROMPT: &str = "pipeline> ";

fn htb(text: &str) {
    let got = parse_htb_class("fz0", text);
    match &got {
        Ok(c) => {
            assert_eq!(c.dev.as_deref(), Some("fz0"));
            assert!(c.maps.is_none() && c.swx_cli.is_none() && c.pna.is_none());
            // A rate or burst past 64 bits is refused, not clamped (`as u64` saturates).
            assert!(c.credit_rate_bytes_per_s.is_some_and(|r| r != u64::MAX / 8));
            assert!(c.credit_burst_bytes.is_some_and(|b| b != u64::MAX));
        }
        Err(e) => assert!(e.starts_with("dev fz0: "), "{e}"),
    }
    let before = "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b \n Sent 9 bytes 5 pkt (dropped 1, overlimits 0 requeues 0) \n\n";
    assert_eq!(parse_htb_class("fz0", &format!("{before}{text}")), got);
}

fn registers(values: &[u64]) {
    // Register r takes the values at r, r + 6, r + 12, … (so that each can be set apart),
    // repeated over its cells; 0s when there are none.
    let mut regs = BTreeMap::new();
    for (r, (name, n)) in SWX_REGISTERS.iter().enumerate() {
        let mine: Vec<u64> = values
            .iter()
            .skip(r)
            .step_by(SWX_REGISTERS.len())
            .copied()
            .collect();
        let cells: Vec<u64> = (0..*n as usize)
            .map(|i| {
                if mine.is_empty() {
                    0
                } else {
                    mine[i % mine.len()]
                }
            })
            .collect();
        regs.insert(*name, cells);
    }
    let dropped: u128 = regs["_credit_dropped"].iter().map(|&d| u128::from(d)).sum();
    let slots: Vec<(usize, u64, u64)> = regs["_flow_credits"]
        .iter()
        .zip(&regs["_flow_credit_id"])
        .enumerate()
        .filter(|(_, (c, _))| **c > 0)
        .map(|(s, (c, id))| (s, *c, *id))
        .collect();
    let wide = slots
        .iter()
        .any(|&(_, c, id)| c > u32::MAX.into() || id > u32::MAX.into());
    match edge_from_registers("fz:1", &regs) {
        Ok(e) => {
            assert!(!wide);
            assert_eq!(u128::from(e.credits_dropped), dropped);
            assert_eq!(e.credits_passed, regs["class_packets_0"][1 << 2]);
            let pna = e.pna.expect("the PNA detail");
            assert_eq!(pna.flow_credits.len(), slots.len());
            for (f, &(s, c, id)) in pna.flow_credits.iter().zip(&slots) {
                assert_eq!(
                    (f.slot as usize, f.credits, u64::from(f.flow_id)),
                    (s, c, id)
                );
            }
            for c in pna.classes.values() {
                assert!(c.packets > 0);
            }
        }
        Err(e) => {
            assert!(e.starts_with("the SWX pipeline at fz:1: "), "{e}");
            if e.contains("_credit_dropped") {
                assert!(dropped > u64::MAX.into(), "{e}");
            } else {
                assert!(wide && e.contains("_flow_credit"), "{e}");
            }
        }
    }
}

fn swx(data: &[u8], text: &str) {
    let k = text
        .split('\n')
        .map(|l| l.trim_start_matches(PROMPT).trim())
        .filter(|l| l.starts_with("0x"))
        .count();
    // Each `0x` line is a value or an error, so with the prompt at the end: fewer reads
    // than lines is an error (out of step), as many gives the values, more waits.
    let prompt = data.ends_with(PROMPT.as_bytes());
    for n in [0, k.saturating_sub(1), k, k + 1] {
        match regrd_answer(data, n) {
            Ok(Some(v)) => {
                assert!(prompt && (n == 0 || n == k), "{n} of {k}");
                assert_eq!(v.len(), n);
                let back: String = v.iter().map(|x| format!("0x{x:x}\n")).collect();
                let back = format!("{back}{PROMPT}");
                assert_eq!(regrd_answer(back.as_bytes(), n), Ok(Some(v.clone())));
                if n > 0 {
                    registers(&v);
                }
            }
            Ok(None) => assert!(!prompt || n > k, "{n} of {k}"),
            Err(e) => assert!(n > 0 && e.starts_with("regrd answered "), "{e}"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    htb(&text);
    swx(data, &text);
});

//! DSCP plan and ECN code points (docs/protocol.md, "DSCP plan and queues"
//! and "ECN rules").

use serde::{Deserialize, Serialize};

/// Traffic classes a switch distinguishes by DSCP.
///
/// Queue mapping (docs/protocol.md): `Credit` → Q0 (strict priority,
/// rate-limited); `ProactiveData`, `ReactiveData`, `Control` → Q1 (DWRR
/// weight w_q; reactive data is coloured red and dropped at the selective
/// drop threshold, the others green); `Legacy` → Q2 (DWRR weight 1 − w_q).
/// PPT (SIGCOMM'24 §4.2) tags its packets with one of eight strict priorities instead:
/// `Priority(0..=3)` for its high-priority loop (HCP), `Priority(4..=7)` for the
/// low-priority loop (LCP); P0 is served first. A PPT switch profile puts `Priority(p)` in
/// queue p.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficClass {
    /// CREDIT messages.
    Credit,
    /// PROACTIVE_DATA (credit-scheduled) messages.
    ProactiveData,
    /// REACTIVE_DATA (uncredited, window-based) messages.
    ReactiveData,
    /// ACK, CREDIT_REQUEST, CREDIT_STOP, HELLO, HELLO_ACK, RESET.
    Control,
    /// Non-FlexPass traffic (e.g. kernel DCTCP) and FlexPass flows with transport = dctcp.
    Legacy,
    /// PPT priority level P0..P7 (0 = highest). Values above 7 are treated as 7.
    Priority(u8),
}

/// Number of PPT priority levels (SIGCOMM'24 §4.2: P0–P3 HCP, P4–P7 LCP).
pub const PRIORITY_LEVELS: usize = 8;

impl TrafficClass {
    /// All classes, in declaration order.
    pub const ALL: [TrafficClass; 5] = [
        TrafficClass::Credit,
        TrafficClass::ProactiveData,
        TrafficClass::ReactiveData,
        TrafficClass::Control,
        TrafficClass::Legacy,
    ];

    /// The eight PPT priority classes, P0 (highest) first.
    pub const PRIORITIES: [TrafficClass; PRIORITY_LEVELS] = [
        TrafficClass::Priority(0),
        TrafficClass::Priority(1),
        TrafficClass::Priority(2),
        TrafficClass::Priority(3),
        TrafficClass::Priority(4),
        TrafficClass::Priority(5),
        TrafficClass::Priority(6),
        TrafficClass::Priority(7),
    ];

    /// Every class a DSCP plan assigns: the five FlexPass classes, then P0..P7.
    pub fn all_with_priorities() -> impl Iterator<Item = TrafficClass> {
        Self::ALL.into_iter().chain(Self::PRIORITIES)
    }

    /// Switch egress queue index: 0 = credit, 1 = FlexPass data/control, 2 = legacy; a PPT
    /// priority class is its priority level (queue p of an 8-queue strict-priority port).
    pub fn queue(self) -> u8 {
        match self {
            TrafficClass::Credit => 0,
            TrafficClass::ProactiveData | TrafficClass::ReactiveData | TrafficClass::Control => 1,
            TrafficClass::Legacy => 2,
            TrafficClass::Priority(p) => p.min(7),
        }
    }

    /// The PPT priority level of a `Priority` class.
    pub fn priority(self) -> Option<u8> {
        match self {
            TrafficClass::Priority(p) => Some(p.min(7)),
            _ => None,
        }
    }

    /// True for the class coloured red in Q1 (selectively dropped first).
    pub fn is_red(self) -> bool {
        self == TrafficClass::ReactiveData
    }
}

/// DSCP value (0..=63) for each traffic class.
///
/// Defaults: credit 46 (EF), proactive_data 26 (AF31), reactive_data 30
/// (AF33, highest drop precedence of AF3x, i.e. "red"), control 24 (CS3),
/// legacy 0 (best effort); PPT priorities P0..P7: 32..39 (`0b100ppp`: the low three bits
/// are the priority level, the high bit of the three marks the LCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DscpPlan {
    /// DSCP for CREDIT.
    pub credit: u8,
    /// DSCP for PROACTIVE_DATA.
    pub proactive_data: u8,
    /// DSCP for REACTIVE_DATA.
    pub reactive_data: u8,
    /// DSCP for control messages (ACK, HELLO, …).
    pub control: u8,
    /// DSCP for legacy traffic.
    pub legacy: u8,
    /// DSCP for PPT priority levels P0..P7.
    pub priority: [u8; PRIORITY_LEVELS],
}

/// Default DSCPs of PPT priorities P0..P7: 32 + p.
pub const DEFAULT_PRIORITY_DSCP: [u8; PRIORITY_LEVELS] = [32, 33, 34, 35, 36, 37, 38, 39];

impl Default for DscpPlan {
    fn default() -> Self {
        DscpPlan {
            credit: 46,
            proactive_data: 26,
            reactive_data: 30,
            control: 24,
            legacy: 0,
            priority: DEFAULT_PRIORITY_DSCP,
        }
    }
}

impl DscpPlan {
    /// DSCP value of a class.
    pub fn dscp(&self, class: TrafficClass) -> u8 {
        match class {
            TrafficClass::Credit => self.credit,
            TrafficClass::ProactiveData => self.proactive_data,
            TrafficClass::ReactiveData => self.reactive_data,
            TrafficClass::Control => self.control,
            TrafficClass::Legacy => self.legacy,
            TrafficClass::Priority(p) => self.priority[usize::from(p.min(7))],
        }
    }

    /// Class of a DSCP value, if the plan assigns it. (A switch treats
    /// unassigned values as legacy; that policy is left to the caller.)
    pub fn classify(&self, dscp: u8) -> Option<TrafficClass> {
        TrafficClass::all_with_priorities().find(|&c| self.dscp(c) == dscp)
    }

    /// Full IPv4 TOS byte for a class and ECN code point.
    pub fn tos(&self, class: TrafficClass, ecn: Ecn) -> u8 {
        tos(self.dscp(class), ecn)
    }

    /// Checks that every value is < 64 and all thirteen values (five classes, eight PPT
    /// priorities) are distinct.
    pub fn validate(&self) -> Result<(), String> {
        for c in TrafficClass::all_with_priorities() {
            let v = self.dscp(c);
            if v > 63 {
                return Err(format!("DSCP for {c:?} is {v}, must be 0..=63"));
            }
        }
        for (i, a) in TrafficClass::all_with_priorities().enumerate() {
            for b in TrafficClass::all_with_priorities().skip(i + 1) {
                if self.dscp(a) == self.dscp(b) {
                    return Err(format!(
                        "{a:?} and {b:?} share DSCP {}; values must be distinct",
                        self.dscp(a)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// ECN code point (low two bits of the IPv4 TOS byte, RFC 3168).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ecn {
    /// Not ECN-capable transport.
    NotEct = 0,
    /// ECT(1).
    Ect1 = 1,
    /// ECT(0).
    Ect0 = 2,
    /// Congestion experienced.
    Ce = 3,
}

impl Ecn {
    /// ECN code point from the low two bits of `bits` (other bits ignored).
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// True for ECT(0), ECT(1) and CE.
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
}

/// IPv4 TOS byte from a DSCP (only its low 6 bits are used) and an ECN code point.
pub fn tos(dscp: u8, ecn: Ecn) -> u8 {
    ((dscp & 0x3f) << 2) | ecn as u8
}

/// Splits an IPv4 TOS byte into (DSCP, ECN).
pub fn split_tos(tos: u8) -> (u8, Ecn) {
    (tos >> 2, Ecn::from_bits(tos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_classify_back() {
        let p = DscpPlan::default();
        p.validate().unwrap();
        for c in TrafficClass::all_with_priorities() {
            assert_eq!(p.classify(p.dscp(c)), Some(c));
        }
        assert_eq!(p.classify(63), None);
        assert_eq!(p.dscp(TrafficClass::Priority(0)), 32);
        assert_eq!(p.dscp(TrafficClass::Priority(7)), 39);
        assert_eq!(TrafficClass::Priority(5).queue(), 5);
        assert_eq!(p.tos(TrafficClass::Credit, Ecn::NotEct), 0xb8);
        assert_eq!(tos(26, Ecn::Ect0), 0x6a);
        assert_eq!(split_tos(0x6b), (26, Ecn::Ce));
    }

    #[test]
    fn validate_rejects_bad_plans() {
        let p = DscpPlan {
            legacy: 64,
            ..DscpPlan::default()
        };
        assert!(p.validate().is_err());
        let p = DscpPlan {
            control: 46,
            ..DscpPlan::default()
        };
        assert!(p.validate().is_err());
        let mut p = DscpPlan::default();
        p.priority[3] = 0;
        assert!(p.validate().unwrap_err().contains("Priority(3)"));
    }

    #[test]
    fn serde_names() {
        let p: DscpPlan = serde_json::from_str(r#"{"legacy": 8}"#).unwrap();
        assert_eq!(p.legacy, 8);
        assert_eq!(p.credit, 46);
        assert!(serde_json::from_str::<DscpPlan>(r#"{"legacyy": 8}"#).is_err());
        assert_eq!(
            serde_json::to_string(&TrafficClass::ProactiveData).unwrap(),
            "\"proactive_data\""
        );
        let p: DscpPlan = serde_json::from_str(r#"{"priority": [8,9,10,11,12,13,14,15]}"#).unwrap();
        assert_eq!(p.dscp(TrafficClass::Priority(2)), 10);
    }
}

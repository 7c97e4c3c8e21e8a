//! Who gets a flow, and who gets an answer (docs/protocol.md §11, "Half-open flows and
//! cookies"; docs/reliability.md): the half-open table and its bounds, HELLO cookies, the
//! credits of half-open flows, the incoming-flow cap, and RESET answers to flows this host
//! dropped (remembered, rate-limited). The endpoint asks; this module keeps the state and
//! decides.

use crate::flow::FlowKey;
use crate::shaper::TokenBucket;
use crate::stats::EndpointStats;
use flexpass_core::Nanos;
use flexpass_wire::{Hello, Packet};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// When a HELLO is answered with HELLO_ACK `retry` and a cookie, without keeping state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CookieMode {
    /// Never: a HELLO beyond `max_half_open` evicts the oldest half-open flow (for senders
    /// that do not know cookies; under a flood, a real flow may be evicted before its first
    /// data arrives).
    Off,
    /// While the half-open table is full (like TCP SYN cookies): no cost without a flood.
    Auto,
    /// For every HELLO without a valid cookie: no half-open state ever, one more RTT for
    /// every flow.
    Always,
}

impl std::str::FromStr for CookieMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(CookieMode::Off),
            "auto" => Ok(CookieMode::Auto),
            "always" => Ok(CookieMode::Always),
            _ => Err(format!(
                "cookie mode must be off, auto or always, got {s:?}"
            )),
        }
    }
}

/// Defaults of the half-open bounds (docs/protocol.md §11, "Half-open flows and cookies").
pub const DEFAULT_MAX_HALF_OPEN: usize = 256;
pub const DEFAULT_MAX_FLOWS: usize = 8192;
pub const DEFAULT_HALF_OPEN_TIMEOUT: Nanos = 5_000_000_000;
pub const DEFAULT_HALF_OPEN_CREDITS: u32 = 16;
pub const DEFAULT_HALF_OPEN_CREDIT_SHARE: f64 = 0.125;

/// Cookie time slot (docs/protocol.md §11): a cookie is valid in its slot and the next.
const COOKIE_SLOT: Nanos = 8_000_000_000;

/// RESET(unknown_flow) rate limit per endpoint: a peer still sending for a flow this host
/// has forgotten learns it (its sender fails, its receiver stops crediting) without the
/// host becoming a reflector.
const RESETS_PER_SECOND: f64 = 200.0;
const RESET_BURST: f64 = 20.0;
/// How long (and how many) dropped flows are remembered for RESET answers.
const FORGOTTEN_MEMORY: Nanos = 60_000_000_000;
const FORGOTTEN_MAX: usize = 65_536;

/// Whether only the peer of a flow this endpoint has (or had) can send `packet`: every
/// receiver-to-sender message (this endpoint opens its senders itself), and CREDIT_REQUEST
/// (a sender sends it only after HELLO_ACK). Data can be first-RTT data that overtook its
/// flow's HELLO, so it is not one.
fn needs_an_existing_flow(packet: &Packet) -> bool {
    !packet.is_sender_to_receiver() || matches!(packet, Packet::CreditRequest(_))
}

/// A receiver created by a HELLO without a valid cookie, not confirmed yet.
pub(crate) struct HalfOpen {
    since: Nanos,
    /// Credits it may still send before they are stopped (refilled by HELLO and
    /// CREDIT_REQUEST).
    credits_left: u32,
    /// Its credits were stopped here (not by its sender): restarted on confirmation.
    pub(crate) stopped: bool,
    /// Already handed to the application (connections are, at once).
    pub(crate) delivered: bool,
}

/// What to do with a HELLO for a flow this endpoint does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HelloVerdict {
    /// Answer HELLO_ACK retry with this cookie; keep nothing.
    Retry(u64),
    /// Answer HELLO_ACK refused: `max_flows` incoming flows exist.
    Refuse,
    /// Create the receiver (then call `Admission::admitted`).
    Admit,
}

/// A credit a half-open flow is about to send.
pub(crate) struct HalfOpenCredit {
    /// Its allowance is spent: stop its credits (restarted by HELLO, CREDIT_REQUEST or
    /// confirmation).
    pub(crate) stop: bool,
    /// Within the half-open share of the credit rate: send it.
    pub(crate) send: bool,
}

/// Flows this endpoint had and dropped (closed senders, receivers after their linger),
/// remembered for FORGOTTEN_MEMORY: only their packets are answered with RESET. A packet of
/// a flow never seen (first-RTT data ahead of its HELLO, a forgery) is just dropped.
struct ResetLimiter {
    bucket: TokenBucket,
    forgotten: HashMap<FlowKey, Nanos>,
    order: VecDeque<(Nanos, FlowKey)>,
}

/// The bounds admission keeps (`EndpointConfig`'s fields of the same names).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_flows: usize,
    pub(crate) max_half_open: usize,
    pub(crate) half_open_timeout: Nanos,
    /// Credits a half-open flow may send per HELLO or CREDIT_REQUEST.
    pub(crate) half_open_credits: u32,
    pub(crate) cookies: CookieMode,
}

pub(crate) struct Admission {
    limits: Limits,
    /// Receivers not confirmed yet, and their creation order (entries of flows no longer
    /// half-open are skipped).
    half_open: HashMap<FlowKey, HalfOpen>,
    half_open_order: VecDeque<(Nanos, FlowKey)>,
    /// Credits of all half-open flows together: a share of the link's credit rate.
    pub(crate) half_open_credits: TokenBucket,
    cookie_secret: [u8; 32],
    resets: ResetLimiter,
}

impl Admission {
    /// `half_open_credits`: the bucket all half-open flows' credits share.
    pub(crate) fn new(limits: Limits, half_open_credits: TokenBucket) -> Self {
        Admission {
            limits,
            half_open: HashMap::new(),
            half_open_order: VecDeque::new(),
            half_open_credits,
            cookie_secret: rand::random(),
            resets: ResetLimiter {
                bucket: TokenBucket::new(RESETS_PER_SECOND, RESET_BURST),
                forgotten: HashMap::new(),
                order: VecDeque::new(),
            },
        }
    }

    /// The reference cookie (docs/protocol.md §11): slot byte, then 7 bytes of
    /// SHA-256(secret ‖ slot ‖ address ‖ port ‖ flow_id ‖ transport).
    fn cookie(&self, src: SocketAddr, h: &Hello, slot: u8) -> u64 {
        let ip = match src.ip() {
            std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
            std::net::IpAddr::V6(a) => a,
        };
        let mut d = Sha256::new();
        d.update(self.cookie_secret);
        d.update([slot]);
        d.update(ip.octets());
        d.update(src.port().to_be_bytes());
        d.update(h.flow_id.to_be_bytes());
        d.update([h.transport.to_wire()]);
        let out = d.finalize();
        let mut b = [0u8; 8];
        b[0] = slot;
        b[1..].copy_from_slice(&out[..7]);
        u64::from_be_bytes(b)
    }

    fn cookie_slot(now: Nanos) -> u8 {
        (now / COOKIE_SLOT) as u8
    }

    /// Whether the HELLO carries a cookie this endpoint issued, for this sender and flow, in
    /// the current slot or the previous one (counted).
    pub(crate) fn check_cookie(
        &self,
        src: SocketAddr,
        h: &Hello,
        now: Nanos,
        stats: &mut EndpointStats,
    ) -> bool {
        let Some(c) = h.cookie else { return false };
        let slot = (c >> 56) as u8;
        let cur = Self::cookie_slot(now);
        let ok = (slot == cur || slot == cur.wrapping_sub(1)) && self.cookie(src, h, slot) == c;
        if ok {
            stats.cookies_valid += 1;
        } else {
            stats.cookies_invalid += 1;
        }
        ok
    }

    /// A HELLO for a flow this endpoint does not have, with `receivers` incoming flows now:
    /// create the receiver (confirmed with a valid cookie, half-open otherwise) or, under the
    /// half-open bound, answer HELLO_ACK retry with a cookie and keep nothing (or evict,
    /// cookies off). Also the half-open flows to drop first (already out of the half-open
    /// table; the endpoint closes them).
    pub(crate) fn on_new_hello(
        &mut self,
        src: SocketAddr,
        h: &Hello,
        cookie_ok: bool,
        mut receivers: usize,
        now: Nanos,
        stats: &mut EndpointStats,
    ) -> (HelloVerdict, Vec<FlowKey>) {
        let mut drop = Vec::new();
        if !cookie_ok {
            // Pressure: the half-open table is full, or the flows are (a forger that also
            // sends data confirms its flows: they leave the half-open table, but not this).
            let full = |a: &Self, receivers: usize| {
                a.half_open.len() >= a.limits.max_half_open || receivers >= a.limits.max_flows
            };
            if full(self, receivers) && self.limits.cookies != CookieMode::Always {
                // Half-open flows older than the timeout go first.
                while let Some(key) = self.oldest_half_open() {
                    if self.half_open[&key].since + self.limits.half_open_timeout > now {
                        break;
                    }
                    stats.half_open_expired += 1;
                    self.drop_half_open(key, stats, &mut drop);
                    receivers -= 1;
                }
            }
            if self.limits.cookies == CookieMode::Always
                || (full(self, receivers) && self.limits.cookies == CookieMode::Auto)
            {
                stats.cookies_sent += 1;
                let cookie = self.cookie(src, h, Self::cookie_slot(now));
                return (HelloVerdict::Retry(cookie), drop);
            }
            while full(self, receivers) {
                match self.oldest_half_open() {
                    Some(old) => {
                        stats.half_open_evicted += 1;
                        self.drop_half_open(old, stats, &mut drop);
                        receivers -= 1;
                    }
                    None => break,
                }
            }
        }
        if receivers >= self.limits.max_flows {
            // As many flows as allowed: busy (the sender fails; a connection falls back).
            stats.flows_refused += 1;
            return (HelloVerdict::Refuse, drop);
        }
        (HelloVerdict::Admit, drop)
    }

    /// The receiver of an admitted HELLO exists: half-open unless its cookie was valid;
    /// `delivered`: already handed to the application.
    pub(crate) fn admitted(
        &mut self,
        key: FlowKey,
        cookie_ok: bool,
        delivered: bool,
        now: Nanos,
        stats: &mut EndpointStats,
    ) {
        if cookie_ok {
            return;
        }
        self.half_open.insert(
            key,
            HalfOpen {
                since: now,
                credits_left: self.limits.half_open_credits,
                stopped: false,
                delivered,
            },
        );
        self.half_open_order.push_back((now, key));
        stats.half_open = self.half_open.len() as u64;
        stats.half_open_peak = stats.half_open_peak.max(stats.half_open);
    }

    /// The oldest flow still half-open (stale order entries are dropped on the way).
    fn oldest_half_open(&mut self) -> Option<FlowKey> {
        while let Some(&(since, key)) = self.half_open_order.front() {
            if self.half_open.get(&key).is_some_and(|h| h.since == since) {
                return Some(key);
            }
            self.half_open_order.pop_front();
        }
        None
    }

    fn drop_half_open(&mut self, key: FlowKey, stats: &mut EndpointStats, drop: &mut Vec<FlowKey>) {
        self.remove(key, stats);
        drop.push(key);
    }

    pub(crate) fn is_half_open(&self, key: FlowKey) -> bool {
        self.half_open.contains_key(&key)
    }

    pub(crate) fn any_half_open(&self) -> bool {
        !self.half_open.is_empty()
    }

    /// A packet the half-open flow `key` accepted: whether it confirms the flow (data, or a
    /// HELLO with a valid cookie). A HELLO or CREDIT_REQUEST (re)starts its credits: a new
    /// allowance. False for flows that are not half-open.
    pub(crate) fn on_packet(&mut self, key: FlowKey, packet: &Packet, cookie_ok: bool) -> bool {
        let Some(h) = self.half_open.get_mut(&key) else {
            return false;
        };
        match packet {
            Packet::Data(_) => true,
            Packet::Hello(_) if cookie_ok => true,
            Packet::Hello(_) | Packet::CreditRequest(_) => {
                h.credits_left = self.limits.half_open_credits;
                h.stopped = false;
                false
            }
            _ => false,
        }
    }

    /// The peer of a half-open flow proved its address: the flow leaves the table (its entry
    /// is returned). None for other flows.
    pub(crate) fn confirm(&mut self, key: FlowKey, stats: &mut EndpointStats) -> Option<HalfOpen> {
        let h = self.half_open.remove(&key)?;
        stats.half_open = self.half_open.len() as u64;
        stats.half_open_confirmed += 1;
        Some(h)
    }

    /// A receiver closed: it leaves the half-open table if it was there.
    pub(crate) fn remove(&mut self, key: FlowKey, stats: &mut EndpointStats) {
        if self.half_open.remove(&key).is_some() {
            stats.half_open = self.half_open.len() as u64;
        }
    }

    /// A credit of half-open flow `key` (`len` bytes on the wire): its own allowance, then
    /// the half-open share of the link. Counted in `stats`.
    pub(crate) fn half_open_credit(
        &mut self,
        key: FlowKey,
        now: Nanos,
        len: usize,
        stats: &mut EndpointStats,
    ) -> HalfOpenCredit {
        let mut stop = false;
        if let Some(h) = self.half_open.get_mut(&key) {
            h.credits_left = h.credits_left.saturating_sub(1);
            if h.credits_left == 0 {
                h.stopped = true;
                stats.half_open_credit_stops += 1;
                stop = true;
            }
        }
        let send = self.half_open_credits.admit(now, len);
        if send {
            stats.half_open_credits_sent += 1;
        } else {
            stats.half_open_credits_limited += 1;
        }
        HalfOpenCredit { stop, send }
    }

    /// A flow this endpoint dropped: its packets are answered with RESET for a while.
    pub(crate) fn forget(&mut self, key: FlowKey, now: Nanos) {
        let r = &mut self.resets;
        if r.order.len() >= FORGOTTEN_MAX {
            if let Some((_, old)) = r.order.pop_front() {
                r.forgotten.remove(&old);
            }
        }
        r.forgotten.insert(key, now);
        r.order.push_back((now, key));
    }

    /// Forget the dropped flows older than FORGOTTEN_MEMORY.
    pub(crate) fn expire_forgotten(&mut self, now: Nanos) {
        let r = &mut self.resets;
        while let Some(&(at, key)) = r.order.front() {
            if at + FORGOTTEN_MEMORY > now {
                break;
            }
            r.order.pop_front();
            if r.forgotten.get(&key) == Some(&at) {
                r.forgotten.remove(&key);
            }
        }
    }

    /// A valid packet for a flow this endpoint does not have: whether to answer it with
    /// RESET(unknown_flow) — only for a flow this endpoint dropped, rate-limited, and never
    /// a RESET or a HELLO (protocol.md §7). "Dropped" includes the flows of a previous
    /// run of this endpoint (an agent restarted): during its first FORGOTTEN_MEMORY, a
    /// message only an existing flow's peer sends (`needs_an_existing_flow`) is taken to
    /// be for one of those, so the peer's side of a connection fails at once instead of
    /// after its give-up timeout (docs/protocol.md §11, "Forgotten flows").
    pub(crate) fn answer_with_reset(
        &mut self,
        src: SocketAddr,
        packet: &Packet,
        now: Nanos,
    ) -> bool {
        let dropped = self.resets.forgotten.contains_key(&(src, packet.flow_id()))
            || (now < FORGOTTEN_MEMORY && needs_an_existing_flow(packet));
        !matches!(packet, Packet::Reset(_) | Packet::Hello(_))
            && dropped
            && self.resets.bucket.admit(now, 1)
    }

    /// Sizes of the tables (memory report): half-open flows, their order entries, dropped
    /// flows remembered.
    pub(crate) fn table_sizes(&self) -> (usize, usize, usize) {
        (
            self.half_open.len(),
            self.half_open_order.len(),
            self.resets.forgotten.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::{Reset, ResetReason, TransportKind};

    fn admission(max_half_open: usize, cookies: CookieMode) -> Admission {
        let limits = Limits {
            max_flows: DEFAULT_MAX_FLOWS,
            max_half_open,
            half_open_timeout: DEFAULT_HALF_OPEN_TIMEOUT,
            half_open_credits: DEFAULT_HALF_OPEN_CREDITS,
            cookies,
        };
        Admission::new(limits, TokenBucket::new(1e6, 1e3))
    }

    fn hello(flow_id: u32, cookie: Option<u64>) -> Hello {
        Hello {
            flow_id,
            transport: TransportKind::FlexPass,
            flow_size: 0,
            conn: None,
            cookie,
            idle: false,
        }
    }

    /// Full half-open table, cookies auto: a retry with a cookie, valid for that sender and
    /// flow in its slot and the next only; cookies off: the oldest half-open flow goes.
    #[test]
    fn a_full_half_open_table_answers_with_cookies_or_evicts_the_oldest() {
        let src: SocketAddr = "10.0.0.1:7890".parse().unwrap();
        let mut st = EndpointStats::default();
        let mut a = admission(1, CookieMode::Auto);
        assert_eq!(
            a.on_new_hello(src, &hello(1, None), false, 0, 0, &mut st),
            (HelloVerdict::Admit, vec![])
        );
        a.admitted((src, 1), false, false, 0, &mut st);
        assert!(a.is_half_open((src, 1)) && st.half_open == 1);
        let (HelloVerdict::Retry(c), drop) =
            a.on_new_hello(src, &hello(2, None), false, 1, 0, &mut st)
        else {
            panic!("full: a cookie")
        };
        assert!(drop.is_empty(), "a cookie keeps the half-open flow");
        assert!(a.check_cookie(src, &hello(2, Some(c)), COOKIE_SLOT + 1, &mut st));
        assert!(!a.check_cookie(src, &hello(2, Some(c)), 2 * COOKIE_SLOT, &mut st));
        assert!(!a.check_cookie(src, &hello(3, Some(c)), 0, &mut st));
        let other: SocketAddr = "10.0.0.9:7890".parse().unwrap();
        assert!(!a.check_cookie(other, &hello(2, Some(c)), 0, &mut st));
        assert_eq!(
            (st.cookies_sent, st.cookies_valid, st.cookies_invalid),
            (1, 1, 3)
        );

        let mut a = admission(1, CookieMode::Off);
        a.on_new_hello(src, &hello(1, None), false, 0, 0, &mut st);
        a.admitted((src, 1), false, false, 0, &mut st);
        assert_eq!(
            a.on_new_hello(src, &hello(2, None), false, 1, 1, &mut st),
            (HelloVerdict::Admit, vec![(src, 1)])
        );
        assert!(!a.is_half_open((src, 1)));
    }

    /// RESET(unknown_flow) answers only flows this endpoint dropped, never a RESET or a
    /// HELLO, at most RESET_BURST at once.
    #[test]
    fn resets_answer_only_forgotten_flows_and_are_rate_limited() {
        let src: SocketAddr = "10.0.0.1:7890".parse().unwrap();
        let mut a = admission(1, CookieMode::Auto);
        let credit_request = |flow_id| {
            Packet::CreditRequest(flexpass_wire::CreditRequest {
                flow_id,
                pending_bytes: 0,
            })
        };
        // Past the first FORGOTTEN_MEMORY of the endpoint (see the test below).
        let t = FORGOTTEN_MEMORY;
        assert!(!a.answer_with_reset(src, &credit_request(5), t));
        a.forget((src, 5), t);
        let reset = Packet::Reset(Reset {
            flow_id: 5,
            reason: ResetReason::UnknownFlow,
        });
        assert!(!a.answer_with_reset(src, &reset, t));
        assert!(!a.answer_with_reset(src, &Packet::Hello(hello(5, None)), t));
        let answered = (0..100)
            .filter(|_| a.answer_with_reset(src, &credit_request(5), t))
            .count();
        assert_eq!(answered, RESET_BURST as usize);
        a.expire_forgotten(t + FORGOTTEN_MEMORY);
        let later = t + FORGOTTEN_MEMORY;
        assert!(!a.answer_with_reset(src, &credit_request(5), later));
    }

    /// A restarted endpoint forgot every flow of its previous run: during its first
    /// FORGOTTEN_MEMORY it answers what only an existing flow's peer sends (credits, ACKs,
    /// CREDIT_REQUEST) with RESET, never data (first-RTT data may overtake a new flow's
    /// HELLO), a HELLO or a RESET; afterwards only flows it dropped itself.
    #[test]
    fn a_restarted_endpoint_resets_the_flows_of_its_previous_run() {
        let src: SocketAddr = "10.0.0.1:7890".parse().unwrap();
        let mut a = admission(1, CookieMode::Auto);
        let credit = Packet::Credit(flexpass_wire::Credit {
            flow_id: 9,
            credit_seq: 3,
            padding: 6,
        });
        let request = Packet::CreditRequest(flexpass_wire::CreditRequest {
            flow_id: 9,
            pending_bytes: 1,
        });
        let data = Packet::Data(flexpass_wire::Data {
            flow_id: 9,
            subflow: flexpass_wire::SubFlow::Reactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: false,
            retransmission: false,
            priority: None,
            payload: bytes::Bytes::from_static(b"x"),
        });
        let now = 1_000_000_000;
        assert!(a.answer_with_reset(src, &credit, now));
        assert!(a.answer_with_reset(src, &request, now));
        assert!(!a.answer_with_reset(src, &data, now));
        assert!(!a.answer_with_reset(src, &Packet::Hello(hello(9, None)), now));
        let later = FORGOTTEN_MEMORY;
        assert!(!a.answer_with_reset(src, &credit, later));
        assert!(!a.answer_with_reset(src, &request, later));
    }
}

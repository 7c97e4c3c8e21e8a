//! One deterministic sender ↔ receiver loop for the core's tests (`mod harness;`).
//!
//! Both sides send everything they have at `now`; each packet takes the path's delay (or
//! is lost, or CE-marked); when nothing moves, time jumps to the next arrival or timer
//! deadline, and the timers that are due run. No randomness but the path's own.

#![allow(dead_code)]

use flexpass_core::{CreditConfig, Nanos, Receiver, ReceiverConfig, Sender, Transmit, MICROS};
use flexpass_wire::{Credit, Packet, TransportKind};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ToReceiver,
    ToSender,
}

/// What the path does to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Arrives after this delay, CE-marked or not.
    Deliver {
        delay: Nanos,
        ce: bool,
    },
    Lost,
}

impl Fate {
    pub fn after(delay: Nanos) -> Fate {
        Fate::Deliver { delay, ce: false }
    }
}

/// The path: (packet, direction, now) → its fate.
pub type Path<'a> = Box<dyn FnMut(&Transmit, Dir, Nanos) -> Fate + 'a>;

/// A packet either side sent.
#[derive(Clone, Debug)]
pub struct Sent {
    pub at: Nanos,
    pub dir: Dir,
    pub transmit: Transmit,
}

pub struct Pair<'a> {
    pub s: Sender,
    pub r: Receiver,
    pub now: Nanos,
    path: Path<'a>,
    /// Every packet sent, in order.
    pub log: Vec<Sent>,
    /// The bytes the receiver delivered, in order.
    pub delivered: Vec<u8>,
    /// Packets the sender / the receiver rejected.
    pub rejected_by_sender: u64,
    pub rejected_by_receiver: u64,
    in_flight: BinaryHeap<Reverse<(Nanos, u64)>>,
    packets: HashMap<u64, (Dir, Packet, bool)>,
    next_id: u64,
}

/// A sender that sends this many packets at one instant is stuck, not busy.
const MAX_BURST: usize = 1_000_000;

impl<'a> Pair<'a> {
    /// A lossless path without delay.
    pub fn new(s: Sender, r: Receiver) -> Self {
        Pair {
            s,
            r,
            now: 0,
            path: Box::new(|_, _, _| Fate::after(0)),
            log: Vec::new(),
            delivered: Vec::new(),
            rejected_by_sender: 0,
            rejected_by_receiver: 0,
            in_flight: BinaryHeap::new(),
            packets: HashMap::new(),
            next_id: 0,
        }
    }

    /// A lossless path with `delay` one way.
    pub fn with_delay(self, delay: Nanos) -> Self {
        self.with_path(move |_, _, _| Fate::after(delay))
    }

    pub fn with_path(mut self, path: impl FnMut(&Transmit, Dir, Nanos) -> Fate + 'a) -> Self {
        self.path = Box::new(path);
        self
    }

    pub fn set_path(&mut self, path: impl FnMut(&Transmit, Dir, Nanos) -> Fate + 'a) {
        self.path = Box::new(path);
    }

    /// Run until `done`, or until `until` (then `now` is `until`). Returns whether `done`.
    pub fn run(&mut self, until: Nanos, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.exchange() {
                continue;
            }
            let next = [
                self.in_flight.peek().map(|Reverse((t, _))| *t),
                self.s.poll_timeout(),
                self.r.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= until => self.now = self.now.max(t),
                _ => {
                    self.now = self.now.max(until);
                    return false;
                }
            }
            self.deliver_due();
            if self.s.poll_timeout().is_some_and(|t| t <= self.now) {
                self.s.handle_timeout(self.now);
            }
            if self.r.poll_timeout().is_some_and(|t| t <= self.now) {
                self.r.handle_timeout(self.now);
            }
        }
    }

    pub fn run_until(&mut self, until: Nanos) {
        self.run(until, |_| false);
    }

    /// Both sides send what they have now, and the receiver's data is read. Returns whether
    /// anything moved.
    pub fn exchange(&mut self) -> bool {
        let mut moved = false;
        let mut burst = 0;
        while let Some(t) = self.s.poll_transmit(self.now) {
            burst += 1;
            assert!(
                burst < MAX_BURST,
                "the sender keeps sending at {} ns",
                self.now
            );
            self.send(Dir::ToReceiver, t);
            moved = true;
        }
        while let Some(t) = self.r.poll_transmit(self.now) {
            self.send(Dir::ToSender, t);
            moved = true;
        }
        while let Some(b) = self.r.read() {
            self.delivered.extend_from_slice(&b);
        }
        moved
    }

    /// `t` from `dir`'s source: logged, and on the path.
    fn send(&mut self, dir: Dir, t: Transmit) {
        let fate = (self.path)(&t, dir, self.now);
        let packet = t.packet.clone();
        self.log.push(Sent {
            at: self.now,
            dir,
            transmit: t,
        });
        if let Fate::Deliver { delay, ce } = fate {
            self.inject(dir, packet, delay, ce);
        }
    }

    /// A packet the test makes up (not logged, not subject to the path): arrives after
    /// `delay` (0: now).
    pub fn inject(&mut self, dir: Dir, packet: Packet, delay: Nanos, ce: bool) {
        if delay == 0 {
            self.deliver(dir, &packet, ce);
        } else {
            self.in_flight
                .push(Reverse((self.now + delay, self.next_id)));
            self.packets.insert(self.next_id, (dir, packet, ce));
            self.next_id += 1;
        }
    }

    fn deliver_due(&mut self) {
        while self
            .in_flight
            .peek()
            .is_some_and(|Reverse((t, _))| *t <= self.now)
        {
            let Reverse((_, id)) = self.in_flight.pop().unwrap();
            let (dir, p, ce) = self.packets.remove(&id).unwrap();
            self.deliver(dir, &p, ce);
        }
    }

    fn deliver(&mut self, dir: Dir, p: &Packet, ce: bool) {
        match dir {
            Dir::ToReceiver => {
                if self.r.handle_packet(self.now, p, ce).is_err() {
                    self.rejected_by_receiver += 1;
                }
            }
            Dir::ToSender => {
                if self.s.handle_packet(self.now, p).is_err() {
                    self.rejected_by_sender += 1;
                }
            }
        }
    }

    /// The packets `dir`'s source sent, with their times.
    pub fn sent(&self, dir: Dir) -> impl Iterator<Item = (Nanos, &Packet)> {
        self.log
            .iter()
            .filter(move |x| x.dir == dir)
            .map(|x| (x.at, &x.transmit.packet))
    }

    /// How many packets `dir`'s source sent that match `f`.
    pub fn count(&self, dir: Dir, f: impl Fn(&Packet) -> bool) -> usize {
        self.sent(dir).filter(|(_, p)| f(p)).count()
    }
}

/// `n` bytes of a pattern that shows misplaced data.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n as u64).map(|i| (i * 131 + i / 7) as u8).collect()
}

/// A receiver of flow 7: credits for a 10 Gbit/s link at half the rate to start, feedback
/// every 25 µs.
pub fn receiver(t: TransportKind) -> Receiver {
    let cfg = ReceiverConfig::new(CreditConfig::for_link(10e9, 0.5, 25 * MICROS));
    Receiver::new(7, t, &cfg).unwrap()
}

/// Everything the sender has to send now.
pub fn drain(s: &mut Sender, now: Nanos) -> Vec<Packet> {
    std::iter::from_fn(|| s.poll_transmit(now))
        .map(|t| t.packet)
        .collect()
}

/// Credit `seq` of flow 7.
pub fn credit(seq: u32) -> Packet {
    Packet::Credit(Credit {
        flow_id: 7,
        credit_seq: seq,
        padding: 6,
    })
}

pub fn is_credit(p: &Packet) -> bool {
    matches!(p, Packet::Credit(_))
}

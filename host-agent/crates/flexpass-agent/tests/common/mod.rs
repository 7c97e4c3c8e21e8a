//! Helpers of the agent's loopback tests: test data and the server side of a turn loop.

use flexpass_agent::{Endpoint, FlowKey};
use std::collections::HashMap;

/// `n` bytes of a pattern that differs with `seed` (a byte slipped or swapped shows).
pub fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).rotate_left(seed) as u8)
        .collect()
}

/// What a server endpoint received: every flow it accepted, and the bytes each delivered,
/// by flow id.
#[derive(Default)]
pub struct Received {
    pub keys: Vec<FlowKey>,
    pub bytes: HashMap<u32, Vec<u8>>,
}

impl Received {
    /// Accept the server's new flows and read what every accepted flow has delivered.
    pub fn collect(&mut self, server: &mut Endpoint) {
        while let Some(k) = server.accept() {
            self.keys.push(k);
        }
        for k in &self.keys {
            let r = server.receiver_mut(*k).unwrap();
            while let Some(b) = r.read() {
                self.bytes.entry(k.1).or_default().extend_from_slice(&b);
            }
        }
    }
}

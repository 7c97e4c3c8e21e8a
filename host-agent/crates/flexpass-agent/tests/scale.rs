//! Many flows (docs/agent-api.md, "Scale"): 10 000 concurrent flows between two endpoints on
//! loopback. Every flow first sends a part of its bytes and goes idle (credits stopped, no
//! timer), all 10 000 stay open together, then each sends the rest and finishes; every flow
//! must arrive byte-exact. The endpoints' turns look at due and touched flows only, so the
//! idle flows cost nothing per turn (measured by `cargo bench -p flexpass-agent --bench
//! scale`, not here: no timed assertions in tests).

use bytes::Bytes;
use flexpass_agent::{Dir, Endpoint, EndpointConfig, FlowKey};
use flexpass_wire::TransportKind;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const FLOWS: usize = 10_000;

fn endpoint(accept: bool) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = 10e9;
    cfg.base_rtt = 100_000;
    cfg.max_flows = 2 * FLOWS;
    cfg.max_half_open = 2 * FLOWS;
    cfg.spin = 0;
    Endpoint::bind(cfg).unwrap()
}

/// Flow `i`'s bytes: its own length and content.
fn flow_bytes(i: usize) -> Vec<u8> {
    let n = 600 + (i * 7919) % 5000;
    (0..n)
        .map(|k| ((k as u32).wrapping_mul(2_654_435_761) ^ (i as u32).wrapping_mul(40_503)) as u8)
        .collect()
}

fn transport(i: usize) -> TransportKind {
    [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
    ][i % 3]
}

struct Side {
    /// Received bytes per accepted flow (by the sender's flow id).
    got: HashMap<u32, Vec<u8>>,
    keys: HashMap<u32, FlowKey>,
    changed: Vec<(Dir, FlowKey)>,
    finished: usize,
}

impl Side {
    /// Accept new flows and read the flows the network touched.
    fn pump(&mut self, server: &mut Endpoint) {
        while let Some(k) = server.accept() {
            self.keys.insert(k.1, k);
            self.got.entry(k.1).or_default();
            self.read(server, k);
        }
        server.take_changed(&mut self.changed);
        let changed = std::mem::take(&mut self.changed);
        for &(dir, k) in &changed {
            if dir == Dir::Recv && self.keys.contains_key(&k.1) {
                self.read(server, k);
            }
        }
        self.changed = changed;
    }

    fn read(&mut self, server: &mut Endpoint, k: FlowKey) {
        let Some(r) = server.receiver_mut(k) else {
            return;
        };
        let buf = self.got.get_mut(&k.1).expect("accepted");
        let was = r.is_finished();
        while let Some(b) = r.read() {
            buf.extend_from_slice(&b);
        }
        if !was && r.is_finished() {
            self.finished += 1;
            server.retire_receiver(k);
        }
    }
}

/// Flows opened (and later finished) together: 10 000 HELLOs in one burst would only
/// measure how a single-threaded test loop drains a socket; the flows still all end up open
/// at once.
const WAVE: usize = 250;

#[test]
fn ten_thousand_concurrent_flows_complete_byte_exact() {
    let mut server = endpoint(true);
    server.track_changes(true);
    let mut client = endpoint(false);
    let addr = server.local_addr().unwrap();
    let data: Vec<Vec<u8>> = (0..FLOWS).map(flow_bytes).collect();
    let mut keys = Vec::with_capacity(FLOWS);
    let mut side = Side {
        got: HashMap::new(),
        keys: HashMap::new(),
        changed: Vec::new(),
        finished: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    let turn = |client: &mut Endpoint, server: &mut Endpoint, side: &mut Side| {
        client.poll(Duration::from_micros(100)).unwrap();
        server.poll(Duration::from_micros(100)).unwrap();
        side.pump(server);
    };
    let check = |client: &Endpoint, server: &Endpoint, wave: &[FlowKey]| {
        for &k in wave {
            let s = client.sender(k).unwrap();
            assert!(
                s.error().is_none(),
                "{k:?}: {:?} {:?}\nserver {:?}\nclient {:?}",
                s.error(),
                s.stats(),
                server.stats,
                client.stats
            );
        }
    };
    // Phase 1: every flow opens and sends its first part, then waits (wave by wave).
    for (w, chunk) in data.chunks(WAVE).enumerate() {
        let mut want = 0;
        for (j, d) in chunk.iter().enumerate() {
            let i = w * WAVE + j;
            let k = client.open(addr, transport(i), d.len() as u64).unwrap();
            client.write(k, Bytes::copy_from_slice(&d[..d.len() / 2]));
            keys.push(k);
            want += d.len() / 2;
        }
        let wave = &keys[w * WAVE..];
        loop {
            turn(&mut client, &mut server, &mut side);
            let got: usize = wave
                .iter()
                .map(|k| side.got.get(&k.1).map_or(0, Vec::len))
                .sum();
            if got == want
                && wave
                    .iter()
                    .all(|&k| client.sender(k).unwrap().unacked_bytes() == 0)
            {
                break;
            }
            check(&client, &server, wave);
            assert!(
                Instant::now() < deadline,
                "phase 1, wave {w}: {} flows accepted, {got} of {want} bytes",
                side.keys.len()
            );
        }
    }
    // All 10 000 flows are open and idle: after the credit-stop timeout nothing is due, the
    // deadline heap holds no more than a few entries per flow, and nothing stays dirty.
    let idle_until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < idle_until {
        turn(&mut client, &mut server, &mut side);
    }
    assert_eq!(side.keys.len(), FLOWS);
    assert_eq!(server.flows().1, FLOWS);
    assert_eq!(client.flows().0, FLOWS);
    for ep in [&client, &server] {
        let (timers, dirty) = ep.timer_entries();
        assert_eq!(dirty, 0);
        assert!(timers <= 4 * FLOWS + 1024, "{timers} heap entries");
    }
    // Phase 2: the rest of every flow, then FIN (wave by wave; the others stay idle).
    for (w, wave) in keys.chunks(WAVE).enumerate() {
        for (j, &k) in wave.iter().enumerate() {
            let d = &data[w * WAVE + j];
            client.write(k, Bytes::copy_from_slice(&d[d.len() / 2..]));
            client.sender_mut(k).unwrap().finish();
        }
        let target = (w * WAVE + wave.len()).min(FLOWS);
        loop {
            turn(&mut client, &mut server, &mut side);
            if side.finished >= target
                && wave
                    .iter()
                    .all(|&k| client.sender(k).unwrap().is_complete())
            {
                break;
            }
            check(&client, &server, wave);
            assert!(
                Instant::now() < deadline,
                "phase 2, wave {w}: {} of {FLOWS} flows finished",
                side.finished
            );
        }
    }
    for (i, d) in data.iter().enumerate() {
        let k = keys[i];
        assert!(client.sender(k).unwrap().error().is_none());
        assert!(
            &side.got[&k.1] == d,
            "flow {i} ({:?}) differs",
            transport(i)
        );
        client.close_sender(k);
    }
    assert_eq!(server.stats.malformed, 0);
}

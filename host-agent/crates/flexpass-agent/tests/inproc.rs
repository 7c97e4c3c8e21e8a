//! In-process listeners over the daemon's real API socket (docs/agent-api.md, "In-process
//! listeners"): a process registers a port with `tcp_listen` + `inproc`, gets `tcp_hello`
//! for each connection, answers HELLO_ACK from its own UDP socket and `tcp_taken` (with the
//! socket's descriptor) or `tcp_refused`; the opening endpoint moves the flow to the
//! process's socket (docs/protocol.md §11). The process here is the core's `Receiver` on a
//! socket of the test; the opener is an `Endpoint` of the test.

#[allow(dead_code)]
mod common;

use bytes::Bytes;
use common::pattern;
use flexpass_agent::daemon::Daemon;
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey};
use flexpass_core::{CreditConfig, Nanos, Receiver, ReceiverConfig, SenderError};
use flexpass_wire::{ConnRole, HelloConn, Packet, TransportKind};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
use serde_json::Value;
use std::io::{BufRead, BufReader, IoSlice, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct Agent {
    dir: PathBuf,
    sock: PathBuf,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Daemon>>,
}

impl Agent {
    fn start(name: &str, inproc: bool) -> Agent {
        let dir = std::env::temp_dir().join(format!("fp-inproc-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("agent.sock");
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.link_bps = 1e9;
        cfg.base_rtt = 50_000;
        let ep = Endpoint::bind(cfg).unwrap();
        let addr = ep.local_addr().unwrap();
        let mut daemon = Daemon::new(ep, &sock).unwrap();
        daemon.set_inproc_listen(inproc);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            daemon.run(&stop2).unwrap();
            daemon
        });
        Agent {
            dir,
            sock,
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// One request on its own API connection: its reply.
    fn request(&self, line: &str) -> Value {
        let (_, v) = register_line(&self.sock, line);
        v
    }

    fn endpoint_stats(&self) -> Value {
        self.request("{\"op\":\"status\"}\n")["endpoint"].clone()
    }

    fn stop(mut self) -> Daemon {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn register_line(sock: &Path, line: &str) -> (BufReader<UnixStream>, Value) {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply).unwrap();
    (r, serde_json::from_str(&reply).unwrap())
}

/// A registration of `port`: the stream its events come on.
fn register(agent: &Agent, port: u16) -> BufReader<UnixStream> {
    let (r, v) = register_line(
        &agent.sock,
        &format!("{{\"op\":\"tcp_listen\",\"port\":{port},\"inproc\":true}}\n"),
    );
    assert_eq!(v, serde_json::json!({"ok": true, "port": port}));
    r.get_ref().set_nonblocking(true).unwrap();
    r
}

/// The next line on a registration, while `turn` drives the opener.
fn next_line(reg: &mut BufReader<UnixStream>, mut turn: impl FnMut()) -> Value {
    let end = Instant::now() + Duration::from_secs(5);
    let mut line = String::new();
    loop {
        assert!(Instant::now() < end, "nothing on the registration");
        match reg.read_line(&mut line) {
            Ok(0) => panic!("registration closed"),
            Ok(_) if line.ends_with('\n') => return serde_json::from_str(&line).unwrap(),
            _ => turn(),
        }
    }
}

fn send_line(reg: &mut BufReader<UnixStream>, line: &str, fd: Option<&UdpSocket>) {
    let fds = fd.map(|s| [s.as_raw_fd()]);
    let cmsgs: Vec<_> = fds.iter().map(|f| ControlMessage::ScmRights(f)).collect();
    let n = sendmsg::<()>(
        reg.get_ref().as_raw_fd(),
        &[IoSlice::new(line.as_bytes())],
        &cmsgs,
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    assert_eq!(n, line.len());
}

fn opener(port: u16) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = false;
    cfg.link_bps = 1e9;
    cfg.base_rtt = 50_000;
    let _ = port;
    Endpoint::bind(cfg).unwrap()
}

/// A connection's open flow from `client` to the agent's port, for service `port`.
fn open_conn(client: &mut Endpoint, agent: SocketAddr, port: u16, data: &[u8]) -> FlowKey {
    let key = client
        .open(agent, TransportKind::FlexPass, data.len() as u64)
        .unwrap();
    let s = client.sender_mut(key).unwrap();
    s.set_conn(HelloConn {
        conn_id: key.1,
        src_port: 40_000,
        dst_port: port,
        role: ConnRole::Open,
    });
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    key
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The process's side of a taken connection: its socket and the core's receiver.
struct Process {
    q: UdpSocket,
    r: Receiver,
    peer: SocketAddr,
    epoch: Instant,
}

impl Process {
    /// Accept the connection of `hello` (a `tcp_hello` event): socket, receiver, HELLO_ACK.
    fn accept(hello: &Value) -> Process {
        let packet = Packet::decode(&unhex(hello["hello"].as_str().unwrap())).unwrap();
        let Packet::Hello(h) = &packet else {
            panic!("tcp_hello carries {packet:?}")
        };
        assert_eq!(h.flow_id as u64, hello["flow_id"].as_u64().unwrap());
        let q = UdpSocket::bind("127.0.0.1:0").unwrap();
        q.set_nonblocking(true).unwrap();
        let cfg = ReceiverConfig::new(CreditConfig::for_link_mtu(1e9, 0.5, 50_000, 1500));
        let mut p = Process {
            r: Receiver::new(h.flow_id, h.transport, &cfg).unwrap(),
            q,
            peer: hello["peer"].as_str().unwrap().parse().unwrap(),
            epoch: Instant::now(),
        };
        p.r.handle_packet(p.now(), &packet, false).unwrap();
        p.turn(&mut vec![]);
        p
    }

    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    fn turn(&mut self, got: &mut Vec<u8>) {
        let mut buf = [0u8; 65_536];
        while let Ok((n, _)) = self.q.recv_from(&mut buf) {
            let now = self.now();
            let _ = self
                .r
                .handle_packet(now, &Packet::decode(&buf[..n]).unwrap(), false);
        }
        let now = self.now();
        if self.r.poll_timeout().is_some_and(|d| d <= now) {
            self.r.handle_timeout(now);
        }
        while let Some(t) = self.r.poll_transmit(now) {
            self.q
                .send_to(&t.packet.encode_to_vec(), self.peer)
                .unwrap();
        }
        while let Some(b) = self.r.read() {
            got.extend_from_slice(&b);
        }
    }
}

/// Run the opener and the process until the process has all of `data` and the opener's
/// sender is complete (30 s at most); the bytes must be those written.
fn receive_all(client: &mut Endpoint, key: FlowKey, p: &mut Process, data: &[u8]) {
    let mut got = vec![];
    let end = Instant::now() + Duration::from_secs(30);
    while !(got.len() == data.len() && client.sender(key).unwrap().is_complete()) {
        assert!(
            Instant::now() < end,
            "stalled at {} of {} bytes",
            got.len(),
            data.len()
        );
        client.poll(Duration::from_micros(100)).unwrap();
        p.turn(&mut got);
    }
    assert!(
        got == data,
        "bytes at the process differ from those written"
    );
}

fn answer(op: &str, hello: &Value) -> String {
    format!(
        "{{\"op\":\"{op}\",\"peer\":\"{}\",\"flow_id\":{}}}\n",
        hello["peer"].as_str().unwrap(),
        hello["flow_id"]
    )
}

/// Drive `client` until its flow `key` fails; the error.
#[track_caller]
fn until_failed(client: &mut Endpoint, key: FlowKey, within: Duration) -> SenderError {
    let end = Instant::now() + within;
    loop {
        client.poll(Duration::from_micros(200)).unwrap();
        if let Some(e) = client.sender(key).unwrap().error() {
            return e;
        }
        assert!(
            Instant::now() < end,
            "the flow did not fail within {within:?}: {:?} {:?}",
            client.stats,
            client.sender(key).map(|s| s.stats())
        );
    }
}

const PORT: u16 = 5201;

#[test]
fn a_registered_process_takes_the_connection_and_receives_it_byte_exact() {
    let agent = Agent::start("take", true);
    let mut reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let data = pattern(1_000_000, 5);
    let key = open_conn(&mut client, agent.addr, PORT, &data);
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    assert_eq!(hello["event"], "tcp_hello", "{hello}");
    assert_eq!(hello["peer"], client.local_addr().unwrap().to_string());
    assert_eq!(hello["flow_id"], key.1);
    assert_eq!(hello["conn_id"], key.1);
    assert_eq!(
        (hello["src_port"].as_u64(), hello["dst_port"].as_u64()),
        (Some(40_000), Some(PORT as u64))
    );
    assert_eq!(hello["transport"], "flexpass");
    let mut p = Process::accept(&hello);
    send_line(&mut reg, &answer("tcp_taken", &hello), Some(&p.q));
    receive_all(&mut client, key, &mut p, &data);
    assert_eq!(client.sender_peer(key), p.q.local_addr().unwrap());
    assert_eq!(client.stats.peer_moved, 1);
    let st = agent.endpoint_stats();
    assert_eq!(st["handed_over"], 1, "{st}");
    assert_eq!(
        (st["handed_refused"].as_u64(), st["resets_sent"].as_u64()),
        (Some(0), Some(0))
    );
    // No registration answer line is owed: nothing but events comes on it.
    let mut line = String::new();
    assert!(reg.read_line(&mut line).is_err(), "unexpected line {line}");
    // The connection ends normally: the agent lets its descriptor go; nothing is reset.
    send_line(&mut reg, &answer("tcp_closed", &hello), None);
    drop(reg);
    let daemon = agent.stop();
    assert_eq!(daemon.inproc_resets(), 0);
}

#[test]
fn a_process_that_dies_mid_handshake_gets_its_opener_reset_and_its_port_goes_back() {
    let agent = Agent::start("dies", true);
    let reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let key = open_conn(&mut client, agent.addr, PORT, b"request");
    let mut reg = reg;
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    assert_eq!(hello["flow_id"], key.1);
    drop(reg); // The process dies before answering.
    assert_eq!(
        until_failed(&mut client, key, Duration::from_secs(1)),
        SenderError::Reset
    );
    // The port is the agent's again: nothing hands it over; the agent accepts the flow
    // and refuses the connection as for any port nobody serves (tcp.refused).
    let _ = open_conn(&mut client, agent.addr, PORT, b"again");
    let end = Instant::now() + Duration::from_secs(1);
    while agent.request("{\"op\":\"status\"}\n")["tcp"]["refused"] != 1 {
        assert!(Instant::now() < end, "the port was not the agent's again");
        client.poll(Duration::from_millis(1)).unwrap();
    }
    let st = agent.endpoint_stats();
    assert_eq!(
        (st["handed_over"].as_u64(), st["handed_refused"].as_u64()),
        (Some(1), Some(1)),
        "{st}"
    );
    // A new registration of the port gets the next connection.
    let mut reg = register(&agent, PORT);
    let key = open_conn(&mut client, agent.addr, PORT, b"third");
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    assert_eq!(hello["flow_id"], key.1);
}

#[test]
fn a_process_that_dies_with_a_taken_connection_has_its_peer_reset_from_its_socket() {
    let agent = Agent::start("dies-taken", true);
    let mut reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let data = pattern(4_000_000, 9);
    let key = open_conn(&mut client, agent.addr, PORT, &data);
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    let mut p = Process::accept(&hello);
    send_line(&mut reg, &answer("tcp_taken", &hello), Some(&p.q));
    let mut got = vec![];
    let end = Instant::now() + Duration::from_secs(10);
    while got.len() < 100_000 {
        assert!(Instant::now() < end, "no data at the process");
        client.poll(Duration::from_micros(100)).unwrap();
        p.turn(&mut got);
    }
    assert_eq!(client.sender_peer(key), p.q.local_addr().unwrap());
    // Killed: its socket and its registration close together.
    drop(p);
    drop(reg);
    let started = Instant::now();
    assert_eq!(
        until_failed(&mut client, key, Duration::from_secs(1)),
        SenderError::Reset
    );
    eprintln!(
        "opener reset {:?} after the process died",
        started.elapsed()
    );
    assert_eq!(agent.stop().inproc_resets(), 1);
}

#[test]
fn a_refused_hand_over_resets_the_opener() {
    let agent = Agent::start("refuse", true);
    let mut reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let key = open_conn(&mut client, agent.addr, PORT, b"request");
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    send_line(&mut reg, &answer("tcp_refused", &hello), None);
    assert_eq!(
        until_failed(&mut client, key, Duration::from_secs(1)),
        SenderError::Reset
    );
    let st = agent.endpoint_stats();
    assert_eq!(st["handed_refused"], 1, "{st}");
}

#[test]
fn unknown_forged_or_misplaced_answers_get_a_clear_error() {
    let off = Agent::start("off", false);
    let v = off.request(&format!(
        "{{\"op\":\"tcp_listen\",\"port\":{PORT},\"inproc\":true}}\n"
    ));
    assert_eq!(v["ok"], false);
    assert!(
        v["error"].as_str().unwrap().contains("--inproc-listen"),
        "{v}"
    );
    drop(off);

    let agent = Agent::start("bad", true);
    let v = agent.request("{\"op\":\"tcp_taken\",\"peer\":\"127.0.0.1:9\",\"flow_id\":1}\n");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("in-process registration"),
        "{v}"
    );
    let v = agent.request(&format!(
        "{{\"op\":\"tcp_listen\",\"port\":{PORT},\"inproc\":1}}\n"
    ));
    assert!(v["error"].as_str().unwrap().contains("\"inproc\""), "{v}");

    let mut reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let key = open_conn(&mut client, agent.addr, PORT, b"request");
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    let q = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Another flow of the same peer, and the right flow of another peer.
    let peer = hello["peer"].as_str().unwrap();
    let wrong_flow = format!(
        "{{\"op\":\"tcp_taken\",\"peer\":\"{peer}\",\"flow_id\":{}}}\n",
        key.1 ^ 1
    );
    send_line(&mut reg, &wrong_flow, Some(&q));
    let e = next_line(&mut reg, || {});
    assert_eq!(e["ok"], false);
    let msg = e["error"].as_str().unwrap();
    assert!(
        msg.contains("tcp_taken") && msg.contains(&format!("flow_id {}", key.1 ^ 1)),
        "{msg}"
    );
    let forged = format!(
        "{{\"op\":\"tcp_refused\",\"peer\":\"10.9.9.9:1\",\"flow_id\":{}}}\n",
        key.1
    );
    send_line(&mut reg, &forged, None);
    let e = next_line(&mut reg, || {});
    assert!(e["error"].as_str().unwrap().contains("10.9.9.9:1"), "{e}");
    // Taken without the descriptor; then with one that is not a UDP socket.
    send_line(&mut reg, &answer("tcp_taken", &hello), None);
    let e = next_line(&mut reg, || {});
    assert!(e["error"].as_str().unwrap().contains("SCM_RIGHTS"), "{e}");
    let (a, _b) = UnixStream::pair().unwrap();
    let fds = [a.as_raw_fd()];
    sendmsg::<()>(
        reg.get_ref().as_raw_fd(),
        &[IoSlice::new(answer("tcp_taken", &hello).as_bytes())],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    let e = next_line(&mut reg, || {});
    assert!(
        e["error"].as_str().unwrap().contains("not a UDP socket"),
        "{e}"
    );
    let e = {
        send_line(&mut reg, "{\"op\":\"status\"}\n", None);
        next_line(&mut reg, || {})
    };
    assert!(
        e["error"].as_str().unwrap().contains("only tcp_taken"),
        "{e}"
    );
    // None of that touched the flow: the registration goes on and the real answer counts.
    assert!(client.sender(key).unwrap().error().is_none());
    send_line(&mut reg, &answer("tcp_refused", &hello), None);
    assert_eq!(
        until_failed(&mut client, key, Duration::from_secs(1)),
        SenderError::Reset
    );
    let st = agent.request("{\"op\":\"status\"}\n");
    assert!(
        st["api"]["bad_requests"].as_u64().unwrap() >= 6,
        "{}",
        st["api"]
    );
}

#[test]
fn a_hello_retransmitted_after_the_answer_is_handed_again_and_needs_no_new_descriptor() {
    let agent = Agent::start("rexmit", true);
    let mut reg = register(&agent, PORT);
    let mut client = opener(PORT);
    let data = pattern(200_000, 11);
    let key = open_conn(&mut client, agent.addr, PORT, &data);
    let hello = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    // The process takes it, but its HELLO_ACK is lost: the opener retransmits its HELLO to
    // the agent's port, which passes it on again.
    let q = UdpSocket::bind("127.0.0.1:0").unwrap();
    send_line(&mut reg, &answer("tcp_taken", &hello), Some(&q));
    let again = next_line(&mut reg, || {
        client.poll(Duration::from_micros(200)).unwrap()
    });
    assert_eq!(
        (again["event"].clone(), again["flow_id"].clone()),
        ("tcp_hello".into(), hello["flow_id"].clone())
    );
    assert!(client.sender(key).unwrap().stats().hello_retransmissions >= 1);
    // Answered again without a descriptor; this time the HELLO_ACK gets through.
    send_line(&mut reg, &answer("tcp_taken", &again), None);
    // (The test's process opens its socket anew: the descriptor the agent kept matters only
    // if the process dies, tested above.)
    drop(q);
    let mut p = Process::accept(&again);
    receive_all(&mut client, key, &mut p, &data);
    // No error line came for the second answer.
    let mut line = String::new();
    assert!(reg.read_line(&mut line).is_err(), "unexpected line {line}");
    assert_eq!(agent.endpoint_stats()["handed_over"], 1);
}

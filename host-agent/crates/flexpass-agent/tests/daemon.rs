//! The agent daemon's Unix-socket API: one program sends through the agent, another
//! receives through it, neither knows the wire format.

use flexpass_agent::daemon::Daemon;
use flexpass_agent::{Endpoint, EndpointConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn request(sock: &std::path::Path, line: &str) -> (BufReader<UnixStream>, serde_json::Value) {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply).unwrap();
    (r, serde_json::from_str(&reply).unwrap())
}

#[test]
fn api_clients_exchange_a_flow_through_the_agent() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("agent.sock");
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.link_bps = 1e9;
    let ep = Endpoint::bind(cfg).unwrap();
    let addr = ep.local_addr().unwrap();
    let mut daemon = Daemon::new(ep, &sock).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let agent = std::thread::spawn(move || {
        daemon.run(&stop2).unwrap();
        daemon
    });

    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 31 + 7) as u8).collect();
    let (mut acceptor, _) = {
        // The accept reply only comes once a flow arrives: connect first, in a thread.
        let sender = send_flow(&sock, addr, &data);
        let (acceptor, accepted) = request(&sock, "{\"op\":\"accept\"}\n");
        assert_eq!(accepted["ok"], true, "{accepted}");
        assert_eq!(accepted["transport"], "flexpass");
        let mut got = vec![];
        let mut acceptor = acceptor;
        acceptor.read_to_end(&mut got).unwrap();
        assert_eq!(got, data, "bytes through the agent are exact");
        let done = sender.join().unwrap();
        assert_eq!(done["event"], "flow_sent", "{done}");
        assert_eq!(done["bytes"], data.len() as u64);
        (acceptor, accepted)
    };
    let mut rest = vec![];
    let _ = acceptor.read_to_end(&mut rest);

    // Bad requests get one JSON error line.
    let (_, bad) = request(&sock, "{\"op\":\"connect\",\"peer\":\"nowhere\"}\n");
    assert_eq!(bad["ok"], false);
    let (_, bad) = request(&sock, "not json\n");
    assert!(bad["error"].as_str().unwrap().contains("not JSON"));

    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An accepting API client that reads only after the flow has ended: the agent holds more
/// than it queues for the client's socket at once (its cap, here 16 KiB), and no packet
/// comes any more; every byte still arrives, then EOF.
#[test]
fn an_api_client_that_reads_late_gets_the_whole_flow() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-api-late-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock, addr, stop, agent) =
        start_agent_with(&dir, "agent.sock", None, |d| d.set_max_pending(16 << 10));
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 13 + 3) as u8).collect();
    let sender = send_flow(&sock, addr, &data);
    let (mut acceptor, accepted) = request(&sock, "{\"op\":\"accept\"}\n");
    assert_eq!(accepted["ok"], true, "{accepted}");
    // The whole flow acknowledged (flow_sent) before the first read.
    let done = sender.join().unwrap();
    assert_eq!(done["bytes"], data.len() as u64, "{done}");
    acceptor
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_exact(
        &read_all(&mut acceptor, data.len()),
        &data,
        "flow to a late reader",
    );
    stop_agents([(stop, agent)], &dir);
}

/// Byte-exact, reporting lengths and the first difference (not megabytes of bytes).
fn assert_exact(got: &[u8], want: &[u8], what: &str) {
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        got.len() == want.len() && first.is_none(),
        "{what}: got {} bytes, want {}, first difference at {first:?}",
        got.len(),
        want.len()
    );
}

type Agent = (
    std::path::PathBuf,
    std::net::SocketAddr,
    Arc<AtomicBool>,
    std::thread::JoinHandle<Daemon>,
);

/// A client of the agent at `sock` that opens a flow to `addr` after 100 ms (an `accept`
/// answers only once a flow arrives), sends `data` and half-closes; the thread returns
/// the agent's `flow_sent` line.
fn send_flow(
    sock: &std::path::Path,
    addr: std::net::SocketAddr,
    data: &[u8],
) -> std::thread::JoinHandle<serde_json::Value> {
    let (sock, data) = (sock.to_path_buf(), data.to_vec());
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let (mut r, hello) = request(
            &sock,
            &format!("{{\"op\":\"connect\",\"peer\":\"{addr}\",\"transport\":\"flexpass\"}}\n"),
        );
        assert_eq!(hello["ok"], true, "{hello}");
        r.get_mut().write_all(&data).unwrap();
        r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
        let mut done = String::new();
        r.read_line(&mut done).unwrap();
        serde_json::from_str::<serde_json::Value>(&done).unwrap()
    })
}

/// Stop the agents, then remove their directory.
fn stop_agents<const N: usize>(
    agents: [(Arc<AtomicBool>, std::thread::JoinHandle<Daemon>); N],
    dir: &std::path::Path,
) {
    for (stop, h) in agents {
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Everything until EOF (a read that fails names how far it got).
fn read_all(r: &mut impl Read, want: usize) -> Vec<u8> {
    let mut got = vec![];
    if let Err(e) = r.read_to_end(&mut got) {
        panic!("{e} after {} of {want} bytes", got.len());
    }
    got
}

fn start_agent(dir: &std::path::Path, name: &str, peer_port: Option<u16>) -> Agent {
    start_agent_with(dir, name, peer_port, |_| {})
}

/// An agent whose daemon `setup` adjusts before it runs.
fn start_agent_with(
    dir: &std::path::Path,
    name: &str,
    peer_port: Option<u16>,
    setup: impl FnOnce(&mut Daemon),
) -> Agent {
    let sock = dir.join(name);
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.link_bps = 1e9;
    let ep = Endpoint::bind(cfg).unwrap();
    let addr = ep.local_addr().unwrap();
    let mut daemon = Daemon::new(ep, &sock).unwrap();
    if let Some(p) = peer_port {
        daemon.set_peer_port(p);
    }
    setup(&mut daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        let mut daemon = daemon;
        daemon.run(&stop2).unwrap();
        daemon
    });
    (sock, addr, stop, h)
}

/// A TCP connection of an unmodified application, as libflexpass.so makes it: the client's
/// API connection becomes its socket (`tcp_connect`), the server's agent delivers the
/// connection to the registered listener (`tcp_listen`) over loopback and maps its address
/// (`tcp_peer`); bytes both ways, half-close, and a port nobody serves over FlexPass.
#[test]
fn tcp_connection_both_directions_through_two_agents() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock_b, addr_b, stop_b, agent_b) = start_agent(&dir, "b.sock", None);
    // Agent A reaches B's UDP port (on one host both agents cannot share 7890).
    let (sock_a, _, stop_a, agent_a) = start_agent(&dir, "a.sock", Some(addr_b.port()));
    {
        let mut s = UnixStream::connect(&sock_a).unwrap();
        s.write_all(b"{\"op\":\"status\"}\n").unwrap();
        let mut r = String::new();
        BufReader::new(s).read_line(&mut r).unwrap();
        assert!(r.contains("\"ok\":true"), "{r}");
    }
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let (_, reg) = request(
        &sock_b,
        &format!("{{\"op\":\"tcp_listen\",\"port\":{port},\"addr\":\"0.0.0.0\"}}\n"),
    );
    assert_eq!(reg["ok"], true, "{reg}");
    // A loopback-only listener is never offered to peers.
    let (_, lo) = request(
        &sock_b,
        "{\"op\":\"tcp_listen\",\"port\":6379,\"addr\":\"127.0.0.1\"}\n",
    );
    assert_eq!(lo["ok"], false, "{lo}");

    let up: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 + 1) as u8).collect();
    let down: Vec<u8> = (0..2_500_000u32).map(|i| (i * 13 + 5) as u8).collect();
    let (up2, down2) = (up.clone(), down.clone());
    let srv = std::thread::spawn(move || {
        let (mut c, from) = server.accept().unwrap();
        // The agent's loopback connection comes from its own source address.
        assert_eq!(from.ip().to_string(), "127.0.0.2");
        let mut got = vec![];
        c.read_to_end(&mut got).unwrap(); // the client's shutdown(SHUT_WR) is the FIN
        assert_exact(&got, &up2, "client → server");
        c.write_all(&down2).unwrap();
        from.port()
    });
    let dst = format!("127.0.0.1:{port}");
    let req = format!("{{\"op\":\"tcp_connect\",\"dst\":\"{dst}\",\"src\":\"127.0.0.1:40000\"}}\n");
    // A's peers listen on B's port.
    let mut s = UnixStream::connect(&sock_a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = addr_b;
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["mode"], "flexpass", "{reply}");
    r.get_mut().write_all(&up).unwrap();
    r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = vec![];
    r.read_to_end(&mut got).unwrap();
    assert_exact(&got, &down, "server → client");
    let loop_port = srv.join().unwrap();
    let (_, peer) = request(
        &sock_b,
        &format!("{{\"op\":\"tcp_peer\",\"port\":{loop_port}}}\n"),
    );
    assert_eq!(peer["peer"], "127.0.0.1:40000", "{peer}");

    // A port B does not serve: the client is told to use kernel TCP.
    let (_, direct) = request(
        &sock_a,
        "{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:1\"}\n",
    );
    assert_eq!(direct["mode"], "direct", "{direct}");
    assert_eq!(direct["peer_has_no_agent"], false, "{direct}");

    // A registered port whose listener is gone: refused, unregistered, kernel TCP.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_, reg) = request(
        &sock_b,
        &format!("{{\"op\":\"tcp_listen\",\"port\":{gone}}}\n"),
    );
    assert_eq!(reg["ok"], true, "{reg}");
    let (_, direct) = request(
        &sock_a,
        &format!("{{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:{gone}\"}}\n"),
    );
    assert_eq!(direct["mode"], "direct", "{direct}");
    let (_, st_b) = request(&sock_b, "{\"op\":\"status\"}\n");
    assert_eq!(st_b["tcp"]["refused"], 2, "{st_b}");
    assert!(
        !st_b["tcp"]["listening"]
            .as_array()
            .unwrap()
            .contains(&gone.into()),
        "{st_b}"
    );

    std::thread::sleep(Duration::from_millis(100));
    let (_, st) = request(&sock_a, "{\"op\":\"status\"}\n");
    assert_eq!(st["tcp"]["opened_flexpass"], 1, "{st}");
    let closed = &st["tcp"]["closed"][0];
    assert_eq!(closed["bytes_sent"], up.len() as u64, "{st}");
    assert_eq!(closed["bytes_received"], down.len() as u64, "{st}");
    assert_eq!(closed["outcome"], "closed", "{st}");
    // The record as the daemon wrote it before it was typed (api::ConnRecord).
    assert_eq!(closed["event"], "tcp_conn", "{st}");
    assert_eq!(closed["side"], "client", "{st}");
    assert_eq!(closed["transport"], "flexpass", "{st}");
    assert_eq!(closed["remote"], dst.as_str(), "{st}");
    assert_eq!(closed["local"], "127.0.0.1:40000", "{st}");
    stop_agents([(stop_a, agent_a), (stop_b, agent_b)], &dir);
}

/// A client that reads after the server has sent everything: the receiving agent holds
/// more than it queues for the local socket at once (its cap, here 16 KiB), and no packet
/// comes any more to start another turn. The agent keeps writing until the socket is full
/// or the flow is drained, so every byte arrives (it stalled when the socket took all it
/// queued: curl through its agent stopped at 37 of 100 MB).
#[test]
fn a_client_that_reads_late_gets_everything_the_agent_holds() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-late-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock_b, addr_b, stop_b, agent_b) = start_agent(&dir, "b.sock", None);
    let (sock_a, _, stop_a, agent_a) = start_agent_with(&dir, "a.sock", Some(addr_b.port()), |d| {
        d.set_max_pending(16 << 10)
    });
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let (_, reg) = request(
        &sock_b,
        &format!("{{\"op\":\"tcp_listen\",\"port\":{port}}}\n"),
    );
    assert_eq!(reg["ok"], true, "{reg}");
    let down: Vec<u8> = (0..4_000_000u32).map(|i| (i * 31 + 7) as u8).collect();
    let down2 = down.clone();
    let srv = std::thread::spawn(move || {
        let (mut c, _) = server.accept().unwrap();
        c.write_all(&down2).unwrap();
    });
    let mut s = UnixStream::connect(&sock_a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:{port}\"}}\n").as_bytes())
        .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("\"mode\":\"flexpass\""), "{line}");
    srv.join().unwrap(); // the server's socket took everything; the flow carries it
                         // Until agent A has received it all (its receiver acknowledged every byte).
    let t0 = std::time::Instant::now();
    loop {
        let (_, st) = request(&sock_b, "{\"op\":\"status\"}\n");
        let acked = st["tcp"]["closed"][0]["outcome"] == "closed"
            || st["tcp"]["conns"].as_array().is_some_and(|o| {
                o.iter()
                    .any(|c| c["sender"]["bytes_acked"].as_u64() == Some(down.len() as u64))
            });
        if acked {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "not acknowledged: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_exact(&read_all(&mut r, down.len()), &down, "server → late client");
    stop_agents([(stop_a, agent_a), (stop_b, agent_b)], &dir);
}

/// A peer without an agent: no HELLO_ACK, so the client is told to use kernel TCP quickly
/// and the verdict is cached.
#[test]
fn tcp_connect_to_a_peer_without_flexpass_falls_back() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-nofp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The "peer" is a UDP port that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (sock, _, stop, agent) =
        start_agent(&dir, "a.sock", Some(silent.local_addr().unwrap().port()));
    let t = std::time::Instant::now();
    let (_, r) = request(&sock, "{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:9\"}\n");
    assert_eq!(r["mode"], "direct", "{r}");
    assert_eq!(r["peer_has_no_agent"], true, "{r}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let (_, r) = request(&sock, "{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:9\"}\n");
    assert!(r["reason"].as_str().unwrap().contains("cached"), "{r}");
    // Cached or not, a "direct" verdict says whether the peer has no agent.
    assert_eq!(r["peer_has_no_agent"], true, "{r}");
    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host without an agent answers the first-contact probe with ICMP port unreachable:
/// fallback without waiting for the HELLO timeout.
#[test]
fn tcp_connect_to_a_closed_agent_port_falls_back_at_once() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-closed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let closed = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (sock, _, stop, agent) = start_agent(&dir, "a.sock", Some(closed));
    let (_, r) = request(&sock, "{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:9\"}\n");
    assert_eq!(r["mode"], "direct", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("agent port is closed"),
        "{r}"
    );
    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One raw exchange: write `bytes`, optionally shut the write side down, read the reply
/// line (empty if the agent closed without one).
fn raw_request(sock: &std::path::Path, bytes: &[u8], shut: bool) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The agent may close before reading everything (line too long): ignore EPIPE.
    let _ = s.write_all(bytes);
    if shut {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line
}

/// Malformed API requests — bad JSON, binary garbage, a huge line, unknown ops, wrong
/// types, a request cut by a half-close, a silent client — each get one error line, and the
/// daemon keeps serving (a status request and a flow afterwards).
#[test]
fn malformed_api_requests_get_an_error_and_the_daemon_keeps_serving() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock, addr, stop, agent) = start_agent(&dir, "bad.sock", None);
    let deep = format!("{}{}\n", "[".repeat(2000), "]".repeat(2000));
    let huge_line = format!("{{\"op\":\"status\",\"x\":\"{}\"}}\n", "a".repeat(10_000));
    let cases: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("not JSON", b"hello agent\n".to_vec(), false, "not JSON"),
        (
            "binary garbage",
            vec![0u8, 0xff, 0xfe, 0x80, 0x10, b'\n'],
            false,
            "not JSON",
        ),
        (
            "non-UTF-8 in a string",
            b"{\"op\":\"\xff\xfe\"}\n".to_vec(),
            false,
            "not JSON",
        ),
        ("nested 2000 deep", deep.into_bytes(), false, "not JSON"),
        ("a line of 10 kB", huge_line.into_bytes(), false, "too long"),
        (
            "64 kB without a newline",
            vec![b'x'; 64 << 10],
            false,
            "too long",
        ),
        (
            "unknown op",
            b"{\"op\":\"format_disk\"}\n".to_vec(),
            false,
            "unknown op",
        ),
        (
            "op not a string",
            b"{\"op\":5}\n".to_vec(),
            false,
            "unknown op",
        ),
        ("not an object", b"[1,2,3]\n".to_vec(), false, "unknown op"),
        ("null", b"null\n".to_vec(), false, "unknown op"),
        ("empty line", b"\n".to_vec(), false, "not JSON"),
        (
            "peer of the wrong type",
            b"{\"op\":\"connect\",\"peer\":7890}\n".to_vec(),
            false,
            "connect needs",
        ),
        (
            "bad transport",
            b"{\"op\":\"connect\",\"peer\":\"127.0.0.1:1\",\"transport\":\"tcp\"}\n".to_vec(),
            false,
            "connect needs",
        ),
        (
            "port out of range",
            b"{\"op\":\"tcp_listen\",\"port\":70000}\n".to_vec(),
            false,
            "tcp_listen needs",
        ),
        (
            "port a string",
            b"{\"op\":\"tcp_listen\",\"port\":\"80\"}\n".to_vec(),
            false,
            "tcp_listen needs",
        ),
        (
            "port negative",
            b"{\"op\":\"tcp_peer\",\"port\":-1}\n".to_vec(),
            false,
            "tcp_peer needs \"port\"",
        ),
        (
            "tcp_connect to IPv6",
            b"{\"op\":\"tcp_connect\",\"dst\":\"[::1]:80\"}\n".to_vec(),
            false,
            "tcp_connect needs",
        ),
        (
            "tcp_connect with bytes before the reply",
            b"{\"op\":\"tcp_connect\",\"dst\":\"127.0.0.1:80\"}\nGET /".to_vec(),
            false,
            "no bytes may follow",
        ),
        (
            "half-closed mid-request",
            b"{\"op\":\"sta".to_vec(),
            true,
            "incomplete request",
        ),
    ];
    for (what, bytes, shut, want) in &cases {
        let line = raw_request(&sock, bytes, *shut);
        let v: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{what}: reply {line:?} is not JSON: {e}"));
        assert_eq!(v["ok"], false, "{what}: {v}");
        let err = v["error"].as_str().unwrap_or_default();
        assert!(err.contains(want), "{what}: {err:?} does not say {want:?}");
    }
    // A client that connects and says nothing, one that connects and goes away, and one
    // that half-closes at once: no reply needed, nothing breaks.
    let idle = UnixStream::connect(&sock).unwrap();
    drop(UnixStream::connect(&sock).unwrap());
    let empty = raw_request(&sock, b"", true);
    assert!(empty.is_empty(), "{empty:?}");
    // Still serving: status (which counts the bad requests), then a whole flow.
    let (_, st) = request(&sock, "{\"op\":\"status\"}\n");
    assert_eq!(st["ok"], true, "{st}");
    assert_eq!(st["api"]["bad_requests"], cases.len() as u64, "{st}");
    assert!(st["memory"]["rss_kb"].as_u64().unwrap() > 0, "{st}");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 3) as u8).collect();
    let sock2 = sock.clone();
    let data2 = data.clone();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let (mut r, ok) = request(
            &sock2,
            &format!("{{\"op\":\"connect\",\"peer\":\"{addr}\",\"transport\":\"dctcp\"}}\n"),
        );
        assert_eq!(ok["ok"], true, "{ok}");
        r.get_mut().write_all(&data2).unwrap();
        r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
        let mut done = String::new();
        r.read_line(&mut done).unwrap();
    });
    let (mut acc, accepted) = request(&sock, "{\"op\":\"accept\"}\n");
    assert_eq!(accepted["ok"], true, "{accepted}");
    let mut got = vec![];
    acc.read_to_end(&mut got).unwrap();
    assert_exact(&got, &data, "flow after the bad requests");
    sender.join().unwrap();
    drop(idle);
    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The API socket is 0600 and checks its peers' credentials: another user (nobody) is
/// refused by the kernel, and — with the file opened up by hand — by the agent itself with
/// an error line; `allow_uids` lets it in. Needs root (to run a client as another user).
#[test]
fn the_api_socket_refuses_other_users() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { nix::libc::geteuid() } != 0 {
        eprintln!("SKIPPED the_api_socket_refuses_other_users: not root (needs a second user)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fp-daemon-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.join("perm.sock");
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.link_bps = 1e9;
    let mut daemon = Daemon::new(Endpoint::bind(cfg).unwrap(), &sock).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    // A client as user nobody (65534): prints the agent's reply or the connect error.
    let as_nobody = |sock: &std::path::Path| -> String {
        let script = "import socket,sys\n\
            s=socket.socket(socket.AF_UNIX)\n\
            try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('connect:', e.strerror); sys.exit(0)\n\
            try:\n s.sendall(b'{\"op\":\"status\"}\\n')\nexcept OSError:\n pass\n\
            print(s.makefile().readline().strip())\n";
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(sock)
            .uid(65534)
            .gid(65534)
            .output()
            .expect("python3");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let run = |mut daemon: Daemon, stop: Arc<AtomicBool>| {
        std::thread::spawn(move || {
            daemon.run(&stop).unwrap();
            daemon
        })
    };
    let h = run(daemon, Arc::clone(&stop));
    let out = as_nobody(&sock);
    assert!(out.contains("connect: Permission denied"), "{out}");
    // Opened by hand: the peer-credential check refuses it with a reason.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody(&sock);
    assert!(out.contains("permission denied: uid 65534"), "{out}");
    // Root (this process) is served.
    let (_, st) = request(&sock, "{\"op\":\"status\"}\n");
    assert_eq!(st["api"]["refused"], 1, "{st}");
    stop.store(true, Ordering::Relaxed);
    daemon = h.join().unwrap();
    daemon
        .set_access(flexpass_agent::daemon::ApiAccess {
            allow_uids: vec![65534],
            allow_gids: vec![],
        })
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let h = run(daemon, Arc::clone(&stop));
    let out = as_nobody(&sock);
    assert!(out.contains("\"ok\":true"), "{out}");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Many API clients at once (docs/agent-api.md, "Scale"): 300 clients send a flow each
/// through one agent, 300 clients accept them on another, every client stays connected
/// until all flows are open (so the agents serve them together), and every flow arrives
/// byte-exact at one acceptor. The daemon's turn only looks at clients epoll reports or
/// whose flow the network touched.
#[test]
fn many_api_clients_at_once_each_flow_byte_exact() {
    const N: usize = 300;
    let dir = std::env::temp_dir().join(format!("fp-daemon-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tx_sock, _, tx_stop, tx_agent) = start_agent(&dir, "tx.sock", None);
    let (rx_sock, rx_addr, rx_stop, rx_agent) = start_agent(&dir, "rx.sock", None);
    let payload = |i: usize| -> Vec<u8> {
        let mut v = (i as u64).to_be_bytes().to_vec();
        v.extend(
            (0..(3000 + i * 97 % 20_000)).map(|k| (k as u32 ^ (i as u32 * 2_654_435_761)) as u8),
        );
        v
    };
    // Acceptors first: each waits in `accept` (its reply comes with a flow).
    let acceptors: Vec<UnixStream> = (0..N)
        .map(|_| {
            let mut s = UnixStream::connect(&rx_sock).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(b"{\"op\":\"accept\"}\n").unwrap();
            s
        })
        .collect();
    // Senders: open every flow and send its first bytes, keep it open, then finish all.
    let mut senders: Vec<BufReader<UnixStream>> = (0..N)
        .map(|i| {
            let (mut r, hello) = request(
                &tx_sock,
                &format!(
                    "{{\"op\":\"connect\",\"peer\":\"{rx_addr}\",\"transport\":\"{}\"}}\n",
                    ["flexpass", "expresspass", "dctcp"][i % 3]
                ),
            );
            assert_eq!(hello["ok"], true, "{hello}");
            r.get_mut().write_all(&payload(i)[..8]).unwrap();
            r
        })
        .collect();
    let readers: Vec<_> = acceptors
        .into_iter()
        .map(|s| {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                assert_eq!(v["ok"], true, "{v}");
                let mut got = vec![];
                r.read_to_end(&mut got).unwrap();
                got
            })
        })
        .collect();
    for (i, s) in senders.iter_mut().enumerate() {
        s.get_mut().write_all(&payload(i)[8..]).unwrap();
        s.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
    }
    for s in &mut senders {
        let mut done = String::new();
        s.read_line(&mut done).unwrap();
        let v: serde_json::Value = serde_json::from_str(&done).unwrap();
        assert_eq!(v["event"], "flow_sent", "{v}");
    }
    let mut seen = vec![false; N];
    for h in readers {
        let got = h.join().unwrap();
        let i = u64::from_be_bytes(got[..8].try_into().unwrap()) as usize;
        assert!(i < N && !seen[i], "flow {i} twice or unknown");
        seen[i] = true;
        assert_exact(&got, &payload(i), &format!("flow {i}"));
    }
    tx_stop.store(true, Ordering::Relaxed);
    rx_stop.store(true, Ordering::Relaxed);
    let tx = tx_agent.join().unwrap();
    rx_agent.join().unwrap();
    assert_eq!(
        tx.endpoint().flows().0,
        0,
        "senders closed once acknowledged"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_idle_agent_sleeps_between_events_and_still_answers_at_once() {
    // With no client, connection or flow, the loop waits for its sockets (a turn every
    // 20 ms at most), not a turn every 200 µs: 5 000 wake-ups a second cost an idle agent
    // a tenth of a core. A request still gets its answer (here in ~0.4 ms: the listener's
    // socket wakes the loop).
    let dir = std::env::temp_dir().join(format!("fp-daemon-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sock, _, stop, h) = start_agent(&dir, "idle.sock", None);
    std::thread::sleep(Duration::from_millis(400));
    let t = std::time::Instant::now();
    let (_, v) = request(&sock, "{\"op\":\"status\"}\n");
    let answered = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    let daemon = h.join().unwrap();
    let turns = daemon.endpoint().stats.recv_calls;
    eprintln!("idle agent: {turns} turns in 0.4 s, stats answered in {answered:?}: {v}");
    assert!(turns < 100, "{turns} loop turns in 0.4 s idle");
    assert_eq!(v["ok"], true, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

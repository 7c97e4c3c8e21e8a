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
        let sock2 = sock.clone();
        let data2 = data.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let (mut r, hello) = request(
                &sock2,
                &format!("{{\"op\":\"connect\",\"peer\":\"{addr}\",\"transport\":\"flexpass\"}}\n"),
            );
            assert_eq!(hello["ok"], true, "{hello}");
            r.get_mut().write_all(&data2).unwrap();
            r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
            let mut done = String::new();
            r.read_line(&mut done).unwrap();
            serde_json::from_str::<serde_json::Value>(&done).unwrap()
        });
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

//! libflexpass.so in real processes, without root: two agents in this process (loopback
//! UDP), Python programs with the library preloaded (policy `loopback` lets a single host
//! carry its own loopback connections over FlexPass), and the pass-through when no agent
//! runs. The network-namespace tests (host-agent/netns-tests/test_preload.py) run the real
//! Debian programs between two hosts.

use flexpass_agent::daemon::Daemon;
use flexpass_agent::{Endpoint, EndpointConfig};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The cdylib (target/<profile>/libflexpass.so). `cargo test` links no cdylib into tests,
/// so it is (re)built here first: a no-op when it is up to date.
fn library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "-q", "-p", "flexpass-preload"]);
    if deps.parent()?.file_name()? == "release" {
        build.arg("--release");
    }
    if !build.status().is_ok_and(|s| s.success()) {
        return None;
    }
    [
        deps.join("libflexpass.so"),
        deps.parent()?.join("libflexpass.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("-c")
            .arg("pass")
            .status()
            .is_ok_and(|s| s.success())
    })
}

struct Agent {
    sock: PathBuf,
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    fn start(dir: &Path, name: &str, peer_port: Option<u16>) -> Agent {
        Agent::start_with(dir, name, peer_port, false)
    }

    /// `inproc`: the agent hands connections to in-process listeners (`--inproc-listen`).
    fn start_with(dir: &Path, name: &str, peer_port: Option<u16>, inproc: bool) -> Agent {
        let sock = dir.join(name);
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.link_bps = 1e9;
        let ep = Endpoint::bind(cfg).unwrap();
        let port = ep.local_addr().unwrap().port();
        let mut d = Daemon::new(ep, &sock).unwrap();
        if let Some(p) = peer_port {
            d.set_peer_port(p);
        }
        d.set_inproc_listen(inproc);
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let thread = Some(std::thread::spawn(move || d.run(&s2).unwrap()));
        Agent {
            sock,
            port,
            stop,
            thread,
        }
    }

    fn status(&self) -> serde_json::Value {
        let mut s = UnixStream::connect(&self.sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"{\"op\":\"status\"}\n").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const SERVER: &str = r#"
import hashlib, socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 0)); l.listen()
print(l.getsockname()[1], flush=True)
c, peer = l.accept()
h = hashlib.sha256(); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    h.update(d); n += len(d)
c.sendall(f"{peer[0]}:{peer[1]} {c.getpeername()[0]}:{c.getpeername()[1]} {n} {h.hexdigest()}".encode())
c.close()
"#;

const CLIENT: &str = r#"
import hashlib, socket, sys
data = bytes((i * 7 + 3) % 256 for i in range(1_000_000))
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
me, peer = s.getsockname(), s.getpeername()
s.sendall(data); s.shutdown(socket.SHUT_WR)
reply = s.makefile("rb").read().decode()
print(f"{me[0]}:{me[1]} {peer[0]}:{peer[1]} {len(data)} {hashlib.sha256(data).hexdigest()} | {reply}")
"#;

fn preloaded(py: &str, lib: &Path, agent: &Path, policy: &str, script: &str) -> Command {
    let mut c = Command::new(py);
    c.arg("-c")
        .arg(script)
        .env("LD_PRELOAD", lib)
        .env("FLEXPASS_AGENT_SOCKET", agent)
        .env("FLEXPASS_POLICY", policy)
        .env_remove("FLEXPASS_LOG");
    c
}

/// Start the server (`srv`, printing its port first), run the client against that port
/// (`cli`), and check both exited well. Returns the client's line, split (client: me peer
/// n sha | server: accept-peer getpeername n sha), and its stderr.
fn exchange(mut srv: Command, mut cli: Command) -> (Vec<String>, String) {
    let mut srv = srv.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    let mut port = String::new();
    out.read_line(&mut port).unwrap();
    let cli = cli.arg(port.trim()).output().unwrap();
    let err = String::from_utf8_lossy(&cli.stderr).into_owned();
    assert!(cli.status.success(), "{err}");
    assert!(srv.wait().unwrap().success());
    let line = String::from_utf8(cli.stdout).unwrap();
    let f: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert_eq!(f.len(), 9, "{line}");
    assert_eq!(f[1], format!("127.0.0.1:{}", port.trim()), "{line}");
    (f, err)
}

#[test]
fn preloaded_programs_talk_over_flexpass_through_two_agents() {
    let (Some(lib), Some(py)) = (library(), python()) else {
        eprintln!("SKIPPED: libflexpass.so or python3 not found");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fp-preload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = Agent::start(&dir, "b.sock", None);
    let a = Agent::start(&dir, "a.sock", Some(b.port));
    let (f, _) = exchange(
        preloaded(py, &lib, &b.sock, "loopback", SERVER),
        preloaded(py, &lib, &a.sock, "loopback", CLIENT),
    );
    // The server saw the client's own address (not the agent's 127.0.0.2 connection).
    assert_eq!((&f[5], &f[6]), (&f[0], &f[0]), "{f:?}");
    assert_eq!((&f[2], &f[3]), (&f[7], &f[8]), "bytes exact: {f:?}");
    let st = a.status();
    assert_eq!(st["tcp"]["opened_flexpass"], 1, "{st}");
    assert_eq!(b.status()["tcp"]["accepted_flexpass"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The transport in the programs' processes (docs/datapath.md, "Next step: the core in
/// the application's process"). `open`: the client opens in-process too (FLEXPASS_INPROC=1),
/// else through its agent (FLEXPASS_INPROC=listen). The server process takes the
/// connection from its agent (`tcp_hello`) and runs the flows on its own UDP socket; the
/// opener follows its HELLO_ACK there. Bytes exact both ways, the addresses the programs
/// see are the programs' own.
fn in_process(open: bool) {
    let (Some(lib), Some(py)) = (library(), python()) else {
        eprintln!("SKIPPED: libflexpass.so or python3 not found");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fp-preload-inproc-{}-{open}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = Agent::start_with(&dir, "b.sock", None, true);
    let a = Agent::start(&dir, "a.sock", Some(b.port));
    let mut srv = preloaded(py, &lib, &b.sock, "loopback", SERVER);
    srv.env("FLEXPASS_INPROC", "listen");
    let mut cli = preloaded(py, &lib, &a.sock, "loopback", CLIENT);
    cli.env("FLEXPASS_INPROC", if open { "1" } else { "listen" })
        .env("FLEXPASS_PEER_PORT", b.port.to_string());
    let (f, _) = exchange(srv, cli);
    assert_eq!(
        (&f[5], &f[6]),
        (&f[0], &f[0]),
        "the server sees the client: {f:?}"
    );
    assert_eq!((&f[2], &f[3]), (&f[7], &f[8]), "bytes exact: {f:?}");
    let (sa, sb) = (a.status(), b.status());
    // The answering agent handed the flow over instead of accepting it.
    assert_eq!(sb["endpoint"]["handed_over"], 1, "{sb}");
    assert_eq!(sb["tcp"]["accepted_flexpass"], 0, "{sb}");
    if open {
        // The opening agent carried nothing: the client process did.
        assert_eq!(sa["tcp"]["opened_flexpass"], 0, "{sa}");
        assert_eq!(sa["endpoint"]["datagrams_out"], 0, "{sa}");
    } else {
        // The opening agent moved its flow to the process's socket.
        assert_eq!(sa["tcp"]["opened_flexpass"], 1, "{sa}");
        assert_eq!(sa["endpoint"]["peer_moved"], 1, "{sa}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_in_process_listener_serves_the_connection_on_its_own_socket() {
    in_process(false);
}

#[test]
fn both_programs_run_the_connection_in_their_own_processes() {
    in_process(true);
}

/// FLEXPASS_INPROC=1 towards a port nobody serves over FlexPass (the peer's agent answers
/// RESET): kernel TCP, said once.
#[test]
fn an_in_process_opener_falls_back_to_kernel_tcp() {
    let (Some(lib), Some(py)) = (library(), python()) else {
        eprintln!("SKIPPED: libflexpass.so or python3 not found");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fp-preload-inproc-fb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = Agent::start(&dir, "b.sock", None);
    let mut srv = Command::new(py);
    srv.arg("-c").arg(SERVER);
    let mut cli = preloaded(py, &lib, &b.sock, "loopback", CLIENT);
    cli.env("FLEXPASS_INPROC", "1")
        .env("FLEXPASS_PEER_PORT", b.port.to_string());
    let (f, err) = exchange(srv, cli);
    assert_eq!(err.matches("kernel TCP").count(), 1, "{err}");
    assert!(err.contains("does not serve the port"), "{err}");
    assert_eq!(
        (&f[2], &f[3]),
        (&f[7], &f[8]),
        "bytes exact over kernel TCP: {f:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_an_agent_the_library_passes_through_and_says_so_once() {
    let (Some(lib), Some(py)) = (library(), python()) else {
        eprintln!("SKIPPED: libflexpass.so or python3 not found");
        return;
    };
    let mut srv = Command::new(py)
        .arg("-c")
        .arg(SERVER)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    let mut port = String::new();
    out.read_line(&mut port).unwrap();
    // Two connections in one process: one "agent not running" line.
    let script = format!("{CLIENT}\ntry:\n    socket.create_connection(('127.0.0.1', 1), timeout=5)\nexcept OSError:\n    pass\n");
    let cli = preloaded(
        py,
        &lib,
        Path::new("/nonexistent/agent.sock"),
        "loopback",
        &script,
    )
    .arg(port.trim())
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&cli.stderr);
    assert!(cli.status.success(), "{err}");
    assert!(srv.wait().unwrap().success());
    assert_eq!(err.matches("agent not running").count(), 1, "{err}");
    let line = String::from_utf8(cli.stdout).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (f[2], f[3]),
        (f[7], f[8]),
        "bytes exact over kernel TCP: {line}"
    );
}

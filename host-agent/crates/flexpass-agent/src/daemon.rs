//! The agent daemon: one process per host serving every flow of the host's applications
//! through a local Unix-socket API, so programs send and receive bytes over FlexPass,
//! ExpressPass or DCTCP without knowing the wire format (docs/agent-api.md).
//!
//! Each API connection carries one flow:
//! - `{"op":"connect","peer":"10.0.0.2:7890","transport":"flexpass"}` → `{"ok":true,"flow_id":N}`;
//!   then the client writes the flow's bytes and shuts its write side down (FIN); the agent
//!   answers one JSON line with the flow record when everything is acknowledged, and closes.
//! - `{"op":"accept"}` → `{"ok":true,"flow_id":N,"peer":"…","transport":"…"}` once a flow
//!   arrives, then the flow's bytes; the agent closes the connection after the FIN.
//!
//! Errors are one JSON line `{"ok":false,"error":"…"}` followed by close.

use crate::{Endpoint, FlowKey};
use bytes::Bytes;
use flexpass_wire::TransportKind;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Unacknowledged bytes a sending client may have queued in its flow.
const SEND_WINDOW: u64 = 8 << 20;
/// Received bytes held for a client that reads slower than the network delivers.
const MAX_PENDING_OUT: usize = 64 << 20;

enum Role {
    /// Waiting for the request line.
    Handshake(Vec<u8>),
    Sending {
        key: FlowKey,
        started: Instant,
        eof: bool,
    },
    Accepting,
    Receiving {
        key: FlowKey,
        out: VecDeque<Bytes>,
        out_bytes: usize,
    },
    /// Answer (or error) queued; close once written.
    Closing,
}

struct Client {
    stream: UnixStream,
    role: Role,
    reply: Vec<u8>,
}

pub struct Daemon {
    ep: Endpoint,
    listener: UnixListener,
    clients: Vec<Client>,
    /// Accepted network flows no client has claimed yet.
    unclaimed: VecDeque<FlowKey>,
}

fn json_line(v: serde_json::Value) -> Vec<u8> {
    let mut b = v.to_string().into_bytes();
    b.push(b'\n');
    b
}

fn err_line(msg: impl std::fmt::Display) -> Vec<u8> {
    json_line(serde_json::json!({"ok": false, "error": msg.to_string()}))
}

fn parse_transport(s: &str) -> Option<TransportKind> {
    match s {
        "flexpass" => Some(TransportKind::FlexPass),
        "expresspass" => Some(TransportKind::ExpressPass),
        "dctcp" => Some(TransportKind::Dctcp),
        _ => None,
    }
}

impl Daemon {
    /// Serve the API on `socket` (removed first if it is a stale socket file).
    pub fn new(ep: Endpoint, socket: &Path) -> io::Result<Self> {
        if socket.exists() {
            std::fs::remove_file(socket)?;
        }
        let listener = UnixListener::bind(socket)?;
        listener.set_nonblocking(true)?;
        Ok(Daemon {
            ep,
            listener,
            clients: vec![],
            unclaimed: VecDeque::new(),
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Run until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            self.turn(Duration::from_micros(200))?;
        }
        Ok(())
    }

    /// One turn: accept API connections, move bytes between clients and flows, run the
    /// network for at most `wait`.
    pub fn turn(&mut self, wait: Duration) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true)?;
                    self.clients.push(Client {
                        stream,
                        role: Role::Handshake(vec![]),
                        reply: vec![],
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        while let Some(k) = self.ep.accept() {
            self.unclaimed.push_back(k);
        }
        let mut i = 0;
        while i < self.clients.len() {
            if self.service(i) {
                i += 1;
            } else {
                let c = self.clients.swap_remove(i);
                self.release(c);
            }
        }
        self.ep.poll(wait)
    }

    /// Forget the network side of a client that went away.
    fn release(&mut self, c: Client) {
        match c.role {
            Role::Sending { key, .. } => {
                self.ep.close_sender(key);
            }
            Role::Receiving { key, .. } => {
                self.ep.retire_receiver(key);
            }
            _ => {}
        }
    }

    /// Returns false when the client is done and must be dropped.
    fn service(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 64 << 10];
        let c = &mut self.clients[i];
        // Flush what we owe the client first.
        while !c.reply.is_empty() {
            match c.stream.write(&c.reply) {
                Ok(0) => return false,
                Ok(n) => {
                    c.reply.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        match &mut c.role {
            Role::Closing => false,
            Role::Handshake(line) => {
                match c.stream.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(n) => line.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                    Err(_) => return false,
                }
                let Some(pos) = line.iter().position(|&b| b == b'\n') else {
                    if line.len() > 4096 {
                        c.reply = err_line("request line too long");
                        c.role = Role::Closing;
                    }
                    return true;
                };
                let rest = line.split_off(pos + 1);
                let req = std::mem::take(line);
                self.request(i, &req, rest);
                true
            }
            Role::Accepting => {
                if let Some(key) = self.unclaimed.pop_front() {
                    let transport = self
                        .ep
                        .receiver(key)
                        .map(|r| format!("{:?}", r.transport()).to_lowercase());
                    let c = &mut self.clients[i];
                    c.reply = json_line(
                        serde_json::json!({"ok": true, "flow_id": key.1, "peer": key.0.to_string(), "transport": transport}),
                    );
                    c.role = Role::Receiving {
                        key,
                        out: VecDeque::new(),
                        out_bytes: 0,
                    };
                }
                // A client that hangs up while waiting is simply dropped.
                !matches!(self.clients[i].stream.read(&mut buf), Ok(0))
            }
            Role::Sending { key, started, eof } => {
                let key = *key;
                let Some(s) = self.ep.sender_mut(key) else {
                    return false;
                };
                while !*eof && s.unacked_bytes() < SEND_WINDOW {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            *eof = true;
                            s.finish();
                        }
                        Ok(n) => {
                            s.write(Bytes::copy_from_slice(&buf[..n]));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => return false,
                    }
                }
                if let Some(e) = s.error() {
                    c.reply = err_line(e);
                    c.role = Role::Closing;
                } else if s.is_complete() {
                    let st = s.stats();
                    c.reply = json_line(
                        serde_json::json!({"ok": true, "event": "flow_sent", "flow_id": key.1,
                        "bytes": st.bytes_acked, "fct_us": started.elapsed().as_secs_f64() * 1e6,
                        "retransmissions": st.retransmissions, "timeouts": st.timeouts,
                        "credits_received": st.credits_received, "credits_wasted": st.credits_wasted}),
                    );
                    c.role = Role::Closing;
                    self.ep.close_sender(key);
                }
                true
            }
            Role::Receiving {
                key,
                out,
                out_bytes,
            } => {
                let key = *key;
                let Some(r) = self.ep.receiver_mut(key) else {
                    return false;
                };
                while *out_bytes < MAX_PENDING_OUT {
                    match r.read() {
                        Some(b) => {
                            *out_bytes += b.len();
                            out.push_back(b);
                        }
                        None => break,
                    }
                }
                while let Some(front) = out.front_mut() {
                    match c.stream.write(front) {
                        Ok(0) => return false,
                        Ok(n) if n == front.len() => {
                            *out_bytes -= n;
                            out.pop_front();
                        }
                        Ok(n) => {
                            *out_bytes -= n;
                            let _ = front.split_to(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                        Err(_) => return false,
                    }
                }
                // Everything up to the FIN delivered and written: close (EOF for the client).
                !r.is_finished()
            }
        }
    }

    fn request(&mut self, i: usize, line: &[u8], rest: Vec<u8>) {
        let c = &mut self.clients[i];
        let req: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                c.reply = err_line(format!("request is not JSON: {e}"));
                c.role = Role::Closing;
                return;
            }
        };
        match req.get("op").and_then(|v| v.as_str()) {
            Some("accept") => c.role = Role::Accepting,
            Some("connect") => {
                let peer = req
                    .get("peer")
                    .and_then(|v| v.as_str())
                    .and_then(|p| p.parse().ok());
                let transport = req
                    .get("transport")
                    .and_then(|v| v.as_str())
                    .unwrap_or("flexpass");
                let (Some(peer), Some(t)) = (peer, parse_transport(transport)) else {
                    c.reply = err_line("connect needs \"peer\": \"IP:PORT\" and \"transport\": flexpass | expresspass | dctcp");
                    c.role = Role::Closing;
                    return;
                };
                let size = req.get("size").and_then(|v| v.as_u64()).unwrap_or(0);
                match self.ep.open(peer, t, size) {
                    Ok(key) => {
                        if !rest.is_empty() {
                            self.ep.write(key, Bytes::from(rest));
                        }
                        let c = &mut self.clients[i];
                        c.reply = json_line(serde_json::json!({"ok": true, "flow_id": key.1}));
                        c.role = Role::Sending {
                            key,
                            started: Instant::now(),
                            eof: false,
                        };
                    }
                    Err(e) => {
                        let c = &mut self.clients[i];
                        c.reply = err_line(e);
                        c.role = Role::Closing;
                    }
                }
            }
            other => {
                c.reply = err_line(format!(
                    "unknown op {other:?}: use \"connect\" or \"accept\""
                ));
                c.role = Role::Closing;
            }
        }
    }
}

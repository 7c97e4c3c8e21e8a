//! The opening side in the application's process (FLEXPASS_INPROC=1): `connect()` to a
//! policy destination sends the open flow's HELLO from the connection's own UDP socket
//! pair to the peer host's agent (FLEXPASS_PEER_PORT, default 7890), follows the
//! HELLO_ACK to whichever port of that address it came from (flexpass_core::peer: the
//! peer's agent, or the serving process), and makes the reply flow's `Receiver` from the
//! reply HELLO. Then the socket is dup3'd onto the application's fd. A RESET, a refusal
//! or no answer: kernel TCP on the application's own socket, as through the agent
//! (the peer is then reached directly for a while, per process).

use super::conn::{Conn, Locked, SOCKET_BUFFER};
use super::listen::{configs, new_flow_id, route_to};
use super::{insert, now, sys, timer, Shared};
use flexpass_core::{Nanos, Sender, SenderError};
use flexpass_wire::{ConnRole, HelloConn, TransportKind};
use libc::c_int;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex, OnceLock};

/// How long connect() waits for HELLO_ACK and the reply flow's HELLO.
const OPEN_WAIT: Nanos = 3_000_000_000;
/// A peer that did not answer (no agent): kernel TCP without asking for this long.
const NO_AGENT_TTL: Nanos = 60_000_000_000;
/// A port the peer does not serve over FlexPass (RESET, refused): kernel TCP for this long.
const NO_SERVICE_TTL: Nanos = 5_000_000_000;

/// Peers reached by kernel TCP until a time: (address, port or 0 for every port).
fn direct() -> &'static Mutex<HashMap<(Ipv4Addr, u16), Nanos>> {
    static D: OnceLock<Mutex<HashMap<(Ipv4Addr, u16), Nanos>>> = OnceLock::new();
    D.get_or_init(Default::default)
}

fn cached_direct(dst: SocketAddrV4, now: Nanos) -> bool {
    let Ok(mut d) = direct().lock() else {
        return false;
    };
    d.retain(|_, until| *until > now);
    d.contains_key(&(*dst.ip(), 0)) || d.contains_key(&(*dst.ip(), dst.port()))
}

fn peer_port() -> u16 {
    std::env::var("FLEXPASS_PEER_PORT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(7890)
}

fn transport() -> TransportKind {
    let name = crate::config().transport;
    TransportKind::ALL
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or(TransportKind::FlexPass)
}

pub enum Opened {
    /// The application's fd is now the connection.
    FlexPass,
    /// Kernel TCP, and why.
    Direct(&'static str),
}

/// Open the connection from `fd` (the application's TCP socket) to `dst` in-process.
pub fn connect(fd: c_int, dst: SocketAddrV4, v6: bool) -> Opened {
    let start = now();
    if cached_direct(dst, start) {
        return Opened::Direct("reached directly (cached)");
    }
    let Some((ip, mtu)) = route_to(dst) else {
        return Opened::Direct("no route");
    };
    let Some((own, ctl, local)) = sys::socket_pair(ip, SOCKET_BUFFER) else {
        return Opened::Direct("no UDP port");
    };
    let t = transport();
    let (rcfg, scfg) = configs(t, mtu);
    let id = new_flow_id();
    let Ok(mut tx) = Sender::new(id, scfg, 0, start) else {
        sys::close(own);
        sys::close(ctl);
        return Opened::Direct("no sender");
    };
    tx.set_conn(HelloConn {
        conn_id: id,
        src_port: local.port(),
        dst_port: dst.port(),
        role: ConnRole::Open,
    });
    let hello_to = SocketAddrV4::new(*dst.ip(), peer_port());
    let mut conn = Conn::new((own, ctl), hello_to, local, dst, local, v6, None, tx, None);
    conn.reply_rx = Some((id, rcfg));
    conn.hello_to = Some(hello_to);
    let c: Shared = Arc::new(Locked::new(conn));
    match handshake(&c, start) {
        Ok(()) => {}
        Err((reason, ttl)) => {
            sys::close(own);
            sys::close(ctl);
            if let Ok(mut d) = direct().lock() {
                let port = if ttl == NO_AGENT_TTL { 0 } else { dst.port() };
                d.insert((*dst.ip(), port), now() + ttl);
            }
            return Opened::Direct(reason);
        }
    }
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        let fdfl = libc::fcntl(fd, libc::F_GETFD);
        let cloexec = fdfl >= 0 && fdfl & libc::FD_CLOEXEC != 0;
        if libc::dup3(own, fd, if cloexec { libc::O_CLOEXEC } else { 0 }) < 0 {
            sys::close(own);
            sys::close(ctl);
            return Opened::Direct("dup3 failed");
        }
        // O_NONBLOCK of the application's socket, on the connection's open file.
        let now_fl = libc::fcntl(fd, libc::F_GETFL);
        let nb = fl >= 0 && fl & libc::O_NONBLOCK != 0;
        libc::fcntl(
            fd,
            libc::F_SETFL,
            if nb {
                now_fl | libc::O_NONBLOCK
            } else {
                now_fl & !libc::O_NONBLOCK
            },
        );
    }
    insert(fd, Arc::clone(&c));
    timer::add(c);
    Opened::FlexPass
}

/// HELLO out, until the HELLO_ACK and the reply flow's HELLO came, or why not.
fn handshake(c: &Shared, start: Nanos) -> Result<(), (&'static str, Nanos)> {
    loop {
        let (ctl, wait) = {
            let mut g = c.lock().map_err(|_| ("lock", NO_SERVICE_TTL))?;
            let now = now();
            g.drain(now);
            g.flush(now);
            // An ICMP error would keep `ctl` reporting POLLERR (the wait below): read here.
            if g.hello_refused() {
                return Err(match g.hello_to {
                    Some(_) => ("peer does not speak FlexPass", NO_AGENT_TTL),
                    None => ("peer does not serve the port over FlexPass", NO_SERVICE_TTL),
                });
            }
            match g.tx.error() {
                Some(SenderError::PeerNotResponding) => {
                    return Err(("peer does not speak FlexPass", NO_AGENT_TTL))
                }
                Some(SenderError::UnsupportedTransport) => {
                    return Err(("peer does not support the transport", NO_SERVICE_TTL))
                }
                Some(_) => {
                    return Err(("peer does not serve the port over FlexPass", NO_SERVICE_TTL))
                }
                None => {}
            }
            if g.tx.is_established() && g.rx.is_some() {
                return Ok(());
            }
            if now.saturating_sub(start) > OPEN_WAIT {
                let e = if g.tx.is_established() {
                    ("no reply flow from the peer", NO_SERVICE_TTL)
                } else {
                    ("peer does not speak FlexPass", NO_AGENT_TTL)
                };
                return Err(e);
            }
            let until = g
                .deadline()
                .unwrap_or(now + 10_000_000)
                .min(start + OPEN_WAIT + 1);
            (g.ctl, until.saturating_sub(now).clamp(1, 10_000_000))
        };
        sys::wait(ctl, libc::POLLIN, wait);
    }
}

//! TCP connections carried over FlexPass for unmodified applications (libflexpass.so,
//! `flexpass run`; README "Unmodified applications").
//!
//! A connection is two flows, one per direction, tied by the HELLO connection extension
//! (docs/protocol.md §6.6). On the opening host the application's socket is an AF_UNIX
//! stream connected to the agent (the library put it in place of the TCP socket); on the
//! answering host it is a kernel TCP connection from the agent to the application's own
//! listening socket over loopback. Either way the agent moves bytes between that local
//! socket and the two flows: local bytes are written into the outgoing flow (EOF = FIN),
//! the incoming flow's bytes are written to the local socket (its FIN = shutdown(SHUT_WR)).

pub use crate::api::Side;

use crate::api::ConnRecord;
use crate::{Endpoint, FlowKey};
use bytes::Bytes;
use flexpass_wire::{ResetReason, TransportKind};
use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Unacknowledged bytes the agent takes from a local socket into a flow (back-pressure:
/// beyond it the application's writes block in its socket buffer).
pub const CONN_SEND_WINDOW: u64 = 4 << 20;
/// Received bytes the agent queues for a local socket at once; the flow's receiver keeps
/// the rest until the socket takes these (it advertises no window: a local socket that
/// reads slower than the network leaves its bytes in the agent).
pub const CONN_MAX_PENDING: usize = 16 << 20;
/// Chunks written to a local socket per writev(2).
const IOV: usize = 64;

/// The application's side of a connection.
pub enum Local {
    /// Opening host: the AF_UNIX stream the library put in place of the TCP socket.
    Unix(UnixStream),
    /// Answering host: the agent's loopback TCP connection to the application's listener.
    Tcp(TcpStream),
}

impl Local {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Local::Unix(s) => s.read(buf),
            Local::Tcp(s) => s.read(buf),
        }
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Local::Unix(s) => s.write(buf),
            Local::Tcp(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Local::Unix(s) => s.write_vectored(bufs),
            Local::Tcp(s) => s.write_vectored(bufs),
        }
    }
    fn shutdown_write(&self) {
        let _ = match self {
            Local::Unix(s) => s.shutdown(Shutdown::Write),
            Local::Tcp(s) => s.shutdown(Shutdown::Write),
        };
    }
    /// An aborted connection: closing the loopback TCP leg then sends RST, so the
    /// application's next read or write fails (ECONNRESET) instead of meeting an orderly
    /// end of stream, as with kernel TCP reset by its peer. (An AF_UNIX stream has no
    /// reset: the application sees end of stream, or ECONNRESET if bytes it wrote were
    /// still unread.)
    pub fn reset_on_close(&self) {
        if let Local::Tcp(s) = self {
            let l = nix::libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            let _ = nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::Linger, &l);
        }
    }
    pub fn raw_fd(&self) -> RawFd {
        match self {
            Local::Unix(s) => s.as_raw_fd(),
            Local::Tcp(s) => s.as_raw_fd(),
        }
    }
}

/// What became of a connection this turn.
pub enum Step {
    Keep,
    /// Both directions finished: close and record.
    Done,
    /// Aborted (reset by the peer, the application went away, the peer stopped answering).
    Aborted(String),
}

pub struct Conn {
    pub side: Side,
    pub local: Local,
    /// The remote application's address (its host, its port as it sees it).
    pub remote: SocketAddr,
    /// This side's application-visible address.
    pub local_addr: SocketAddr,
    /// The peer agent's UDP address.
    pub udp_peer: SocketAddr,
    pub conn_id: u32,
    pub transport: TransportKind,
    pub out_key: Option<FlowKey>,
    pub in_key: Option<FlowKey>,
    /// Client side, until the verdict: when the open flow started.
    pub opening: Option<Instant>,
    /// Client side, first contact with a peer: a connected UDP socket to the peer's agent
    /// port that sent one empty datagram. A host without an agent answers ICMP port
    /// unreachable, which this socket reports as ECONNREFUSED: fallback in one round trip
    /// instead of the HELLO timeout (an agent drops the datagram as malformed).
    pub probe: Option<UdpSocket>,
    /// Bytes for the local socket before any flow data (the client's reply line).
    pub line: Vec<u8>,
    /// Close once `line` is written (a "direct" verdict).
    pub close_after_line: bool,
    pub local_eof: bool,
    /// The local socket may hold bytes to read: set when the connection starts and when
    /// epoll reports it readable, cleared by a read that found it drained (a short read
    /// or EAGAIN). Turns caused by the network (ACKs, credits, data) then cost no read(2)
    /// that can only fail; level-triggered epoll reports later bytes.
    pub local_readable: bool,
    out: VecDeque<Bytes>,
    out_bytes: usize,
    wr_shut: bool,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub started: Instant,
    /// Answering side: the agent's loopback source port (the application's getpeername).
    pub loop_port: Option<u16>,
    /// Answering side, until the loopback connect completes.
    pub connecting: Option<Connecting>,
}

impl Conn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        side: Side,
        local: Local,
        remote: SocketAddr,
        local_addr: SocketAddr,
        udp_peer: SocketAddr,
        conn_id: u32,
        transport: TransportKind,
    ) -> Conn {
        Conn {
            side,
            local,
            remote,
            local_addr,
            udp_peer,
            conn_id,
            transport,
            out_key: None,
            in_key: None,
            opening: None,
            probe: None,
            line: Vec::new(),
            close_after_line: false,
            local_eof: false,
            local_readable: true,
            out: VecDeque::new(),
            out_bytes: 0,
            wr_shut: false,
            bytes_sent: 0,
            bytes_received: 0,
            started: Instant::now(),
            loop_port: None,
            connecting: None,
        }
    }

    /// The state of the local socket's non-blocking connect (answering side).
    pub fn connect_state(&self) -> ConnectState {
        let Local::Tcp(s) = &self.local else {
            return ConnectState::Connected;
        };
        match s.take_error() {
            Ok(Some(e)) | Err(e) => return ConnectState::Failed(e),
            Ok(None) => {}
        }
        match s.peer_addr() {
            Ok(_) => ConnectState::Connected,
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOTCONN) => ConnectState::InProgress,
            Err(e) => ConnectState::Failed(e),
        }
    }

    /// poll(2) events this connection waits for (0: none; the network wakes it otherwise).
    pub fn wake_events(&self, ep: &Endpoint) -> i16 {
        if self.connecting.is_some() {
            return nix::libc::POLLOUT;
        }
        let mut ev = 0;
        if !self.line.is_empty() || !self.out.is_empty() {
            ev |= nix::libc::POLLOUT;
        }
        if self.opening.is_none()
            && !self.close_after_line
            && !self.local_eof
            && self
                .out_key
                .and_then(|k| ep.sender(k))
                .is_some_and(|s| s.unacked_bytes() < CONN_SEND_WINDOW)
        {
            ev |= nix::libc::POLLIN;
        }
        ev
    }

    /// Start the first-contact probe (see `probe`).
    pub fn start_probe(&mut self) {
        let any: SocketAddr = "0.0.0.0:0".parse().expect("address");
        self.probe = UdpSocket::bind(any)
            .and_then(|u| {
                u.connect(self.udp_peer)?;
                u.set_nonblocking(true)?;
                u.send(&[])?;
                Ok(u)
            })
            .ok();
    }

    /// The probe learned that nothing listens on the peer's agent port.
    pub fn probe_refused(&mut self) -> bool {
        let Some(u) = &self.probe else { return false };
        let mut b = [0u8; 1];
        match u.recv(&mut b) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.probe = None;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            // Anything else (even an answer): no conclusion from the probe.
            _ => {
                self.probe = None;
                false
            }
        }
    }

    /// Write the pending reply line; false if the local socket is gone.
    fn flush_line(&mut self) -> io::Result<bool> {
        while !self.line.is_empty() {
            match self.local.write(&self.line) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.line.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Move bytes both ways once the connection is open; at most `max_pending` received
    /// bytes queued for the local socket (CONN_MAX_PENDING by default).
    pub fn pump(&mut self, ep: &mut Endpoint, buf: &mut [u8], max_pending: usize) -> Step {
        match self.flush_line() {
            Ok(true) => {}
            Ok(false) => return Step::Keep,
            Err(e) => return Step::Aborted(format!("local socket: {e}")),
        }
        if self.close_after_line {
            return Step::Done;
        }
        if self.opening.is_some() || self.connecting.is_some() {
            return Step::Keep;
        }
        // Local → outgoing flow.
        if let Some(s) = self.out_key.and_then(|k| ep.sender_mut(k)) {
            // A RESET after everything was acknowledged is only the peer having forgotten
            // the finished flow (its answer to a late packet): not an abort.
            if let (Some(e), false) = (s.error(), s.is_complete()) {
                return Step::Aborted(format!("outgoing flow: {e}"));
            }
            while self.local_readable && !self.local_eof && s.unacked_bytes() < CONN_SEND_WINDOW {
                match self.local.read(buf) {
                    Ok(0) => {
                        self.local_eof = true;
                        s.finish();
                    }
                    Ok(n) => {
                        self.bytes_sent += n as u64;
                        s.write(Bytes::copy_from_slice(&buf[..n]));
                        // A stream read returns less than asked only once the socket is
                        // drained: the next read would fail with EAGAIN.
                        self.local_readable = n == buf.len();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.local_readable = false;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Step::Aborted(format!("local socket: {e}")),
                }
            }
        } else {
            return Step::Aborted("outgoing flow gone".into());
        }
        // Incoming flow → local, as much as the local socket takes. Invariant at the end of
        // a turn: `out` is not empty (the poller waits for POLLOUT) or the receiver has
        // nothing ready. A turn that wrote all it pulled at the cap pulls again: the
        // receiver may hold more, and once the peer has sent everything no packet comes
        // to start another turn (curl stalled at 37 of 100 MB in a netns test).
        let mut finished = false;
        loop {
            let mut capped = false;
            if let Some(r) = self.in_key.and_then(|k| ep.receiver_mut(k)) {
                if r.was_reset() && !r.is_complete() {
                    return Step::Aborted("reset by the peer".into());
                }
                capped = true;
                while self.out_bytes < max_pending {
                    match r.read() {
                        Some(b) => {
                            self.out_bytes += b.len();
                            self.out.push_back(b);
                        }
                        None => {
                            capped = false;
                            break;
                        }
                    }
                }
                finished = r.is_finished();
            }
            if let Some(step) = self.write_local(ep) {
                return step;
            }
            if !(capped && self.out.is_empty() && !self.wr_shut) {
                break;
            }
        }
        if finished && self.out.is_empty() && !self.wr_shut {
            self.local.shutdown_write();
            self.wr_shut = true;
        }
        let sent = self
            .out_key
            .and_then(|k| ep.sender(k))
            .is_some_and(|s| s.is_complete());
        if self.local_eof && sent && self.wr_shut {
            Step::Done
        } else {
            Step::Keep
        }
    }

    /// Write `out` to the local socket until it is empty or the socket is full; Some: the
    /// connection ends.
    fn write_local(&mut self, ep: &mut Endpoint) -> Option<Step> {
        while !self.out.is_empty() {
            let slices: Vec<IoSlice> = self.out.iter().take(IOV).map(|b| IoSlice::new(b)).collect();
            match self.local.write_vectored(&slices) {
                Ok(0) => return Some(Step::Aborted("local socket closed".into())),
                Ok(mut n) => {
                    self.out_bytes -= n;
                    self.bytes_received += n as u64;
                    while n > 0 {
                        let front = self.out.front_mut().expect("written bytes were queued");
                        if n >= front.len() {
                            n -= front.len();
                            self.out.pop_front();
                        } else {
                            let _ = front.split_to(n);
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The application closed its socket (EOF came first) while bytes were still
                // coming: refuse the incoming flow, as TCP answers data for a closed socket
                // with RST, but let what it wrote before closing go out.
                Err(_) if self.local_eof => {
                    self.out.clear();
                    self.out_bytes = 0;
                    if let Some(k) = self.in_key.take() {
                        ep.abort_receiver(k, ResetReason::Shutdown);
                    }
                    self.wr_shut = true;
                    break;
                }
                Err(e) => return Some(Step::Aborted(format!("local socket: {e}"))),
            }
        }
        None
    }

    /// Release the flows: finished ones are closed (receivers linger to re-acknowledge),
    /// aborted ones are reset so the peer gives up too.
    pub fn release(&mut self, ep: &mut Endpoint, aborted: bool) {
        if let Some(k) = self.out_key.take() {
            if aborted {
                ep.abort_sender(k, ResetReason::Shutdown);
            } else {
                ep.close_sender(k);
            }
        }
        if let Some(k) = self.in_key.take() {
            if aborted {
                ep.abort_receiver(k, ResetReason::Shutdown);
            } else {
                ep.retire_receiver(k);
            }
        }
    }

    /// The connection's record (the `status` op, the agent's log), with the outgoing flow's
    /// sender statistics while it exists.
    pub fn record(&self, ep: &Endpoint, outcome: &str) -> ConnRecord {
        ConnRecord {
            side: self.side,
            conn_id: self.conn_id,
            remote: self.remote,
            local: self.local_addr,
            transport: self.transport,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            duration_s: self.started.elapsed().as_secs_f64(),
            outcome: outcome.to_string(),
            in_process: false,
            sender: self
                .out_key
                .and_then(|k| ep.sender(k))
                .map(|s| s.stats().clone()),
        }
    }
}

/// Source of the agent's loopback connections to local listeners: the library maps
/// connections from it (and only those) back to the remote application's address.
pub const AGENT_LOOPBACK_SRC: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 2);

/// Start a non-blocking connect to a local listener, from `AGENT_LOOPBACK_SRC` for the
/// IPv4 loopback, from the listener's own address when it is bound to one (the event loop
/// never waits on it: see `Conn::connecting`).
pub fn connect_local(target: SocketAddr) -> io::Result<TcpStream> {
    use nix::errno::Errno;
    use nix::sys::socket::{
        bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn, SockaddrStorage,
    };
    let family = if target.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
    let fd = socket(family, SockType::Stream, flags, None)?;
    if let SocketAddr::V4(t) = target {
        let src = if t.ip().is_loopback() {
            AGENT_LOOPBACK_SRC
        } else {
            *t.ip()
        };
        bind(
            fd.as_raw_fd(),
            &SockaddrIn::from(std::net::SocketAddrV4::new(src, 0)),
        )?;
    }
    match connect(fd.as_raw_fd(), &SockaddrStorage::from(target)) {
        Ok(()) | Err(Errno::EINPROGRESS) => Ok(TcpStream::from(fd)),
        Err(e) => Err(e.into()),
    }
}

/// Where a non-blocking connect stands.
pub enum ConnectState {
    InProgress,
    Connected,
    Failed(io::Error),
}

/// A local listener being connected to (answering side), before the reverse flow opens.
#[derive(Clone, Copy)]
pub struct Connecting {
    pub since: Instant,
    pub target: SocketAddr,
    pub hello: flexpass_wire::HelloConn,
}

/// The local IPv4 address the kernel uses towards `peer` (a connected UDP socket's address).
pub fn local_ip_towards(peer: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let u = UdpSocket::bind(any).ok()?;
    u.connect(SocketAddr::new(peer, 9)).ok()?;
    u.local_addr().ok().map(|a| a.ip())
}

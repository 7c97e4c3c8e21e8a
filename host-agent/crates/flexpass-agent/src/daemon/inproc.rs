//! In-process listeners (docs/agent-api.md, "In-process listeners"; docs/datapath.md,
//! "Hand-over of a connection to the serving process"): a `tcp_listen` with `inproc` keeps
//! its API connection open as the port's registration. Each HELLO the endpoint hands over
//! (`Endpoint::take_handed`, admission done) becomes a `tcp_hello` event on it; the process
//! answers `tcp_taken` (with its UDP socket's descriptor, SCM_RIGHTS) or `tcp_refused`.
//!
//! Invariants: a port is handed over by the endpoint iff it has a live registration here;
//! every handed flow is in exactly one registration's `pending` until answered; when a
//! registration ends, its pending flows are reset from the agent's port and its taken
//! connections from the sockets the agent kept (so the peers learn it within a round trip).

use super::{Daemon, Role};
use crate::api::{Listening, Reply, TcpHello, MAX_REQUEST_LINE};
use crate::FlowKey;
use flexpass_wire::{Packet, Reset, ResetReason};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Descriptors received ahead of their `tcp_taken` lines, at most.
const MAX_QUEUED_FDS: usize = 64;
/// Unanswered flows one registration may hold; beyond, new ones are refused (the endpoint
/// expires its own handed entries, but only the process's answer clears them here).
const MAX_PENDING: usize = 4096;

/// One in-process listener: its port, what it was handed and what it took.
pub(super) struct Registration {
    port: u16,
    /// Bytes of the answer line being read.
    line: Vec<u8>,
    /// Descriptors received (SCM_RIGHTS), for the next `tcp_taken` lines in order.
    fds: VecDeque<OwnedFd>,
    /// Handed flows without an answer yet.
    pending: HashSet<FlowKey>,
    /// Taken connections: the process's socket (kept, never polled) and its reply flow.
    taken: HashMap<FlowKey, (OwnedFd, Option<u32>)>,
}

/// An answer on a registration.
enum Answer {
    Taken(FlowKey, Option<u32>),
    Refused(FlowKey),
    Closed(FlowKey),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Daemon {
    /// `tcp_listen` with `inproc`: client `i` becomes the registration of `port`; the newer
    /// listener of a port wins (in-process or not).
    pub(super) fn inproc_register(&mut self, i: usize, port: u16, rest: Vec<u8>) {
        if !self.inproc_listen {
            return self.answer(
                i,
                Reply::error(
                    "tcp_listen with \"inproc\": in-process listeners are off (run the agent \
                     with --inproc-listen)",
                ),
            );
        }
        self.tcp.listens.remove(&port);
        self.ep.hand_over_port(port, true);
        self.registrations.insert(port, i);
        log::debug!("flexpass agent: port {port} served in-process");
        let c = self.clients.at(i);
        c.reply = Reply::Listening(Listening { port }).to_line();
        c.role = Role::Registered(Box::new(Registration {
            port,
            line: rest,
            fds: VecDeque::new(),
            pending: HashSet::new(),
            taken: HashMap::new(),
        }));
        // Answers that came with the request line are read on its next service.
        self.ready_clients.push(i);
    }

    /// A plain `tcp_listen` of `port` replaces its in-process registration (which stays
    /// open for its handed flows' answers but gets no new ones).
    pub(super) fn inproc_unregister_port(&mut self, port: u16) {
        if self.registrations.remove(&port).is_some() {
            self.ep.hand_over_port(port, false);
        }
    }

    /// Pass the HELLOs the endpoint handed over to their ports' registrations; one for a
    /// port no longer registered is refused (RESET from the agent's port).
    pub(super) fn pass_handed(&mut self) {
        while let Some(h) = self.ep.take_handed() {
            let key = (h.peer, h.hello.flow_id);
            let conn = h
                .hello
                .conn
                .expect("only connection HELLOs are handed over");
            let Some(&i) = self.registrations.get(&conn.dst_port) else {
                self.ep.handed_answered(key, false);
                continue;
            };
            let event = TcpHello {
                peer: h.peer,
                flow_id: h.hello.flow_id,
                transport: h.hello.transport,
                conn_id: conn.conn_id,
                src_port: conn.src_port,
                dst_port: conn.dst_port,
                idle: h.hello.idle,
                hello: hex(&Packet::Hello(h.hello.clone()).encode_to_vec()),
            };
            let c = self.clients.at(i);
            let Role::Registered(reg) = &mut c.role else {
                unreachable!("registrations map to registered clients");
            };
            // A retransmitted HELLO of a taken flow: the process answers it again (its
            // HELLO_ACK was lost); it stays taken.
            if !reg.taken.contains_key(&key) && !reg.pending.contains(&key) {
                if reg.pending.len() >= MAX_PENDING {
                    self.ep.handed_answered(key, false);
                    continue;
                }
                reg.pending.insert(key);
            }
            let line = serde_json::to_string(&event).expect("serializable");
            c.reply.extend_from_slice(line.as_bytes());
            c.reply.push(b'\n');
            self.ready_clients.push(i);
        }
    }

    /// Read registration `i`'s answers (and the descriptors that come with them). Returns
    /// false when the registration ended (the process closed its API socket or died).
    pub(super) fn service_registration(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 4096];
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 8]);
        loop {
            let c = self.clients.at(i);
            let fd = c.stream.as_raw_fd();
            let Role::Registered(reg) = &mut c.role else {
                unreachable!("called for registrations");
            };
            let mut iov = [IoSliceMut::new(&mut buf)];
            let n = match recvmsg::<()>(fd, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC) {
                Ok(m) => {
                    for c in m.cmsgs().into_iter().flatten() {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            // SAFETY: SCM_RIGHTS gave this process these new descriptors.
                            reg.fds.extend(
                                fds.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }),
                            );
                        }
                    }
                    m.bytes
                }
                Err(nix::errno::Errno::EAGAIN) => return true,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return false,
            };
            if n == 0 {
                return false;
            }
            reg.line.extend_from_slice(&buf[..n]);
            let mut lines = vec![];
            while let Some(pos) = reg.line.iter().position(|&b| b == b'\n') {
                let rest = reg.line.split_off(pos + 1);
                lines.push(std::mem::replace(&mut reg.line, rest));
            }
            for line in lines {
                if let Err(e) = self.registration_line(i, &line) {
                    self.bad_requests += 1;
                    // The registration goes on: its other flows are not the bad line's.
                    self.clients
                        .at(i)
                        .reply
                        .extend_from_slice(&Reply::error(e).to_line());
                }
            }
            let Role::Registered(reg) = &mut self.clients.at(i).role else {
                unreachable!();
            };
            if reg.line.len() > MAX_REQUEST_LINE || reg.fds.len() > MAX_QUEUED_FDS {
                self.bad_requests += 1;
                log::warn!(
                    "flexpass agent: registration of port {} ended: a line over {MAX_REQUEST_LINE} \
                     bytes or more than {MAX_QUEUED_FDS} descriptors without their tcp_taken",
                    reg.port
                );
                return false;
            }
        }
    }

    /// One answer line of registration `i`.
    fn registration_line(&mut self, i: usize, line: &[u8]) -> Result<(), String> {
        use crate::api::Request;
        let answer = match Request::parse(line).map_err(|e| e.0)? {
            Request::TcpTaken {
                peer,
                flow_id,
                reply_flow_id,
            } => Answer::Taken((peer, flow_id), reply_flow_id),
            Request::TcpRefused { peer, flow_id } => Answer::Refused((peer, flow_id)),
            Request::TcpClosed { peer, flow_id } => Answer::Closed((peer, flow_id)),
            r => {
                return Err(format!(
                    "{} on an in-process registration: only tcp_taken, tcp_refused and \
                     tcp_closed are answered here",
                    r.op()
                ))
            }
        };
        let Role::Registered(reg) = &mut self.clients.at(i).role else {
            unreachable!("called for registrations");
        };
        let unknown = |op: &str, (peer, id): FlowKey| {
            format!(
                "{op}: no connection handed to this registration has peer {peer} and flow_id {id}"
            )
        };
        match answer {
            // Again, for a retransmitted HELLO (the process sent its HELLO_ACK again): no
            // descriptor this time, the first one stays.
            Answer::Taken(key, _) if reg.taken.contains_key(&key) => {}
            Answer::Taken(key, reply) => {
                let Some(fd) = reg.fds.pop_front() else {
                    return Err(format!(
                        "tcp_taken of peer {} flow_id {} came without the socket's descriptor \
                         (SCM_RIGHTS on the same sendmsg)",
                        key.0, key.1
                    ));
                };
                let udp = nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SockType)
                    .is_ok_and(|t| t == nix::sys::socket::SockType::Datagram);
                if !udp {
                    return Err(format!(
                        "tcp_taken of peer {} flow_id {}: the descriptor sent is not a UDP socket",
                        key.0, key.1
                    ));
                }
                if !reg.pending.remove(&key) {
                    return Err(unknown("tcp_taken", key));
                }
                reg.taken.insert(key, (fd, reply));
                self.ep.handed_answered(key, true);
            }
            Answer::Refused(key) => {
                if !reg.pending.remove(&key) {
                    return Err(unknown("tcp_refused", key));
                }
                self.ep.handed_answered(key, false);
            }
            Answer::Closed(key) => {
                if reg.taken.remove(&key).is_none() {
                    return Err(unknown("tcp_closed (of a taken connection)", key));
                }
            }
        }
        Ok(())
    }

    /// Registration `reg` ended: its port goes back to the agent (unless a newer listener
    /// replaced it), its unanswered flows are reset from the agent's port, its taken
    /// connections from their own sockets (their peers since the move).
    pub(super) fn end_registration(&mut self, i: usize, reg: Registration) {
        if self.registrations.get(&reg.port) == Some(&i) {
            self.inproc_unregister_port(reg.port);
        }
        for key in reg.pending {
            self.ep.handed_answered(key, false);
        }
        for ((peer, flow_id), (fd, reply)) in reg.taken {
            let sock = UdpSocket::from(fd);
            for id in std::iter::once(flow_id).chain(reply) {
                let _ = reset_from(&sock, peer, id);
            }
            self.inproc_resets += 1;
        }
        log::debug!(
            "flexpass agent: in-process listener of port {} ended",
            reg.port
        );
    }
}

fn reset_from(sock: &UdpSocket, peer: SocketAddr, flow_id: u32) -> io::Result<usize> {
    let reset = Packet::Reset(Reset {
        flow_id,
        reason: ResetReason::Unspecified,
    });
    sock.send_to(&reset.encode_to_vec(), peer)
}

//! A UDP socket that sets the IP TOS byte (DSCP + ECN) per packet and reports the TOS of
//! every received packet (IP_RECVTOS), so ECN marks reach the transport core.

use nix::sys::socket::{self, sockopt, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrIn};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

impl std::os::fd::AsFd for TosSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

pub struct TosSocket {
    sock: UdpSocket,
    cmsg: Vec<u8>,
}

fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "FlexPass runs over IPv4 only",
        )),
    }
}

impl TosSocket {
    /// Bind a non-blocking UDP socket on an IPv4 address.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        v4(addr)?;
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        socket::setsockopt(&sock, sockopt::IpRecvTos, &true).map_err(io::Error::from)?;
        Ok(TosSocket {
            sock,
            cmsg: nix::cmsg_space!(u8).into_iter().chain([0u8; 32]).collect(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Send one datagram with the given TOS byte.
    pub fn send_to(&self, buf: &[u8], dst: SocketAddr, tos: u8) -> io::Result<usize> {
        let dst = SockaddrIn::from(v4(dst)?);
        let tos_byte = tos;
        let cmsgs = [ControlMessage::Ipv4Tos(&tos_byte)];
        socket::sendmsg(
            self.sock.as_raw_fd(),
            &[IoSlice::new(buf)],
            &cmsgs,
            MsgFlags::empty(),
            Some(&dst),
        )
        .map_err(io::Error::from)
    }

    /// Receive one datagram: (length, source, TOS byte). `WouldBlock` when none is waiting.
    pub fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, u8)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = socket::recvmsg::<SockaddrIn>(
            self.sock.as_raw_fd(),
            &mut iov,
            Some(&mut self.cmsg),
            MsgFlags::MSG_TRUNC,
        )
        .map_err(io::Error::from)?;
        let mut tos = 0;
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::Ipv4Tos(t) = c {
                tos = t;
            }
        }
        let src = msg
            .address
            .map(|a| SocketAddr::V4(SocketAddrV4::new(a.ip(), a.port())))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "datagram without source address",
                )
            })?;
        if msg.flags.contains(MsgFlags::MSG_TRUNC) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("oversized datagram from {src} truncated"),
            ));
        }
        Ok((msg.bytes, src, tos))
    }
}

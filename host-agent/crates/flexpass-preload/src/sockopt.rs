//! getsockopt / setsockopt on FlexPass sockets (the client's AF_UNIX stream, or an
//! in-process connection's UDP socket): what a TCP socket would answer; TCP/IP options
//! accepted and ignored.

use crate::{client_name, enosys, errno, inproc, real_getsockopt, real_setsockopt, set_errno};
use libc::{c_int, c_void, socklen_t};
use std::mem::size_of;

unsafe fn put_int(val: *mut c_void, len: *mut socklen_t, v: c_int) {
    if val.is_null() || len.is_null() {
        return;
    }
    let n = (*len as usize).min(size_of::<c_int>());
    std::ptr::copy_nonoverlapping((&v as *const c_int).cast::<u8>(), val.cast::<u8>(), n);
    *len = n as socklen_t;
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let Some(real) = real_getsockopt() else {
        return enosys();
    };
    if level != libc::SOL_SOCKET
        || matches!(
            name,
            libc::SO_TYPE | libc::SO_PROTOCOL | libc::SO_DOMAIN | libc::SO_ERROR
        )
    {
        if let Some((_, _, v6)) = inproc::names(fd) {
            return conn_sockopt(v6, level, name, val, len);
        }
    }
    let r = real(fd, level, name, val, len);
    let saved = errno();
    let interesting = if level == libc::SOL_SOCKET {
        r == 0 && (name == libc::SO_DOMAIN || name == libc::SO_PROTOCOL)
    } else {
        r != 0
            && matches!(
                level,
                libc::IPPROTO_TCP | libc::IPPROTO_IP | libc::IPPROTO_IPV6
            )
    };
    if !interesting {
        return r;
    }
    let Some(n) = client_name(fd) else {
        set_errno(saved);
        return r;
    };
    let r = conn_sockopt(n.v6, level, name, val, len);
    set_errno(saved);
    r
}

/// getsockopt on a FlexPass socket (client AF_UNIX stream or in-process UDP socket): what
/// a TCP socket would answer.
unsafe fn conn_sockopt(
    v6: bool,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => {
            put_int(val, len, if v6 { libc::AF_INET6 } else { libc::AF_INET })
        }
        (libc::SOL_SOCKET, libc::SO_TYPE) => put_int(val, len, libc::SOCK_STREAM),
        // The UDP socket's pending ICMP error (IP_RECVERR) is the library's
        // (Conn::peer_errors): the peer's end shows in reads and writes.
        (libc::SOL_SOCKET, libc::SO_ERROR) => put_int(val, len, 0),
        (libc::SOL_SOCKET, _) => put_int(val, len, libc::IPPROTO_TCP),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            if !val.is_null() && !len.is_null() {
                let s = b"flexpass\0";
                let k = (*len as usize).min(s.len());
                std::ptr::copy_nonoverlapping(s.as_ptr(), val.cast::<u8>(), k);
                *len = k as socklen_t;
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => put_int(val, len, 1444),
        (libc::IPPROTO_TCP, libc::TCP_INFO) => {
            if !val.is_null() && !len.is_null() {
                std::ptr::write_bytes(val.cast::<u8>(), 0, *len as usize);
                if *len > 0 {
                    *val.cast::<u8>() = 1; // tcpi_state = TCP_ESTABLISHED
                }
            }
        }
        _ => {
            if !val.is_null() && !len.is_null() {
                std::ptr::write_bytes(val.cast::<u8>(), 0, *len as usize);
            }
        }
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    let Some(real) = real_setsockopt() else {
        return enosys();
    };
    let r = real(fd, level, name, val, len);
    if r == 0 {
        return r;
    }
    let saved = errno();
    if matches!(saved, libc::EOPNOTSUPP | libc::ENOPROTOOPT | libc::EINVAL)
        && (client_name(fd).is_some() || inproc::is_conn(fd))
    {
        // TCP/IP options have no meaning on the local leg of a FlexPass connection.
        debug!("fd {fd}: option {level}/{name} ignored on a FlexPass socket");
        set_errno(saved);
        return 0;
    }
    set_errno(saved);
    r
}

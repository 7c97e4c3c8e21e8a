//! Who may use the API (docs/agent-api.md, "Access"): the socket file's mode and every
//! connection's peer credentials (SO_PEERCRED).

use super::Daemon;
use crate::api::Reply;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Who may use the API besides root and the agent's own user (docs/agent-api.md,
/// "Access").
#[derive(Clone, Debug, Default)]
pub struct ApiAccess {
    /// More users (the socket file becomes 0666: the peer-credential check is the gate).
    pub allow_uids: Vec<u32>,
    /// Groups whose members may connect (primary or supplementary group of the client
    /// process); the socket file becomes 0660 owned by the first one.
    pub allow_gids: Vec<u32>,
}

/// Connections refused by the access check (and the last log of them).
#[derive(Default)]
pub(super) struct Refusals {
    pub(super) count: u64,
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Daemon {
    /// Let more users or groups use the API: the socket file becomes 0660 with the first
    /// group (`allow_gids`), or 0666 (`allow_uids`; the peer-credential check then does all
    /// the work). Root and the agent's own user are always allowed.
    pub fn set_access(&mut self, access: ApiAccess) -> io::Result<()> {
        let mode = if !access.allow_uids.is_empty() {
            0o666
        } else if let Some(&gid) = access.allow_gids.first() {
            std::os::unix::fs::chown(&self.socket, None, Some(gid))?;
            0o660
        } else {
            0o600
        };
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(mode))?;
        self.access = access;
        Ok(())
    }

    /// Whether the process at the other end of `stream` may use the API; `Err` names it.
    pub(super) fn check_peer(&self, stream: &UnixStream) -> Result<(), String> {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let cred = getsockopt(stream, PeerCredentials)
            .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
        let (uid, gid, pid) = (cred.uid(), cred.gid(), cred.pid());
        if uid == 0 || uid == self.euid || self.access.allow_uids.contains(&uid) {
            return Ok(());
        }
        if !self.access.allow_gids.is_empty() {
            if self.access.allow_gids.contains(&gid) {
                return Ok(());
            }
            // Supplementary groups of the client process.
            if let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                let groups = st
                    .lines()
                    .find_map(|l| l.strip_prefix("Groups:"))
                    .unwrap_or("");
                if groups
                    .split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok())
                    .any(|g| self.access.allow_gids.contains(&g))
                {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "uid {uid} (gid {gid}, pid {pid}) is not allowed: the agent (uid {}) serves root, \
             its own user and --allow-uid / --allow-gid",
            self.euid
        ))
    }

    /// Refuse a client that failed the access check: one error line, then close.
    pub(super) fn refuse(&mut self, mut stream: UnixStream, why: String) {
        self.refusals.count += 1;
        let now = Instant::now();
        // One log line per second at most: a local process cannot flood the log.
        if self
            .refusals
            .logged_at
            .is_none_or(|t| now - t >= Duration::from_secs(1))
        {
            let more = std::mem::take(&mut self.refusals.unlogged);
            log::warn!(
                "flexpass agent: API connection refused: {why}{}",
                if more > 0 {
                    format!(" ({more} more refused since the last message)")
                } else {
                    String::new()
                }
            );
            self.refusals.logged_at = Some(now);
        } else {
            self.refusals.unlogged += 1;
        }
        let _ = stream.set_nonblocking(true);
        let _ = stream.write(&Reply::error(format!("permission denied: {why}")).to_line());
    }
}

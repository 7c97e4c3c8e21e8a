//! In-process connections across fork(2) and exec (docs/datapath.md, "The core in the
//! application's process": fork, exec). A connection's state is in the memory of the
//! process that made it; after a fork, parent and child each have a copy, current at the
//! fork. One process at a time drives a connection (its owner): the copies must not both
//! answer the peer.
//!
//! Each connection has a `Slot` in an arena mapped MAP_SHARED (before the connection
//! exists, so every forked child shares it): `word` = owner pid << 32 | epoch, `holders` =
//! the processes holding a descriptor of it. A process's copy of the state is current
//! while the word's epoch is the one it remembers (`Own::epoch`).
//! - At a fork (atfork prepare, every connection's lock held): holders + 1, and a
//!   connection the forking process owns becomes unclaimed (pid 0, same epoch): both
//!   copies are current.
//! - The first data call of a process claims an unclaimed connection whose copy is current
//!   (CAS to its pid and epoch + 1): every other copy is stale from then on. A data call
//!   on a connection another process claimed (or a stale copy) fails with EIO.
//! - The timer thread drives only what its process owns; it never claims.
//! - A process's last close of it: the owner's close ends the connection (FIN, as before);
//!   an unclaimed one's last holder claims and ends it; any other close only forgets it
//!   here (its sockets closed in this process, no datagram sent).
//! - exit, _exit and exec release every connection as a close would (process.rs).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// A connection's word in the shared arena.
#[repr(C)]
pub struct Slot {
    word: AtomicU64,
    holders: AtomicU32,
    _pad: u32,
}

/// Connections the arena has room for (16 bytes each, pages touched as used).
const SLOTS: usize = 1 << 16;

fn word(pid: i32, epoch: u32) -> u64 {
    ((pid as u32 as u64) << 32) | epoch as u64
}

fn split(w: u64) -> (i32, u32) {
    ((w >> 32) as u32 as i32, w as u32)
}

/// This process's pid (set at the first connection and by the atfork child handler; a
/// vfork child, which runs no handler, sees its parent's).
static MY_PID: AtomicI32 = AtomicI32::new(0);

pub fn my_pid() -> i32 {
    let p = MY_PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = unsafe { libc::getpid() };
    MY_PID.store(p, Ordering::Relaxed);
    p
}

/// The calling process made or inherited (by fork) in-process connections, and is not a
/// vfork child (whose memory is its parent's: it must change nothing).
pub fn is_mine() -> bool {
    let p = MY_PID.load(Ordering::Relaxed);
    p != 0 && unsafe { libc::getpid() } == p
}

static ARENA: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());
static NEXT: AtomicU32 = AtomicU32::new(0);

fn arena() -> Option<&'static [Slot]> {
    let mut p = ARENA.load(Ordering::Acquire);
    if p.is_null() {
        let m = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SLOTS * std::mem::size_of::<Slot>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            return None;
        }
        match ARENA.compare_exchange(
            std::ptr::null_mut(),
            m.cast(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => p = m.cast(),
            Err(q) => {
                unsafe { libc::munmap(m, SLOTS * std::mem::size_of::<Slot>()) };
                p = q;
            }
        }
    }
    Some(unsafe { std::slice::from_raw_parts(p, SLOTS) })
}

/// How a close leaves a connection.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Release {
    /// This process owns it (or claimed it as its last holder): the real close.
    End,
    /// Another process has it, or will: only this process's copy goes.
    Forget,
}

/// A claim by a data call.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Claim {
    Mine,
    /// Unclaimed until now: this process drives it from here.
    Claimed,
    /// Another process's, or this copy is stale.
    Refused,
}

/// A connection's ownership as this process sees it.
pub struct Own {
    slot: &'static Slot,
    /// The slot is in the shared arena (else a fork leaves the connection to its maker).
    shared: bool,
    /// The epoch at which this process's copy is current.
    epoch: AtomicU32,
    /// The timer generation (timer::generation) the connection is registered in.
    pub gen: AtomicU32,
}

impl Own {
    /// A new connection, owned by this process.
    pub fn new() -> Own {
        init(); // before the program can see the connection (accept may return at once)
        let pid = my_pid();
        let found = arena().and_then(|a| {
            let start = NEXT.fetch_add(1, Ordering::Relaxed) as usize;
            (0..SLOTS).map(|i| &a[(start + i) % SLOTS]).find(|s| {
                s.holders
                    .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
        });
        let shared = found.is_some();
        let slot = found.unwrap_or_else(|| {
            crate::debug!("in-process: no shared slot left: this connection stays with its process across fork");
            Box::leak(Box::new(Slot {
                word: AtomicU64::new(0),
                holders: AtomicU32::new(1),
                _pad: 0,
            }))
        });
        slot.word.store(word(pid, 0), Ordering::Release);
        Own {
            slot,
            shared,
            epoch: AtomicU32::new(0),
            gen: AtomicU32::new(0),
        }
    }

    fn mine(&self, pid: i32) -> u64 {
        word(pid, self.epoch.load(Ordering::Relaxed))
    }

    pub fn owned(&self) -> bool {
        self.owned_by(my_pid())
    }

    fn owned_by(&self, pid: i32) -> bool {
        self.slot.word.load(Ordering::Acquire) == self.mine(pid)
    }

    pub fn claim(&self) -> Claim {
        self.claim_as(my_pid())
    }

    fn claim_as(&self, pid: i32) -> Claim {
        let cur = self.slot.word.load(Ordering::Acquire);
        if cur == self.mine(pid) {
            return Claim::Mine;
        }
        let (owner, epoch) = split(cur);
        if owner != 0 || epoch != self.epoch.load(Ordering::Relaxed) {
            return Claim::Refused;
        }
        let next = epoch.wrapping_add(1);
        match self.slot.word.compare_exchange(
            cur,
            word(pid, next),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                self.epoch.store(next, Ordering::Relaxed);
                Claim::Claimed
            }
            Err(_) => Claim::Refused,
        }
    }

    /// atfork prepare, the connection's lock held: one more holder, and what this process
    /// owns becomes unclaimed.
    fn at_fork(&self, pid: i32) {
        if !self.shared {
            return;
        }
        self.slot.holders.fetch_add(1, Ordering::AcqRel);
        let mine = self.mine(pid);
        let _ = self.slot.word.compare_exchange(
            mine,
            mine & u32::MAX as u64,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// This process's last descriptor of it goes (close, exit, exec). `End` with the
    /// connection claimed (`claimed` says whether by this call).
    pub fn release(&self) -> (Release, bool) {
        self.release_as(my_pid())
    }

    fn release_as(&self, pid: i32) -> (Release, bool) {
        let remaining = self
            .slot
            .holders
            .fetch_sub(1, Ordering::AcqRel)
            .saturating_sub(1);
        if self.owned_by(pid) {
            return (Release::End, false);
        }
        if remaining == 0 && self.claim_as(pid) == Claim::Claimed {
            return (Release::End, true);
        }
        (Release::Forget, false)
    }
}

/// What the forking thread holds across fork(2): the table, every connection's lock, the
/// timer thread's state, the registrations' write locks (so that the child's copies are
/// whole and unlocked). Taken in this order, which is every other path's.
struct Held {
    conns: Vec<(
        std::sync::MutexGuard<'static, super::conn::Conn>,
        super::Shared,
    )>,
    timers: Option<super::timer::ForkHold>,
    listen: super::listen::ForkHold,
    table: Option<super::TableRead>,
}

thread_local! {
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
}

/// The handlers, once per process (inherited by children).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| unsafe {
        my_pid();
        libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
    });
}

extern "C" fn prepare() {
    let pid = my_pid();
    let table = super::table_read();
    let list = table.as_deref().map_or_else(Vec::new, super::distinct_in);
    let mut conns = Vec::with_capacity(list.len());
    for c in list {
        // The guard borrows from `c`, which is kept with it and dropped after it.
        let l: &'static super::conn::Locked = unsafe { &*std::sync::Arc::as_ptr(&c) };
        if let Some(g) = l.raw_lock() {
            c.own.at_fork(pid);
            conns.push((g, c));
        }
    }
    let timers = super::timer::hold_for_fork();
    let regs = conns.iter().filter_map(|(g, _)| g.reg.clone()).collect();
    let listen = super::listen::hold_for_fork(regs);
    HELD.with(|h| {
        *h.borrow_mut() = Some(Held {
            conns,
            timers,
            listen,
            table,
        })
    });
}

fn unhold() {
    HELD.with(|h| {
        if let Some(held) = h.borrow_mut().take() {
            drop(held.listen);
            drop(held.timers);
            drop(held.conns);
            drop(held.table);
        }
    });
}

extern "C" fn parent() {
    unhold();
}

extern "C" fn child() {
    MY_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    EXITING.store(false, Ordering::Relaxed);
    super::timer::forked();
    unhold();
}

/// exit / _exit / exec ran the releases already (once per process).
pub static EXITING: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> Own {
        let slot = Box::leak(Box::new(Slot {
            word: AtomicU64::new(word(100, 0)),
            holders: AtomicU32::new(1),
            _pad: 0,
        }));
        Own {
            slot,
            shared: true,
            epoch: AtomicU32::new(0),
            gen: AtomicU32::new(0),
        }
    }

    /// The child's copy of `o` at a fork (its memory is a copy; the slot is shared).
    fn fork(o: &Own, parent: i32) -> Own {
        o.at_fork(parent);
        Own {
            slot: o.slot,
            shared: true,
            epoch: AtomicU32::new(o.epoch.load(Ordering::Relaxed)),
            gen: AtomicU32::new(0),
        }
    }

    #[test]
    fn forking_server_parent_closes_child_serves() {
        let p = local();
        assert_eq!(p.claim_as(100), Claim::Mine);
        let c = fork(&p, 100);
        assert!(!p.owned_by(100) && !c.owned_by(200), "unclaimed after fork");
        // The parent closes its copy first: not the last holder, nothing sent.
        assert_eq!(p.release_as(100), (Release::Forget, false));
        assert_eq!(c.claim_as(200), Claim::Claimed);
        assert_eq!(c.claim_as(200), Claim::Mine);
        assert_eq!(c.release_as(200), (Release::End, false));
    }

    #[test]
    fn child_done_before_parent_close() {
        let p = local();
        let c = fork(&p, 100);
        assert_eq!(c.claim_as(200), Claim::Claimed);
        // The owner's close ends it even while the parent still holds its descriptor.
        assert_eq!(c.release_as(200), (Release::End, false));
        // The parent's copy is stale: refused, and its close only forgets it.
        assert_eq!(p.claim_as(100), Claim::Refused);
        assert_eq!(p.release_as(100), (Release::Forget, false));
    }

    #[test]
    fn forking_client_parent_keeps_it() {
        let p = local();
        let c = fork(&p, 100);
        // The child exits (or execs) without touching it.
        assert_eq!(c.release_as(200), (Release::Forget, false));
        assert_eq!(p.claim_as(100), Claim::Claimed);
        assert_eq!(
            c.claim_as(200),
            Claim::Refused,
            "stale after the parent's claim"
        );
        assert_eq!(p.release_as(100), (Release::End, false));
    }

    #[test]
    fn last_holder_of_an_unclaimed_connection_ends_it() {
        let p = local();
        let c = fork(&p, 100);
        assert_eq!(p.release_as(100), (Release::Forget, false));
        // The child closes without a data call: it is the last holder.
        assert_eq!(c.release_as(200), (Release::End, true));
    }

    #[test]
    fn fork_of_a_child_that_owns_it() {
        let p = local();
        let c = fork(&p, 100);
        assert_eq!(c.claim_as(200), Claim::Claimed);
        let g = fork(&c, 200);
        // The original parent's copy stays stale; the child and grandchild may claim.
        assert_eq!(p.claim_as(100), Claim::Refused);
        assert_eq!(g.claim_as(300), Claim::Claimed);
        assert_eq!(c.claim_as(200), Claim::Refused);
    }

    #[test]
    fn a_fork_of_an_unowned_copy_changes_no_owner() {
        let p = local();
        let c = fork(&p, 100);
        assert_eq!(c.claim_as(200), Claim::Claimed);
        let _g = fork(&p, 100); // the parent forks again: its copy is stale
        assert_eq!(c.claim_as(200), Claim::Mine);
        assert_eq!(p.slot.holders.load(Ordering::Relaxed), 3);
    }
}

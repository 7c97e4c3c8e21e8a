//! exit and exec of a process holding in-process connections (inproc/fork.rs): its
//! connections are released as close() would release them (the ones it drives end with
//! their FIN, and `_exit` waits for their bytes to be acknowledged as `exit` does; the ones
//! another process drives are only forgotten). exec'd images see an inherited descriptor
//! as the plain UDP socket it is (docs/datapath.md, "fork and exec").
//!
//! Hooked: `_exit` / `_Exit` (what a forked child calls, Python's os._exit among them;
//! `exit` runs the atexit handler, inproc/timer.rs) and execve, execv, execvp, execvpe,
//! fexecve (not the variadic execl family, nor what glibc calls inside system() or
//! posix_spawn: those run in a vfork child, which holds nothing of the library's).

use crate::inproc;
use libc::{c_char, c_int};

real_fn!(real_exit, "_exit", fn(c_int) -> ());
real_fn!(real_cap_exit, "_Exit", fn(c_int) -> ());
real_fn!(
    real_execve,
    "execve",
    fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int
);
real_fn!(
    real_execv,
    "execv",
    fn(*const c_char, *const *const c_char) -> c_int
);
real_fn!(
    real_execvp,
    "execvp",
    fn(*const c_char, *const *const c_char) -> c_int
);
real_fn!(
    real_execvpe,
    "execvpe",
    fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int
);
real_fn!(
    real_fexecve,
    "fexecve",
    fn(c_int, *const *const c_char, *const *const c_char) -> c_int
);

fn release() {
    if inproc::enabled() {
        inproc::timer::exit_linger();
    }
}

unsafe fn exit_now(real: Option<unsafe extern "C" fn(c_int)>, status: c_int) -> ! {
    release();
    if let Some(f) = real {
        f(status);
    }
    libc::syscall(libc::SYS_exit_group, status as libc::c_long);
    unreachable!()
}

#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    exit_now(real_exit(), status)
}

#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(real_cap_exit(), status)
}

fn enosys() -> c_int {
    unsafe { crate::set_errno(libc::ENOSYS) };
    -1
}

#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    release();
    real_execve().map_or_else(enosys, |f| f(path, argv, envp))
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    release();
    real_execv().map_or_else(enosys, |f| f(path, argv))
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    release();
    real_execvp().map_or_else(enosys, |f| f(file, argv))
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    release();
    real_execvpe().map_or_else(enosys, |f| f(file, argv, envp))
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    release();
    real_fexecve().map_or_else(enosys, |f| f(fd, argv, envp))
}

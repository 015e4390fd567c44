//! Descriptors a parent hands down to a child process at fixed numbers (the
//! pool gives its workers its HTTP listening sockets, their counters page
//! and the access log this way), and the child taking them.
//!
//! Handing down happens between `fork` and `exec` (`pre_exec`), where only
//! async-signal-safe calls are allowed: two `fcntl`/`dup2` per descriptor,
//! no allocation. Taking sets close-on-exec again, so what the child starts
//! in turn (a PHP `exec()`) does not inherit them.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::io::FdFlags;

/// Most descriptors one [`hand_down`] passes.
pub const MAX_HANDED: usize = 16;

/// The first number handed-down descriptors get in the child (after stdin,
/// stdout and stderr).
pub const FIRST_HANDED: RawFd = 3;

/// Arranges for `cmd`'s child to find `fds` open at `FIRST_HANDED`,
/// `FIRST_HANDED + 1`, ... in order (without close-on-exec), whatever
/// numbers they have here; returns those numbers. The descriptors must stay
/// open until `cmd.spawn()` returns.
///
/// # Errors
/// `InvalidInput` for more than [`MAX_HANDED`] descriptors.
pub fn hand_down(cmd: &mut Command, fds: &[BorrowedFd<'_>]) -> io::Result<Vec<RawFd>> {
    if fds.len() > MAX_HANDED {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} descriptors to hand down, at most {MAX_HANDED}",
                fds.len()
            ),
        ));
    }
    let mut sources = [-1 as RawFd; MAX_HANDED];
    for (s, fd) in sources.iter_mut().zip(fds) {
        *s = fd.as_raw_fd();
    }
    let count = fds.len();
    let targets: Vec<RawFd> = (0..count as RawFd).map(|i| FIRST_HANDED + i).collect();
    let above = FIRST_HANDED + count as RawFd;
    let place = move || -> io::Result<()> {
        // First every source to a number above every target (so that no
        // dup2 below closes a source not yet placed), then each to its
        // target. Only fcntl and dup2: async-signal-safe, no allocation.
        let mut moved = [-1 as RawFd; MAX_HANDED];
        for (m, &source) in moved.iter_mut().zip(&sources[..count]) {
            // SAFETY: `source` was open in the parent when `spawn` forked
            // (the caller keeps it open until then) and the child has the same
            // table; the borrow only reaches fcntl.
            let src = unsafe { BorrowedFd::borrow_raw(source) };
            let high = rustix::io::fcntl_dupfd_cloexec(src, above)?;
            *m = high.as_raw_fd();
            std::mem::forget(high); // closed at exec: close-on-exec
        }
        for (i, &m) in moved[..count].iter().enumerate() {
            // SAFETY: `m` was just made by fcntl above and is open.
            let high = unsafe { BorrowedFd::borrow_raw(m) };
            // SAFETY: the target number belongs to nothing in this child that
            // will run (it execs next); dup2 replaces whatever it was, and the
            // value is forgotten so it is never closed here.
            let mut target = unsafe { OwnedFd::from_raw_fd(FIRST_HANDED + i as RawFd) };
            let placed = rustix::io::dup2(high, &mut target);
            std::mem::forget(target);
            placed?;
        }
        Ok(())
    };
    // SAFETY: the closure runs in the child between fork and exec and makes
    // only async-signal-safe system calls (fcntl, dup2) on numbers copied
    // into it beforehand; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(place);
    }
    Ok(targets)
}

/// Takes ownership of descriptor `fd`, which a parent handed down to this
/// process, and sets close-on-exec on it.
///
/// # Safety
/// Nothing else in this process owns `fd` or will take it again: it was
/// handed down by the parent and is taken once.
///
/// # Errors
/// `EBADF` when `fd` is not open.
pub unsafe fn take(fd: RawFd) -> io::Result<OwnedFd> {
    if !crate::fdpass::is_open(fd) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("descriptor {fd} is not open in this process"),
        ));
    }
    // SAFETY: open (checked above) and owned by nobody else (the caller's
    // contract).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(&owned, FdFlags::CLOEXEC).map_err(crate::failed("fcntl(F_SETFD)"))?;
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    #[test]
    fn a_child_finds_the_descriptors_at_their_numbers() {
        let a = crate::memfd::create_sealed("handed-a", 4096).expect("memfd");
        let b = crate::memfd::create_sealed("handed-b", 8192).expect("memfd");
        let mut cmd = Command::new("sh");
        // Each handed descriptor's size, read through /proc/self/fd.
        cmd.arg("-c")
            .arg("stat -L -c %s /proc/self/fd/3 /proc/self/fd/4")
            .stdout(std::process::Stdio::piped());
        let numbers = hand_down(&mut cmd, &[b.as_fd(), a.as_fd()]).expect("hand down");
        assert_eq!(numbers, vec![3, 4]);
        let mut child = cmd.spawn().expect("spawn");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read");
        assert!(child.wait().expect("wait").success());
        assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["8192", "4096"]);
    }

    #[test]
    fn too_many_are_refused() {
        let a = crate::memfd::create_sealed("handed", 4096).expect("memfd");
        let fds: Vec<BorrowedFd<'_>> = (0..=MAX_HANDED).map(|_| a.as_fd()).collect();
        let e = hand_down(&mut Command::new("true"), &fds).expect_err("17");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn taking_a_closed_number_fails() {
        // SAFETY: a number above any descriptor limit is owned by nothing.
        let e = unsafe { take(1 << 30) }.expect_err("not open");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}

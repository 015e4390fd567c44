//! The syscall layer of shmlink.
//!
//! Everything that talks to the kernel lives here, built on `rustix`: sealed
//! memfd segments, shared mappings, the futex doorbell, descriptor passing with
//! `SCM_RIGHTS`, peer credentials with `SO_PEERCRED`, readiness polling, epoll
//! and eventfd, socket sends without `SIGPIPE` and peeks, the socket files'
//! lock, mode and group, files opened beneath a root and `sendfile`, signals, limits and CPU affinity. The layers above
//! make no syscalls of their own beyond what `std` offers (files, sockets,
//! threads); none of them depends on `rustix`.
//!
//! Each wrapper is small, names its man page and the errors it passes on,
//! and is tested in its module.
//!
//! `unsafe` code lives in [`mapping`] (mmap/munmap and raw access to the
//! mapped bytes), in [`fdpass::is_open`] (an `fcntl` on a descriptor
//! number a C caller handed in) and in [`inherit`] (descriptors placed for a
//! child between fork and exec, and taken by it), and in [`clock`] and
//! [`cpu`] (libc calls that read the vDSO, which rustix's own lookup cannot
//! do under valgrind); `grep -rn 'allow(unsafe_code)'` lists it.

pub mod affinity;
pub mod children;
pub mod clock;
pub mod cpu;
pub mod cred;
pub mod epoll;
pub mod eventfd;
pub mod fdpass;
pub mod files;
pub mod fs;
pub mod futex;
pub mod inherit;
pub mod mapping;
pub mod memfd;
pub mod net;
pub mod poll;
pub mod process;

pub use cred::{peer_cred, PeerCred};

/// `e` with the name of the call that failed in front of its text (the
/// kind is kept), so a message read far from here says which call failed:
/// `memfd_create: Operation not permitted (os error 1)`.
pub(crate) fn failed<E: Into<std::io::Error>>(
    call: &'static str,
) -> impl FnOnce(E) -> std::io::Error {
    move |e| {
        let e = e.into();
        std::io::Error::new(e.kind(), format!("{call}: {e}"))
    }
}
pub use mapping::{Mapping, ReadOnlyMapping};

#[cfg(test)]
mod tests {
    use std::io;

    #[test]
    fn a_failed_call_is_named_and_keeps_its_kind() {
        let e = super::failed("memfd_create")(io::Error::from_raw_os_error(1));
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let text = e.to_string();
        assert!(text.starts_with("memfd_create: "), "{text}");
        assert!(text.contains("os error 1"), "{text}");
    }
}

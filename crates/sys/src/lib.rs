//! The syscall layer of shmlink.
//!
//! Everything that talks to the kernel lives here, built on `rustix`: sealed
//! memfd segments, shared mappings, the futex doorbell, descriptor passing with
//! `SCM_RIGHTS`, peer credentials with `SO_PEERCRED`, readiness polling, epoll
//! and eventfd, socket sends without `SIGPIPE` and peeks, the socket files'
//! lock, mode and group, signals, limits and CPU affinity. The layers above
//! make no syscalls of their own beyond what `std` offers (files, sockets,
//! threads); none of them depends on `rustix`.
//!
//! Each wrapper is small, names its man page and the errors it passes on,
//! and is tested in its module.
//!
//! `unsafe` code lives in [`mapping`] (mmap/munmap and raw access to the
//! mapped bytes) and in [`fdpass::is_open`] (an `fcntl` on a descriptor
//! number a C caller handed in); `grep -rn 'allow(unsafe_code)'` lists it.

pub mod affinity;
pub mod cred;
pub mod epoll;
pub mod eventfd;
pub mod fdpass;
pub mod fs;
pub mod futex;
pub mod mapping;
pub mod memfd;
pub mod net;
pub mod poll;
pub mod process;

pub use cred::{peer_cred, PeerCred};
pub use mapping::{Mapping, ReadOnlyMapping};

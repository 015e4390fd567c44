//! The syscall layer of shmlink.
//!
//! Everything that talks to the kernel lives here, built on `rustix`: sealed
//! memfd segments, shared mappings, the futex doorbell, descriptor passing with
//! `SCM_RIGHTS`, peer credentials with `SO_PEERCRED`, readiness polling and CPU
//! affinity. The layers above contain no syscalls of their own.
//!
//! The only `unsafe` code is in [`mapping`] (mmap/munmap and raw access to the
//! mapped bytes); `grep -rn 'allow(unsafe_code)'` lists it.

pub mod affinity;
pub mod cred;
pub mod fdpass;
pub mod futex;
pub mod mapping;
pub mod memfd;
pub mod poll;

pub use cred::{peer_cred, PeerCred};
pub use mapping::Mapping;

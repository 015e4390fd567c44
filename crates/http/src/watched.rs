//! A descriptor the worker's HTTP runtime watches for readability without
//! ever reading it (the worker's session socket with its supervisor).
#![allow(unsafe_code)]

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Registers `fd` with the current runtime for readability. Call inside
/// the runtime's context.
///
/// # Errors
/// The descriptor cannot be polled (a regular file).
pub(crate) fn register(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `OwnedFd` owns a valid, open descriptor; the `AsyncFd` owns the
    // `OwnedFd`, so it is neither replaced nor closed while registered (it is
    // deregistered before it is closed, when the `AsyncFd` drops).
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

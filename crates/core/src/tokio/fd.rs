//! The session's readiness descriptor in tokio's reactor. tokio's safe
//! constructors of `AsyncFd` are deprecated (they cannot know the
//! descriptor stays open); the one left is `unsafe`, and the registration
//! here upholds its contract by owning a duplicate of the descriptor.
#![allow(unsafe_code)]

use std::os::fd::{BorrowedFd, OwnedFd};

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;

/// Registers a duplicate of `fd`, watched for reading.
///
/// # Errors
/// `dup` failing (out of descriptors); the reactor refusing it. Panics
/// outside a tokio runtime, as tokio does.
pub(super) fn register(fd: BorrowedFd<'_>) -> std::io::Result<AsyncFd<OwnedFd>> {
    let owned = fd.try_clone_to_owned()?;
    // SAFETY: the `AsyncFd` owns `owned`, an open descriptor that stays
    // open and refers to the same file description until the `AsyncFd` is
    // dropped (which closes it); `OwnedFd::as_raw_fd` always returns that
    // same number.
    unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }.map_err(Into::into)
}

//! The only place atomics come from: loom's under `cfg(loom)`, std's otherwise.
//! (`ci/test.sh` fails when `std::sync::atomic` appears elsewhere in this crate.)

#[cfg(loom)]
pub(crate) use loom::sync::atomic::Ordering;
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64};

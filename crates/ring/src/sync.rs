//! The only place atomics come from: loom's under `cfg(loom)`, std's otherwise.
#![allow(clippy::disallowed_types)]

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::Ordering;
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64};

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64};

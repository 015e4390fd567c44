//! The C ABI of shmlink: opaque client and server handles, plain option
//! structs, library-owned buffers and integer status codes with a per-thread
//! error detail. `include/shmlink.h` is generated from this crate by cbindgen.
//!
//! Rules every entry point follows:
//! - no panic crosses the boundary: each body runs under `catch_unwind` and a
//!   caught panic becomes `SHMLINK_E_INTERNAL`;
//! - every pointer is checked for NULL and every option for range before use;
//! - raw pointers are turned into references in one `unsafe` block at the top
//!   of each function, relying on the contract the header documents.

// A C ABI is unsafe by nature: every entry point takes raw pointers. Each
// `unsafe` block still carries its SAFETY comment (clippy enforces it), and
// `unsafe_op_in_unsafe_fn` keeps unsafe operations in explicit blocks.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_camel_case_types)]

mod buffer;
mod client;
mod guard;
mod info;
mod options;
mod request;
mod response;
mod server;
mod status;
mod view;
mod worker;

pub use buffer::{shmlink_buffer, shmlink_buffer_free};
pub use client::*;
pub use info::*;
pub use options::*;
pub use request::*;
pub use response::*;
pub use server::*;
pub use status::{
    shmlink_status, SHMLINK_REMOTE_CLOSED, SHMLINK_REMOTE_HANDLER_EXCEPTION,
    SHMLINK_REMOTE_HANDLER_PANICKED, SHMLINK_REMOTE_NOT_ANSWERED, SHMLINK_REMOTE_NO_WORKER,
    SHMLINK_REMOTE_NO_WORKERS_START, SHMLINK_REMOTE_POOL_STOPPING, SHMLINK_REMOTE_PROTOCOL_ERROR,
    SHMLINK_REMOTE_QUEUE_FULL, SHMLINK_REMOTE_RESPONSE_TOO_LARGE, SHMLINK_REMOTE_SHUTTING_DOWN,
    SHMLINK_REMOTE_UNKNOWN_COMMAND, SHMLINK_REMOTE_WORKER_DIED, SHMLINK_REMOTE_WORKER_TIMEOUT,
};
pub use view::*;
pub use worker::*;

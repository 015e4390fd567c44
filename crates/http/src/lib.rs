//! HTTP/1.1 for `shmlink pool --http`, in one of two places:
//!
//! - in the worker processes themselves ([`WorkerHttp`]): the pool hands its
//!   listening sockets down ([`Handed`]), each worker accepts and parses
//!   requests in Rust on its own thread and hands them to its loop; no other
//!   process is on a request's path;
//! - in the pool's front ([`Front`]): the same loop on threads of the pool,
//!   each request one call to a [`Backend`] (the pool's dispatch to its
//!   workers) made on threads of their own.
//!
//! Both run one engine (`engine`: an epoll loop, heads parsed by httparse,
//! bodies, limits, keep-alive and pipelining, responses, counters, access
//! log) and one encoding of requests and responses ([`wire`]).

mod access;
mod backend;
mod counters;
mod engine;
mod error;
mod files;
mod front;
#[doc(hidden)]
pub mod fuzzing;
mod handed;
mod in_worker;
mod options;
mod stats;
pub use shmlink_wire::http as wire;

pub use backend::{Backend, Fault};
pub use counters::{CountersPage, StatsHandle, DURATION_BOUNDS_US, STATUS_CODES};
pub use error::HttpError;
pub use front::Front;
pub use handed::{Handed, HTTP_ENV};
pub use in_worker::{Event, WorkerHttp, DRAIN_IDLE, SAMPLE_EVERY};
pub use options::FrontOptions;
pub use stats::{Durations, HttpStats};

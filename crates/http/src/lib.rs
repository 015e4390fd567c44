//! HTTP/1.1 for `shmlink pool --http`, in one of two places:
//!
//! - in the worker processes themselves ([`WorkerHttp`]): the pool hands its
//!   listening sockets down ([`Handed`]), each worker accepts and parses
//!   requests in Rust on its own thread and hands them to its loop; no other
//!   process is on a request's path;
//! - in the pool's front ([`Front`]): a hyper server on a tokio runtime that
//!   turns every request into one call to a [`Backend`] (the pool's dispatch
//!   to its workers).
//!
//! Both run one request path ([`wire`] encoding, limits, responses,
//! counters, access log) over hyper connections: keep-alive, chunked bodies
//! and pipelined requests are hyper's; this crate adds the limits (body
//! size, header size and time, open connections), the mapping of faults to
//! statuses (500, 502, 503, 504), counters and an optional access log.

mod access;
mod backend;
mod coarse_timer;
mod conn;
mod counters;
mod error;
mod front;
mod handed;
mod in_worker;
mod options;
mod request;
mod respond;
mod stats;
mod watched;
pub mod wire;

pub use backend::{Backend, Fault};
pub use counters::{CountersPage, StatsHandle};
pub use error::HttpError;
pub use front::Front;
pub use handed::{Handed, HTTP_ENV};
pub use in_worker::{Event, WorkerHttp, DRAIN_IDLE, SAMPLE_EVERY};
pub use options::FrontOptions;
pub use stats::HttpStats;

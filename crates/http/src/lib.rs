//! The HTTP front of `shmlink pool --http`: an HTTP/1.1 server (hyper, on a
//! tokio runtime) that turns every request into one call to a [`Backend`]
//! (the pool's dispatch to its workers) in the binary encoding of
//! [`wire`], and the backend's answer into the HTTP response.
//!
//! Keep-alive, chunked request bodies and pipelined requests are hyper's;
//! the front adds the limits (body size, header size and time, open
//! connections), the mapping of backend faults to statuses (502, 503, 504),
//! counters and an optional access log.

mod access;
mod backend;
mod error;
mod front;
mod options;
mod respond;
mod stats;
pub mod wire;

pub use backend::{Backend, Fault};
pub use error::HttpError;
pub use front::Front;
pub use options::FrontOptions;
pub use stats::{HttpStats, StatsHandle};

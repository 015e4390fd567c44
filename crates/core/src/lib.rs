//! shmlink: request/response calls between processes on one host, over
//! shared memory (`shm:`), Unix sockets (`unix:`) or TCP (`tcp:`), behind one
//! API.
//!
//! - [`Client`]: connect to an address, [`Client::call`], pipeline with
//!   [`Client::send`]/[`Client::recv`], one-way [`Client::notify`].
//! - [`Server`]: bind to several addresses, serve a [`Handler`].
//! - [`wire`]: the protocol's encodings (the `shmlink-wire` crate), for other
//!   implementations and tools.
//!
//! Everything else is internal: nothing public lets safe code reach the
//! shared memory of a session (see the `compile_fail` examples in
//! `src/soundness.rs`). Layers below: `shmlink-sys` (syscalls),
//! `shmlink-ring` (the lock-free ring and doorbell protocol), `shmlink-wire`
//! (the byte formats). See
//! `docs/design.md` and `docs/protocol.md`.
//!
//! # Examples
//! ```no_run
//! use shmlink::{Client, Server};
//! let server = Server::bind(&["shm:/tmp/demo.sock"], Default::default())?
//!     .spawn(|req: &[u8], resp: &mut Vec<u8>| { resp.extend_from_slice(&req[..req.len() / 8]); Ok(()) })?;
//! let mut client = Client::connect("shm:/tmp/demo.sock", Default::default())?;
//! assert_eq!(client.call(&[7u8; 64])?, vec![7u8; 8]);
//! server.stop()?;
//! # Ok::<(), shmlink::Error>(())
//! ```

mod address;
mod both_ways;
mod callee;
mod client;
mod connect;
mod deadline;
mod error;
mod inspect;
mod kept;
mod link;
mod message;
mod options;
mod queue;
mod response;
mod segment;
mod server;
mod session;
mod tally;
#[cfg(feature = "tokio")]
pub mod tokio;
mod watch;
pub mod wire;
mod worker;

#[cfg(doctest)]
mod soundness;

pub use address::{Address, Transport};
pub use both_ways::{Incoming, MAX_QUEUED_INCOMING};
pub use client::{CallId, Client, Reply};
pub use deadline::Deadline;
pub use error::{Error, RefusalCode, RemoteError, Result};
pub use inspect::inspect;
pub use kept::release_kept_mappings;
pub use options::{
    ClientOptions, Log, ServerOptions, WaitStrategy, DEFAULT_ARENA_BYTES, DEFAULT_MAX_MESSAGE,
    DEFAULT_RING_SIZE, MAX_MESSAGE_SIZE, MAX_RING_SIZE, MIN_RING_SIZE,
};
pub use queue::{QueueHandler, QueuedRequest, RequestQueue};
pub use response::Response;
pub use server::{
    Accepted, AcceptedWorker, Answer, BatchAnswer, Handler, InPlace, Listener, PortInterrupter,
    RunningServer, Server, Stats, StopHandle, WithFds, WorkerPort, PREPARED_SEGMENTS,
    READY_SEGMENTS,
};
pub use shmlink_arena::{fill_copy, Loan, STREAM_FROM};
pub use shmlink_wire::codes::{
    CODE_CLOSED, CODE_HANDLER_EXCEPTION, CODE_HANDLER_PANICKED, CODE_NOT_ANSWERED,
    CODE_PROTOCOL_ERROR, CODE_RESPONSE_TOO_LARGE, CODE_SHUTTING_DOWN, CODE_WORKER_DIED,
    CODE_WORKER_TIMEOUT,
};
pub use shmlink_wire::frame::{MAX_FDS, MIN_MESSAGE_LIMIT};
pub use worker::{LineAsk, LineHold, LineOffer, Polled, Worker, WORKER_ENV, WORKER_WAIT_ENV};

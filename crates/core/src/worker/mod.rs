//! The worker wing: what makes a process a worker of a supervisor, and the
//! direct lines a supervisor lends between a caller and one of its workers.
//!
//! - [`process`]: [`Worker`], the worker's session with its supervisor,
//!   and the line it serves.
//! - [`line`]: a line's segment and socket pair made, and either end
//!   opened; [`LineAsk`], [`LineOffer`], [`LineHold`].
//! - [`frames`]: the `Line` frames on a session, sent and decoded.
//! - [`caller`]: a client's direct line: when it asks, its calls over it.
//! - [`grant`]: the supervisor's side, on its session with a worker (lend,
//!   revoke, wait for the line's return).
//! - [`ask`]: a server's answer to a client's ask (its handler decides).
//!
//! The wing imports neither the client nor the server: both call into it
//! (the client's public `lend_line`, `revoke_line`, `line_returned` and
//! its own line; the server's sessions for asks). A worker port
//! (`server/port.rs`) stays with the server, whose admission it uses.

pub(crate) mod ask;
pub(crate) mod caller;
pub(crate) mod frames;
pub(crate) mod grant;
pub(crate) mod line;
mod process;

pub use line::{LineAsk, LineHold, LineOffer};
pub use process::{Polled, Worker, WORKER_ENV, WORKER_WAIT_ENV};

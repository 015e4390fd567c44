//! The server: listens on several addresses, runs a thread per session, and
//! watches every session for its peer's death and for shutdown.
//!
//! Rooms, each importing only those after it in this list (no circles;
//! `tests/layering.rs` checks): [`monitor`] (the accept loop) ->
//! [`admit`] (the handshake in named steps) and [`session`] (one session's
//! request loop) -> [`conn`] (accepted connections, welcomes and refusals),
//! [`shared`] (state of the whole server, the stop handle) -> [`registry`]
//! (sessions the accept loop watches), [`listener`], [`policy`], [`pool`]
//! (session threads), [`prepare`] (segments made ahead), [`reuse`]
//! (segments kept for the process that used them), [`handler`],
//! [`stats`], [`sync`].

mod admit;
mod answer;
mod conn;
mod door;
mod handing;
mod handler;
mod handover;
mod inspect;
mod listener;
mod monitor;
mod peers;
mod policy;
mod port;
mod prepare;
mod registry;
mod reuse;
mod serving;
mod shared;
mod stats;
mod sync;
mod takeover;
mod threads;

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::address::Address;
use crate::error::{Error, Result};
use crate::options::ServerOptions;

pub use answer::Answer;
pub use handler::{BatchAnswer, Handler, InPlace, WithFds};
pub use peers::{Accepted, Listener};
pub use port::{AcceptedWorker, PortInterrupter, WorkerPort};
pub use shared::StopHandle;
pub use stats::Stats;

/// Segments a server holds that belong to no session: made ahead of
/// connecting clients (so a handshake does not wait for memfd + mmap), and
/// kept for a few seconds for the client process whose session ended
/// cleanly (its next session reuses it). An idle server holds at most this
/// many `shmlink-session` memfds that belong to no session.
pub const PREPARED_SEGMENTS: usize = prepare::READY + reuse::KEPT;

/// Of [`PREPARED_SEGMENTS`], those made ahead: a server that has started
/// and served no session holds exactly this many once its background
/// thread has made them (one at a time).
pub const READY_SEGMENTS: usize = prepare::READY;

/// A bound server, not yet serving.
///
/// # Examples
/// ```no_run
/// let server = shmlink::Server::bind(&["shm:/tmp/echo.sock", "tcp:127.0.0.1:7000"], Default::default())?;
/// server.serve(|req: &[u8], resp: &mut Vec<u8>| { resp.extend_from_slice(req); Ok(()) })?;
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct Server {
    core: monitor::Monitor,
}

impl Server {
    /// Binds every address. Socket files get the configured mode; stale ones
    /// are replaced, live ones refused.
    ///
    /// # Errors
    /// Invalid addresses or options, or any address that cannot be bound (the
    /// ones already bound are released).
    pub fn bind<A: AsRef<str>>(addresses: &[A], options: ServerOptions) -> Result<Server> {
        let addrs = addresses
            .iter()
            .map(|a| a.as_ref().parse())
            .collect::<Result<Vec<Address>>>()?;
        Self::bind_to(&addrs, options)
    }

    /// Binds parsed addresses.
    ///
    /// # Errors
    /// As [`Server::bind`].
    pub fn bind_to(addresses: &[Address], options: ServerOptions) -> Result<Server> {
        options.validate()?;
        if addresses.is_empty() {
            return Err(Error::InvalidOption {
                name: "addresses",
                reason: "at least one address is needed".into(),
            });
        }
        Ok(Server {
            core: monitor::Monitor::new(addresses, options)?,
        })
    }

    /// Takes over the server that listens for successors at `handover`
    /// (its [`ServerOptions::handover`]): its listening sockets and its
    /// live sessions (`shm:`, `unix:`, `tcp:`) come here, and go on from
    /// where it stopped; their clients notice nothing (no reconnect, no
    /// failed call). The old server answers the calls it had begun, then
    /// stops. A session this server cannot take (its policy
    /// refuses the client, a limit) fails the hand-over: the old server
    /// is told why and serves on. With `options.handover` set, this server
    /// then listens there for a successor of its own.
    ///
    /// # Errors
    /// [`Error::Bind`] naming the hand-over socket and why.
    pub fn take_over(
        handover: impl AsRef<std::path::Path>,
        options: ServerOptions,
    ) -> Result<Server> {
        options.validate()?;
        Ok(Server {
            core: monitor::Monitor::take_over(handover.as_ref(), options)?,
        })
    }

    /// The bound addresses (TCP ports resolved when 0 was asked for).
    pub fn addresses(&self) -> Vec<Address> {
        self.core.addresses()
    }

    /// A handle that stops the server from any thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.core.stop_handle()
    }

    /// The server's counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.core.stats()
    }

    /// Serves until stopped: accepts sessions, runs `handler` for each request,
    /// and on stop finishes requests already received, closes every session,
    /// removes its socket files, and returns.
    ///
    /// # Errors
    /// When the accept loop itself fails.
    pub fn serve<H: Handler>(self, handler: H) -> Result<()> {
        self.core.run(Arc::new(handler))
    }

    /// Serves on a new thread.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn spawn<H: Handler>(self, handler: H) -> Result<RunningServer> {
        let stop = self.stop_handle();
        let stats = self.stats();
        let addresses = self.addresses();
        let thread = std::thread::Builder::new()
            .name("shmlink-server".into())
            .spawn(move || self.serve(handler))
            .map_err(|e| Error::io("starting server thread", e))?;
        Ok(RunningServer {
            stop,
            stats,
            addresses,
            thread: Some(thread),
        })
    }
}

/// A server running on its own thread; stopped and joined on drop.
#[derive(Debug)]
pub struct RunningServer {
    stop: StopHandle,
    stats: Arc<Stats>,
    addresses: Vec<Address>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl RunningServer {
    /// The bound addresses.
    pub fn addresses(&self) -> &[Address] {
        &self.addresses
    }

    /// The server's counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A stop handle.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Whether a successor took the listeners and sessions (see
    /// [`StopHandle::handed_over`]).
    pub fn handed_over(&self) -> bool {
        self.stop.handed_over()
    }

    /// Stops gracefully and waits for the server thread.
    ///
    /// # Errors
    /// The accept loop's error, if it failed.
    pub fn stop(mut self) -> Result<()> {
        self.stop.stop();
        self.join_thread()
    }

    /// Waits until the server stops, asked by a [`StopHandle`] elsewhere
    /// (another thread or a signal handler).
    ///
    /// # Errors
    /// The accept loop's error, if it failed.
    pub fn wait(mut self) -> Result<()> {
        self.join_thread()
    }

    fn join_thread(&mut self) -> Result<()> {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(Error::io(
                    "server thread",
                    std::io::Error::other("panicked"),
                ))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop.stop();
        let _ = self.join_thread();
    }
}

//! A worker port: an address that worker processes connect to (a
//! [`Worker`](crate::Worker) offers capability bit 3), for a supervisor that
//! calls them. Each accepted worker is a [`Client`] whose calls the worker
//! answers; the same handshake, policy and segments as a server's, without
//! session threads.

use std::sync::Arc;
use std::time::Duration;

use shmlink_sys::eventfd::EventFd;

use super::door::Door;
use super::shared::Mode;
use crate::address::Address;
use crate::both_ways::Side;
use crate::client::Client;
use crate::error::Result;
use crate::options::ServerOptions;

/// A worker that connected to a [`WorkerPort`].
#[derive(Debug)]
pub struct AcceptedWorker {
    /// Calls to the worker: the worker answers them.
    pub client: Client,
    /// The worker's pid, from `SO_PEERCRED` (`None` over TCP).
    pub pid: Option<u32>,
}

/// Ends a [`WorkerPort::accept`] wait early (see
/// [`WorkerPort::interrupter`]).
#[derive(Debug, Clone)]
pub struct PortInterrupter(Arc<EventFd>);

impl PortInterrupter {
    pub(super) fn new(evt: Arc<EventFd>) -> Self {
        PortInterrupter(evt)
    }

    /// The current or next `accept` wait returns `None` at once.
    pub fn interrupt(&self) {
        self.0.signal();
    }
}

/// An address workers connect to.
///
/// # Examples
/// ```no_run
/// let port = shmlink::WorkerPort::bind("shm:/run/app-workers.sock", Default::default())?;
/// // ... start a worker process with SHMLINK_WORKER=shm:/run/app-workers.sock ...
/// if let Some(mut w) = port.accept(std::time::Duration::from_secs(5))? {
///     let answer = w.client.call(b"work")?;
/// }
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct WorkerPort {
    door: Door,
}

impl WorkerPort {
    /// Binds `address` (`shm:` for workers on this host; `unix:` and `tcp:`
    /// work too). `options` apply as for a server: the credential policy
    /// (by default only this process's uid may connect), socket mode,
    /// handshake timeout, largest message.
    ///
    /// # Errors
    /// An invalid address or options, or one that cannot be bound.
    pub fn bind(address: &str, options: ServerOptions) -> Result<WorkerPort> {
        let door = Door::bind(address, options, Mode::TakeWorkers, "worker port")?;
        Ok(WorkerPort { door })
    }

    /// The bound address.
    pub fn address(&self) -> &Address {
        self.door.address()
    }

    /// A handle that makes a wait in [`WorkerPort::accept`] return `None`
    /// at once, from another thread (a supervisor stopping).
    pub fn interrupter(&self) -> PortInterrupter {
        PortInterrupter(Arc::clone(&self.door.interrupt))
    }

    /// Waits up to `timeout` for a worker to connect and completes its
    /// handshake; `None` when none came in time. A connection that is not a
    /// worker, or that the policy refuses, is refused (and told why) and not
    /// returned.
    ///
    /// # Errors
    /// When waiting on the listening socket fails.
    pub fn accept(&self, timeout: Duration) -> Result<Option<AcceptedWorker>> {
        let Some(est) = self.door.accept(timeout, "waiting for workers")? else {
            return Ok(None);
        };
        let (address, calls) = (self.address().clone(), self.door.calls.clone());
        Ok(Some(AcceptedWorker {
            client: Client::over(est.session, address, calls, Side::Supervisor),
            pid: est.pid.and_then(|p| u32::try_from(p).ok()),
        }))
    }

    /// Connections refused so far (policy, not a worker, bad handshakes).
    pub fn refused(&self) -> u64 {
        self.door.refused()
    }
}

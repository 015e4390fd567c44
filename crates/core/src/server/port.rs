//! A worker port: an address that worker processes connect to (a
//! [`Worker`](crate::Worker) offers capability bit 3), for a supervisor that
//! calls them. Each accepted worker is a [`Client`] whose calls the worker
//! answers; the same handshake, policy and segments as a server's, without
//! session threads.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::eventfd::EventFd;
use shmlink_sys::poll;

use super::admit;
use super::conn::HelloBuf;
use super::listener::Listener;
use super::prepare::Preparer;
use super::registry::Registry;
use super::shared::{Mode, Shared};
use crate::address::{Address, Transport};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::options::{ClientOptions, ServerOptions, DEFAULT_RING_SIZE};

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
    listener: Listener,
    /// Rung by [`PortInterrupter::interrupt`].
    interrupt: Arc<EventFd>,
    shared: Arc<Shared>,
    calls: ClientOptions,
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
        options.validate()?;
        let addr: Address = address.parse()?;
        let listener = Listener::bind(&addr, &options)?;
        let io_err =
            |what: &str, e: io::Error| Error::io(format!("creating worker port {what}"), e);
        let registry = Registry::new().map_err(|e| io_err("epoll", e))?;
        let wake_evt = EventFd::new().map_err(|e| io_err("eventfd", e))?;
        let segments = if addr.transport() == Transport::Shm {
            Preparer::start((DEFAULT_RING_SIZE, DEFAULT_RING_SIZE))
        } else {
            Preparer::idle()
        };
        let calls = ClientOptions {
            wait: options.wait,
            max_message_size: options.max_message_size,
            timeout: options.send_timeout,
            ..ClientOptions::default()
        };
        let shared = Shared::new(Mode::TakeWorkers, options, registry, wake_evt, segments);
        Ok(WorkerPort {
            interrupt: Arc::new(EventFd::new().map_err(|e| io_err("eventfd", e))?),
            listener,
            shared: Arc::new(shared),
            calls,
        })
    }

    /// The bound address.
    pub fn address(&self) -> &Address {
        self.listener.address()
    }

    /// A handle that makes a wait in [`WorkerPort::accept`] return `None`
    /// at once, from another thread (a supervisor stopping).
    pub fn interrupter(&self) -> PortInterrupter {
        PortInterrupter(Arc::clone(&self.interrupt))
    }

    /// Waits up to `timeout` for a worker to connect and completes its
    /// handshake; `None` when none came in time. A connection that is not a
    /// worker, or that the policy refuses, is refused (and told why) and not
    /// returned.
    ///
    /// # Errors
    /// When waiting on the listening socket fails.
    pub fn accept(&self, timeout: Duration) -> Result<Option<AcceptedWorker>> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = poll::either_readable(&self.listener, &*self.interrupt, Some(deadline))
                .map_err(|e| Error::io("waiting for workers", e))?;
            match ready {
                Some(0) => {}
                Some(_) => {
                    self.interrupt.clear();
                    return Ok(None);
                }
                None => return Ok(None),
            }
            let conn = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("accepting a worker", e)),
            };
            let handshake = Instant::now() + self.shared.opts.handshake_timeout;
            let address = self.address().to_string();
            let transport = self.listener.transport();
            if let Some(est) = admit::establish(
                &self.shared,
                conn.into_stream(),
                HelloBuf::new(),
                transport,
                &address,
                handshake,
            ) {
                let client = Client::over(est.session, self.address().clone(), self.calls.clone());
                return Ok(Some(AcceptedWorker {
                    client,
                    pid: est.pid.and_then(|p| u32::try_from(p).ok()),
                }));
            }
        }
    }

    /// Connections refused so far (policy, not a worker, bad handshakes).
    pub fn refused(&self) -> u64 {
        self.shared
            .stats
            .refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for WorkerPort {
    fn drop(&mut self) {
        self.shared.segments.close();
    }
}

//! A door: an address whose sessions are handed to whoever accepts them,
//! without session threads. The same handshake, policy and segments as a
//! server's. Under a worker port (workers connect and answer) and a
//! listener (clients connect, both sides call).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::eventfd::EventFd;
use shmlink_sys::poll;

use super::admit::{self, Established};
use super::conn::HelloBuf;
use super::listener::Listener as Bound;
use super::prepare::Preparer;
use super::registry::Registry;
use super::shared::{Mode, Shared};
use crate::address::{Address, Transport};
use crate::error::{Error, Result};
use crate::options::{ClientOptions, ServerOptions, DEFAULT_RING_SIZE};

/// A bound address and the state of its handshakes.
#[derive(Debug)]
pub(super) struct Door {
    bound: Bound,
    /// Rung by an interrupter: the current or next wait returns `None`.
    pub(super) interrupt: Arc<EventFd>,
    pub(super) shared: Arc<Shared>,
    /// The options of the accepting side's calls on each session.
    pub(super) calls: ClientOptions,
}

impl Door {
    /// Binds `address` for sessions of `mode`; `what` names the door in
    /// errors ("worker port", "listener").
    pub(super) fn bind(
        address: &str,
        options: ServerOptions,
        mode: Mode,
        what: &str,
    ) -> Result<Door> {
        options.validate()?;
        let addr: Address = address.parse()?;
        let bound = Bound::bind(&addr, &options)?;
        let io_err = |step: &str, e: io::Error| Error::io(format!("creating {what} {step}"), e);
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
        let shared = Shared::new(mode, options, registry, wake_evt, segments);
        Ok(Door {
            interrupt: Arc::new(EventFd::new().map_err(|e| io_err("eventfd", e))?),
            bound,
            shared: Arc::new(shared),
            calls,
        })
    }

    /// The bound address.
    pub(super) fn address(&self) -> &Address {
        self.bound.address()
    }

    /// Waits up to `timeout` for a connection and completes its handshake;
    /// `None` when none came in time or the wait was interrupted. A
    /// connection the handshake or the policy refuses is told why and not
    /// returned. `what` names the waiting in errors ("waiting for workers").
    pub(super) fn accept(&self, timeout: Duration, what: &str) -> Result<Option<Established>> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = poll::either_readable(&self.bound, &*self.interrupt, Some(deadline))
                .map_err(|e| Error::io(what, e))?;
            match ready {
                Some(0) => {}
                Some(_) => {
                    self.interrupt.clear();
                    return Ok(None);
                }
                None => return Ok(None),
            }
            let conn = match self.bound.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(format!("accepting ({what})"), e)),
            };
            let handshake = Instant::now() + self.shared.opts.handshake_timeout;
            let address = self.address().to_string();
            let transport = self.bound.transport();
            if let Some(est) = admit::establish(
                &self.shared,
                conn.into_stream(),
                HelloBuf::new(),
                transport,
                &address,
                handshake,
            ) {
                return Ok(Some(est));
            }
        }
    }

    /// Connections refused so far (policy, wrong kind of peer, bad
    /// handshakes).
    pub(super) fn refused(&self) -> u64 {
        self.shared
            .stats
            .refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.shared.segments.close();
    }
}

//! A listener: an address clients connect to, whose sessions are handed
//! whole to whoever accepts them. Both sides of such a session are equal
//! (capability bit 10): each end is a [`Client`] that calls the other, sends
//! it one-way messages, and answers the other's calls.

use std::sync::Arc;
use std::time::Duration;

use super::door::Door;
use super::port::PortInterrupter;
use super::shared::Mode;
use crate::address::Address;
use crate::both_ways::Side;
use crate::client::Client;
use crate::error::Result;
use crate::options::ServerOptions;

/// A session a client opened with a [`Listener`]: this side's end of it.
#[derive(Debug)]
pub struct Accepted {
    /// This side's end: its calls go to the connecting process, which
    /// answers them with its handler ([`Client::on_call`]) or through
    /// [`Client::next_incoming`]; what the connecting process sends on its
    /// own comes out of [`Client::next_incoming`] here.
    pub peer: Client,
    /// The connecting process's pid, from `SO_PEERCRED` (`None` over TCP).
    pub pid: Option<u32>,
    /// Its uid (`None` over TCP).
    pub uid: Option<u32>,
}

/// An address whose sessions are symmetric: once open, either side calls.
/// Use it for a daemon that pushes to its clients or calls them back; a
/// [`Server`](crate::Server) (handler threads) answers calls only.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// let listener = shmlink::Listener::bind("shm:/run/app-push.sock", Default::default())?;
/// if let Some(mut s) = listener.accept(Duration::from_secs(5))? {
///     s.peer.notify(b"config changed")?; // a one-way message to the client
///     let answer = s.peer.call(b"your state?")?; // the client answers it
/// }
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct Listener {
    door: Door,
}

impl Listener {
    /// Binds `address` (`shm:`, `unix:` or `tcp:`). `options` apply as for
    /// a server: the credential policy (by default only this process's uid
    /// may connect), socket mode, handshake timeout, largest message,
    /// descriptors accepted; `send_timeout` is the default timeout of the
    /// calls this side makes.
    ///
    /// # Errors
    /// An invalid address or options, or one that cannot be bound.
    pub fn bind(address: &str, options: ServerOptions) -> Result<Listener> {
        let door = Door::bind(address, options, Mode::Peers, "listener")?;
        Ok(Listener { door })
    }

    /// The bound address.
    pub fn address(&self) -> &Address {
        self.door.address()
    }

    /// A handle that makes a wait in [`Listener::accept`] return `None` at
    /// once, from another thread.
    pub fn interrupter(&self) -> PortInterrupter {
        PortInterrupter::new(Arc::clone(&self.door.interrupt))
    }

    /// Waits up to `timeout` for a client to connect and completes its
    /// handshake (on this thread: up to the options' `handshake_timeout`);
    /// `None` when none came in time. A connection the policy refuses is
    /// told why and not returned. A client of an older build, which does
    /// not offer capability bit 10, is accepted too: its end answers its
    /// calls, and calls made on it fail with [`Error::NotAgreed`](crate::Error::NotAgreed).
    ///
    /// # Errors
    /// When waiting on the listening socket fails.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Accepted>> {
        let Some(est) = self.door.accept(timeout, "waiting for clients")? else {
            return Ok(None);
        };
        let (address, calls) = (self.address().clone(), self.door.calls.clone());
        Ok(Some(Accepted {
            peer: Client::over(est.session, address, calls, Side::Listening),
            pid: est.pid.and_then(|p| u32::try_from(p).ok()),
            uid: est.uid,
        }))
    }

    /// Connections refused so far (policy, workers, bad handshakes).
    pub fn refused(&self) -> u64 {
        self.door.refused()
    }
}

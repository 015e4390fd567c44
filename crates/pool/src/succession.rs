//! What a pool knows of its hot upgrades (`upgrade.rs` runs them): the
//! one under way, how the last went, whether a successor serves, and the
//! listening sockets a successor is started with.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// The upgrades of one pool.
#[derive(Debug)]
pub(crate) struct Upgrades {
    state: Mutex<State>,
    pub(crate) changed: Condvar,
    /// The pool's private directory (its hand-over sockets are there).
    pub(crate) dir: PathBuf,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// The successor being started, and when.
    pub(crate) running: Option<(u32, Instant)>,
    /// How the last upgrade went.
    pub(crate) outcome: Option<String>,
    /// A successor serves: this pool is to stop.
    pub(crate) upgraded: bool,
    /// Copies of the HTTP front's and the metrics endpoint's listening
    /// sockets, to hand down.
    pub(crate) http: Vec<OwnedFd>,
    pub(crate) metrics: Option<OwnedFd>,
}

impl Upgrades {
    pub(crate) fn new(dir: PathBuf) -> Upgrades {
        Upgrades {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            dir,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Files the listening sockets a successor is started with.
    pub(crate) fn keep(&self, http: Vec<OwnedFd>, metrics: Option<OwnedFd>) {
        let mut s = self.lock();
        s.http = http;
        s.metrics = metrics;
    }

    /// Lets the copies of the listening sockets go (at the stop: the
    /// ports must close with the pool).
    pub(crate) fn forget(&self) {
        let mut s = self.lock();
        s.http.clear();
        s.metrics = None;
    }

    /// How the last upgrade went (`shmlink pool status`).
    pub(crate) fn outcome(&self) -> Option<String> {
        let s = self.lock();
        match s.running {
            Some((pid, _)) => Some(format!("under way: successor pid {pid} starting")),
            None => s.outcome.clone(),
        }
    }

    /// Whether a successor serves (the pool stops draining, not at once).
    pub(crate) fn upgraded(&self) -> bool {
        self.lock().upgraded
    }

    /// Waits until a successor serves.
    pub(crate) fn wait(&self) {
        let mut s = self.lock();
        while !s.upgraded {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

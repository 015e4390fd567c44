//! HTTP served by the workers themselves (`--http-mode workers`, the
//! default): the pool binds the listening sockets and hands them down to
//! every worker it starts, with a slot of the counters page and the access
//! log (`shmlink_http::Handed`); the workers accept, parse and answer on
//! their own. The pool only supervises: it sums the workers' counters for
//! `status`, recycles a worker after `--max-jobs` requests, and kills one
//! whose request runs past `--call-timeout`.
//!
//! The listening sockets stay open in the pool for its whole life, so a
//! worker that exits (recycled, reloaded, crashed) loses no connection
//! waiting to be accepted: another worker takes it.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use shmlink_http::{CountersPage, FrontOptions, Handed, HttpStats};

use crate::error::PoolError;

/// What the pool keeps for workers that serve HTTP.
#[derive(Debug)]
pub(crate) struct HttpWorkers {
    listeners: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
    page_fd: OwnedFd,
    page: CountersPage,
    access: Option<OwnedFd>,
    /// The limits every worker gets.
    limits: Handed,
    book: Mutex<Book>,
}

/// Which slots are free, and what workers gone counted.
#[derive(Debug, Default)]
struct Book {
    free: Vec<usize>,
    gone: HttpStats,
}

impl HttpWorkers {
    /// Binds `opts.listen`, makes the counters page (room for every worker
    /// a reload or recycling may run at once) and opens the access log.
    ///
    /// # Errors
    /// An address that does not parse or cannot be bound; the page; the
    /// access log.
    /// `inherited`: listening sockets a predecessor handed down at an
    /// upgrade, used instead of binding (none: bind).
    pub(crate) fn bind(
        opts: &FrontOptions,
        workers: usize,
        queue_timeout: Duration,
        inherited: Vec<TcpListener>,
    ) -> Result<HttpWorkers, PoolError> {
        let io = |context: String| move |source| PoolError::Io { context, source };
        let bind = inherited.is_empty();
        let mut listeners = inherited;
        for a in opts.listen.iter().filter(|_| bind) {
            let l = TcpListener::bind(a.as_str())
                .map_err(io(format!("binding the HTTP address {a}")))?;
            listeners.push(l);
        }
        let addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<Result<Vec<_>, _>>()
            .map_err(io("reading a bound HTTP address".into()))?;
        // A reload runs the old and the new workers side by side, and
        // recycled ones drain while their replacements start.
        let slots = workers * 3 + 4;
        let (page_fd, page) = CountersPage::create(slots)?;
        let access = match &opts.access_log {
            None => None,
            Some(p) if p.as_os_str() == "-" => Some(
                std::io::stderr()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(io("duplicating standard error for the access log".into()))?,
            ),
            Some(p) => Some(OwnedFd::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(io(format!("opening the access log {}", p.display())))?,
            )),
        };
        Ok(HttpWorkers {
            listeners,
            addrs,
            page_fd,
            page,
            access,
            limits: Handed::limits(opts, queue_timeout),
            book: Mutex::new(Book {
                free: (0..slots).rev().collect(),
                gone: HttpStats::default(),
            }),
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The addresses served (with the ports chosen for port 0).
    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The listening sockets (handed down to workers, and to a successor
    /// at an upgrade).
    pub(crate) fn listeners(&self) -> &[TcpListener] {
        &self.listeners
    }

    /// A free slot of the counters page, zeroed, for a worker to start.
    pub(crate) fn take_slot(&self) -> Option<usize> {
        let slot = self.book().free.pop()?;
        self.page.clear(slot);
        Some(slot)
    }

    /// A worker of `slot` exited: what it counted joins the totals (but its
    /// open connections, which closed with it), and the slot is free.
    pub(crate) fn release(&self, slot: usize) {
        self.page.closed_all(slot);
        let mut counted = self.page.stats(slot);
        counted.connections_open = 0;
        let mut b = self.book();
        b.gone.add(&counted);
        b.free.push(slot);
    }

    /// Every worker's counters: those gone, and those of `live` slots.
    pub(crate) fn stats(&self, live: impl Iterator<Item = usize>) -> HttpStats {
        let mut all = self.book().gone.clone();
        for slot in live {
            all.add(&self.page.stats(slot));
        }
        all
    }

    /// Requests the worker of `slot` handed to its application, and
    /// requests it answered.
    pub(crate) fn application(&self, slot: usize) -> (u64, u64) {
        self.page.application(slot)
    }

    /// Whether the worker of `slot` runs a request in its application now
    /// (handed one more than it answered).
    pub(crate) fn runs_request(&self, slot: usize) -> bool {
        let (handed, answered) = self.application(slot);
        handed > answered
    }

    /// The descriptors a worker of `slot` gets, in order; `env` makes the
    /// value of `SHMLINK_HTTP` from the numbers they get in the worker.
    pub(crate) fn hand(
        &self,
        slot: usize,
    ) -> (Vec<BorrowedFd<'_>>, impl FnOnce(&[RawFd]) -> String + '_) {
        let mut fds: Vec<BorrowedFd<'_>> = self.listeners.iter().map(AsFd::as_fd).collect();
        fds.push(self.page_fd.as_fd());
        fds.extend(self.access.as_ref().map(AsFd::as_fd));
        let n = self.listeners.len();
        let env = move |numbers: &[RawFd]| {
            let mut h = self.limits.clone();
            h.listeners = numbers[..n].to_vec();
            h.counters = Some((numbers[n], slot));
            h.access_log = numbers.get(n + 1).copied();
            h.encode()
        };
        (fds, env)
    }
}

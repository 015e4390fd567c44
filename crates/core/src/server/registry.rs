//! The sessions the accept loop watches: one epoll set holds the listeners,
//! the stop event and the control socket of every `shm:` session; the
//! table maps a session id (its epoll token) to what wakes that session.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink_sys::epoll::{Epoll, Interest};
use shmlink_sys::eventfd::EventFd;
use shmlink_sys::futex;

use std::time::Instant;

use super::sync::lock;
use crate::address::Transport;
use crate::link::stream::Stream;
use crate::segment::{Direction, Segment};
use crate::tally::Tally;
use crate::watch::SessionFlags;

/// What the accept loop needs to stop or wake one session.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The flags its thread checks when woken.
    pub(crate) flags: Arc<SessionFlags>,
    wake: Wake,
    /// The control socket of an `shm:` session.
    ctrl: Option<Arc<Stream>>,
    /// Whether the session agreed on file descriptors: its control socket
    /// then carries their records, and only a hang-up there counts.
    fds: bool,
    /// Who it serves and what it carried.
    pub(crate) about: About,
}

/// What an inspection shows of a session.
#[derive(Debug)]
pub(crate) struct About {
    /// The client's pid and uid, when the socket tells them.
    pub(crate) pid: Option<i32>,
    pub(crate) uid: Option<u32>,
    /// The listener's transport.
    pub(crate) transport: Transport,
    pub(crate) since: Instant,
    pub(crate) tally: Arc<Tally>,
}

/// How a session thread is woken.
#[derive(Debug)]
pub(crate) enum Wake {
    /// It may sleep on either futex of its segment.
    Shm(Arc<Segment>),
    /// It may block reading its socket; the eventfd, when the server may
    /// hand over, ends that wait without touching the socket.
    Stream(Arc<Stream>, Option<Arc<EventFd>>),
}

impl Entry {
    /// An entry for a session with these flags (and its control socket,
    /// for an `shm:` session, which carries descriptor records when `fds`).
    pub(crate) fn new(
        flags: Arc<SessionFlags>,
        wake: Wake,
        ctrl: Option<Arc<Stream>>,
        fds: bool,
        about: About,
    ) -> Entry {
        Entry {
            flags,
            wake,
            ctrl,
            fds,
            about,
        }
    }

    /// The segment of an `shm:` session that has one.
    pub(crate) fn segment(&self) -> Option<&Segment> {
        match &self.wake {
            Wake::Shm(seg) => Some(seg),
            Wake::Stream(..) => None,
        }
    }

    fn wake(&self) {
        match &self.wake {
            Wake::Shm(seg) => {
                // Ring both bells the session thread may sleep on: the
                // increment makes a wait that read the old value return, and
                // the flag was set before it (Release), so the thread sees it.
                seg.ring_server_bell();
                let out = seg.ring_header(Direction::ServerToClient);
                out.space_bell.fetch_add(1, Ordering::AcqRel);
                futex::wake(&out.space_bell, u32::MAX);
            }
            // Not once handed over: the successor reads the same socket.
            Wake::Stream(s, _) if !self.flags.hand_over.load(Ordering::Acquire) => {
                s.shutdown_read();
            }
            Wake::Stream(_, Some(evt)) => evt.signal(),
            Wake::Stream(_, None) => {}
        }
    }

    /// The client's control socket hung up, or carries bytes: after the
    /// handshake nothing but descriptor records (when agreed) may be written
    /// there; anything else is a protocol error.
    pub(crate) fn control_event(&self) {
        if self.fds {
            // A record came (the session thread reads it), or a hang-up.
            if self
                .ctrl
                .as_ref()
                .is_some_and(|c| shmlink_sys::poll::peer_gone(&**c))
            {
                self.flags.gone.store(true, Ordering::Release);
                self.wake();
            }
            return;
        }
        let mut byte = [0u8; 1];
        let wrote = self
            .ctrl
            .as_ref()
            .is_some_and(|c| matches!(shmlink_sys::net::peek(&**c, &mut byte), Ok(1)));
        if wrote {
            self.flags.wrote_control.store(true, Ordering::Release);
        }
        self.flags.gone.store(true, Ordering::Release);
        self.wake();
    }

    /// The server hands its sessions over: stop at the next message
    /// boundary (a stream session's wait ends by its interrupt, never by
    /// shutting its socket, which goes on at the successor).
    pub(crate) fn hand_over(&self) {
        self.flags.hand_over.store(true, Ordering::Release);
        match &self.wake {
            Wake::Shm(_) => self.wake(),
            Wake::Stream(_, Some(evt)) => evt.signal(),
            Wake::Stream(_, None) => {}
        }
    }

    /// Whether a hand-over can take this session (an `shm:` one, or a
    /// stream one with an interrupt).
    pub(crate) fn can_hand_over(&self) -> bool {
        matches!(self.wake, Wake::Shm(_) | Wake::Stream(_, Some(_)))
    }

    /// The server is stopping.
    pub(crate) fn stop(&self) {
        self.flags.stop.store(true, Ordering::Release);
        self.wake();
    }
}

/// The epoll set and the table of sessions in it.
#[derive(Debug)]
pub(crate) struct Registry {
    epoll: Epoll,
    sessions: Mutex<HashMap<u64, Arc<Entry>>>,
}

impl Registry {
    /// An empty registry with its epoll set.
    ///
    /// # Errors
    /// When the kernel refuses the epoll set.
    pub(crate) fn new() -> io::Result<Registry> {
        Ok(Registry {
            epoll: Epoll::new()?,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The epoll set (the accept loop adds its listeners and waits on it).
    pub(crate) fn epoll(&self) -> &Epoll {
        &self.epoll
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
        lock(&self.sessions)
    }

    /// Files a session under `id`, watching `ctrl` (an `shm:` session's
    /// control socket) for its client's hang-up. A control socket that
    /// cannot be watched marks the session gone: it could never notice its
    /// client's death otherwise.
    pub(crate) fn add(&self, id: u64, entry: &Arc<Entry>, ctrl: Option<&impl AsFd>) {
        self.lock().insert(id, Arc::clone(entry));
        if let Some(fd) = ctrl {
            if self.epoll.add(fd, id, Interest::HangUp).is_err() {
                entry.flags.gone.store(true, Ordering::Release);
            }
        }
    }

    /// Takes a session out.
    pub(crate) fn remove(&self, id: u64, ctrl: Option<&impl AsFd>) {
        if let Some(fd) = ctrl {
            let _ = self.epoll.delete(fd);
        }
        self.lock().remove(&id);
    }

    /// Something happened on the control socket of session `id` (an epoll
    /// event with its token).
    pub(crate) fn control_event(&self, id: u64) {
        if let Some(entry) = self.lock().get(&id) {
            entry.control_event();
        }
    }

    /// The sessions now, by id.
    pub(crate) fn snapshot(&self) -> Vec<(u64, Arc<Entry>)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(&id, e)| (id, Arc::clone(e)))
            .collect();
        all.sort_unstable_by_key(|&(id, _)| id);
        all
    }

    /// Tells every session that the server is stopping.
    pub(crate) fn stop_all(&self) {
        for entry in self.lock().values() {
            entry.stop();
        }
    }
}

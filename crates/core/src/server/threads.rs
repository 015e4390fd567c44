//! Session threads, reused: a thread that finished a session waits for the
//! next one instead of exiting, so a new session does not pay for a fresh
//! thread (stack pages are first-touch faults, several µs each on a VM).
//! Threads idle for [`IDLE_KEEP`] exit; sleeping threads cost no CPU.
//! [`SessionThreads::close`] joins every thread: when the server has stopped, none of
//! them still runs library code (a C or PHP host may unload it then).

use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::sync::{join_all, lock};

/// How long an idle session thread waits for work before exiting.
pub(crate) const IDLE_KEEP: Duration = Duration::from_secs(30);

type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    idle: usize,
    closed: bool,
}

/// A growable pool of session threads.
#[derive(Default)]
pub(crate) struct SessionThreads {
    state: Mutex<State>,
    work: Condvar,
    /// Every thread started and not joined yet (finished ones are dropped
    /// when the next one starts).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for SessionThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionThreads")
    }
}

impl SessionThreads {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Runs `job` on an idle thread, or on a new one.
    ///
    /// # Errors
    /// When a new thread is needed and cannot be created.
    pub(crate) fn submit(self: &Arc<Self>, job: Job) -> io::Result<()> {
        let mut st = self.lock();
        if st.idle > st.jobs.len() {
            st.jobs.push_back(job);
            drop(st);
            self.work.notify_one();
            return Ok(());
        }
        drop(st);
        let pool = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("shmlink-session".into())
            .spawn(move || {
                run_job(job);
                pool.worker_loop();
            })?;
        let mut threads = lock(&self.threads);
        threads.retain(|t| !t.is_finished());
        threads.push(thread);
        Ok(())
    }

    fn worker_loop(&self) {
        let mut st = self.lock();
        loop {
            if let Some(job) = st.jobs.pop_front() {
                drop(st);
                run_job(job);
                st = self.lock();
                continue;
            }
            if st.closed {
                return;
            }
            st.idle += 1;
            let (guard, timeout) = self
                .work
                .wait_timeout(st, IDLE_KEEP)
                .unwrap_or_else(|p| p.into_inner());
            st = guard;
            st.idle -= 1;
            if timeout.timed_out() && st.jobs.is_empty() {
                return;
            }
        }
    }

    /// Lets idle threads exit and waits until every thread has (except the
    /// calling one, should a job close its own pool).
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.work.notify_all();
        let threads = std::mem::take(&mut *lock(&self.threads));
        join_all(threads);
    }
}

fn run_job(job: Job) {
    // Handler panics are caught closer to the handler; this only keeps a
    // bug elsewhere from killing a reusable thread.
    let _ = catch_unwind(AssertUnwindSafe(job));
}

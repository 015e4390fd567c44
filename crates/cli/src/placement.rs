//! Where a measurement's parties run: the client on the first CPU this
//! process may use, the servers on the last (a pool's threads and workers,
//! or server commands told their CPU), as `shmlink bench` and the main
//! job's scenario place a client and a server. Threads and processes
//! inherit the affinity of the thread that starts them, so servers started
//! here are started while the calling thread is pinned to their CPU, and
//! the thread then moves to the client's.

use anyhow::Context;

/// The two CPUs, or none (one CPU, or `--no-pin`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    cpus: Option<(usize, usize)>,
}

impl Placement {
    /// The first and last allowed CPUs when there are two or more and
    /// `pin` is set (this thread moves to the client's at once); no pinning
    /// otherwise.
    pub(crate) fn new(pinned: bool) -> anyhow::Result<Placement> {
        if !pinned {
            return Ok(Placement { cpus: None });
        }
        let cpus = shmlink_sys::process::allowed_cpus().context("cannot read the allowed CPUs")?;
        let cpus = match cpus.as_slice() {
            [first, .., last] => Some((*first, *last)),
            _ => None,
        };
        if let Some((client, _)) = cpus {
            pin(client)?;
        }
        Ok(Placement { cpus })
    }

    /// Runs `start` (which starts the pool or the workers) on the servers'
    /// CPU, then moves this thread to the client's.
    pub(crate) fn start_servers<T>(
        &self,
        start: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let Some((client, server)) = self.cpus else {
            return start();
        };
        pin(server)?;
        let started = start();
        pin(client)?;
        started
    }

    /// The servers' CPU, if pinned (for servers started as commands, which
    /// pin themselves).
    pub(crate) fn server_cpu(&self) -> Option<usize> {
        self.cpus.map(|(_, server)| server)
    }

    /// How the parties were placed, for the report.
    pub(crate) fn describe(&self) -> String {
        match self.cpus {
            Some((client, server)) => {
                format!("client on CPU {client}, pool and workers on CPU {server}")
            }
            None => "not pinned".to_string(),
        }
    }
}

fn pin(cpu: usize) -> anyhow::Result<()> {
    shmlink_sys::affinity::pin_current_thread(cpu)
        .with_context(|| format!("cannot pin to CPU {cpu}"))
}

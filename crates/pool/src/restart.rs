//! Why the pool replaces a worker: what the supervisor records when one
//! exits, and the `reason` label of the restart metrics.

/// Why a worker was replaced (`reason` of
/// `shmlink_pool_worker_restarts_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restart {
    /// It exited or was killed without being asked (a failed start too).
    Crash,
    /// `--max-jobs` calls served.
    MaxJobs,
    /// Over `--max-memory`.
    MaxMemory,
    /// Older than `--ttl`.
    Ttl,
    /// Idle for `--idle-ttl`.
    IdleTtl,
    /// Replaced by a reload.
    Reload,
    /// Killed: a call, request or direct line past the call timeout, or a
    /// start past the start timeout.
    Timeout,
}

impl Restart {
    /// Every reason, in the order they are shown.
    pub(crate) const ALL: [Restart; 7] = [
        Restart::Crash,
        Restart::MaxJobs,
        Restart::MaxMemory,
        Restart::Ttl,
        Restart::IdleTtl,
        Restart::Reload,
        Restart::Timeout,
    ];

    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Restart::Crash => "crash",
            Restart::MaxJobs => "max_jobs",
            Restart::MaxMemory => "max_memory",
            Restart::Ttl => "ttl",
            Restart::IdleTtl => "idle_ttl",
            Restart::Reload => "reload",
            Restart::Timeout => "timeout",
        }
    }
}

//! The remote error codes a pool answers a call with when no worker could
//! (the worker's own errors pass through with their codes).

/// No worker became free within the queue timeout.
pub const CODE_NO_WORKER: u32 = 0xFFFF_0010;
/// The queue of calls waiting for a worker is full.
pub const CODE_QUEUE_FULL: u32 = 0xFFFF_0011;
/// The worker running the call died (crashed, was killed) before answering.
pub const CODE_WORKER_DIED: u32 = 0xFFFF_0012;
/// The worker did not answer within the call timeout; it was killed.
pub const CODE_WORKER_TIMEOUT: u32 = 0xFFFF_0013;
/// The pool is stopping.
pub const CODE_POOL_STOPPING: u32 = 0xFFFF_0014;
/// No worker can start: every recent start failed (the reason says how).
pub const CODE_NO_WORKERS_START: u32 = 0xFFFF_0015;
/// The control socket does not know the command.
pub const CODE_UNKNOWN_COMMAND: u32 = 0xFFFF_0020;

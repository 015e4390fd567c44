//! The remote error codes a pool answers a call with when no worker could
//! (the worker's own errors pass through with their codes).

/// No worker became free within the queue timeout.
pub const CODE_NO_WORKER: u32 = 0xFFFF_0010;
/// The queue of calls waiting for a worker is full.
pub const CODE_QUEUE_FULL: u32 = 0xFFFF_0011;
// The worker running the call died, or did not answer within the call
// timeout: defined by the core, whose clients on a direct line answer
// those calls themselves.
pub use shmlink::{CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
/// The pool is stopping.
pub const CODE_POOL_STOPPING: u32 = 0xFFFF_0014;
/// No worker can start: every recent start failed (the reason says how).
pub const CODE_NO_WORKERS_START: u32 = 0xFFFF_0015;
/// The control socket does not know the command.
pub const CODE_UNKNOWN_COMMAND: u32 = 0xFFFF_0020;

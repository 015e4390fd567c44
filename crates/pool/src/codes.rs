//! The remote error codes a pool answers a call with when no worker could
//! (the worker's own errors pass through with their codes): from the one
//! registry of codes, `shmlink::wire::codes`.

pub use shmlink::wire::codes::{
    CODE_NO_WORKER, CODE_NO_WORKERS_START, CODE_POOL_STOPPING, CODE_QUEUE_FULL,
    CODE_UNKNOWN_COMMAND, CODE_WORKER_DIED, CODE_WORKER_TIMEOUT,
};

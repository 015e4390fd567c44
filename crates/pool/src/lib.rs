//! `shmlink pool`: a supervisor of long-lived worker processes (PHP with
//! `Shmlink\Worker`, or native ones with `shmlink::Worker`) behind shmlink
//! addresses.
//!
//! The pool listens on its addresses as any shmlink server does; each call a
//! client makes is handed to an idle worker over shared memory (the worker's
//! loop runs on its own thread and waits on its ring directly) and the
//! worker's answer goes back as the response. Calls wait for a worker in a
//! bounded queue; a worker that dies or hangs fails only the call it was
//! running, with a clear error, and is replaced (with backoff when starts
//! keep failing); workers are recycled between calls after `max_jobs`
//! calls, past `max_memory`, `ttl` or `idle_ttl`; a reload replaces them all
//! without failing a call. A control socket answers `status` and `reload`.
//!
//! # Examples
//! ```no_run
//! use shmlink_pool::{Pool, PoolOptions};
//! let opts = PoolOptions::new(
//!     vec!["shm:/run/app.sock".into()],
//!     vec!["php".into(), "-d".into(), "opcache.enable_cli=1".into(), "worker.php".into()],
//! );
//! let pool = Pool::start(opts)?;
//! // ... later, from a signal handler's thread:
//! pool.stop();
//! # Ok::<(), shmlink_pool::PoolError>(())
//! ```

mod codes;
mod control;
mod dispatch;
mod error;
mod heritage;
mod http;
mod http_workers;
mod inner;
mod log_format;
mod metrics;
mod options;
mod pool;
mod restart;
mod shutdown;
mod spawn;
mod status;
mod succession;
mod supervise;
mod table;
mod upgrade;

pub use codes::*;
pub use error::PoolError;
pub use heritage::Inheritance;
pub use log_format::{json_line, LogFormat};
pub use options::{
    default_idle_worker_wait, default_wait, default_worker_wait, HttpMode, PoolOptions,
};
pub use pool::{Pool, Upgraded};
pub use status::{Status, WorkerStatus};

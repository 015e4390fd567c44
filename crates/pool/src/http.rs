//! The pool behind the HTTP front: each request is a call dispatched to a
//! worker as any client's call is; the pool's error codes become statuses.

use std::sync::Arc;
use std::time::Duration;

use shmlink_http::{Backend, Fault};

use crate::codes::{
    CODE_NO_WORKER, CODE_NO_WORKERS_START, CODE_POOL_STOPPING, CODE_QUEUE_FULL, CODE_WORKER_DIED,
    CODE_WORKER_TIMEOUT,
};
use crate::dispatch::Dispatch;
use crate::inner::Inner;

/// The front's backend: the pool's dispatch.
pub(crate) struct PoolBackend(Dispatch);

impl PoolBackend {
    pub(crate) fn new(inner: Arc<Inner>) -> PoolBackend {
        PoolBackend(Dispatch::new(inner))
    }
}

impl Backend for PoolBackend {
    fn call(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), Fault> {
        self.0
            .dispatch(request, response)
            .map_err(|e| Fault::new(status_of(e.code), e.message))
    }

    fn concurrency(&self) -> usize {
        self.0.workers()
    }

    fn queue_timeout(&self) -> Duration {
        self.0.queue_timeout()
    }
}

/// The status a pool error code is answered with.
pub(crate) fn status_of(code: u32) -> u16 {
    match code {
        CODE_WORKER_DIED => 502,
        CODE_NO_WORKER | CODE_QUEUE_FULL | CODE_POOL_STOPPING | CODE_NO_WORKERS_START => 503,
        CODE_WORKER_TIMEOUT => 504,
        // The worker's own error (its handler threw): the application failed.
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pool_code_has_its_status() {
        assert_eq!(status_of(CODE_WORKER_DIED), 502);
        assert_eq!(status_of(CODE_NO_WORKER), 503);
        assert_eq!(status_of(CODE_QUEUE_FULL), 503);
        assert_eq!(status_of(CODE_WORKER_TIMEOUT), 504);
        assert_eq!(status_of(42), 500);
    }
}

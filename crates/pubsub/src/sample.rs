//! A sample as a subscriber receives it: read in place in the publisher's
//! pool (over `shm:`), or a copy of its own (over a socket).

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use shmlink_sys::ReadOnlyMapping;

use crate::shared;

/// Slots a subscriber's samples gave back on drop, to return to the
/// publisher at the subscriber's next receive.
#[derive(Debug, Default)]
pub(crate) struct Returns {
    pub(crate) slots: Mutex<Vec<u32>>,
}

#[derive(Debug)]
enum Body {
    InPlace {
        pool: Arc<ReadOnlyMapping>,
        off: usize,
        len: usize,
        slot: u32,
        returns: Arc<Returns>,
    },
    Copied {
        message: Vec<u8>,
        from: usize,
    },
}

/// A received sample: it derefs to its bytes.
///
/// Over `shm:` the bytes are the publisher's pool, read where they lie and
/// shared with every other subscriber; dropping the sample gives its slot
/// back (at this subscriber's next receive). **The bytes are volatile**
/// as an arena view's are: a publisher breaking the protocol may write
/// them while they are read, which changes what is read but never reaches
/// outside memory mapped for reading. Use [`Sample::to_vec`] for a stable
/// copy.
#[derive(Debug)]
pub struct Sample {
    seq: u64,
    body: Body,
}

impl Sample {
    pub(crate) fn in_place(
        seq: u64,
        pool: Arc<ReadOnlyMapping>,
        off: usize,
        len: usize,
        slot: u32,
        returns: Arc<Returns>,
    ) -> Sample {
        Sample {
            seq,
            body: Body::InPlace {
                pool,
                off,
                len,
                slot,
                returns,
            },
        }
    }

    pub(crate) fn copied(seq: u64, message: Vec<u8>, from: usize) -> Sample {
        Sample {
            seq,
            body: Body::Copied { message, from },
        }
    }

    /// The publisher's sequence number of this sample (0 for its first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether it is read in place in shared memory (over `shm:`).
    pub fn in_shared_memory(&self) -> bool {
        matches!(self.body, Body::InPlace { .. })
    }

    /// A copy of its bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.deref().to_vec()
    }
}

impl Deref for Sample {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.body {
            // The range was checked against the pool when received.
            Body::InPlace { pool, off, len, .. } => shared::slot(pool, *off, *len).unwrap_or(&[]),
            Body::Copied { message, from } => message.get(*from..).unwrap_or(&[]),
        }
    }
}

impl Drop for Sample {
    fn drop(&mut self) {
        if let Body::InPlace { slot, returns, .. } = &self.body {
            returns
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(*slot);
        }
    }
}

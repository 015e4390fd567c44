//! A futex for loom, shared by the loom suites (`mod loom_futex;`): wait
//! sleeps only while the word holds `expected`; checking and sleeping are
//! atomic with respect to `wake` (the mutex), as the kernel makes them for
//! FUTEX_WAIT/FUTEX_WAKE.

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct Futex {
    m: Mutex<()>,
    cv: Condvar,
}

impl Futex {
    pub(crate) fn wait(&self, word: &AtomicU32, expected: u32) {
        let g = self.m.lock().expect("futex lock");
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        drop(self.cv.wait(g).expect("futex wait"));
    }

    pub(crate) fn wake(&self) {
        let _g = self.m.lock().expect("futex lock");
        self.cv.notify_all();
    }
}

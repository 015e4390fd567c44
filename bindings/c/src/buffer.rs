//! Library-owned byte buffers handed to C.

use std::mem::ManuallyDrop;

/// A byte buffer owned by the library. Start from `SHMLINK_BUFFER_INIT` (all
/// zero), pass it to the calls that fill it (they reuse its allocation, so a
/// caller that keeps one buffer makes calls without allocating), release it
/// with `shmlink_buffer_free`. Read `data[0..len]`; never change the fields.
/// `data` may be NULL when `len` is 0. A buffer with `capacity` 0 owns no
/// bytes: `shmlink_client_call_or_view` points it at a view's.
#[repr(C)]
#[derive(Debug)]
pub struct shmlink_buffer {
    /// The bytes.
    pub data: *mut u8,
    /// How many bytes are valid.
    pub len: usize,
    /// Size of the allocation (private to the library).
    pub capacity: usize,
}

impl shmlink_buffer {
    /// Takes the allocation out as a `Vec`, leaving the buffer empty.
    ///
    /// # Safety
    /// The fields are all zero or were set by [`shmlink_buffer::put`].
    pub(crate) unsafe fn take(&mut self) -> Vec<u8> {
        let (data, len, capacity) = (self.data, self.len, self.capacity);
        *self = Self::EMPTY;
        if data.is_null() || capacity == 0 {
            return Vec::new();
        }
        // SAFETY: (data, len, capacity) came from a `Vec<u8>` forgotten by
        // `put`, per this function's contract.
        unsafe { Vec::from_raw_parts(data, len.min(capacity), capacity) }
    }

    /// Hands `v` to the buffer, which must be empty (taken) before.
    pub(crate) fn put(&mut self, v: Vec<u8>) {
        if v.capacity() == 0 {
            *self = Self::EMPTY;
            return;
        }
        let mut v = ManuallyDrop::new(v);
        *self = shmlink_buffer {
            data: v.as_mut_ptr(),
            len: v.len(),
            capacity: v.capacity(),
        };
    }

    /// Points the buffer, which must be empty (taken) before, at `len` bytes
    /// at `data` that it does not own (capacity 0: `take` and
    /// `shmlink_buffer_free` leave them alone).
    pub(crate) fn show(&mut self, data: *const u8, len: usize) {
        *self = shmlink_buffer {
            data: data.cast_mut(),
            len,
            capacity: 0,
        };
    }

    const EMPTY: shmlink_buffer = shmlink_buffer {
        data: std::ptr::null_mut(),
        len: 0,
        capacity: 0,
    };
}

/// Frees a buffer's bytes and resets it to all zero, ready for reuse.
///
/// Ownership: the buffer struct stays the caller's; its bytes go back to the
/// library. NULL is allowed. Thread-safe for distinct buffers.
///
/// # Safety
/// `buffer` is NULL or points to a buffer that is all zero or was filled by
/// this library.
#[no_mangle]
pub unsafe extern "C" fn shmlink_buffer_free(buffer: *mut shmlink_buffer) {
    // SAFETY: per the contract, `buffer` is NULL or a valid buffer struct
    // whose fields were set by the library.
    if let Some(b) = unsafe { buffer.as_mut() } {
        // SAFETY: as above.
        drop(unsafe { b.take() });
    }
}

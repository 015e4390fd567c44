//! Responses handed to C where they arrived: lent from the server's arena
//! (read in place) or in a buffer of their own.

use shmlink::Response;

use crate::guard::free_box;

/// A response read where it arrived (opaque), from
/// `shmlink_client_call_response`: a large response the server lent from
/// its arena lies in memory the server shares read-only and is read in
/// place, without a copy; any other lies in a buffer of its own. Free it
/// with `shmlink_view_free`, which gives a lent response back to the server
/// (the release travels with the client's next message).
///
/// It keeps its memory mapped by itself: it stays valid after further calls
/// on its client, and after the client is closed or freed.
///
/// **The bytes of a lent response are volatile**: a server breaking the
/// protocol could change them while they are read (never make a read leave
/// the mapping). Copy them out first when they must not change between two
/// reads.
#[derive(Debug)]
pub struct shmlink_view {
    pub(crate) response: Response,
}

impl shmlink_view {
    /// Where the bytes start (NULL for an empty response) and how many.
    pub(crate) fn bytes(&self) -> (*const u8, usize) {
        match self.response.len() {
            0 => (std::ptr::null(), 0),
            n => (self.response.as_ptr(), n),
        }
    }
}

/// 1 when the response lies in the server's arena (lent, read in place),
/// 0 when it came in a buffer of its own, or for NULL.
///
/// # Safety
/// `view` is NULL or a view not yet freed.
#[no_mangle]
pub unsafe extern "C" fn shmlink_view_is_lent(view: *const shmlink_view) -> i32 {
    // SAFETY: NULL or a live view, per the contract.
    unsafe { view.as_ref() }.map_or(0, |v| i32::from(v.response.is_lent()))
}

/// Frees a view: a lent response goes back to the server (its release
/// travels with the next message of the client it came from; nothing is
/// sent when that client is closed or freed). The data pointer the call
/// gave is invalid afterwards. NULL is ignored. Fine after the view's client
/// was closed or freed, and from any thread (one at a time per view).
///
/// # Safety
/// `view` is NULL or a view not yet freed.
#[no_mangle]
pub unsafe extern "C" fn shmlink_view_free(view: *mut shmlink_view) {
    // SAFETY: NULL or a view from `shmlink_client_call_response*` (boxed
    // there) not yet freed, per the contract.
    unsafe { free_box(view) }
}

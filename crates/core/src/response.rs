//! A response as it arrived: in a buffer of its own, or lent from the
//! server's arena and read where it lies.

use std::fmt;
use std::ops::Deref;

use crate::message::Message;

/// A response from [`Client::call_response`](crate::Client::call_response):
/// it derefs to the response bytes.
///
/// A large response the server lent from its arena (capability bit 5) is
/// read in place, without a copy: the bytes lie in memory the server
/// shares read-only, and dropping the `Response` gives them back (the
/// release travels with the client's next message). **Those bytes are
/// volatile** in the way [`View`](shmlink_arena::View) describes: a server
/// breaking the protocol could change them while they are read, never make
/// a read leave the mapping. [`Response::into_vec`] takes a stable copy.
pub struct Response(Body);

enum Body {
    Owned(Vec<u8>),
    Lent(shmlink_arena::View),
}

impl Response {
    /// The response a message carries (its lent buffer, or its body).
    pub(crate) fn from_message(mut m: Message) -> Response {
        if m.has_extra() {
            if let Some(view) = m.take_extra().lent {
                return Response(Body::Lent(view));
            }
        }
        Response(Body::Owned(m.body))
    }

    /// Whether the bytes lie in the server's arena (read in place).
    pub fn is_lent(&self) -> bool {
        matches!(self.0, Body::Lent(_))
    }

    /// The bytes in a buffer of their own: the buffer itself when the
    /// response came in one, else a copy (and the lent buffer goes back).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Body::Owned(v) => v,
            Body::Lent(view) => view.to_vec(),
        }
    }
}

impl Deref for Response {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Body::Owned(v) => v,
            Body::Lent(view) => view,
        }
    }
}

impl AsRef<[u8]> for Response {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("len", &self.len())
            .field("lent", &self.is_lent())
            .finish()
    }
}

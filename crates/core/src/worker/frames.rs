//! A session's `Line` frames (capability bit 7): sent with their
//! descriptors, decoded when received.

use std::os::fd::{BorrowedFd, OwnedFd};

use crate::deadline::Deadline;
use crate::error::Result;
use crate::message::Message;
use crate::session::Session;
use shmlink_wire::frame::Kind;
use shmlink_wire::line::LineBody;

/// Sends a line frame on `session`; a grant with its two descriptors.
///
/// # Errors
/// As [`Session::send_with_fds`].
pub(crate) fn send(
    session: &mut Session,
    body: &LineBody,
    fds: &[BorrowedFd<'_>],
    deadline: &mut Deadline,
) -> Result<()> {
    session.send_with_fds(Kind::Line, 0, &body.encode(), fds, deadline)
}

/// Decodes a line frame received on `session`, and takes its descriptors;
/// a malformed one ends the session.
///
/// # Errors
/// A protocol error (the peer is told why).
pub(crate) fn decode(session: &mut Session, m: &mut Message) -> Result<(LineBody, Vec<OwnedFd>)> {
    let fds = m.take_extra().fds;
    match LineBody::decode(&m.body, fds.len()) {
        Ok(b) => Ok((b, fds)),
        Err(detail) => Err(session.violation(detail)),
    }
}

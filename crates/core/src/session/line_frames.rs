//! A session's `Line` frames (capability bit 7, `crate::line`): sent with
//! their descriptors, decoded when received.

use std::os::fd::{BorrowedFd, OwnedFd};

use super::Session;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::message::Message;
use shmlink_wire::frame::Kind;
use shmlink_wire::line::LineBody;

impl Session {
    /// Sends a line frame; a grant with its two descriptors.
    ///
    /// # Errors
    /// As [`Session::send_with_fds`].
    pub(crate) fn send_line(
        &mut self,
        body: &LineBody,
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
    ) -> Result<()> {
        self.send_with_fds(Kind::Line, 0, &body.encode(), fds, deadline)
    }

    /// Decodes a received line frame, and takes its descriptors; a
    /// malformed one ends the session.
    ///
    /// # Errors
    /// A protocol error (the peer is told why).
    pub(crate) fn line_body(&mut self, m: &mut Message) -> Result<(LineBody, Vec<OwnedFd>)> {
        let fds = m.take_extra().fds;
        match LineBody::decode(&m.body, fds.len()) {
            Ok(b) => Ok((b, fds)),
            Err(detail) => Err(self.violation(detail)),
        }
    }
}

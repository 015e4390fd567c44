//! File descriptors sent with messages (capability bit 4). On `unix:` they
//! ride on the frame's first bytes (`SCM_RIGHTS`); on `shm:` the frame goes
//! through the ring and its descriptors through the control socket, in a
//! record ([`shmlink_wire::fd_record`]) sent just before the frame is pushed.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use shmlink_sys::fdpass;
use shmlink_sys::poll::{self, Ready};

use crate::error::{Error, Result};
use shmlink_wire::fd_record::{FdRecord, FD_RECORD_LEN as RECORD_LEN};
use shmlink_wire::frame::FrameHeader;

/// Sends the record for frame `h` with `fds` on the control socket,
/// waiting for buffer space until `deadline`. Nothing is sent when it fails.
///
/// # Errors
/// [`Error::BadFds`] (a descriptor is not open), [`Error::Timeout`], socket
/// errors.
pub(crate) fn send_record(
    sock: impl AsFd,
    h: &FrameHeader,
    fds: &[BorrowedFd<'_>],
    deadline: Option<Instant>,
    addr: &str,
) -> Result<()> {
    let rec = FdRecord {
        id: h.id,
        count: u32::try_from(fds.len()).unwrap_or(u32::MAX),
    }
    .encode();
    let started = Instant::now();
    loop {
        match fdpass::send_vectored_with_fds(&sock, &[io::IoSlice::new(&rec)], fds, true) {
            Ok(RECORD_LEN) => return Ok(()),
            Ok(n) => {
                return Err(Error::Protocol {
                    peer: addr.to_string(),
                    detail: format!(
                    "the control socket took {n} of the {RECORD_LEN} bytes of a descriptor record"
                ),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match poll::writable(&sock, deadline).map_err(|e| send_error(addr, e))? {
                    Ready::Yes => {}
                    Ready::TimedOut => {
                        return Err(Error::Timeout {
                            address: addr.to_string(),
                            op: "sending file descriptors",
                            after: started.elapsed(),
                        })
                    }
                    Ready::HungUp => {
                        return Err(Error::PeerGone {
                            address: addr.to_string(),
                            detail: "control socket hung up".into(),
                        })
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(send_error(addr, e)),
        }
    }
}

/// The error of a `sendmsg` that carried descriptors: a descriptor that is
/// not open, or too many in flight, leaves the session usable.
pub(crate) fn send_error(addr: &str, e: io::Error) -> Error {
    let Some(reason) = fdpass::fd_refusal(&e) else {
        return Error::io(format!("sending file descriptors to {addr}"), e);
    };
    Error::BadFds {
        address: addr.to_string(),
        reason: reason.into(),
    }
}

/// Receives the record of frame `h` from the control socket (it was sent
/// before the frame was pushed, so it is there already) and returns its
/// descriptors.
///
/// # Errors
/// A protocol error when the record is missing, malformed, or does not
/// match the frame.
pub(crate) fn recv_record(sock: impl AsFd, h: &FrameHeader, addr: &str) -> Result<Vec<OwnedFd>> {
    let proto = |detail: String| Error::Protocol {
        peer: addr.to_string(),
        detail,
    };
    let mut buf = [0u8; RECORD_LEN];
    let mut fds = Vec::new();
    let n = match fdpass::recv_fds_into(sock, &mut buf, &mut fds, true) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(e) => {
            return Err(proto(format!(
                "receiving the descriptors of call {}: {e}",
                h.id
            )))
        }
    };
    let Some(FdRecord { count, id }) = FdRecord::decode(&buf[..n]) else {
        return Err(proto(format!(
            "frame of call {} announces {} file descriptors, but no descriptor record ({n} bytes) came on the control socket",
            h.id, h.fds
        )));
    };
    if id != h.id || count != u32::from(h.fds) || fds.len() != usize::from(h.fds) {
        return Err(proto(format!(
            "frame of call {} announces {} file descriptors; the record names call {id} and {count}, and {} came",
            h.id,
            h.fds,
            fds.len()
        )));
    }
    Ok(fds)
}

/// Takes the descriptors of frame `h` from those a stream received, in
/// order.
///
/// # Errors
/// A protocol error when fewer arrived than the frame announces.
pub(crate) fn take(queue: &mut Vec<OwnedFd>, h: &FrameHeader, addr: &str) -> Result<Vec<OwnedFd>> {
    let n = usize::from(h.fds);
    if queue.len() < n {
        return Err(Error::Protocol {
            peer: addr.to_string(),
            detail: format!(
                "frame of call {} announces {n} file descriptors, {} arrived with it",
                h.id,
                queue.len()
            ),
        });
    }
    Ok(queue.drain(..n).collect())
}

/// The error for a frame announcing descriptors on a session that did not
/// agree on them.
#[cold]
pub(crate) fn not_agreed(h: &FrameHeader, addr: &str) -> Error {
    Error::Protocol {
        peer: addr.to_string(),
        detail: format!(
            "frame of call {} announces {} file descriptors, but descriptors (capability bit 4) were not agreed",
            h.id, h.fds
        ),
    }
}

//! Passing descriptors over a Unix socket (`SCM_RIGHTS`).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// Most descriptors one message may carry.
pub const MAX_FDS: usize = 4;

/// Sends `data` with `fds` attached, in one `sendmsg`. Returns the bytes sent.
///
/// # Errors
/// Fails on socket errors, or with `InvalidInput` for more than [`MAX_FDS`].
pub fn send_with_fds(sock: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("control buffer too small for descriptors"));
    }
    Ok(sendmsg(
        sock,
        &[IoSlice::new(data)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?)
}

/// Receives into `buf`, collecting any descriptors sent with the message.
///
/// Returns the number of bytes read (0 at end of stream) and the descriptors.
/// A message whose descriptors did not fit (`MSG_CTRUNC`) is an error; the
/// descriptors that did arrive are closed.
///
/// # Errors
/// Socket errors, or `InvalidData` when descriptors were truncated.
pub fn recv_with_fds(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg.flags.contains(ReturnFlags::CTRUNC) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "descriptors truncated in transit",
        ));
    }
    Ok((msg.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn passes_a_memfd() {
        let (a, b) = UnixStream::pair().expect("pair");
        let fd = crate::memfd::create_sealed("pass", 4096).expect("memfd");
        send_with_fds(&a, b"hello", &[fd.as_fd()]).expect("send");
        let mut buf = [0u8; 16];
        let (n, fds) = recv_with_fds(&b, &mut buf).expect("recv");
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        assert_eq!(crate::memfd::inspect(&fds[0]).expect("inspect").len, 4096);
    }
}

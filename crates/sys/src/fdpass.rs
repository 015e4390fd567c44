//! Passing descriptors over a Unix socket (`SCM_RIGHTS`).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// Most descriptors one `sendmsg` here carries (the size of the control
/// buffers; the kernel's own limit, `SCM_MAX_FD`, is 253).
pub const MAX_FDS: usize = 64;

/// Sends `data` with `fds` attached, in one `sendmsg`. Returns the bytes sent.
///
/// # Errors
/// Fails on socket errors, or with `InvalidInput` for more than [`MAX_FDS`].
pub fn send_with_fds(sock: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    send_vectored_with_fds(sock, &[IoSlice::new(data)], fds, false)
}

/// `sendmsg(2)` of the slices with `fds` attached (`SCM_RIGHTS`), with
/// `MSG_NOSIGNAL` (and `MSG_DONTWAIT` when `nonblocking`): the descriptors
/// go with the first byte sent. Returns the bytes sent; without blocking
/// that may be fewer than given (or `WouldBlock`, with nothing sent and no
/// descriptor passed).
///
/// # Errors
/// Socket errors (`EBADF` names a descriptor that is not open: nothing was
/// sent), or `InvalidInput` for more than [`MAX_FDS`].
pub fn send_vectored_with_fds(
    sock: impl AsFd,
    bufs: &[IoSlice<'_>],
    fds: &[BorrowedFd<'_>],
    nonblocking: bool,
) -> io::Result<usize> {
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
    let mut flags = SendFlags::NOSIGNAL;
    if nonblocking {
        flags |= SendFlags::DONTWAIT;
    }
    Ok(sendmsg(sock, bufs, &mut control, flags)?)
}

/// What a `sendmsg` error with descriptors attached says about the
/// descriptors themselves (`None`: the error is the socket's): `EBADF` (one
/// is not open) or `ETOOMANYREFS` (too many in flight to the receiver).
pub fn fd_refusal(e: &io::Error) -> Option<&'static str> {
    match rustix::io::Errno::from_io_error(e) {
        Some(rustix::io::Errno::BADF) => Some("one of them is not an open descriptor (EBADF)"),
        Some(rustix::io::Errno::TOOMANYREFS) => {
            Some("too many descriptors in flight to the peer (ETOOMANYREFS)")
        }
        _ => None,
    }
}

/// Whether `fd` is an open descriptor of this process (`fcntl(F_GETFD)`
/// succeeds), for callers holding plain descriptor numbers (the C ABI) that
/// must check them before borrowing them as [`BorrowedFd`]. Negative numbers
/// are never open. The answer can be stale once another thread closes or
/// opens descriptors.
#[must_use]
pub fn is_open(fd: RawFd) -> bool {
    if fd < 0 {
        return false;
    }
    #[allow(unsafe_code)]
    // SAFETY: the borrowed number only reaches `fcntl(F_GETFD)`, which reads
    // the descriptor table and fails with EBADF for a number that is not
    // open; the borrow ends with the call and nothing is read or closed
    // through it.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_getfd(fd).is_ok()
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
    let mut fds = Vec::new();
    let n = recv_fds_into(sock, buf, &mut fds, false)?;
    Ok((n, fds))
}

/// `recvmsg(2)` into `buf` (with `MSG_DONTWAIT` when `nonblocking`),
/// appending any descriptors that came with the bytes to `fds` (close-on-exec
/// set). Returns the bytes read (0 at end of stream). Descriptors that did
/// not fit (`MSG_CTRUNC`: more than [`MAX_FDS`], or the process is out of
/// descriptors) make it an error; those that did arrive are closed.
///
/// # Errors
/// Socket errors (`WouldBlock` when non-blocking and nothing is queued), or
/// `InvalidData` when descriptors were truncated.
pub fn recv_fds_into(
    sock: impl AsFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    nonblocking: bool,
) -> io::Result<usize> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if nonblocking {
        flags |= RecvFlags::DONTWAIT;
    }
    let msg = recvmsg(sock, &mut [IoSliceMut::new(buf)], &mut control, flags)?;
    let before = fds.len();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg.flags.contains(ReturnFlags::CTRUNC) {
        fds.truncate(before);
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "descriptors truncated in transit",
        ));
    }
    Ok(msg.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn is_open_tells_open_from_closed_and_negative() {
        use std::os::fd::AsRawFd;
        let fd = crate::memfd::create_sealed("open", 4096).expect("memfd");
        let raw = fd.as_raw_fd();
        assert!(is_open(raw));
        assert!(!is_open(-1));
        assert!(!is_open(i32::MIN));
        // Above any descriptor limit, so never open (a number just closed
        // could be reused at once by a test on another thread).
        assert!(!is_open(1 << 30));
    }

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

    #[test]
    fn passes_many_with_gathered_bytes_and_refuses_too_many() {
        let (a, b) = UnixStream::pair().expect("pair");
        let fd = crate::memfd::create_sealed("pass", 4096).expect("memfd");
        let many = vec![fd.as_fd(); MAX_FDS];
        let bufs = [IoSlice::new(b"ab"), IoSlice::new(b"cd")];
        assert_eq!(
            send_vectored_with_fds(&a, &bufs, &many, true).expect("send"),
            4
        );
        let mut got = Vec::new();
        let mut buf = [0u8; 8];
        assert_eq!(
            recv_fds_into(&b, &mut buf, &mut got, true).expect("recv"),
            4
        );
        assert_eq!(&buf[..4], b"abcd");
        assert_eq!(got.len(), MAX_FDS);
        let err = recv_fds_into(&b, &mut buf, &mut got, true).expect_err("nothing queued");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let too_many = vec![fd.as_fd(); MAX_FDS + 1];
        let err = send_with_fds(&a, b"x", &too_many).expect_err("too many");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}

//! The control channel between the bench and its baseline peer: a Unix
//! socketpair whose peer end is the peer's stdin. The bench sends an order
//! (which baseline, sizes) with the segment or socket it uses attached; the
//! peer answers READY when set up and DONE when the bench stopped it.

use std::io::{self, Read, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use shmlink_sys::fdpass;

/// The raw baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaselineKind {
    /// Spin ping-pong on a shared page.
    Spin,
    /// FUTEX_WAIT/FUTEX_WAKE ping-pong on a shared page.
    Futex,
    /// Length-prefixed ping-pong over a Unix socketpair.
    Unix,
}

impl BaselineKind {
    /// Every baseline, in table order.
    pub(crate) const ALL: [BaselineKind; 3] =
        [BaselineKind::Spin, BaselineKind::Futex, BaselineKind::Unix];

    /// The name used as the record's transport.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BaselineKind::Spin => "baseline-spin",
            BaselineKind::Futex => "baseline-futex",
            BaselineKind::Unix => "baseline-unix",
        }
    }

    fn to_wire(self) -> u32 {
        match self {
            BaselineKind::Spin => 1,
            BaselineKind::Futex => 2,
            BaselineKind::Unix => 3,
        }
    }

    fn from_wire(n: u32) -> Option<Self> {
        match n {
            1 => Some(BaselineKind::Spin),
            2 => Some(BaselineKind::Futex),
            3 => Some(BaselineKind::Unix),
            _ => None,
        }
    }
}

/// What the bench asks the peer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Order {
    /// Which baseline.
    pub(crate) kind: BaselineKind,
    /// Request size in bytes.
    pub(crate) size: usize,
    /// Response size in bytes.
    pub(crate) reply: usize,
}

const MAGIC: u32 = u32::from_le_bytes(*b"SLBP");
const ORDER_LEN: usize = 24;

/// The peer is set up and waits for the first request.
pub(crate) const READY: u8 = b'R';
/// The peer saw the stop and waits for the next order.
pub(crate) const DONE: u8 = b'D';

/// Sends an order with `fd` attached.
pub(crate) fn send_order(ctl: &UnixStream, order: &Order, fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut msg = [0u8; ORDER_LEN];
    msg[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    msg[4..8].copy_from_slice(&order.kind.to_wire().to_le_bytes());
    msg[8..16].copy_from_slice(&(order.size as u64).to_le_bytes());
    msg[16..24].copy_from_slice(&(order.reply as u64).to_le_bytes());
    let n = fdpass::send_with_fds(ctl, &msg, &[fd])?;
    // The descriptor went with the first byte; the rest is plain data.
    let mut w = ctl;
    w.write_all(&msg[n..])
}

/// Receives the next order and its descriptor; `None` when the bench closed
/// the channel.
pub(crate) fn recv_order(ctl: &UnixStream) -> io::Result<Option<(Order, OwnedFd)>> {
    let mut msg = [0u8; ORDER_LEN];
    let (n, mut fds) = fdpass::recv_with_fds(ctl, &mut msg)?;
    if n == 0 {
        return Ok(None);
    }
    let mut r = ctl;
    r.read_exact(&mut msg[n..])?;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("bad order: {what}"));
    let word = |i: usize| u32::from_le_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
    let long = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&msg[i..i + 8]);
        usize::try_from(u64::from_le_bytes(b)).map_err(|_| bad("size out of range"))
    };
    if word(0) != MAGIC {
        return Err(bad(
            "wrong magic (is this process started by `shmlink bench`?)",
        ));
    }
    let kind = BaselineKind::from_wire(word(4)).ok_or_else(|| bad("unknown baseline"))?;
    let order = Order {
        kind,
        size: long(8)?,
        reply: long(16)?,
    };
    if fds.len() != 1 {
        return Err(bad("expected exactly one descriptor"));
    }
    let fd = fds.remove(0);
    Ok(Some((order, fd)))
}

/// Sends a one-byte acknowledgement.
pub(crate) fn send_ack(ctl: &UnixStream, ack: u8) -> io::Result<()> {
    let mut w = ctl;
    w.write_all(&[ack])
}

/// Receives a one-byte acknowledgement; `None` at end of stream.
pub(crate) fn recv_ack(ctl: &UnixStream) -> io::Result<Option<u8>> {
    let mut b = [0u8; 1];
    let mut r = ctl;
    match r.read(&mut b)? {
        0 => Ok(None),
        _ => Ok(Some(b[0])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn order_round_trip() {
        let (a, b) = UnixStream::pair().expect("pair");
        let (x, _y) = UnixStream::pair().expect("pair");
        let order = Order {
            kind: BaselineKind::Futex,
            size: 2048,
            reply: 256,
        };
        send_order(&a, &order, x.as_fd()).expect("send");
        let (got, _fd) = recv_order(&b).expect("recv").expect("an order");
        assert_eq!(got, order);
        send_ack(&b, DONE).expect("ack");
        assert_eq!(recv_ack(&a).expect("ack"), Some(DONE));
        drop(a);
        assert!(recv_order(&b).expect("eof").is_none());
    }
}

//! `shmlink __baseline-peer`: the other process of the raw baselines. Its
//! stdin is the control socket of `shmlink bench`; it runs each order it
//! receives until the bench stops it, and exits when the bench closes the
//! channel (or dies).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

use anyhow::{bail, Context};
use clap::Args;

use super::control::{self, BaselineKind, Order, DONE, READY};
use super::framing::{self, FrameReader};
use super::shared::{self, SharedPage, REQ_DATA, REQ_SEQ, RESP_SEQ, STOP};
use crate::reply::ReplyShape;

/// Options of the hidden `__baseline-peer` command.
#[derive(Debug, Args)]
pub(crate) struct PeerArgs {
    /// Pin to this CPU.
    #[arg(long, value_name = "CPU")]
    pin_cpu: Option<usize>,
}

/// Serves the bench's orders.
pub(crate) fn run_peer(args: &PeerArgs) -> anyhow::Result<()> {
    if let Some(cpu) = args.pin_cpu {
        shmlink_sys::affinity::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the baseline peer to CPU {cpu}"))?;
    }
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("cannot use stdin")?;
    let ctl = UnixStream::from(fd);
    let parent = std::os::unix::process::parent_id();
    loop {
        let next = control::recv_order(&ctl)
            .context("stdin must be the control socket of `shmlink bench`")?;
        let Some((order, fd)) = next else {
            return Ok(());
        };
        match order.kind {
            BaselineKind::Spin | BaselineKind::Futex => serve_page(&ctl, fd, order, parent)?,
            BaselineKind::Unix => serve_unix(&ctl, fd, order)?,
        }
        control::send_ack(&ctl, DONE).context("cannot answer the bench")?;
    }
}

/// Answers requests on the shared page until the stop word is set.
fn serve_page(ctl: &UnixStream, fd: OwnedFd, order: Order, parent: u32) -> anyhow::Result<()> {
    let futex = order.kind == BaselineKind::Futex;
    let page = SharedPage::map(&fd, shared::segment_len(order.size, order.reply))
        .context("cannot map the baseline page")?;
    drop(fd);
    control::send_ack(ctl, READY).context("cannot answer the bench")?;
    let (req_seq, resp_seq, stop) = (page.word(REQ_SEQ), page.word(RESP_SEQ), page.word(STOP));
    let shape = ReplyShape::Fixed(order.reply);
    let resp_at = shared::resp_data(order.size);
    let mut req = vec![0u8; order.size];
    let mut out = Vec::with_capacity(order.reply);
    let mut seq = 0u32;
    loop {
        seq = seq.wrapping_add(1);
        shared::wait_for(req_seq, seq, futex, || {
            if std::os::unix::process::parent_id() != parent {
                bail!("the bench process is gone");
            }
            Ok(())
        })?;
        if stop.load(Ordering::Acquire) != 0 {
            return Ok(());
        }
        page.read(REQ_DATA, &mut req);
        out.clear();
        shape.fill(&req, &mut out);
        page.write(resp_at, &out);
        resp_seq.store(seq, Ordering::Release);
        if futex {
            shmlink_sys::futex::wake(resp_seq, 1);
        }
    }
}

/// Answers framed requests on the socket until the bench closes it.
fn serve_unix(ctl: &UnixStream, fd: OwnedFd, order: Order) -> anyhow::Result<()> {
    let sock = UnixStream::from(fd);
    control::send_ack(ctl, READY).context("cannot answer the bench")?;
    let shape = ReplyShape::Fixed(order.reply);
    let mut reader = FrameReader::new(order.size + 4);
    let mut out = Vec::with_capacity(order.reply);
    while let Some(req) = reader.next(&sock).context("baseline-unix: reading")? {
        out.clear();
        shape.fill(req, &mut out);
        framing::write_frame(&sock, &out).context("baseline-unix: writing")?;
    }
    Ok(())
}

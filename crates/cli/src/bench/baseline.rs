//! The bench's side of the raw baselines: the same payloads as shmlink,
//! ping-ponged with the bare mechanism against `shmlink __baseline-peer` in
//! another process: spinning on a shared page, FUTEX_WAIT/FUTEX_WAKE on
//! every turn, and a length-prefixed Unix socketpair.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::control::{self, BaselineKind, Order, DONE, READY};
use super::framing::{self, FrameReader};
use super::measure::{self, Checks, PointCtx, Sequential};
use super::payload::Payloads;
use super::shared::{self, SharedPage, REQ_DATA, REQ_SEQ, RESP_SEQ, STOP};
use super::stats::Record;
use crate::child::ChildGuard;
use crate::reply::ReplyShape;

/// Longest wait for one round trip or one acknowledgement.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The baseline peer process and its control channel.
#[derive(Debug)]
pub(crate) struct Peer {
    ctl: UnixStream,
    child: ChildGuard,
}

impl Peer {
    /// Starts `exe __baseline-peer`, its stdin one end of the control socketpair.
    pub(crate) fn spawn(exe: &Path, pin_cpu: Option<usize>, dir: &Path) -> anyhow::Result<Peer> {
        let (ctl, theirs) = UnixStream::pair().context("cannot create a socketpair")?;
        let mut cmd = Command::new(exe);
        cmd.arg("__baseline-peer");
        if let Some(cpu) = pin_cpu {
            cmd.arg("--pin-cpu").arg(cpu.to_string());
        }
        cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
        let child = ChildGuard::spawn(cmd, "baseline peer", dir.join("baseline-peer.stderr"))?;
        ctl.set_read_timeout(Some(CALL_TIMEOUT))
            .context("cannot set a timeout on the control socket")?;
        Ok(Peer { ctl, child })
    }

    /// The peer's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Measures one baseline at one size.
    pub(crate) fn measure(
        &mut self,
        kind: BaselineKind,
        payloads: &Payloads,
        ctx: &PointCtx<'_>,
        label: &str,
    ) -> anyhow::Result<Record> {
        let size = payloads.size();
        let reply = ctx.shape.len_for(size);
        let order = Order { kind, size, reply };
        let mut checks = Checks::default();
        let seq = match kind {
            BaselineKind::Spin | BaselineKind::Futex => {
                self.run_page(order, payloads, ctx, &mut checks)
            }
            BaselineKind::Unix => self.run_unix(order, payloads, ctx, &mut checks),
        }
        .with_context(|| format!("{label}: sequential calls"))?;
        checks.ensure(label)?;
        Ok(seq.record(kind.name().to_string(), "-".to_string(), size, reply))
    }

    fn run_page(
        &mut self,
        order: Order,
        payloads: &Payloads,
        ctx: &PointCtx<'_>,
        checks: &mut Checks,
    ) -> anyhow::Result<Sequential> {
        let futex = order.kind == BaselineKind::Futex;
        let (page, fd) = SharedPage::create(shared::segment_len(order.size, order.reply))
            .context("cannot create the shared page")?;
        self.start(&order, fd.as_fd())?;
        drop(fd);
        let (req_seq, resp_seq) = (page.word(REQ_SEQ), page.word(RESP_SEQ));
        let resp_at = shared::resp_data(order.size);
        let mut resp = vec![0u8; order.reply];
        let mut seq = 0u32;
        let result = measure::sequential(ctx, |i| {
            let req = payloads.get(i);
            let t0 = Instant::now();
            page.write(REQ_DATA, req);
            seq = seq.wrapping_add(1);
            req_seq.store(seq, Ordering::Release);
            if futex {
                shmlink_sys::futex::wake(req_seq, 1);
            }
            let deadline = t0 + CALL_TIMEOUT;
            shared::wait_for(resp_seq, seq, futex, || {
                ctx.interrupt.check()?;
                if Instant::now() > deadline {
                    bail!("the baseline peer did not answer within {CALL_TIMEOUT:?}");
                }
                Ok(())
            })?;
            page.read(resp_at, &mut resp);
            let t1 = Instant::now();
            checks.check(ReplyShape::Fixed(order.reply), req, &resp);
            Ok((t0, t1))
        });
        // Stop the peer whatever happened: the stop word, then the next turn.
        page.word(STOP).store(1, Ordering::Release);
        req_seq.store(seq.wrapping_add(1), Ordering::Release);
        shmlink_sys::futex::wake(req_seq, 1);
        let stopped = self.expect(DONE);
        let seq = result?;
        stopped?;
        Ok(seq)
    }

    fn run_unix(
        &mut self,
        order: Order,
        payloads: &Payloads,
        ctx: &PointCtx<'_>,
        checks: &mut Checks,
    ) -> anyhow::Result<Sequential> {
        let (sock, theirs) = UnixStream::pair().context("cannot create a socketpair")?;
        self.start(&order, theirs.as_fd())?;
        drop(theirs);
        sock.set_read_timeout(Some(CALL_TIMEOUT))
            .context("cannot set a socket timeout")?;
        let mut reader = FrameReader::new(order.reply + 4);
        let mut resp = Vec::with_capacity(order.reply);
        let result = measure::sequential(ctx, |i| {
            let req = payloads.get(i);
            let t0 = Instant::now();
            framing::write_frame(&sock, req).context("sending to the baseline peer")?;
            let frame = reader
                .next(&sock)
                .context("receiving from the baseline peer")?
                .context("the baseline peer closed the socket")?;
            resp.clear();
            resp.extend_from_slice(frame);
            let t1 = Instant::now();
            checks.check(ReplyShape::Fixed(order.reply), req, &resp);
            Ok((t0, t1))
        });
        drop(sock);
        let stopped = self.expect(DONE);
        let seq = result?;
        stopped?;
        Ok(seq)
    }

    /// Sends an order and waits until the peer is ready.
    fn start(&mut self, order: &Order, fd: std::os::fd::BorrowedFd<'_>) -> anyhow::Result<()> {
        control::send_order(&self.ctl, order, fd)
            .context("cannot send an order to the baseline peer")
            .or_else(|e| self.child.check_alive().and(Err(e)))?;
        self.expect(READY)
    }

    /// Waits for one acknowledgement.
    fn expect(&mut self, ack: u8) -> anyhow::Result<()> {
        match control::recv_ack(&self.ctl) {
            Ok(Some(got)) if got == ack => Ok(()),
            Ok(Some(got)) => bail!("the baseline peer sent {got:#x} instead of {ack:#x}"),
            Ok(None) => {
                self.child.check_alive()?;
                bail!("the baseline peer closed its control channel")
            }
            Err(e) => {
                self.child.check_alive()?;
                Err(e).context("no answer from the baseline peer")
            }
        }
    }
}

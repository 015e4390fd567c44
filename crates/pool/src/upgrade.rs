//! A hot upgrade, the side of the pool being replaced (docs/design.md,
//! "Hot upgrade"): it starts its successor (`PoolOptions::successor`) with
//! the HTTP and metrics listening sockets and a ready socket handed down
//! (`heritage`), and waits for it. The successor starts its workers, takes
//! the client and control servers over through the library's hand-over,
//! serves on the handed listeners, then writes `R`: this pool is
//! upgraded, and its owner stops it (its HTTP connections close between
//! requests, its workers stop). A successor that exits, closes the ready
//! socket, or stays silent past its deadline has failed: it is killed if
//! still running, and this pool serves on.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::heritage::{Numbers, DIR_ENV, HANDED_ENV};
use crate::inner::Inner;

/// What the successor gets beyond its start timeout to say it serves
/// (its own start, the two hand-overs).
const GRACE: Duration = Duration::from_secs(15);

/// Starts an upgrade: the successor's pid, or why none started.
///
/// # Errors
/// No successor command, an upgrade under way, the pool stopping, a
/// command that cannot be started.
pub(crate) fn begin(inner: &Arc<Inner>) -> Result<u32, String> {
    let up = &inner.upgrades;
    let argv = inner.opts.successor.clone().ok_or_else(|| {
        "this pool has no command to start its successor with (PoolOptions::successor; \
         `shmlink pool` sets its own)"
            .to_string()
    })?;
    let (program, args) = argv.split_first().ok_or("the successor command is empty")?;
    // The table's lock is never taken while the upgrade's is held:
    // `Inner::status` takes them in the other order (a status call during
    // an upgrade deadlocked both, and every call with them).
    let stopping = inner.shared.lock().stopping;
    let mut s = up.lock();
    if let Some((pid, _)) = s.running {
        return Err(format!(
            "an upgrade is under way: successor pid {pid} is starting"
        ));
    }
    if s.upgraded || stopping {
        return Err("the pool is stopping".into());
    }
    let (mine, theirs) =
        UnixStream::pair().map_err(|e| format!("making the successor's ready socket: {e}"))?;
    let http_workers: Vec<BorrowedFd<'_>> = inner
        .http_workers
        .as_ref()
        .map(|h| h.listeners().iter().map(AsFd::as_fd).collect())
        .unwrap_or_default();
    let http: Vec<BorrowedFd<'_>> = if http_workers.is_empty() {
        s.http.iter().map(AsFd::as_fd).collect()
    } else {
        http_workers
    };
    let mut fds = vec![theirs.as_fd()];
    fds.extend(&http);
    fds.extend(s.metrics.as_ref().map(AsFd::as_fd));
    let mut cmd = Command::new(program);
    cmd.args(args).env(DIR_ENV, &up.dir).stdin(Stdio::null());
    let numbers = shmlink_sys::inherit::hand_down(&mut cmd, &fds)
        .map_err(|e| format!("handing the listening sockets down: {e}"))?;
    let named = Numbers {
        ready: numbers[0],
        http: numbers[1..=http.len()].to_vec(),
        metrics: s.metrics.as_ref().map(|_| numbers[numbers.len() - 1]),
    };
    cmd.env(HANDED_ENV, named.to_env());
    let spawned = cmd.spawn();
    drop(fds);
    drop(http);
    drop(theirs);
    let child = spawned
        .map_err(|e| format!("starting the successor {}: {e}", program.to_string_lossy()))?;
    let pid = child.id();
    s.running = Some((pid, Instant::now()));
    drop(s);
    inner.say(&format!(
        "upgrade: started the successor, pid {pid} ({})",
        program.to_string_lossy()
    ));
    let i = Arc::clone(inner);
    std::thread::Builder::new()
        .name("shmlink-pool-upgrade".into())
        .spawn(move || watch(&i, child, mine))
        .map_err(|e| format!("starting the upgrade's thread: {e}"))?;
    Ok(pid)
}

/// Waits for the successor's word.
fn watch(inner: &Inner, mut child: Child, mut ready: UnixStream) {
    let pid = child.id();
    let deadline = inner.opts.start_timeout + GRACE;
    let _ = ready.set_read_timeout(Some(deadline));
    let mut byte = [0u8; 1];
    let heard = match ready.read(&mut byte) {
        Ok(1) if byte[0] == b'R' => Ok(()),
        Ok(1) => Err(format!("it wrote {:?} instead of R", byte[0] as char)),
        Ok(_) => Err(match child.try_wait() {
            Ok(Some(status)) => format!("it exited ({status}) before it served"),
            _ => "it closed its ready socket before it served".to_string(),
        }),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(format!("it did not serve within {deadline:?}"))
        }
        Err(e) => Err(format!("reading its ready socket: {e}")),
    };
    let up = &inner.upgrades;
    let mut s = up.lock();
    let took = s
        .running
        .take()
        .map(|(_, at)| at.elapsed())
        .unwrap_or_default();
    match heard {
        Ok(()) => {
            s.upgraded = true;
            s.outcome = Some(format!("done: successor pid {pid} serves"));
            inner.say(&format!(
                "upgrade: successor pid {pid} serves ({:.1} ms after it was started); this pool stops",
                took.as_secs_f64() * 1e3
            ));
            // The successor outlives this process: it is not waited for.
            drop(child);
        }
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            s.outcome = Some(format!("failed: successor pid {pid}: {why}"));
            inner.say(&format!(
                "upgrade failed: successor pid {pid}: {why}; serving on"
            ));
        }
    }
    drop(s);
    up.changed.notify_all();
}

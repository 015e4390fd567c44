//! What a pool hands its successor at a hot upgrade, besides what the
//! library's hand-over carries (docs/design.md, "Hot upgrade"): the
//! descriptors it starts the successor with, at fixed numbers
//! (`shmlink_sys::inherit`), named in [`HANDED_ENV`]:
//!
//! ```text
//! SHMLINK_POOL_PREDECESSOR=/run/user/1000/shmlink-pool-4242-0
//! SHMLINK_POOL_HANDED=ready=3 http=4,5 metrics=6
//! ```
//!
//! `ready` is a socket the successor writes one byte `R` to once it serves
//! (closing it without that byte: it failed); `http` the HTTP listening
//! sockets (none without `--http`); `metrics` the metrics endpoint's (absent
//! without `--metrics`). The predecessor's private directory holds the
//! library hand-over sockets of its client server and its control server
//! ([`CLIENTS_SOCKET`], [`CONTROL_SOCKET`]).
#![allow(unsafe_code)]

use std::io::Write;
use std::net::TcpListener;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::PoolError;

/// The predecessor's private directory.
pub(crate) const DIR_ENV: &str = "SHMLINK_POOL_PREDECESSOR";
/// The descriptors handed down.
pub(crate) const HANDED_ENV: &str = "SHMLINK_POOL_HANDED";
/// The client server's hand-over socket, in the private directory.
pub(crate) const CLIENTS_SOCKET: &str = "handover-clients.sock";
/// The control server's hand-over socket, in the private directory.
pub(crate) const CONTROL_SOCKET: &str = "handover-control.sock";

/// Whether this process took its inheritance already.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// What a successor inherits from the pool it replaces.
#[derive(Debug)]
pub struct Inheritance {
    pub(crate) dir: PathBuf,
    ready: UnixStream,
    pub(crate) http: Vec<TcpListener>,
    pub(crate) metrics: Option<TcpListener>,
}

/// The numbers named in [`HANDED_ENV`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Numbers {
    pub(crate) ready: RawFd,
    pub(crate) http: Vec<RawFd>,
    pub(crate) metrics: Option<RawFd>,
}

impl Numbers {
    /// The variable's value.
    pub(crate) fn to_env(&self) -> String {
        let http: Vec<String> = self.http.iter().map(ToString::to_string).collect();
        let mut v = format!("ready={} http={}", self.ready, http.join(","));
        if let Some(m) = self.metrics {
            v.push_str(&format!(" metrics={m}"));
        }
        v
    }

    /// Parses the variable's value; every number distinct and at least 3.
    pub(crate) fn parse(v: &str) -> Result<Numbers, String> {
        let number = |t: &str| -> Result<RawFd, String> {
            t.parse::<RawFd>().ok().filter(|n| *n >= 3).ok_or_else(|| {
                format!("{HANDED_ENV}: {t:?} is not a descriptor number of 3 or more")
            })
        };
        let mut n = Numbers::default();
        let mut ready = None;
        for pair in v.split_whitespace() {
            let (k, val) = pair
                .split_once('=')
                .ok_or_else(|| format!("{HANDED_ENV}: {pair:?} is not key=value"))?;
            match k {
                "ready" if ready.is_none() => ready = Some(number(val)?),
                "http" if n.http.is_empty() => {
                    n.http = val
                        .split(',')
                        .filter(|t| !t.is_empty())
                        .map(number)
                        .collect::<Result<_, _>>()?;
                }
                "metrics" if n.metrics.is_none() => n.metrics = Some(number(val)?),
                _ => return Err(format!("{HANDED_ENV}: unknown or repeated key {k:?}")),
            }
        }
        n.ready = ready.ok_or_else(|| format!("{HANDED_ENV} names no ready socket"))?;
        let mut all: Vec<RawFd> = n.http.iter().copied().chain(n.metrics).collect();
        all.push(n.ready);
        all.sort_unstable();
        if all.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("{HANDED_ENV} names a descriptor twice: {v:?}"));
        }
        Ok(n)
    }
}

impl Inheritance {
    /// The inheritance named in this process's environment, if it was
    /// started as a pool's successor. Taken once per process.
    ///
    /// # Errors
    /// A malformed variable, a number that is not open, a second take.
    pub fn from_env() -> Result<Option<Inheritance>, PoolError> {
        let Some(dir) = std::env::var_os(DIR_ENV) else {
            return Ok(None);
        };
        let bad = |why: String| PoolError::Options(format!("starting as a successor: {why}"));
        let handed = std::env::var(HANDED_ENV)
            .map_err(|_| bad(format!("{DIR_ENV} is set but {HANDED_ENV} is not")))?;
        let n = Numbers::parse(&handed).map_err(bad)?;
        if TAKEN.swap(true, Ordering::AcqRel) {
            return Err(bad("the inherited descriptors were taken already".into()));
        }
        let ready = UnixStream::from(take(n.ready)?);
        let http = n
            .http
            .iter()
            .map(|&fd| take(fd).map(TcpListener::from))
            .collect::<Result<_, _>>()?;
        let metrics = n.metrics.map(take).transpose()?.map(TcpListener::from);
        Ok(Some(Inheritance {
            dir: PathBuf::from(dir),
            ready,
            http,
            metrics,
        }))
    }

    /// Tells the predecessor this pool serves: it stops.
    pub(crate) fn serving(mut self) -> Result<(), PoolError> {
        self.ready.write_all(b"R").map_err(|e| PoolError::Io {
            context: "telling the pool being replaced that its successor serves".into(),
            source: e,
        })
    }
}

/// Takes descriptor `fd`, handed down by the predecessor.
fn take(fd: RawFd) -> Result<OwnedFd, PoolError> {
    // SAFETY: the predecessor handed `fd` down to this process for the
    // pool alone (the variables' contract); `Numbers::parse` checked that
    // no number is named twice and `TAKEN` that they are taken once.
    unsafe { shmlink_sys::inherit::take(fd) }.map_err(|e| PoolError::Io {
        context: format!("taking descriptor {fd} named in {HANDED_ENV}"),
        source: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        let n = Numbers {
            ready: 3,
            http: vec![4, 5],
            metrics: Some(6),
        };
        assert_eq!(Numbers::parse(&n.to_env()), Ok(n));
        let bare = Numbers {
            ready: 3,
            ..Numbers::default()
        };
        assert_eq!(bare.to_env(), "ready=3 http=");
        assert_eq!(Numbers::parse(&bare.to_env()), Ok(bare));
    }

    #[test]
    fn bad_values_are_refused() {
        for v in [
            "",
            "http=4",
            "ready=2",
            "ready=3 ready=4",
            "ready=3 http=3",
            "ready=x",
            "ready=3 other=4",
            "ready=3 metrics=4 metrics=5",
        ] {
            assert!(Numbers::parse(v).is_err(), "{v:?} accepted");
        }
    }
}

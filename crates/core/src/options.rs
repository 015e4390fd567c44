//! Client and server options, with their defaults and validation.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use shmlink_wire::frame::MIN_MESSAGE_LIMIT;

/// How a side waits for its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Announce sleep and `FUTEX_WAIT` at once: lowest CPU, highest latency.
    Sleep,
    /// Spin for up to the given time, then sleep. The spin adapts: after waits
    /// much longer than the bound it shrinks (an idle peer costs almost no
    /// CPU), and grows back once answers come within the bound. The default.
    Spin(Duration),
    /// Never sleep: lowest latency, a full core while waiting.
    Busy,
}

impl WaitStrategy {
    /// The default spin bound.
    pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

    /// Short name, as parsed by [`FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            WaitStrategy::Sleep => "sleep",
            WaitStrategy::Spin(_) => "spin",
            WaitStrategy::Busy => "busy",
        }
    }
}

impl Default for WaitStrategy {
    fn default() -> Self {
        WaitStrategy::Spin(Self::DEFAULT_SPIN)
    }
}

impl FromStr for WaitStrategy {
    type Err = Error;

    /// `sleep`, `busy`, `spin` (default bound) or `spin:MICROS`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "sleep" => Ok(WaitStrategy::Sleep),
            "busy" => Ok(WaitStrategy::Busy),
            "spin" => Ok(WaitStrategy::default()),
            _ => match s
                .strip_prefix("spin:")
                .and_then(|us| us.parse::<u64>().ok())
            {
                Some(us) => Ok(WaitStrategy::Spin(Duration::from_micros(us))),
                None => Err(Error::InvalidOption {
                    name: "wait",
                    reason: format!("{s:?} is not one of sleep, spin, spin:MICROS, busy"),
                }),
            },
        }
    }
}

impl fmt::Display for WaitStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitStrategy::Spin(d) if *d != Self::DEFAULT_SPIN => {
                write!(f, "spin:{}", d.as_micros())
            }
            w => f.write_str(w.name()),
        }
    }
}

/// Smallest ring a session may use.
pub const MIN_RING_SIZE: usize = 4096;
/// Largest ring a session may use.
pub const MAX_RING_SIZE: usize = 1 << 28;
/// Default ring size per direction: 64 KiB keeps a session cheap (16 pages per
/// direction, touched only as used) while a 2 KiB call and a 32-deep pipeline
/// of small calls fit without waiting; larger messages stream through it.
pub const DEFAULT_RING_SIZE: usize = 64 * 1024;
/// Default maximum message size: 64 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;
/// Largest `max_message_size` an option may set (64 GiB less 16 bytes).
pub const MAX_MESSAGE_SIZE: usize = u32::MAX as usize * 16;

pub(crate) fn check_ring_size(name: &'static str, n: usize) -> Result<(), Error> {
    if !n.is_power_of_two() || !(MIN_RING_SIZE..=MAX_RING_SIZE).contains(&n) {
        return Err(Error::InvalidOption {
            name,
            reason: format!(
                "{n} is not a power of two between {MIN_RING_SIZE} and {MAX_RING_SIZE}"
            ),
        });
    }
    Ok(())
}

pub(crate) fn check_max_message(n: usize) -> Result<(), Error> {
    if !(MIN_MESSAGE_LIMIT..=MAX_MESSAGE_SIZE).contains(&n) {
        return Err(Error::InvalidOption {
            name: "max_message_size",
            reason: format!("{n} is out of range ({MIN_MESSAGE_LIMIT} to {MAX_MESSAGE_SIZE})"),
        });
    }
    Ok(())
}

/// Options of a [`Client`](crate::Client).
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Default timeout of each call (also used for connecting). Default 5 s.
    pub timeout: Duration,
    /// How to wait for responses. Default: adaptive spin, then sleep.
    pub wait: WaitStrategy,
    /// Ring size per direction for `shm:` sessions (power of two). Default 64 KiB.
    pub ring_size: usize,
    /// Largest message this client sends or accepts. Default 64 MiB.
    pub max_message_size: usize,
    /// Most bytes of arena this client maps to lend requests from (over
    /// `shm:` and `unix:`, to a server that takes them; capability bit 2),
    /// and most bytes of the server's arena it maps to read lent responses
    /// in place (bit 5). 0: neither; everything streams. Default
    /// [`DEFAULT_ARENA_BYTES`].
    pub max_arena_bytes: u64,
    /// Requests of at least this many bytes go through the arena (copied
    /// once into it, read in place by the server) instead of streaming
    /// through the ring or socket; they stream when the arena is full.
    /// Default 64 KiB.
    pub arena_threshold: usize,
    /// When the arena has no room, [`Client::loan`](crate::Client::loan)
    /// waits up to `timeout` for buffers to come back (the releases of
    /// calls the server is still answering, such as calls that timed out)
    /// instead of failing at once with `ArenaFull`; it fails at once when
    /// no call is outstanding, since nothing could come back. Default
    /// false.
    pub loan_wait: bool,
    /// An `shm:` session that the server cannot give shared memory (its
    /// `max_shm_bytes` reached, memfd or mmap failing) is refused instead
    /// of continuing over its socket (capability bit 6 not offered).
    /// [`Client::transport`](crate::Client::transport) says which a session
    /// uses. Default false.
    pub shm_required: bool,
}

/// Default arena limit, each side of a session: 2 GiB of address space
/// (memory is used only as buffers are filled, and reused).
pub const DEFAULT_ARENA_BYTES: u64 = 2 << 30;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(5),
            wait: WaitStrategy::default(),
            ring_size: DEFAULT_RING_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE,
            max_arena_bytes: DEFAULT_ARENA_BYTES,
            arena_threshold: 64 << 10,
            loan_wait: false,
            shm_required: false,
        }
    }
}

impl ClientOptions {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the field and the value.
    pub fn validate(&self) -> Result<(), Error> {
        if self.timeout.is_zero() {
            return Err(Error::InvalidOption {
                name: "timeout",
                reason: "must be greater than zero".into(),
            });
        }
        check_ring_size("ring_size", self.ring_size)?;
        check_max_message(self.max_message_size)
    }
}

/// Where a server reports the sessions it ended because the client broke
/// the protocol or stopped reading (one line each, naming the session id and
/// the client's pid or address). Default: standard error.
#[derive(Clone)]
pub struct Log(Option<Arc<LogLine>>);

/// What a [`Log`] calls with each line.
type LogLine = dyn Fn(&str) + Send + Sync;

impl Log {
    /// Lines go to standard error (the default).
    pub fn stderr() -> Log {
        Log(Some(Arc::new(|line: &str| eprintln!("{line}"))))
    }

    /// Lines are dropped.
    pub fn off() -> Log {
        Log(None)
    }

    /// Lines go to `f` (called from session threads).
    pub fn to(f: impl Fn(&str) + Send + Sync + 'static) -> Log {
        Log(Some(Arc::new(f)))
    }

    /// Writes one line.
    pub fn write(&self, line: &str) {
        if let Some(f) = &self.0 {
            f(line);
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log::stderr()
    }
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Log(on)"
        } else {
            "Log(off)"
        })
    }
}

/// Options of a [`Server`](crate::Server).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Uids allowed besides the server's own.
    pub allowed_uids: Vec<u32>,
    /// Gids allowed (the peer's primary gid).
    pub allowed_gids: Vec<u32>,
    /// Permission bits of socket files. Default 0600, or 0660 when `socket_group` is set.
    pub socket_mode: Option<u32>,
    /// Group owning the socket files.
    pub socket_group: Option<u32>,
    /// Most sessions at once; more are refused. Default 4096.
    pub max_sessions: usize,
    /// How session threads wait for requests. Default: adaptive spin, then sleep.
    pub wait: WaitStrategy,
    /// Largest message the server sends or accepts. Default 64 MiB.
    pub max_message_size: usize,
    /// How long a whole handshake may take, from the connection's acceptance
    /// to the welcome sent. Default 2 s.
    pub handshake_timeout: Duration,
    /// How long writing a response may wait for the client to make room
    /// (ring space, or socket buffer space on `unix:`/`tcp:`); a client that
    /// stops reading loses its session then. Default 5 s.
    pub send_timeout: Duration,
    /// Whether clients may send file descriptors with their calls (over
    /// `shm:` and `unix:`; handlers receive them). Default true.
    pub accept_fds: bool,
    /// Whether `shm:` clients may ask for a direct line to a worker
    /// (capability bit 7; [`crate::Handler::line`] answers): on for a
    /// server that dispatches to workers (`shmlink pool`). Default false.
    pub lines: bool,
    /// Most bytes of a client's arena a session maps to read lent requests
    /// in place (capability bit 2), and most bytes of the session's own
    /// arena it lends large responses from (bit 5); both need `accept_fds`.
    /// 0: neither; everything streams. Default [`DEFAULT_ARENA_BYTES`].
    pub max_arena_bytes: u64,
    /// Responses of at least this many bytes go through the session's arena
    /// (copied once into it, read in place by a client that agreed to bit
    /// 5) instead of streaming; they stream when the arena is full.
    /// Default 64 KiB.
    pub arena_threshold: usize,
    /// Most bytes of shared memory (session segments: rings and their
    /// header) the server's sessions hold at once; an `shm:` session past
    /// it continues over its socket (with a logged reason), or is refused
    /// when its client requires shared memory. Default: no limit.
    pub max_shm_bytes: u64,
    /// Where sessions ended for a protocol error or a stalled client are
    /// reported. Default: standard error.
    pub log: Log,
    /// A Unix socket (mode 0600) on which a successor process may take
    /// this server over ([`crate::Server::take_over`]): its listeners and
    /// its live sessions are handed to it, and the server then
    /// stops (docs/protocol.md, "Hand-over"). Default: none.
    pub handover: Option<std::path::PathBuf>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            allowed_uids: Vec::new(),
            allowed_gids: Vec::new(),
            socket_mode: None,
            socket_group: None,
            max_sessions: 4096,
            wait: WaitStrategy::default(),
            max_message_size: DEFAULT_MAX_MESSAGE,
            handshake_timeout: Duration::from_secs(2),
            send_timeout: Duration::from_secs(5),
            accept_fds: true,
            lines: false,
            max_arena_bytes: DEFAULT_ARENA_BYTES,
            arena_threshold: 64 << 10,
            max_shm_bytes: u64::MAX,
            log: Log::default(),
            handover: None,
        }
    }
}

impl ServerOptions {
    /// The socket file mode in force.
    pub fn effective_socket_mode(&self) -> u32 {
        self.socket_mode.unwrap_or(if self.socket_group.is_some() {
            0o660
        } else {
            0o600
        })
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the field and the value.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(m) = self.socket_mode {
            if m & !0o777 != 0 {
                return Err(Error::InvalidOption {
                    name: "socket_mode",
                    reason: format!("{m:#o} has bits outside 0777"),
                });
            }
        }
        if self.max_sessions == 0 {
            return Err(Error::InvalidOption {
                name: "max_sessions",
                reason: "must be at least 1".into(),
            });
        }
        if self.handshake_timeout.is_zero() || self.send_timeout.is_zero() {
            return Err(Error::InvalidOption {
                name: "timeout",
                reason: "timeouts must be greater than zero".into(),
            });
        }
        check_max_message(self.max_message_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_strategies_parse_and_print() {
        for s in ["sleep", "spin", "busy", "spin:10"] {
            assert_eq!(s.parse::<WaitStrategy>().expect(s).to_string(), s);
        }
        assert!("nap".parse::<WaitStrategy>().is_err());
    }

    #[test]
    fn ring_size_is_checked() {
        let o = ClientOptions {
            ring_size: 100_000,
            ..Default::default()
        };
        assert!(o
            .validate()
            .expect_err("odd size")
            .to_string()
            .contains("power of two"));
        assert!(ClientOptions::default().validate().is_ok());
    }
}

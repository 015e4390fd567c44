//! Addresses: `shm:PATH`, `unix:PATH`, `tcp:HOST:PORT`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::Error;

/// Which transport an address selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Handshake over a Unix socket, then shared-memory rings.
    Shm,
    /// Length-prefixed frames over a Unix stream socket.
    Unix,
    /// Length-prefixed frames over TCP with `TCP_NODELAY`.
    Tcp,
}

impl Transport {
    /// The address prefix, without the colon.
    pub fn scheme(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Unix => "unix",
            Transport::Tcp => "tcp",
        }
    }
}

/// A parsed address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `shm:PATH`: the Unix socket path of the handshake.
    Shm(PathBuf),
    /// `unix:PATH`.
    Unix(PathBuf),
    /// `tcp:HOST:PORT` (HOST may be a name, an IPv4 address or `[IPv6]`).
    Tcp(String),
}

/// Longest Unix socket path the kernel accepts (`sun_path` less the NUL).
const MAX_UNIX_PATH: usize = 107;

impl Address {
    /// The transport this address selects.
    pub fn transport(&self) -> Transport {
        match self {
            Address::Shm(_) => Transport::Shm,
            Address::Unix(_) => Transport::Unix,
            Address::Tcp(_) => Transport::Tcp,
        }
    }

    /// The socket path of a `shm:` or `unix:` address.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        match self {
            Address::Shm(p) | Address::Unix(p) => Some(p),
            Address::Tcp(_) => None,
        }
    }
}

impl FromStr for Address {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |reason: &str| Error::InvalidAddress {
            address: s.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("missing transport prefix"))?;
        match scheme {
            "shm" | "unix" => {
                if rest.is_empty() {
                    return Err(bad("empty socket path"));
                }
                if rest.len() > MAX_UNIX_PATH {
                    return Err(bad(&format!(
                        "socket path is {} bytes, the limit is {MAX_UNIX_PATH}",
                        rest.len()
                    )));
                }
                if rest.contains('\0') {
                    return Err(bad("socket path contains a NUL byte"));
                }
                let p = PathBuf::from(rest);
                Ok(if scheme == "shm" {
                    Address::Shm(p)
                } else {
                    Address::Unix(p)
                })
            }
            "tcp" => {
                let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("missing :PORT"))?;
                if host.is_empty() {
                    return Err(bad("empty host"));
                }
                port.parse::<u16>()
                    .map_err(|_| bad(&format!("port {port:?} is not a number from 0 to 65535")))?;
                Ok(Address::Tcp(rest.to_string()))
            }
            other => Err(bad(&format!("unknown transport {other:?}"))),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Shm(p) => write!(f, "shm:{}", p.display()),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Tcp(hp) => write!(f, "tcp:{hp}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in [
            "shm:/run/a.sock",
            "unix:rel.sock",
            "tcp:127.0.0.1:7000",
            "tcp:[::1]:0",
            "tcp:localhost:80",
        ] {
            let a: Address = s.parse().expect(s);
            assert_eq!(a.to_string(), s);
        }
    }

    #[test]
    fn rejects_bad_addresses_with_reasons() {
        for (s, why) in [
            ("/run/a.sock", "prefix"),
            ("shm:", "empty"),
            ("tcp:host", "PORT"),
            ("tcp:host:99999", "port"),
            ("tcp::80", "empty host"),
            ("udp:x:1", "unknown transport"),
        ] {
            let e = s.parse::<Address>().expect_err(s).to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
        let long = format!("unix:/{}", "a".repeat(200));
        assert!(long
            .parse::<Address>()
            .expect_err("long")
            .to_string()
            .contains("limit"));
    }
}

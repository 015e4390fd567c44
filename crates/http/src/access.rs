//! The access log: one line per request.

use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::error::HttpError;

/// Where access lines go.
pub(crate) struct AccessLog {
    out: Mutex<LineWriter<Box<dyn Write + Send>>>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessLog")
    }
}

impl AccessLog {
    /// Opens `path` for appending (`-`: standard error).
    pub(crate) fn open(path: &Path) -> Result<AccessLog, HttpError> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stderr())
        } else {
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| HttpError::Io {
                        context: format!("opening the access log {}", path.display()),
                        source: e,
                    })?,
            )
        };
        Ok(AccessLog {
            out: Mutex::new(LineWriter::new(out)),
        })
    }

    /// Appends to a descriptor handed down by the pool (a file opened for
    /// appending, or its standard error): each line is one `write`, so the
    /// lines of several workers do not mix.
    pub(crate) fn from_fd(fd: std::os::fd::OwnedFd) -> AccessLog {
        AccessLog {
            out: Mutex::new(LineWriter::new(Box::new(std::fs::File::from(fd)))),
        }
    }

    /// `REMOTE "METHOD TARGET PROTOCOL" STATUS BYTES MICROSECONDSus`.
    /// `request` is `METHOD TARGET`; `version` 0 for HTTP/1.0, 1 for 1.1.
    pub(crate) fn line(
        &self,
        remote: &str,
        request: &str,
        version: u8,
        status: u16,
        bytes: usize,
        took: Duration,
    ) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A log that cannot be written must not fail the request.
        let _ = writeln!(
            out,
            "{remote} \"{request} HTTP/1.{version}\" {status} {bytes} {}us",
            took.as_micros()
        );
    }
}

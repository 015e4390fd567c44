//! The control socket: a `unix:` shmlink server (mode 0600, this user only)
//! whose calls are commands: `status`, `status-json`, `reload`, `upgrade`.

use std::sync::Arc;

use shmlink::{Handler, RemoteError};

use crate::codes::CODE_UNKNOWN_COMMAND;
use crate::inner::Inner;

/// The code of a known command that could not be carried out (an upgrade
/// refused: no successor command, one under way); the message says why.
/// An application code of the control socket, not a reserved one.
pub(crate) const CODE_COMMAND_FAILED: u32 = 1;

/// The control server's handler.
#[derive(Debug)]
pub(crate) struct Control {
    inner: Arc<Inner>,
}

impl Control {
    pub(crate) fn new(inner: Arc<Inner>) -> Control {
        Control { inner }
    }
}

impl Handler for Control {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        match request {
            b"status" => response.extend_from_slice(self.inner.status().to_text().as_bytes()),
            b"status-json" => {
                let json = serde_json::to_vec_pretty(&self.inner.status())
                    .map_err(|e| RemoteError::new(CODE_UNKNOWN_COMMAND, e.to_string()))?;
                response.extend_from_slice(&json);
            }
            b"reload" => {
                crate::inner::reload(&self.inner);
                response.extend_from_slice(b"reloading\n");
            }
            b"upgrade" => {
                let pid = crate::upgrade::begin(&self.inner)
                    .map_err(|why| RemoteError::new(CODE_COMMAND_FAILED, why))?;
                response.extend_from_slice(format!("upgrading: successor pid {pid}\n").as_bytes());
            }
            other => {
                return Err(RemoteError::new(
                    CODE_UNKNOWN_COMMAND,
                    format!(
                        "unknown command {:?} (known: status, status-json, reload, upgrade)",
                        String::from_utf8_lossy(&other[..other.len().min(64)])
                    ),
                ))
            }
        }
        Ok(())
    }
}

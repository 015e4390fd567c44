//! Who may open a session: checked on `SO_PEERCRED` before anything is read.

use shmlink_sys::PeerCred;

use crate::options::ServerOptions;

/// The server's credential policy.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    own_uid: u32,
    uids: Vec<u32>,
    gids: Vec<u32>,
}

impl Policy {
    pub(crate) fn new(opts: &ServerOptions) -> Self {
        Policy {
            own_uid: shmlink_sys::cred::current_uid(),
            uids: opts.allowed_uids.clone(),
            gids: opts.allowed_gids.clone(),
        }
    }

    /// `Ok` or the refusal text naming who and why.
    pub(crate) fn check(&self, c: &PeerCred, address: &str) -> Result<(), String> {
        if c.uid == self.own_uid || self.uids.contains(&c.uid) || self.gids.contains(&c.gid) {
            return Ok(());
        }
        Err(format!(
            "server at {address} refused uid {} (gid {}, pid {}): not the server's uid {}, not in allowed uids {:?}, gid not in allowed gids {:?}",
            c.uid, c.gid, c.pid, self.own_uid, self.uids, self.gids
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_allows_own_listed_uids_and_gids() {
        let opts = ServerOptions {
            allowed_uids: vec![1001],
            allowed_gids: vec![50],
            ..Default::default()
        };
        let p = Policy::new(&opts);
        let me = shmlink_sys::cred::current_uid();
        let cred = |uid, gid| PeerCred { pid: 1, uid, gid };
        assert!(p.check(&cred(me, 12345), "x").is_ok());
        assert!(p.check(&cred(1001, 12345), "x").is_ok());
        assert!(p.check(&cred(4242, 50), "x").is_ok());
        let e = p
            .check(&cred(4242, 51), "shm:/run/a.sock")
            .expect_err("refused");
        assert!(e.contains("refused uid 4242"), "{e}");
    }
}

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

    /// Whether a peer of `uid` (`None`: unknown, over TCP) may inspect the
    /// server: its own uid or root only, whatever the session policy
    /// allows (an inspection shows every session's peer).
    pub(crate) fn may_inspect(&self, uid: Option<u32>, address: &str) -> Result<(), String> {
        match uid {
            Some(u) if u == self.own_uid || u == 0 => Ok(()),
            Some(u) => Err(format!(
                "server at {address} refused inspection by uid {u}: only uid {} (the server's) or root may inspect",
                self.own_uid
            )),
            None => Err(format!(
                "server at {address} refused an inspection over TCP: only a process of uid {} (the server's) or root, on a Unix socket, may inspect",
                self.own_uid
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_uid_and_root_inspect() {
        let p = Policy::new(&ServerOptions {
            allowed_uids: vec![1001],
            ..ServerOptions::default()
        });
        let me = shmlink_sys::cred::current_uid();
        assert!(p.may_inspect(Some(me), "a").is_ok());
        assert!(p.may_inspect(Some(0), "a").is_ok());
        let other = if me == 1001 { 1002 } else { 1001 };
        let e = p
            .may_inspect(Some(other), "shm:/x")
            .expect_err("an allowed uid");
        assert!(
            e.contains(&format!("refused inspection by uid {other}")),
            "{e}"
        );
        assert!(e.contains("(the server's) or root"), "{e}");
        let e = p.may_inspect(None, "tcp:h:1").expect_err("tcp");
        assert!(e.contains("over TCP"), "{e}");
    }

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

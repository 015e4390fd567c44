//! Permissions with real second and third users, created here when the tests
//! run as root (as in CI): allowed uid, allowed gid, refused uid, socket
//! file modes and groups, a client that cannot open the socket file at all.
//! Each refusal must name who was refused and why.
//!
//! Users (created once, kept): `shmlink-perm-a` (its own group) and
//! `shmlink-perm-b` (primary group `shmlink-perm-g`). Not root: the tests
//! say so and check only what the current user can.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use support::{Echo, TempDir, BIN};

#[derive(Debug, Clone, Copy)]
struct User {
    uid: u32,
    gid: u32,
}

struct Users {
    a: User,
    b: User,
    /// The group of `b`, not of `a`.
    g: u32,
}

fn id(flag: &str, name: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, name]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn gid_of_group(name: &str) -> Option<u32> {
    let out = Command::new("getent").args(["group", name]).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .nth(2)?
        .trim()
        .parse()
        .ok()
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The two test users, created if missing; `None` when not root.
fn users() -> Option<&'static Users> {
    static USERS: OnceLock<Option<Users>> = OnceLock::new();
    USERS
        .get_or_init(|| {
            if shmlink_sys::cred::current_uid() != 0 {
                eprintln!(
                    "NOTE: not root: cannot create the test users; checking own-uid paths only"
                );
                return None;
            }
            if gid_of_group("shmlink-perm-g").is_none() {
                run(Command::new("groupadd").args(["--system", "shmlink-perm-g"]));
            }
            for (user, group) in [
                ("shmlink-perm-a", None),
                ("shmlink-perm-b", Some("shmlink-perm-g")),
            ] {
                if id("-u", user).is_none() {
                    let mut c = Command::new("useradd");
                    c.args([
                        "--system",
                        "--no-create-home",
                        "--shell",
                        "/usr/sbin/nologin",
                    ]);
                    match group {
                        Some(g) => c.args(["--gid", g]),
                        None => c.arg("--user-group"),
                    };
                    run(c.arg(user));
                }
            }
            let user = |n: &str| User {
                uid: id("-u", n).expect("uid"),
                gid: id("-g", n).expect("gid"),
            };
            Some(Users {
                a: user("shmlink-perm-a"),
                b: user("shmlink-perm-b"),
                g: gid_of_group("shmlink-perm-g").expect("group"),
            })
        })
        .as_ref()
}

/// `shmlink call ADDR ping` as `user`.
fn call_as(user: User, addr: &str) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={}", user.uid),
            &format!("--regid={}", user.gid),
            "--clear-groups",
            BIN,
            "call",
            addr,
            "ping-ping-ping-ping",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run setpriv")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A directory the test users can enter.
fn open_dir(name: &str) -> TempDir {
    let d = TempDir::new(name);
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

#[test]
fn allowed_uid_is_served_and_another_is_refused_by_name() {
    let Some(u) = users() else { return };
    let dir = open_dir("perm-uid");
    let echo = Echo::start(
        dir.path(),
        &["--socket-mode", "0666", "--allow-uid", &u.a.uid.to_string()],
    );
    for scheme in ["shm:", "unix:"] {
        let addr = echo.address(scheme);
        let ok = call_as(u.a, addr);
        assert!(
            ok.status.success(),
            "{addr} as uid {}: {}",
            u.a.uid,
            stderr(&ok)
        );
        let no = call_as(u.b, addr);
        assert_eq!(no.status.code(), Some(1), "{addr} as uid {}", u.b.uid);
        let msg = stderr(&no);
        assert!(
            msg.contains(&format!("uid {}", u.b.uid)) && msg.contains("refused"),
            "the refusal names the uid: {msg}"
        );
    }
}

#[test]
fn allowed_gid_admits_its_members_only() {
    let Some(u) = users() else { return };
    let dir = open_dir("perm-gid");
    let echo = Echo::start(
        dir.path(),
        &["--socket-mode", "0666", "--allow-gid", &u.g.to_string()],
    );
    let addr = echo.address("shm:");
    let ok = call_as(u.b, addr);
    assert!(
        ok.status.success(),
        "member of gid {}: {}",
        u.g,
        stderr(&ok)
    );
    let no = call_as(u.a, addr);
    assert_eq!(no.status.code(), Some(1));
    let msg = stderr(&no);
    assert!(
        msg.contains(&format!("uid {}", u.a.uid)) && msg.contains(&format!("gid {}", u.a.gid)),
        "the refusal names uid and gid: {msg}"
    );
}

#[test]
fn socket_files_get_the_configured_mode_and_group() {
    let dir = open_dir("perm-modes");
    let echo = Echo::start(dir.path(), &[]);
    for scheme in ["shm:", "unix:"] {
        let path = echo.address(scheme).trim_start_matches(scheme).to_string();
        let meta = std::fs::metadata(&path).expect("socket file");
        assert_eq!(meta.mode() & 0o777, 0o600, "{path}: default mode");
    }
    drop(echo);
    let Some(u) = users() else { return };
    let dir = open_dir("perm-group");
    let echo = Echo::start(dir.path(), &["--socket-group", &u.g.to_string()]);
    let path = echo.address("shm:").trim_start_matches("shm:").to_string();
    let meta = std::fs::metadata(&path).expect("socket file");
    assert_eq!(meta.mode() & 0o777, 0o660, "mode with a group");
    assert_eq!(meta.gid(), u.g, "group of the socket file");
    // Members of the group can open the file (and are allowed by policy only
    // if the server says so: here they are not, and are told why).
    let member = call_as(u.b, echo.address("shm:"));
    let msg = stderr(&member);
    assert!(
        msg.contains("refused") && msg.contains(&format!("uid {}", u.b.uid)),
        "{msg}"
    );
    // Others cannot open it at all.
    let other = call_as(u.a, echo.address("shm:"));
    let msg = stderr(&other);
    assert!(
        msg.contains("cannot connect") && msg.contains("Permission denied"),
        "{msg}"
    );
}

#[test]
fn a_client_that_cannot_open_the_socket_file_gets_a_clear_error() {
    let Some(u) = users() else { return };
    let dir = open_dir("perm-private");
    let echo = Echo::start(dir.path(), &[]); // 0600, owned by root
    for scheme in ["shm:", "unix:"] {
        let out = call_as(u.a, echo.address(scheme));
        assert_eq!(out.status.code(), Some(1));
        let msg = stderr(&out);
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(
            msg.contains("cannot connect") && msg.contains("Permission denied"),
            "{msg}"
        );
    }
}

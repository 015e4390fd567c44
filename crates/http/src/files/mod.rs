//! Files the HTTP server sends itself, without the application: a static
//! file under `--http-root` (a `GET` or `HEAD` whose path is an existing
//! regular file there, PHP scripts and hidden files excepted), and the file
//! an application names in `X-Sendfile` or `X-Accel-Redirect` under a
//! `--http-sendfile` directory. Both are opened beneath their directory by
//! the kernel's rules (`openat2`, `RESOLVE_BENEATH`: nothing above it,
//! no link leading out), answered with validators, 304 and ranges
//! ([`conditional`]), and sent with `sendfile(2)` by the engine.

mod conditional;
mod target;

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use shmlink_sys::files::{leaves_dir, open_beneath, open_dir};

pub(crate) use conditional::Conditions;
use conditional::{plan, Plan, Validators};
use target::NotAFile;

use crate::error::HttpError;

/// The directories files are served from.
#[derive(Debug)]
pub(crate) struct Files {
    root: Option<OwnedFd>,
    /// The `--http-sendfile` directories, absolute, each held open.
    handoff: Vec<(PathBuf, OwnedFd)>,
}

/// A response the server makes from a file.
#[derive(Debug)]
pub(crate) struct FileReply {
    pub(crate) status: u16,
    /// Headers besides the framing ones (lower-case names).
    pub(crate) headers: Vec<(&'static str, String)>,
    /// The file, for a status with a body (200, 206).
    pub(crate) file: Option<File>,
    /// Where the bytes sent start, and how many.
    pub(crate) start: u64,
    pub(crate) len: u64,
}

/// What a static path comes to.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A file served from the root.
    File(FileReply),
    /// A path that tries to leave the root (`..`, an encoded one, a link
    /// leading out): 404, with no word to the application.
    Refused,
    /// Not a file of the root: the application answers it.
    Application,
}

/// The header an application names a file in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// `X-Sendfile: /absolute/path` under a `--http-sendfile` directory.
    Sendfile,
    /// `X-Accel-Redirect: /path`, resolved beneath the first
    /// `--http-sendfile` directory.
    AccelRedirect,
}

impl Handoff {
    /// The header `name` (lower case) names, if any.
    pub(crate) fn of(name: &str) -> Option<Handoff> {
        if name.eq_ignore_ascii_case("x-sendfile") {
            Some(Handoff::Sendfile)
        } else if name.eq_ignore_ascii_case("x-accel-redirect") {
            Some(Handoff::AccelRedirect)
        } else {
            None
        }
    }
}

impl Files {
    /// Opens `root` and the `handoff` directories: `None` when neither is
    /// given.
    ///
    /// # Errors
    /// [`HttpError::Options`] naming the option and the directory that
    /// cannot be opened (missing, not a directory).
    pub(crate) fn open(
        root: Option<&Path>,
        handoff: &[PathBuf],
    ) -> Result<Option<Files>, HttpError> {
        if root.is_none() && handoff.is_empty() {
            return Ok(None);
        }
        let dir = |option: &str, p: &Path| {
            open_dir(p).map_err(|e| HttpError::Options(format!("{option} {}: {e}", p.display())))
        };
        let root = root.map(|r| dir("--http-root", r)).transpose()?;
        let mut dirs = Vec::new();
        for p in handoff {
            let abs = std::path::absolute(p)
                .map_err(|e| HttpError::Options(format!("--http-sendfile {}: {e}", p.display())))?;
            let fd = dir("--http-sendfile", &abs)?;
            dirs.push((normal(&abs).unwrap_or(abs), fd));
        }
        Ok(Some(Files {
            root,
            handoff: dirs,
        }))
    }

    /// Whether static paths are looked up (`--http-root`).
    pub(crate) fn serves_root(&self) -> bool {
        self.root.is_some()
    }

    /// Whether applications may name files (`--http-sendfile`).
    pub(crate) fn takes_handoffs(&self) -> bool {
        !self.handoff.is_empty()
    }

    /// What a `GET` or `HEAD` of `target` comes to.
    pub(crate) fn lookup(&self, target: &str, c: Option<&Conditions>) -> Lookup {
        let Some(root) = &self.root else {
            return Lookup::Application;
        };
        let rel = match target::relative(target) {
            Ok(rel) => rel,
            Err(NotAFile::Traversal) => return Lookup::Refused,
            Err(NotAFile::Application) => return Lookup::Application,
        };
        match open_beneath(root, &rel) {
            Ok(file) => match reply(file, &rel, c) {
                Some(r) => Lookup::File(r),
                None => Lookup::Application, // a directory, a FIFO, ...
            },
            Err(e) if leaves_dir(&e) => Lookup::Refused,
            Err(_) => Lookup::Application,
        }
    }

    /// The response for the file an application named in `how`'s header
    /// (`value`).
    ///
    /// # Errors
    /// The status to answer instead and why, for the log: 500 for a path
    /// outside every `--http-sendfile` directory, 404 for a file that is
    /// not there (or not a regular file).
    pub(crate) fn handoff(
        &self,
        how: Handoff,
        value: &[u8],
        c: Option<&Conditions>,
    ) -> Result<FileReply, (u16, String)> {
        let text = String::from_utf8_lossy(value);
        let (dir, rel) = match how {
            Handoff::Sendfile => {
                let path = normal(Path::new(text.trim())).ok_or_else(|| {
                    (
                        500,
                        format!("X-Sendfile {text:?} is not an absolute path without '..'"),
                    )
                })?;
                self.handoff
                    .iter()
                    .find_map(|(d, fd)| {
                        path.strip_prefix(d).ok().map(|rel| (fd, rel.to_path_buf()))
                    })
                    .ok_or_else(|| {
                        (
                            500,
                            format!(
                                "X-Sendfile {text:?} is not under a --http-sendfile directory ({})",
                                self.handoff
                                    .iter()
                                    .map(|(d, _)| d.display().to_string())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })?
            }
            Handoff::AccelRedirect => {
                let rel = target::beneath(text.trim()).ok_or_else(|| {
                    (
                        500,
                        format!("X-Accel-Redirect {text:?} is not a path without '..'"),
                    )
                })?;
                let (_, fd) = self
                    .handoff
                    .first()
                    .ok_or((500, "no --http-sendfile".into()))?;
                (fd, rel)
            }
        };
        let file = open_beneath(dir, &rel).map_err(|e| (404, format!("{how:?} {text:?}: {e}")))?;
        reply(file, &rel, c).ok_or_else(|| (404, format!("{how:?} {text:?} is not a regular file")))
    }
}

/// The answer for an opened `file` (`rel`: its name, for its type): `None`
/// when it is not a regular file.
fn reply(file: File, rel: &Path, c: Option<&Conditions>) -> Option<FileReply> {
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    let size = meta.len();
    let v = Validators::of(size, meta.modified().ok()?);
    let mut headers: Vec<(&'static str, String)> = Vec::with_capacity(5);
    let kind = mime_guess::from_path(rel)
        .first_raw()
        .unwrap_or("application/octet-stream");
    headers.push(("content-type", kind.to_string()));
    headers.push(("last-modified", v.last_modified()));
    headers.push(("etag", v.etag.clone()));
    headers.push(("accept-ranges", "bytes".into()));
    let (status, file, start, len) = match plan(c, &v, size) {
        Plan::Full => (200, Some(file), 0, size),
        Plan::NotModified => (304, None, 0, 0),
        Plan::Partial { start, len } => {
            headers.push((
                "content-range",
                format!("bytes {start}-{}/{size}", start + len - 1),
            ));
            (206, Some(file), start, len)
        }
        Plan::Unsatisfiable => {
            headers.push(("content-range", format!("bytes */{size}")));
            (416, None, 0, 0)
        }
    };
    Some(FileReply {
        status,
        headers,
        file,
        start,
        len,
    })
}

/// `path` with `.` parts dropped, if it is absolute and has no `..`.
fn normal(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => out.push(p),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    path.is_absolute().then_some(out)
}

/// The decoders of peer bytes here, for [`crate::fuzzing`].
pub(crate) mod fuzzing {
    use super::conditional::{plan, Conditions, Plan, Validators};
    use std::path::PathBuf;
    use std::time::{Duration, UNIX_EPOCH};

    /// The path beneath the root a request target names (`--http-root`),
    /// or `None` when the root serves none for it.
    pub fn file_path(target: &str) -> Option<PathBuf> {
        super::target::relative(target).ok()
    }

    /// The bytes of a file of `size` bytes a request with these headers
    /// gets: `Some((start, len))` for a 200 or a 206, `None` for a 304 or
    /// a 416.
    pub fn file_range(
        range: Option<&str>,
        if_range: Option<&str>,
        if_none_match: Option<&str>,
        if_modified_since: Option<&str>,
        size: u64,
        modified_secs: u64,
    ) -> Option<(u64, u64)> {
        let c = Conditions {
            range: range.map(Into::into),
            if_range: if_range.map(Into::into),
            if_none_match: if_none_match.map(Into::into),
            if_modified_since: if_modified_since.map(Into::into),
        };
        let modified = UNIX_EPOCH + Duration::from_secs(modified_secs.min(1 << 40));
        match plan(Some(&c), &Validators::of(size, modified), size) {
            Plan::Full => Some((0, size)),
            Plan::Partial { start, len } => Some((start, len)),
            Plan::NotModified | Plan::Unsatisfiable => None,
        }
    }
}

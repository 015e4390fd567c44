//! The processes of a scope, read from `/proc`.

use std::collections::HashSet;

use crate::env;

/// A live process as the scan saw it.
#[derive(Debug, Clone)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    /// Its start time: with the pid, it names one process for good.
    pub(crate) start: u64,
    /// Its environment carries the scope's token.
    pub(crate) carrier: bool,
    /// It is a janitor (of this scope or of one inside it).
    pub(crate) janitor: bool,
}

/// Every live process this user may read (zombies and kernel threads
/// left out), with what its environment says of `token`.
pub(crate) fn snapshot(token: &str) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (state, ppid, start) = stat(pid)?;
            if matches!(state, 'Z' | 'X') {
                return None;
            }
            // Unreadable (another user's) or empty (a kernel thread): not
            // a carrier, but still a possible descendant of one.
            let block = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let (carrier, janitor) = env::read_block(&block, token);
            Some(Proc {
                pid,
                ppid,
                start,
                carrier,
                janitor,
            })
        })
        .collect()
}

/// The processes of the scope among `all`: the carriers of its token, the
/// guardian's children (orphans re-parented to it, and its command), those
/// `known` from earlier looks (pid and start time: a process that rewrote
/// its environment for its title, as nginx does, is found through its
/// parent only while that parent lives), and every descendant of those;
/// never `me`.
pub(crate) fn of_scope(
    all: &[Proc],
    guardian: Option<u32>,
    me: u32,
    known: &HashSet<(u32, u64)>,
) -> Vec<Proc> {
    let mut ours: HashSet<u32> = all
        .iter()
        .filter(|p| p.carrier || Some(p.ppid) == guardian || known.contains(&(p.pid, p.start)))
        .map(|p| p.pid)
        .collect();
    loop {
        let before = ours.len();
        for p in all {
            if ours.contains(&p.ppid) {
                ours.insert(p.pid);
            }
        }
        if ours.len() == before {
            break;
        }
    }
    ours.remove(&me);
    if let Some(g) = guardian {
        ours.remove(&g);
    }
    all.iter()
        .filter(|p| ours.contains(&p.pid))
        .cloned()
        .collect()
}

/// State, parent pid and start time (clock ticks since boot) from
/// `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) may hold spaces and parentheses: the fields
    // go on after the last ')', from field 3 (the state) on.
    let f: Vec<&str> = text.rsplit_once(')')?.1.split_ascii_whitespace().collect();
    let state = f.first()?.chars().next()?;
    let ppid = f.get(1)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?; // field 22
    Some((state, ppid, start))
}

/// The start time of process `pid`: with the pid, it names one process for
/// good.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, _, start)| start)
}

/// The command line of process `pid`, its arguments joined by spaces
/// (at most 120 characters), for messages.
pub(crate) fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let text: String = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() > 120 {
        text.chars().take(117).collect::<String>() + "..."
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32, carrier: bool) -> Proc {
        Proc {
            pid,
            ppid,
            start: u64::from(pid) * 10,
            carrier,
            janitor: false,
        }
    }

    #[test]
    fn the_scope_is_carriers_guardian_children_and_their_descendants() {
        let all = [
            p(1, 0, false),
            p(10, 1, false),  // the guardian
            p(11, 10, true),  // its janitor (me)
            p(12, 10, true),  // its command
            p(13, 12, false), // a child that cleared its environment
            p(14, 13, false), // and its child
            p(20, 1, true),   // an orphan of the scope re-parented to init
            p(21, 10, false), // an orphan re-parented to the guardian
            p(30, 1, false),  // someone else's
            p(31, 30, false),
        ];
        let ours = |all: &[Proc], guardian, known: &HashSet<(u32, u64)>| {
            let mut got: Vec<u32> = of_scope(all, guardian, 11, known)
                .iter()
                .map(|p| p.pid)
                .collect();
            got.sort_unstable();
            got
        };
        let none = HashSet::new();
        assert_eq!(ours(&all, Some(10), &none), vec![12, 13, 14, 20, 21]);
        // The guardian gone: carriers, their descendants, and the known.
        let all = [
            p(1, 0, false),
            p(11, 1, true),
            p(20, 1, true),
            p(22, 20, false),
            p(30, 1, false),
            p(40, 1, false),
        ];
        assert_eq!(ours(&all, None, &none), vec![20, 22]);
        // Known from an earlier look (an orphan that rewrote its
        // environment), but not a new process that took a known pid.
        let known: HashSet<(u32, u64)> = [(40, 400), (30, 1)].into_iter().collect();
        assert_eq!(ours(&all, None, &known), vec![20, 22, 40]);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let (state, ppid, _) = stat(me).expect("own stat");
        assert!(state == 'R' || state == 'S', "{state}");
        assert_eq!(ppid, shmlink_sys::children::parent_pid());
        assert!(start_time(me).is_some());
        assert!(!command_line(me).is_empty());
        assert!(snapshot("none").iter().any(|p| p.pid == me));
    }
}

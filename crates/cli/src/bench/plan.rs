//! Which points run against which server, in what order. Only one server
//! (or the baseline peer) runs at a time, so that a spinning server never
//! steals the CPU of another measurement.

use shmlink::{Address, Transport, WaitStrategy};

use super::control::BaselineKind;
use super::report::human_size;
use super::target::LendPath;

/// What serves a group of points.
#[derive(Debug, Clone)]
pub(crate) enum Serving {
    /// The baseline peer.
    Peer,
    /// A `shmlink echo` child listening on these addresses with this strategy.
    Echo {
        /// `--listen` addresses (a TCP port of 0 is resolved by the child).
        listen: Vec<String>,
        /// `--wait`.
        wait: WaitStrategy,
    },
    /// A server given with `--connect`.
    External,
}

/// One measurement point.
#[derive(Debug, Clone)]
pub(crate) enum Point {
    /// A raw baseline.
    Baseline {
        /// Which.
        kind: BaselineKind,
        /// Request size.
        size: usize,
    },
    /// shmlink over one transport.
    Link {
        /// The transport.
        transport: Transport,
        /// The strategy of both sides (shm only).
        wait: Option<WaitStrategy>,
        /// Request size.
        size: usize,
        /// The address for `--connect`; spawned servers report theirs.
        address: Option<String>,
        /// How requests travel.
        path: LendPath,
        /// Sequential calls only (a `--paths` run): no pipelined, idle or
        /// sessions phase.
        sequential_only: bool,
    },
}

impl Point {
    /// `shm spin 64 B`, `unix 2 KiB`, `baseline-futex 1 MiB`.
    pub(crate) fn label(&self) -> String {
        match self {
            Point::Baseline { kind, size } => format!("{} {}", kind.name(), human_size(*size)),
            Point::Link {
                transport,
                wait,
                size,
                path,
                ..
            } => {
                let mut l = match wait {
                    Some(w) => format!("{} {w} {}", transport.scheme(), human_size(*size)),
                    None => format!("{} {}", transport.scheme(), human_size(*size)),
                };
                if *path != LendPath::Copy {
                    l = format!("{l} {}", path.name());
                }
                l
            }
        }
    }
}

/// Points sharing one server.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Who serves them.
    pub(crate) serving: Serving,
    /// The points, in order.
    pub(crate) points: Vec<Point>,
}

/// What to measure.
#[derive(Debug, Clone)]
pub(crate) struct Selection<'a> {
    /// Transports of spawned servers.
    pub(crate) transports: &'a [Transport],
    /// Strategies measured on shm.
    pub(crate) waits: &'a [WaitStrategy],
    /// Request sizes.
    pub(crate) sizes: &'a [usize],
    /// `--connect` addresses, parsed (empty: spawn servers).
    pub(crate) connect: &'a [Address],
    /// Whether to run the raw baselines.
    pub(crate) baselines: bool,
    /// Paths measured over `shm:` and `unix:` (`tcp:` streams only); more
    /// than `copy` alone makes every point sequential only.
    pub(crate) paths: &'a [LendPath],
}

/// Plans the run: baselines first, then one group per server.
pub(crate) fn groups(sel: &Selection<'_>, dir: &std::path::Path) -> Vec<Group> {
    let mut groups = Vec::new();
    if sel.baselines {
        let points = BaselineKind::ALL
            .iter()
            .flat_map(|&kind| {
                sel.sizes
                    .iter()
                    .map(move |&size| Point::Baseline { kind, size })
            })
            .collect();
        groups.push(Group {
            serving: Serving::Peer,
            points,
        });
    }
    let sequential_only = sel.paths != [LendPath::Copy];
    let link = |transport, wait, address: Option<&Address>| -> Vec<Point> {
        let address = address.map(ToString::to_string);
        let paths: &[LendPath] = if transport == Transport::Tcp {
            &[LendPath::Copy]
        } else {
            sel.paths
        };
        sel.sizes
            .iter()
            .flat_map(|&size| {
                let address = address.clone();
                paths.iter().map(move |&path| Point::Link {
                    transport,
                    wait,
                    size,
                    address: address.clone(),
                    path,
                    sequential_only,
                })
            })
            .collect()
    };
    if !sel.connect.is_empty() {
        let mut points = Vec::new();
        for a in sel.connect {
            match a.transport() {
                Transport::Shm => {
                    for &w in sel.waits {
                        points.extend(link(Transport::Shm, Some(w), Some(a)));
                    }
                }
                t => points.extend(link(t, None, Some(a))),
            }
        }
        groups.push(Group {
            serving: Serving::External,
            points,
        });
        return groups;
    }
    if sel.transports.contains(&Transport::Shm) {
        for (i, &w) in sel.waits.iter().enumerate() {
            groups.push(Group {
                serving: Serving::Echo {
                    listen: vec![format!("shm:{}/shm-{i}.sock", dir.display())],
                    wait: w,
                },
                points: link(Transport::Shm, Some(w), None),
            });
        }
    }
    let mut listen = Vec::new();
    let mut points = Vec::new();
    for &t in sel.transports {
        match t {
            Transport::Unix => listen.push(format!("unix:{}/unix.sock", dir.display())),
            Transport::Tcp => listen.push("tcp:127.0.0.1:0".to_string()),
            Transport::Shm => continue,
        }
        points.extend(link(t, None, None));
    }
    if !listen.is_empty() {
        groups.push(Group {
            serving: Serving::Echo {
                listen,
                wait: WaitStrategy::default(),
            },
            points,
        });
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plan() {
        let sel = Selection {
            transports: &[Transport::Shm, Transport::Unix, Transport::Tcp],
            waits: &[
                WaitStrategy::Sleep,
                WaitStrategy::default(),
                WaitStrategy::Busy,
            ],
            sizes: &[64, 2048],
            connect: &[],
            baselines: true,
            paths: &[LendPath::Copy],
        };
        let g = groups(&sel, std::path::Path::new("/tmp/x"));
        assert_eq!(g.len(), 1 + 3 + 1);
        assert_eq!(g.iter().map(|g| g.points.len()).sum::<usize>(), 6 + 6 + 4);
        assert_eq!(g[1].points[0].label(), "shm sleep 64 B");
        assert_eq!(g[4].points[3].label(), "tcp 2 KiB");
    }

    #[test]
    fn paths_multiply_shm_and_unix_points_only() {
        let sel = Selection {
            transports: &[Transport::Shm, Transport::Unix, Transport::Tcp],
            waits: &[WaitStrategy::Busy],
            sizes: &[1 << 20],
            connect: &[],
            baselines: false,
            paths: &[LendPath::Copy, LendPath::Arena, LendPath::Loan],
        };
        let g = groups(&sel, std::path::Path::new("/tmp/x"));
        let labels: Vec<String> = g
            .iter()
            .flat_map(|g| g.points.iter().map(Point::label))
            .collect();
        assert_eq!(
            labels,
            [
                "shm busy 1 MiB",
                "shm busy 1 MiB arena",
                "shm busy 1 MiB loan",
                "unix 1 MiB",
                "unix 1 MiB arena",
                "unix 1 MiB loan",
                "tcp 1 MiB"
            ]
        );
    }
}

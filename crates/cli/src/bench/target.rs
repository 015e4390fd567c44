//! Where a point connects, how its requests travel and how its client is
//! set up: shared by the full measurement (`run`) and the `--paths` one
//! (`lend`).

use std::time::Duration;

use shmlink::{ClientOptions, Transport, WaitStrategy};

/// How a point's requests travel (`--paths`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LendPath {
    /// Streamed through the ring or socket (the arena is not used).
    Copy,
    /// `call()` lending every request from the arena (copied in once).
    Arena,
    /// Written in place into a loan (`loan` + `call_loan`); the fill is
    /// timed apart.
    Loan,
}

impl LendPath {
    /// `copy`, `arena`, `loan`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LendPath::Copy => "copy",
            LendPath::Arena => "arena",
            LendPath::Loan => "loan",
        }
    }
}

/// Where a point connects and how its client waits.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Server address.
    pub(crate) address: String,
    /// Its transport.
    pub(crate) transport: Transport,
    /// Wait strategy of both sides (shm only).
    pub(crate) wait: Option<WaitStrategy>,
    /// How requests travel.
    pub(crate) path: LendPath,
    /// Sequential calls only (a `--paths` run).
    pub(crate) sequential_only: bool,
}

impl Target {
    /// The client's options for requests of `size` bytes: copy streams
    /// every request, arena lends every one (loans are explicit). The call
    /// timeout grows with the size (the default plus 20 s a GiB): on a VM
    /// whose host hands memory back lazily, first touches of a 1 GiB
    /// message have taken over 5 s of kernel time; the bench measures
    /// that instead of failing.
    pub(crate) fn options(&self, size: usize) -> ClientOptions {
        let d = ClientOptions::default();
        ClientOptions {
            timeout: d.timeout + Duration::from_secs_f64(20.0 * size as f64 / (1u64 << 30) as f64),
            wait: self.wait.unwrap_or_default(),
            max_message_size: size.max(d.max_message_size),
            arena_threshold: if self.path == LendPath::Arena {
                0
            } else {
                usize::MAX
            },
            ..d
        }
    }

    /// The baseline this point is compared with.
    pub(crate) fn baseline(&self) -> &'static str {
        match (self.transport, self.wait) {
            (Transport::Shm, Some(WaitStrategy::Sleep)) => "baseline-futex",
            (Transport::Shm, _) => "baseline-spin",
            _ => "baseline-unix",
        }
    }
}

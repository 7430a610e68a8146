//! How a run ended ([`Verdict`]) and everything it hands back
//! ([`RunOutcome`]): the end of a run's data path, after the checks.

use std::time::Duration;

use crate::{
    plan::ResolvedStep,
    rack::ZoneKind,
    timing::Timing,
    trace::{fmt_duration, fmt_time, TraceLine},
};

/// The exit status of `racksim` commands when a run ended in a testbed
/// error (0 converged / expectation held, 1 not, 2 bad input).
pub const TESTBED_ERROR_EXIT: i32 = 3;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Converged at `at` (after the last plan step) and stayed so for the
    /// stability window.
    Converged { at: Duration },
    /// Still not converged at the deadline; what was missing then.
    NotConverged {
        deadline: Duration,
        gaps: Vec<String>,
    },
    /// The testbed could not judge the run: a fake's server stopped, a host
    /// task could not start (a socket it could not bind), or a host's
    /// software panicked or returned an error (in a fake, or in the code
    /// under test: `error` says which). It is evidence neither for nor
    /// against the strategy, and no expectation accepts it (`racksim run`
    /// exits with [`TESTBED_ERROR_EXIT`]).
    TestbedError {
        at: Duration,
        /// The host whose software failed (`?` when unknown).
        host: String,
        error: String,
    },
    /// A safety invariant broke; the run stops at the first violation.
    InvariantViolated {
        at: Duration,
        invariant: &'static str,
        message: String,
        /// The last trace line before the violation was seen: the event
        /// that broke it.
        event: Option<String>,
    },
}

impl Verdict {
    pub fn converged(&self) -> bool {
        matches!(self, Verdict::Converged { .. })
    }

    /// The testbed itself failed; see [`Verdict::TestbedError`].
    pub fn is_testbed_error(&self) -> bool {
        matches!(self, Verdict::TestbedError { .. })
    }

    /// Lines of the verdict, for the end of the trace and the CLI.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Verdict::Converged { at } => {
                vec![format!(
                    "CONVERGED at {} (time to converge {})",
                    fmt_time(*at),
                    fmt_duration(*at)
                )]
            }
            Verdict::NotConverged { deadline, gaps } => {
                let mut v = vec![format!(
                    "NOT CONVERGED by the deadline {}",
                    fmt_time(*deadline)
                )];
                v.extend(gaps.iter().map(|g| format!("  - {g}")));
                v
            }
            Verdict::TestbedError { at, host, error } => vec![
                format!("TESTBED ERROR at {} on {host}: {error}", fmt_time(*at)),
                "  the testbed failed: this run says nothing about the strategy".to_string(),
            ],
            Verdict::InvariantViolated {
                at,
                invariant,
                message,
                event,
            } => {
                let mut v = vec![format!(
                    "INVARIANT VIOLATED at {}: {invariant}: {message}",
                    fmt_time(*at)
                )];
                if let Some(e) = event {
                    v.push(format!("  first violating event: {e}"));
                }
                v
            }
        }
    }
}

/// Result of a run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The plan with its drawn times.
    pub steps: Vec<ResolvedStep>,
    pub trace: Vec<TraceLine>,
    pub verdict: Verdict,
    /// Simulated time at the end of the run: where the clock stopped, or,
    /// for a broken invariant, the instant it broke (no host ran after it).
    pub sim_time: Duration,
    /// Simulation steps the driver took (the unit of simulation cost).
    pub events: u64,
    /// How long each zone start took: `(sled, zone, duration)`.
    pub zone_starts: Vec<(String, ZoneKind, Duration)>,
    /// When the rack first converged, and each fault's repair time.
    pub timing: Timing,
    /// With [`RunConfig::recheck_every_event`](super::RunConfig::recheck_every_event): each instant at which the
    /// gaps had changed though the world's version had not, with the gaps
    /// the driver held and those it would have found, and each instant
    /// between two checks at which a safety invariant was broken. Empty
    /// otherwise, and empty in a sound world.
    pub uncounted_changes: Vec<String>,
}

impl RunOutcome {
    /// The plan's instance API requests and what each caller heard.
    pub fn operations(&self) -> Vec<super::operations::Operation> {
        super::operations::operations(&self.steps, &self.trace)
    }
}

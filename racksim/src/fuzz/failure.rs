//! How a run failed, in the terms the fuzzer, the shrinker and the known
//! defects compare failures by: the same invariant, or not converging with
//! the same thing missing.

use racksim_sim::{RunOutcome, Verdict};
use serde::Serialize;

use crate::file::{Expectation, Outcome};

/// How a run failed, as the shrinker keeps it: the same invariant, or not
/// converging with the same thing missing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Failure {
    /// A safety invariant broke.
    Invariant(&'static str),
    /// Not converged by the deadline; the first gap of the verdict.
    NotConverged(String),
    /// Converged, but later than the expectation allows.
    TooSlow,
    /// The testbed itself failed (never a finding about the code under
    /// test; counted apart).
    TestbedError,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Invariant(inv) => write!(f, "invariant {inv} violated"),
            Failure::NotConverged(gap) => write!(f, "not converged: {gap}"),
            Failure::TooSlow => f.write_str("converged too late"),
            Failure::TestbedError => f.write_str("testbed error"),
        }
    }
}

impl Failure {
    /// Does a run's outcome fail in this way? `NotConverged` matches when
    /// the same item is still among the gaps.
    pub fn matches(&self, exp: &Expectation, outcome: &RunOutcome) -> bool {
        match (self, &outcome.verdict) {
            (Failure::NotConverged(gap), Verdict::NotConverged { gaps, .. }) => gaps.contains(gap),
            _ => failure(exp, outcome).as_ref() == Some(self),
        }
    }
}

/// How a run missed a `converges` expectation, if it did.
pub fn failure(exp: &Expectation, outcome: &RunOutcome) -> Option<Failure> {
    match &outcome.verdict {
        Verdict::InvariantViolated { invariant, .. } => Some(Failure::Invariant(invariant)),
        Verdict::NotConverged { gaps, .. } => Some(Failure::NotConverged(
            gaps.first().cloned().unwrap_or_default(),
        )),
        Verdict::TestbedError { .. } => Some(Failure::TestbedError),
        Verdict::Converged { at } => match exp.outcome {
            Outcome::ConvergesWithin(within) if *at > within => Some(Failure::TooSlow),
            _ => None,
        },
    }
}

/// One seed's run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeedResult {
    pub seed: u64,
    /// `None` when the rack converged in time with no invariant broken.
    pub failure: Option<Failure>,
    /// Simulated time at the end of the run, in milliseconds.
    pub sim_ms: u64,
    /// Every gap of a not-converged verdict (what known defects are matched
    /// against: all of them, not only the first).
    pub gaps: Vec<String>,
    /// An invariant violation's message.
    pub message: Option<String>,
}

/// A run's outcome as a seed's result (for a fuzz seed, or a regression
/// file's run checked against a known defect's signature).
pub fn result_of(seed: u64, exp: &Expectation, outcome: &RunOutcome) -> SeedResult {
    let (gaps, message) = match &outcome.verdict {
        Verdict::NotConverged { gaps, .. } => (gaps.clone(), None),
        Verdict::InvariantViolated { message, .. } => (Vec::new(), Some(message.clone())),
        _ => (Vec::new(), None),
    };
    SeedResult {
        seed,
        failure: failure(exp, outcome),
        sim_ms: outcome.sim_time.as_millis() as u64,
        gaps,
        message,
    }
}

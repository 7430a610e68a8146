//! A run's plan: which strategy runs, and the timed steps (faults and
//! actions) the driver applies to the world.
//!
//! Steps may carry a jitter window (`at = 5m..8m`); [`Plan::resolve`] draws
//! the concrete times from the run's seed *before* the simulation starts, so
//! the drawn values can be printed up front and a run replays from its seed.

use std::{fmt, str::FromStr, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;
use rand::{rngs::SmallRng, Rng, SeedableRng};

use crate::trace::fmt_duration;

/// Which service-NAT code the sleds run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// Blocking zone-start path (seed 000), bugs included.
    Legacy,
    /// Periodic per-sled task (seed 000's proposal).
    SledTask,
}

impl Strategy {
    pub const ALL: [Strategy; 2] = [Strategy::Legacy, Strategy::SledTask];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Legacy => "legacy",
            Strategy::SledTask => "sled-task",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown strategy {s:?} (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

/// When a step happens: a fixed time, or a window drawn from the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Fixed(Duration),
    /// Inclusive window; the time is drawn uniformly at millisecond grain.
    Window(Duration, Duration),
}

impl At {
    pub fn latest(self) -> Duration {
        match self {
            At::Fixed(d) | At::Window(_, d) => d,
        }
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Fixed(d) => f.write_str(&fmt_duration(*d)),
            At::Window(a, b) => write!(f, "{}..{}", fmt_duration(*a), fmt_duration(*b)),
        }
    }
}

/// What a step does to the world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Internal DNS stops advertising this switch zone (the madrid case).
    HideSwitch(SwitchSlot),
    /// Internal DNS advertises the switch zone again.
    RevealSwitch(SwitchSlot),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::HideSwitch(s) => write!(f, "discovery hides {s}"),
            Action::RevealSwitch(s) => write!(f, "discovery reveals {s}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub at: At,
    pub action: Action,
}

/// A plan as written: steps with possibly-jittered times.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
}

/// A step with its time drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedStep {
    pub at: Duration,
    pub action: Action,
    /// The window it was drawn from, if any (printed with the options).
    pub drawn_from: Option<At>,
}

impl Plan {
    /// Draw every jittered time from `seed`. Steps come back in time order;
    /// steps at the same time keep their written order.
    pub fn resolve(&self, seed: u64) -> Vec<ResolvedStep> {
        // A stream of its own, so adding randomness elsewhere in the run does
        // not shift the drawn plan.
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x706c_616e_5f6a_6974);
        let mut steps: Vec<ResolvedStep> = self
            .steps
            .iter()
            .map(|s| match s.at {
                At::Fixed(d) => ResolvedStep {
                    at: d,
                    action: s.action.clone(),
                    drawn_from: None,
                },
                At::Window(a, b) => {
                    let ms = rng.random_range(a.as_millis() as u64..=b.as_millis() as u64);
                    ResolvedStep {
                        at: Duration::from_millis(ms),
                        action: s.action.clone(),
                        drawn_from: Some(s.at),
                    }
                }
            })
            .collect();
        steps.sort_by_key(|s| s.at);
        steps
    }
}

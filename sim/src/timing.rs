//! Convergence timing: when the rack first converged, counted from the
//! start of the run, and how long each fault took to repair, counted from
//! the moment the fault ended (or the change was made).
//!
//! The driver samples the convergence gaps whenever the world changes and
//! at least once a simulated second; [`Timeline`] keeps the instants where
//! "converged" flipped. A verdict says whether the rack converged in the
//! end; the timing says how fast each strategy repairs each fault, which is
//! where strategies differ (seconds for a scrimlet-local repair, a 30 s
//! period for a per-sled task, never for the legacy path).

use std::time::Duration;

use crate::{plan::ResolvedStep, trace::fmt_duration, trace::fmt_time, Action};

/// The convergence timing of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// Start of the first stretch during which the rack stayed converged
    /// for the stability window (or until the run ended converged).
    pub first_converged: Option<Duration>,
    /// One per plan step that ends a fault or makes a change (a step that
    /// only starts a fault — hiding a switch, a partition, a power-off —
    /// is measured at the step that ends it).
    pub repairs: Vec<Repair>,
}

/// How long the rack took to converge after one plan step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The step, as the plan prints it.
    pub step: String,
    /// When the fault ended or the change was made.
    pub from: Duration,
    /// When the rack was converged again; `None` if it never was.
    pub converged_at: Option<Duration>,
}

impl Repair {
    pub fn took(&self) -> Option<Duration> {
        self.converged_at.map(|at| at - self.from)
    }
}

impl Timing {
    /// Lines for the end of a run's report.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![match self.first_converged {
            Some(at) => format!(
                "first converged at {} (from the start of the run)",
                fmt_time(at)
            ),
            None => "never converged".to_string(),
        }];
        for r in &self.repairs {
            v.push(match r.took() {
                Some(took) => format!(
                    "{}  {}: repaired in {}",
                    fmt_time(r.from),
                    r.step,
                    fmt_duration(took)
                ),
                None => format!("{}  {}: not repaired", fmt_time(r.from), r.step),
            });
        }
        v
    }

    /// The slowest repair, and whether any was never repaired.
    pub fn slowest_repair(&self) -> Option<&Repair> {
        self.repairs
            .iter()
            .max_by_key(|r| r.took().unwrap_or(Duration::MAX))
    }
}

/// When a step's fault ends, from which its repair is measured; `None` for
/// a step that starts a fault some later step ends.
pub fn fault_end(step: &ResolvedStep) -> Option<Duration> {
    match &step.action {
        Action::HideSwitch(_)
        | Action::Partition { .. }
        | Action::Latency { .. }
        | Action::SidecarPowerOff(_)
        | Action::PowerOff => None,
        Action::DpdErrors { window, .. } | Action::DpdHang { window, .. } => {
            Some(step.at + *window)
        }
        _ => Some(step.at),
    }
}

/// The instants at which the rack's convergence flipped.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    flips: Vec<(Duration, bool)>,
}

impl Timeline {
    /// The rack is (or is not) converged at `at`. Samples come in time
    /// order; one taken after a plan step applied at `at` reflects it.
    pub fn sample(&mut self, at: Duration, converged: bool) {
        if self.flips.last().map(|f| f.1) != Some(converged) {
            self.flips.push((at, converged));
        }
    }

    /// Whether the rack was converged at `at` (after any step applied then).
    fn converged_at(&self, at: Duration) -> bool {
        self.flips
            .iter()
            .rev()
            .find(|f| f.0 <= at)
            .is_some_and(|f| f.1)
    }

    /// When the rack was converged again after a fault that ended at
    /// `from`: the start of the first converged stretch at or after `from`
    /// that lasted the stability window, or until the next plan step
    /// (`next`), or to the end of the run. A stretch cut short does not
    /// count: a sidecar powered back on leaves the rack "converged" for the
    /// instant before its switch zone comes up with an empty table.
    fn repaired_at(
        &self,
        from: Duration,
        next: Option<Duration>,
        stability: Duration,
    ) -> Option<Duration> {
        let mut starts: Vec<Duration> = Vec::new();
        if self.converged_at(from) {
            starts.push(from);
        }
        starts.extend(self.flips.iter().filter(|f| f.0 > from && f.1).map(|f| f.0));
        starts.into_iter().find(
            |&start| match self.flips.iter().find(|f| f.0 > start && !f.1) {
                None => true,
                Some(&(broke, _)) => broke - start >= stability || next.is_some_and(|n| broke >= n),
            },
        )
    }

    /// The timing of a run that ended at `end`.
    pub fn timing(&self, steps: &[ResolvedStep], stability: Duration, end: Duration) -> Timing {
        let first_converged = self.flips.iter().enumerate().find_map(|(i, &(at, c))| {
            let until = self.flips.get(i + 1).map(|f| f.0);
            let lasted = until.unwrap_or(end) - at;
            (c && (lasted >= stability || until.is_none())).then_some(at)
        });
        let repairs = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.at <= end)
            .filter_map(|(i, s)| {
                let from = fault_end(s)?.min(end);
                let next = steps[i + 1..].iter().map(|n| n.at).find(|&at| at > from);
                Some(Repair {
                    step: s.action.to_string(),
                    from,
                    converged_at: self.repaired_at(from, next, stability),
                })
            })
            .collect();
        Timing {
            first_converged,
            repairs,
        }
    }
}

#[cfg(test)]
mod tests;

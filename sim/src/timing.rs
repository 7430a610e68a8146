//! Convergence timing: when the rack first converged, counted from the
//! start of the run, and how long each fault took to repair, counted from
//! the moment the fault ended (or the change was made).
//!
//! The driver samples the convergence gaps whenever the world changes
//! (nothing they read moves otherwise); [`Timeline`] keeps the instants where
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
    /// When the fault ended or the change was made, or, if the host it
    /// happened to was then in an outage another step began, when that
    /// outage ended.
    pub from: Duration,
    /// When the step itself happened, if its repair is measured from a
    /// later outage's end (`from`).
    pub delayed_from: Option<Duration>,
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
            let delayed = r.delayed_from.map_or(String::new(), |at| {
                format!(
                    " (at {}; measured from the end of an outage of its host)",
                    fmt_time(at)
                )
            });
            v.push(match r.took() {
                Some(took) => format!(
                    "{}  {}{delayed}: repaired in {}",
                    fmt_time(r.from),
                    r.step,
                    fmt_duration(took)
                ),
                None => format!("{}  {}{delayed}: not repaired", fmt_time(r.from), r.step),
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
/// a step that starts a fault some later step ends (a crash is measured at
/// the restart, a control-plane outage when it is back up).
pub fn fault_end(step: &ResolvedStep) -> Option<Duration> {
    match &step.action {
        Action::HideSwitch(_)
        | Action::Partition { .. }
        | Action::Latency { .. }
        | Action::SidecarPowerOff(_)
        | Action::ScrimletReboot(_)
        | Action::PowerOff
        | Action::Crash(_)
        | Action::ControlPlaneDown
        | Action::ControlPlaneCrash => None,
        a if a.window().is_some() => a.window().map(|w| step.at + w),
        _ => Some(step.at),
    }
}

/// The host a step's fault or repair happens to (a switch by its switch
/// zone's name), for finding the outages that overlap it.
fn component(action: &Action) -> Option<String> {
    match action {
        Action::DpdRestart(slot)
        | Action::SidecarPowerOn(slot)
        | Action::SidecarPowerOff(slot)
        | Action::ScrimletReboot(slot)
        | Action::ScrimletBack(slot) => Some(slot.to_string()),
        Action::DpdErrors { switch, .. }
        | Action::DpdHang { switch, .. }
        | Action::MgsErrors { switch, .. }
        | Action::MgsHang { switch, .. }
        | Action::StaleEntry { switch, .. }
        | Action::LostEntry { switch, .. } => Some(switch.to_string()),
        Action::Crash(host) | Action::Restart(host) => Some(host.clone()),
        _ => None,
    }
}

/// The stretches in which a host cannot take any repair, whatever the
/// strategy: its dpd answers errors or hangs, its sidecar is off, it has
/// crashed, the whole rack is off. `(host or None for every host, from,
/// until)`; an outage no step ends lasts to the end of the run.
fn outages(steps: &[ResolvedStep], end: Duration) -> Vec<(Option<String>, Duration, Duration)> {
    let ended_by = |i: usize, ends: &dyn Fn(&Action) -> bool| {
        steps[i + 1..]
            .iter()
            .find(|n| ends(&n.action))
            .map_or(end, |n| n.at)
    };
    steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.action {
            Action::DpdErrors { switch, window } | Action::DpdHang { switch, window } => {
                Some((Some(switch.to_string()), s.at, s.at + *window))
            }
            Action::SidecarPowerOff(slot) => Some((
                Some(slot.to_string()),
                s.at,
                ended_by(i, &|a| matches!(a, Action::SidecarPowerOn(x) if x == slot)),
            )),
            Action::ScrimletReboot(slot) => Some((
                Some(slot.to_string()),
                s.at,
                ended_by(i, &|a| matches!(a, Action::ScrimletBack(x) if x == slot)),
            )),
            Action::Crash(host) => Some((
                Some(host.clone()),
                s.at,
                ended_by(i, &|a| matches!(a, Action::Restart(x) if x == host)),
            )),
            Action::PowerOff => Some((None, s.at, ended_by(i, &|a| matches!(a, Action::ColdBoot)))),
            _ => None,
        })
        .collect()
}

/// When the repair of the step at `index` can begin: the end of its fault,
/// or, if the host it happened to is then in an outage begun by another
/// step (a dpd restarted while it answers 500s), the end of that outage —
/// no strategy can repair a dpd that refuses every request, so time spent
/// waiting for the outage to end is not the strategy's. Outages that chain
/// are followed to the last one.
fn repair_starts(
    steps: &[ResolvedStep],
    index: usize,
    outages: &[(Option<String>, Duration, Duration)],
) -> Option<Duration> {
    let step = &steps[index];
    let mut from = fault_end(step)?;
    let host = component(&step.action);
    loop {
        let blocked = outages
            .iter()
            .filter(|(h, start, until)| {
                (h.is_none() || *h == host) && *start <= from && from < *until
            })
            .map(|(_, _, until)| *until)
            .max();
        match blocked {
            Some(until) if until > from => from = until,
            _ => return Some(from),
        }
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
        let outages = outages(steps, end);
        let repairs = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.at <= end)
            .filter_map(|(i, s)| {
                let start = repair_starts(steps, i, &outages)?;
                let delayed_from = (fault_end(s) != Some(start)).then_some(s.at);
                let from = start.min(end);
                let next = steps[i + 1..].iter().map(|n| n.at).find(|&at| at > from);
                Some(Repair {
                    step: s.action.to_string(),
                    from,
                    delayed_from,
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

//! Plan building and step order: the steps on one piece of state (a
//! switch's DNS visibility, a sidecar's power, a partition, the control
//! plane, the rack's power) must happen in the same order in every draw of
//! their windows, so a cold boot can never be drawn before its power-off.

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::{rack::RackSpec, At, InstanceSpec, Plan, Step};
use toml::Spanned;

use super::{
    error::{Locator, ScenarioError},
    raw::{HostGroup, RawStep},
    steps::{step_action, PlanState},
};

/// The deadline every step must come before: the shortest of the
/// expectations', since each expectation's run ends at its own.
pub(super) struct Deadline {
    pub at: Duration,
    /// Which expectation's, and where it is written: `expect.legacy's
    /// deadline (its `deadline`, line 80)`.
    pub what: String,
}

/// The plan of a scenario's steps, validated against the rack, the
/// instances, the first deadline (none: a file without expectations) and
/// the order rules.
pub(super) fn plan(
    raw_steps: &[RawStep],
    rack: &RackSpec,
    instances: &[InstanceSpec],
    deadline: Option<&Deadline>,
    loc: &Locator,
) -> Result<Plan, ScenarioError> {
    let err = |span, message, hint| loc.error(span, message, hint);
    let mut steps = Vec::new();
    let mut sorted: Vec<&RawStep> = raw_steps.iter().collect();
    sorted.sort_by_key(|s| s.at.get_ref().0.latest());
    let mut state = PlanState::new(rack);
    // The last step so far (in the order above) that changed each piece of
    // state an order is checked on, so the next such step can be required
    // to come after it in every draw of the windows.
    let mut last: BTreeMap<String, &RawStep> = BTreeMap::new();
    for (i, s) in sorted.iter().enumerate() {
        let at = s.at.get_ref().0;
        let latest = at.latest();
        if let Some(d) = deadline.filter(|d| latest >= d.at) {
            return Err(err(
                Some(s.at.span()),
                format!(
                    "step at {at} is not before the deadline: {}, {}, ends that run first",
                    d.what,
                    racksim_sim::trace::fmt_duration(d.at),
                ),
                Some(format!(
                    "move the step earlier, or make that deadline later than {}",
                    racksim_sim::trace::fmt_duration(latest)
                )),
            ));
        }
        let resource = ordered_resource(s);
        // The step before it on the same state must be over before this one
        // can start. Steps are sorted by their latest time, and `Plan::resolve`
        // keeps plan order on a tie, so starting exactly when it ends is fine.
        if let Some(prev) = resource.as_ref().and_then(|r| last.get(r)) {
            if earliest(at) < prev.at.get_ref().0.latest() {
                let (message, hint) = overlap(s, prev);
                return Err(err(Some(s.at.span()), message, Some(hint)));
            }
        }
        let before = state.clone();
        let action = step_action(s, rack, instances, &mut state).map_err(|(span, msg, hint)| {
            // A step the state does not allow yet, with a step later in the
            // list that would allow it but can draw a time before it: the
            // windows overlap.
            let enabler = resource.as_ref().and_then(|r| {
                sorted[i + 1..].iter().find(|later| {
                    ordered_resource(later).as_ref() == Some(r)
                        && earliest(later.at.get_ref().0) <= at.latest()
                        && {
                            let mut st = before.clone();
                            step_action(later, rack, instances, &mut st).is_ok()
                                && step_action(s, rack, instances, &mut st).is_ok()
                        }
                })
            });
            match enabler {
                Some(later) => {
                    let (message, hint) = overlap(s, later);
                    err(Some(s.at.span()), message, Some(hint))
                }
                None => err(Some(span), msg, hint),
            }
        })?;
        if let Some(r) = resource {
            last.insert(r, s);
        }
        steps.push(Step { at, action });
    }

    Ok(Plan { steps })
}

/// The earliest time a step can happen.
fn earliest(at: At) -> Duration {
    match at {
        At::Fixed(d) | At::Window(d, _) => d,
    }
}

/// The piece of plan state a step changes whose order matters: the steps
/// on one piece must happen in the same order in every draw of their
/// windows. `None` for steps whose order is not checked.
fn ordered_resource(s: &RawStep) -> Option<String> {
    let switch = || {
        s.switch
            .as_ref()
            .map(|v| v.get_ref().clone())
            .unwrap_or_default()
    };
    let group = |g: &Option<Spanned<HostGroup>>| {
        g.as_ref()
            .map(|g| g.get_ref().names().join(","))
            .unwrap_or_default()
    };
    match s.action.get_ref().as_str() {
        "hide-switch" | "reveal-switch" => Some(format!("dns {}", switch())),
        "sidecar-power-off" | "sidecar-power-on" => Some(format!("sidecar {}", switch())),
        "reboot-scrimlet" | "scrimlet-back" => Some(format!("scrimlet {}", switch())),
        "partition" | "heal" => Some(format!(
            "partition {} / {} / {}",
            group(&s.a),
            group(&s.b),
            s.oneway.as_ref().is_some_and(|o| *o.get_ref())
        )),
        "crash" | "restart" => s.host.as_ref().map(|h| format!("host {}", h.get_ref())),
        "control-plane-down" | "control-plane-crash" | "control-plane-up" => {
            Some("control plane".into())
        }
        "power-off" | "cold-boot" => Some("rack power".into()),
        // Each change is checked against the zones the earlier ones leave.
        "config-change" => Some("system networking config".into()),
        _ => None,
    }
}

/// The error for `this` step, which can draw a time before `other` (on the
/// same state) although it must come after it.
fn overlap(this: &RawStep, other: &RawStep) -> (String, String) {
    let (name, at) = (this.action.get_ref(), this.at.get_ref().0);
    let (other_name, other_at) = (other.action.get_ref(), other.at.get_ref().0);
    let message = format!("{name} at {at} can happen before {other_name} at {other_at}");
    let hint = match (at, other_at) {
        (At::Window(..), At::Window(..)) => format!(
            "{name}'s window {at} can start before {other_name}'s {other_at} ends; \
             make the windows not overlap"
        ),
        (At::Fixed(_), At::Fixed(_)) => format!(
            "both are at {at} and {name} is listed first, so it runs first; \
             list the {other_name} step before it"
        ),
        _ => format!(
            "{name} must come after {other_name} in every draw; \
             start it at {} or later",
            racksim_sim::trace::fmt_duration(other_at.latest())
        ),
    };
    (message, hint)
}

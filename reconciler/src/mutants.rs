//! Mutants: plausible reconciler bugs, for proving that the test suite
//! would notice them (the kill table of `racksim mutants`).
//!
//! Each mutant is one small, deliberate deviation at the point in the code
//! where a real engineer could have made it, guarded by
//! [`active`]`(Mutant::X)`. Which mutant (if any) is active is a property of
//! one *run*: the simulation driver selects it for its own thread
//! ([`select`]) before the run starts, and every simulated host of that run
//! executes on that thread (turmoil drives all hosts of a simulation from
//! the thread that steps it). Runs in parallel threads — a matrix, a fuzz
//! sweep — therefore never see each other's mutant, and a run replays with
//! the same mutant from its configuration.
//!
//! **Never in production.** The deviating behaviour exists only when the
//! crate is built with the `mutants` cargo feature. Without it, [`active`]
//! is a `const fn` that returns `false` (the guarded branches are dead code
//! the compiler removes), there is no thread-local to set, the helpers the
//! hooks call are not compiled, and [`COMPILED`] is `false`, so the
//! simulation refuses a configuration that asks for a mutant. Only test
//! builds enable the feature (the `racksim` crate's dev-dependencies) and,
//! on request, the CLI (`cargo run -p racksim --features mutants`).

use std::{fmt, str::FromStr};

/// Whether this build carries the mutants' code.
pub const COMPILED: bool = cfg!(feature = "mutants");

/// One plausible bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    /// sled-task reconciles only the first switch it discovers.
    FirstSwitchOnly,
    /// A reconciler task stops for good after its first failed activation
    /// (an error propagated out of the loop instead of into the status).
    StopAtFirstFailure,
    /// The executor creates before it removes (a stale entry in the way of
    /// the new one makes the create fail with a 409).
    CreateBeforeRemove,
    /// The planner compares only `internal_ip` (a stale MAC, VNI or range
    /// is accepted), as the legacy path does.
    CompareOnlyInternalIp,
    /// Ownership of NAT entries by external IP instead of (IP, port range).
    OwnByIp,
    /// The task never fires its periodic timer.
    NoPeriodicTimer,
    /// The task ignores scrimlet status changes (never goes inert, never
    /// wakes when its switch comes back).
    IgnoreScrimletStatus,
    /// The task ignores config changes (keeps its first snapshot).
    IgnoreConfigChanges,
    /// Instance delete without the check that the instance is stopped.
    DeleteWithoutStateCheck,
    /// The start saga without its conditional Stopped -> Starting
    /// transition (it behaves as the naive start).
    StartWithoutConditionalTransition,
    /// A saga's unwind (also when resumed after a crash) skips the undo of
    /// MARK_AS_STARTING: the instance stays Starting.
    SagaSkipsUndo,
}

impl Mutant {
    pub const ALL: [Mutant; 11] = [
        Mutant::FirstSwitchOnly,
        Mutant::StopAtFirstFailure,
        Mutant::CreateBeforeRemove,
        Mutant::CompareOnlyInternalIp,
        Mutant::OwnByIp,
        Mutant::NoPeriodicTimer,
        Mutant::IgnoreScrimletStatus,
        Mutant::IgnoreConfigChanges,
        Mutant::DeleteWithoutStateCheck,
        Mutant::StartWithoutConditionalTransition,
        Mutant::SagaSkipsUndo,
    ];

    /// The mutant's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::FirstSwitchOnly => "first-switch-only",
            Mutant::StopAtFirstFailure => "stop-at-first-failure",
            Mutant::CreateBeforeRemove => "create-before-remove",
            Mutant::CompareOnlyInternalIp => "compare-only-internal-ip",
            Mutant::OwnByIp => "own-by-ip",
            Mutant::NoPeriodicTimer => "no-periodic-timer",
            Mutant::IgnoreScrimletStatus => "ignore-scrimlet-status",
            Mutant::IgnoreConfigChanges => "ignore-config-changes",
            Mutant::DeleteWithoutStateCheck => "delete-without-state-check",
            Mutant::StartWithoutConditionalTransition => "start-without-conditional-transition",
            Mutant::SagaSkipsUndo => "saga-skips-undo",
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mutant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mutant::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown mutant {s:?} (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(feature = "mutants")]
thread_local! {
    static SELECTED: std::cell::Cell<Option<Mutant>> = const { std::cell::Cell::new(None) };
}

/// Is `m` the mutant selected for the run on this thread? Always `false`
/// without the `mutants` feature.
#[cfg(feature = "mutants")]
pub fn active(m: Mutant) -> bool {
    SELECTED.with(|s| s.get() == Some(m))
}

/// Is `m` the mutant selected for the run on this thread? Always `false`
/// without the `mutants` feature.
#[cfg(not(feature = "mutants"))]
#[inline(always)]
pub const fn active(_m: Mutant) -> bool {
    false
}

/// Restores the previous selection when dropped.
#[must_use = "the selection lasts as long as the guard"]
pub struct Selection {
    #[cfg(feature = "mutants")]
    previous: Option<Mutant>,
}

/// Select `m` for the run on this thread, until the guard drops. `Err` when
/// a mutant is asked for but this build does not carry them.
pub fn select(m: Option<Mutant>) -> Result<Selection, String> {
    #[cfg(feature = "mutants")]
    {
        let previous = SELECTED.with(|s| s.replace(m));
        Ok(Selection { previous })
    }
    #[cfg(not(feature = "mutants"))]
    match m {
        None => Ok(Selection {}),
        Some(m) => Err(format!(
            "mutant {m} asked for, but this build has no mutants (build with --features mutants)"
        )),
    }
}

#[cfg(feature = "mutants")]
impl Drop for Selection {
    fn drop(&mut self) {
        SELECTED.with(|s| s.set(self.previous));
    }
}

/// [`Mutant::CompareOnlyInternalIp`]: a current entry counts as unchanged
/// when a desired one has its address, ports and internal IP.
#[cfg(feature = "mutants")]
pub(crate) fn plan_comparing_internal_ip(
    desired: &[crate::nat::NatEntry],
    current: &[crate::nat::NatEntry],
) -> crate::nat::NatPlan {
    use std::collections::BTreeSet;
    let key = |e: &crate::nat::NatEntry| {
        (
            e.external_ip,
            e.first_port,
            e.last_port,
            e.target.internal_ip,
        )
    };
    let desired: BTreeSet<_> = desired.iter().copied().collect();
    let current: BTreeSet<_> = current.iter().copied().collect();
    let current_keys: BTreeSet<_> = current.iter().map(key).collect();
    let desired_keys: BTreeSet<_> = desired.iter().map(key).collect();
    crate::nat::NatPlan {
        unchanged: current
            .iter()
            .filter(|e| desired_keys.contains(&key(e)))
            .copied()
            .collect(),
        to_remove: current
            .iter()
            .filter(|e| !desired_keys.contains(&key(e)))
            .copied()
            .collect(),
        to_create: desired
            .iter()
            .filter(|e| !current_keys.contains(&key(e)))
            .copied()
            .collect(),
    }
}

/// [`Mutant::FirstSwitchOnly`]: keep only the first discovered switch zone.
#[cfg(feature = "mutants")]
pub(crate) fn first_switch_only<T: Ord>(
    mut zones: std::collections::BTreeSet<T>,
) -> std::collections::BTreeSet<T> {
    if active(Mutant::FirstSwitchOnly) {
        let first = zones.pop_first();
        return first.into_iter().collect();
    }
    zones
}

/// [`Mutant::IgnoreConfigChanges`]: the task keeps reconciling against the
/// first config it saw.
#[cfg(feature = "mutants")]
pub(crate) fn first_snapshot<C: Clone>(first: &mut Option<C>, latest: C) -> C {
    if !active(Mutant::IgnoreConfigChanges) {
        return latest;
    }
    first.get_or_insert(latest).clone()
}

/// [`Mutant::StopAtFirstFailure`]: does this activation's status report a
/// failure? Statuses are the reconcilers' own types; their one-line
/// summaries say "failed"/"failing" for every failure they carry.
#[cfg(feature = "mutants")]
pub(crate) fn stops_after<S: fmt::Display>(status: &S) -> bool {
    active(Mutant::StopAtFirstFailure) && {
        let line = status.to_string().to_lowercase();
        line.contains("fail") || line.contains("cannot") || line.contains("error")
    }
}

/// [`Mutant::CreateBeforeRemove`]: the executor with its two phases the
/// wrong way round. A stale entry still holds the key the desired entry
/// needs, so its create fails (409) before the stale one is removed.
#[cfg(feature = "mutants")]
pub(crate) async fn create_then_remove<C: crate::http::Connector>(
    dpd: &crate::dpd::DpdClient<C>,
    plan: crate::nat::NatPlan,
) -> crate::nat::NatReconcileOutcome {
    let (mut created, mut create_failures) = (0, Vec::new());
    for e in &plan.to_create {
        let r = dpd
            .nat_ipv4_create(e.external_ip, e.first_port, e.last_port, &e.target)
            .await;
        match r {
            Ok(()) => created += 1,
            Err(err) => create_failures.push(format!("creating {e}: {err}")),
        }
    }
    let (mut removed, mut remove_failures) = (0, Vec::new());
    for e in &plan.to_remove {
        match dpd.nat_ipv4_delete(e.external_ip, e.first_port).await {
            Err(err) if err.status() != Some(404) => {
                remove_failures.push(format!("removing {e}: {err}"))
            }
            _ => removed += 1,
        }
    }
    crate::nat::NatReconcileOutcome::Complete {
        unchanged: plan.unchanged.len(),
        removed,
        remove_failures,
        created,
        create_failures,
    }
}

#[cfg(all(test, feature = "mutants"))]
mod tests;

/// `own-by-ip`: a sled treats every entry on its zones' external IPs as its
/// own, whatever the port range — two sleds sharing a source-NAT IP then
/// delete each other's entries.
#[cfg(feature = "mutants")]
pub fn own_by_ip(scope: crate::nat::Scope) -> crate::nat::Scope {
    use crate::nat::{ExternalRange, Scope};
    match scope {
        Scope::ExternalRanges(ranges) if active(Mutant::OwnByIp) => Scope::ExternalRanges(
            ranges
                .into_iter()
                .map(|r| ExternalRange {
                    first_port: 0,
                    last_port: u16::MAX,
                    ..r
                })
                .collect(),
        ),
        other => other,
    }
}

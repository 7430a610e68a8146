//! # racksim-mutants: which plausible reconciler bug a run carries
//!
//! The kill table (`racksim mutants`) proves that the suite would notice a
//! broken reconciler: each [`Mutant`] is one small, deliberate bug, and a
//! run with it must fail somewhere the real reconciler passes. This crate is
//! the catalogue — the mutants' names, as the command line and a run's
//! configuration spell them — and the switch that selects one for a run.
//! The bugs themselves live in the reconciler, and only when it is built
//! with its `mutants` feature (its `src/mutants.rs`; how they are put in
//! place is recorded in `docs/decisions/0005-mutants-as-function-replacements.md`).
//!
//! ## Why a crate of its own
//!
//! A run's configuration names its mutant, and a build without the
//! mutants must still parse that name and refuse the run, so the names
//! exist in every build. The production reconciler, though, should not
//! carry them: without its `mutants` feature it does not depend on this
//! crate at all. So the names sit below it, where the simulation and the
//! command line reach them too.
//!
//! ## One run, one thread
//!
//! Which mutant (if any) is active is a property of one *run*: the
//! simulation driver selects it for its own thread ([`select`]) before the
//! run starts, and every simulated host of that run executes on that thread
//! (turmoil drives all hosts of a simulation from the thread that steps
//! it). Runs in parallel threads — a matrix, a fuzz sweep — therefore never
//! see each other's mutant, and a run replays with the same mutant from its
//! configuration.
//!
//! ## Never in production
//!
//! The selection is real only with the `compiled` feature, which nothing
//! but the reconciler's `mutants` feature sets (only test builds and the
//! `racksim` testbed, whose default features include it, set that). Without
//! it there is no thread-local to set, no `active` to ask and no
//! attribute, [`COMPILED`] is `false`, and [`select`] refuses a run that
//! asks for a mutant.

use std::{fmt, str::FromStr};

/// `#[racksim_mutants::mutant(M)]` on a production function: under the
/// `mutants` feature, the function is replaced while `M` is selected (see
/// `racksim-mutants-macro`).
#[cfg(feature = "compiled")]
pub use racksim_mutants_macro::mutant;

/// Whether this build carries the mutants' code.
pub const COMPILED: bool = cfg!(feature = "compiled");

/// Declares [`Mutant`], [`Mutant::ALL`] and [`Mutant::name`] from one list,
/// so that a mutant is named once.
macro_rules! catalogue {
    ($($(#[doc = $doc:literal])* $mutant:ident => $name:literal,)*) => {
        /// One plausible bug.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Mutant {
            $($(#[doc = $doc])* $mutant,)*
        }

        impl Mutant {
            /// Every mutant, in the kill table's order.
            pub const ALL: [Mutant; [$($name),*].len()] = [$(Mutant::$mutant),*];

            /// The mutant's name on the command line.
            pub fn name(self) -> &'static str {
                match self {
                    $(Mutant::$mutant => $name,)*
                }
            }
        }
    };
}

catalogue! {
    /// sled-task reconciles only the first switch it discovers.
    FirstSwitchOnly => "first-switch-only",
    /// A reconciler task stops for good after its first failed activation
    /// (an error propagated out of the loop instead of into the status).
    StopAtFirstFailure => "stop-at-first-failure",
    /// The executor creates before it removes (a stale entry in the way of
    /// the new one makes the create fail with a 409).
    CreateBeforeRemove => "create-before-remove",
    /// The planner compares only `internal_ip` (a stale MAC, VNI or range
    /// is accepted), as the legacy path does.
    CompareOnlyInternalIp => "compare-only-internal-ip",
    /// Ownership of NAT entries by external IP instead of (IP, port range).
    OwnByIp => "own-by-ip",
    /// The task never fires its periodic timer.
    NoPeriodicTimer => "no-periodic-timer",
    /// The task ignores scrimlet status changes (never goes inert, never
    /// wakes when its switch comes back).
    IgnoreScrimletStatus => "ignore-scrimlet-status",
    /// The task ignores config changes (keeps its first snapshot).
    IgnoreConfigChanges => "ignore-config-changes",
    /// Instance delete without the check that the instance is stopped.
    DeleteWithoutStateCheck => "delete-without-state-check",
    /// The start saga without its conditional Stopped -> Starting
    /// transition (it behaves as the naive start).
    StartWithoutConditionalTransition => "start-without-conditional-transition",
    /// A saga's unwind (also when resumed after a crash) skips the undo of
    /// MARK_AS_STARTING: the instance stays Starting.
    SagaSkipsUndo => "saga-skips-undo",
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

#[cfg(feature = "compiled")]
thread_local! {
    static SELECTED: std::cell::Cell<Option<Mutant>> = const { std::cell::Cell::new(None) };
}

/// Is `m` the mutant selected for the run on this thread? What the
/// [`mutant`] attribute asks before the function it stands on runs.
#[cfg(feature = "compiled")]
pub fn active(m: Mutant) -> bool {
    SELECTED.with(|s| s.get() == Some(m))
}

/// Restores the previous selection when dropped.
#[must_use = "the selection lasts as long as the guard"]
pub struct Selection {
    #[cfg(feature = "compiled")]
    previous: Option<Mutant>,
}

/// Select `m` for the run on this thread, until the guard drops. `Err` when
/// a mutant is asked for but this build does not carry them.
pub fn select(m: Option<Mutant>) -> Result<Selection, String> {
    #[cfg(feature = "compiled")]
    {
        let previous = SELECTED.with(|s| s.replace(m));
        Ok(Selection { previous })
    }
    #[cfg(not(feature = "compiled"))]
    match m {
        None => Ok(Selection {}),
        Some(m) => Err(format!(
            "mutant {m} asked for, but this build has no mutants (build with --features mutants)"
        )),
    }
}

#[cfg(feature = "compiled")]
impl Drop for Selection {
    fn drop(&mut self) {
        SELECTED.with(|s| s.set(self.previous));
    }
}

#[cfg(test)]
mod tests;

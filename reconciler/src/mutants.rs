//! The kill table's mutants: plausible reconciler bugs, for proving that
//! the test suite would notice them (`racksim mutants`).
//!
//! Compiled only with the `mutants` feature, which only the racksim
//! testbed (by default) and test builds enable; a production build has no such
//! module and does not depend on `racksim-mutants`, the catalogue that
//! names the mutants and selects one per run.
//!
//! ## One seam: whole-function replacements
//!
//! Each mutant replaces one or more production functions wholesale. The
//! production function carries one line,
//! `#[cfg_attr(feature = "mutants", racksim_mutants::mutant(M))]`, and its
//! body stays exactly as production runs it; with the feature, the
//! attribute makes the function call its namesake in this module's
//! `m` (the mutant's name in snake case) while `M` is selected. So each
//! module below holds the functions one mutant replaces, under the names
//! of the functions they replace, and nothing here is called any other
//! way. Where a mutant is about a task's *inputs* (its config, its scrimlet
//! status, its timer), the replaced functions are the small ones the task
//! loop is written in: the wait for each input, whether the loop goes on
//! after a status, and the task's entry point, which hands the loop its
//! inputs. The options weighed are recorded in
//! `docs/decisions/0005-mutants-as-function-replacements.md`.
//!
//! A replacement must not call the function it replaces (it would replace
//! itself again); one that only adds to the real behaviour calls what the
//! real function calls ([`crate::task::activations`] for the task's entry
//! point).

/// [`racksim_mutants::Mutant::FirstSwitchOnly`].
pub(crate) mod first_switch_only {
    use std::{collections::BTreeSet, net::Ipv6Addr};

    use crate::discovery::{DiscoveryError, SwitchZoneResolver};

    /// Only the first of the switch zones discovery finds (in address
    /// order): the other switch never gets this sled's entries.
    pub(crate) async fn switch_zones<Res: SwitchZoneResolver>(
        resolver: &Res,
    ) -> Result<BTreeSet<Ipv6Addr>, DiscoveryError> {
        let mut zones: BTreeSet<Ipv6Addr> = resolver.switch_zones().await?.into_iter().collect();
        Ok(zones.pop_first().into_iter().collect())
    }
}

/// [`racksim_mutants::Mutant::StopAtFirstFailure`].
pub(crate) mod stop_at_first_failure {
    use crate::task::ActivationStatus;

    /// The loop ends after a failed activation, as if its error had been
    /// propagated out of the loop instead of into the status.
    pub(crate) fn carries_on_after<S: ActivationStatus>(status: &S) -> bool {
        !status.failed()
    }
}

/// [`racksim_mutants::Mutant::CreateBeforeRemove`].
pub(crate) mod create_before_remove {
    use crate::{
        dpd::DpdClient,
        http::Connector,
        nat::{create_entries, remove_entries, NatPlan, NatReconcileOutcome},
    };

    /// The executor with its two phases the wrong way round. A stale entry
    /// still holds the key the desired entry needs, so its create fails
    /// (409) before the stale one is removed.
    pub(crate) async fn execute<C: Connector>(
        dpd: &DpdClient<C>,
        plan: NatPlan,
    ) -> NatReconcileOutcome {
        let created = create_entries(dpd, &plan.to_create).await;
        let removed = remove_entries(dpd, &plan.to_remove).await;
        NatReconcileOutcome::of(&plan, removed, created)
    }
}

/// [`racksim_mutants::Mutant::CompareOnlyInternalIp`].
pub(crate) mod compare_only_internal_ip {
    use std::collections::BTreeSet;

    use crate::nat::{NatEntry, NatPlan};

    /// A current entry counts as unchanged when a desired one has its
    /// address, ports and internal IP, as the legacy path compares.
    pub(crate) fn plan(desired: &[NatEntry], current: &[NatEntry]) -> NatPlan {
        let key = |e: &NatEntry| {
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
        NatPlan {
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
}

/// [`racksim_mutants::Mutant::OwnByIp`].
pub(crate) mod own_by_ip {
    use crate::nat::{ExternalRange, NatEntry, Scope};

    /// A sled treats every entry on its zones' external IPs as its own,
    /// whatever the port range: two sleds sharing a source-NAT IP then
    /// delete each other's entries.
    pub(crate) fn owned_scope(config: &[NatEntry]) -> Scope {
        Scope::ExternalRanges(
            config
                .iter()
                .map(|e| ExternalRange {
                    first_port: 0,
                    last_port: u16::MAX,
                    ..ExternalRange::of(e)
                })
                .collect(),
        )
    }
}

/// [`racksim_mutants::Mutant::NoPeriodicTimer`].
pub(crate) mod no_periodic_timer {
    use tokio::time::Instant;

    /// The period never elapses (no timer is even set).
    pub(crate) async fn period_elapsed(_deadline: Instant) {
        std::future::pending().await
    }
}

/// [`racksim_mutants::Mutant::IgnoreScrimletStatus`].
pub(crate) mod ignore_scrimlet_status {
    use std::time::Duration;

    use tokio::sync::watch;

    use crate::task::{activations, Reconciler, ScrimletStatus, TaskStatus};

    /// The task runs as one that does not depend on the scrimlet status:
    /// never inert, never woken by the status. The receiver is kept for
    /// the task's life all the same, as the real task keeps it.
    pub(crate) async fn run_reconciler_task<R: Reconciler>(
        reconciler: R,
        config: watch::Receiver<R::Config>,
        scrimlet: Option<watch::Receiver<ScrimletStatus>>,
        period: Duration,
        status: watch::Sender<TaskStatus<R::Status>>,
    ) {
        let _unread = scrimlet;
        activations(reconciler, config, None, period, status).await
    }
}

/// [`racksim_mutants::Mutant::IgnoreConfigChanges`].
pub(crate) mod ignore_config_changes {
    use std::time::Duration;

    use tokio::sync::watch;

    use crate::task::{
        activations, ActivationReason, InputClosed, Reconciler, ScrimletStatus, TaskStatus,
    };

    /// The task reconciles against the first config it snapshots, for
    /// good.
    pub(crate) async fn run_reconciler_task<R: Reconciler>(
        reconciler: R,
        config: watch::Receiver<R::Config>,
        scrimlet: Option<watch::Receiver<ScrimletStatus>>,
        period: Duration,
        status: watch::Sender<TaskStatus<R::Status>>,
    ) {
        let reconciler = FirstConfig {
            inner: reconciler,
            first: None,
        };
        activations(reconciler, config, scrimlet, period, status).await
    }

    /// And a config change never wakes it.
    pub(crate) async fn config_changed<C>(
        _config: &mut watch::Receiver<C>,
    ) -> Result<(), InputClosed> {
        std::future::pending().await
    }

    /// `inner`, handed the first config it is activated with on every
    /// activation.
    struct FirstConfig<R: Reconciler> {
        inner: R,
        first: Option<R::Config>,
    }

    impl<R: Reconciler> Reconciler for FirstConfig<R> {
        const NAME: &'static str = R::NAME;
        type Config = R::Config;
        type Status = R::Status;

        async fn reconcile(&mut self, config: &R::Config, reason: ActivationReason) -> R::Status {
            let first = self.first.get_or_insert_with(|| config.clone());
            self.inner.reconcile(first, reason).await
        }
    }
}

#[cfg(test)]
mod tests;

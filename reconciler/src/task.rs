//! The generic reconciler task (the scrimlet-reconcilers PR's control flow).
//!
//! Every reconciler in this crate is a [`Reconciler`]: an infallible
//! `reconcile(config, reason) -> Status`. This module owns everything around
//! that call, once, for all of them:
//!
//! * **When to run.** On startup; then whenever the config changes, the
//!   sled's scrimlet status changes, or [`DEFAULT_PERIOD`] has passed since
//!   the last activation *ended*. The periodic timer is what repairs state
//!   that changed underneath us without any input changing — a dpd restart
//!   empties its NAT table, and nobody tells us.
//! * **When not to run.** A reconciler that talks to its own switch zone has
//!   nothing to talk to while the sled is not a scrimlet (sidecar powered off
//!   or being updated). It goes [`TaskStatus::Inert`] and waits for the
//!   status to come back, then runs at once.
//! * **What to report.** A [`TaskStatus`] on a `watch` channel, published with
//!   `send_replace` so that it works with or without receivers. Errors are
//!   part of the reconciler's own status type: a failing reconcile is an
//!   ordinary completion, and the next activation tries again.
//!
//! A closed input channel means the owner of the task went away without
//! stopping it; the task reports [`InertReason::TaskExitedUnexpectedly`] and
//! returns rather than spinning.
//!
//! Time comes only from `tokio::time`, so under a paused or simulated clock
//! the task is deterministic.

use std::{future::Future, time::Duration};

use serde::{Deserialize, Serialize, Serializer};
use tokio::{
    sync::watch,
    time::{sleep_until, Instant},
};

/// How often a reconciler runs when nothing else activates it.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(30);

/// Why an activation happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActivationReason {
    Startup,
    PeriodicTimer,
    SystemNetworkingConfigChanged,
    ScrimletStatusChanged,
}

impl std::fmt::Display for ActivationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ActivationReason::Startup => "startup",
            ActivationReason::PeriodicTimer => "periodic timer",
            ActivationReason::SystemNetworkingConfigChanged => "system networking config changed",
            ActivationReason::ScrimletStatusChanged => "scrimlet status changed",
        })
    }
}

/// Why a task is not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InertReason {
    /// The sled is not (or no longer) a scrimlet; the task resumes when it
    /// is one again.
    NoLongerAScrimlet,
    /// An input channel closed: the task has returned and will not run again.
    TaskExitedUnexpectedly,
}

/// Whether this sled is currently a scrimlet (has a working sidecar).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScrimletStatus {
    Scrimlet,
    NotScrimlet,
}

/// The record of one finished activation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Completion<S> {
    pub activation_reason: ActivationReason,
    /// 1 for the first activation of the task.
    pub activation_count: u64,
    /// Serialized as whole milliseconds (`u64`).
    #[serde(serialize_with = "serialize_millis")]
    pub ran_for: Duration,
    pub status: S,
}

fn serialize_millis<Se: Serializer>(d: &Duration, s: Se) -> Result<Se::Ok, Se::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a reconciler task is doing, published on a `watch` channel.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TaskStatus<S> {
    NotYetRun,
    Inert {
        reason: InertReason,
        last_completion: Option<Completion<S>>,
    },
    Running {
        activation_reason: ActivationReason,
        activation_count: u64,
        last_completion: Option<Completion<S>>,
    },
    Idle {
        last_completion: Completion<S>,
    },
}

impl<S> TaskStatus<S> {
    /// The last finished activation, whatever the task is doing now.
    pub fn last_completion(&self) -> Option<&Completion<S>> {
        match self {
            TaskStatus::NotYetRun => None,
            TaskStatus::Inert {
                last_completion, ..
            }
            | TaskStatus::Running {
                last_completion, ..
            } => last_completion.as_ref(),
            TaskStatus::Idle { last_completion } => Some(last_completion),
        }
    }
}

/// Publishes a status on its `watch` channel (when it changes) and logs
/// each change of what it says — its `Display`, after `prefix`: failures as
/// warnings, other changes at info level, repeats of the same line at debug
/// level only (a path that retries forever would otherwise drown its log).
pub(crate) struct StatusLog<'a, T> {
    tx: &'a watch::Sender<T>,
    task: &'static str,
    prefix: &'static str,
    said: String,
}

impl<'a, T: std::fmt::Display + PartialEq> StatusLog<'a, T> {
    pub(crate) fn new(tx: &'a watch::Sender<T>, task: &'static str, prefix: &'static str) -> Self {
        StatusLog {
            tx,
            task,
            prefix,
            said: String::new(),
        }
    }

    /// Publish `next`; `failing` logs a change as a warning.
    pub(crate) fn set(&mut self, next: T, failing: bool) {
        let line = format!("{}{next}", self.prefix);
        self.tx.send_if_modified(|current| {
            if *current == next {
                false
            } else {
                *current = next;
                true
            }
        });
        let task = self.task;
        if line == self.said {
            tracing::debug!(task, "{line} (again)");
        } else if failing {
            tracing::warn!(task, "{line}");
        } else {
            tracing::info!(task, "{line}");
        }
        self.said = line;
    }
}

/// What a reconciler's status says about the activation that produced it.
pub trait ActivationStatus {
    /// The activation failed: something it needed (discovery, a switch's
    /// table, a write to it) answered with an error, which the status
    /// carries. The next activation tries again.
    fn failed(&self) -> bool;
}

/// One kind of reconciliation.
pub trait Reconciler: Send + 'static {
    /// The task's name in logs (`task` field of its `tracing` events).
    const NAME: &'static str;
    type Config: Clone + Send + Sync + 'static;
    /// `Display` is the one-line summary logged when an activation ends.
    type Status: ActivationStatus
        + Clone
        + std::fmt::Debug
        + std::fmt::Display
        + Serialize
        + Send
        + Sync
        + 'static;
    /// Infallible: errors are part of the returned status.
    fn reconcile(
        &mut self,
        config: &Self::Config,
        reason: ActivationReason,
    ) -> impl Future<Output = Self::Status> + Send;
}

/// An input channel closed.
pub(crate) struct InputClosed;

/// Runs until an input channel closes (then Inert(TaskExitedUnexpectedly)).
/// `scrimlet: None` = not scrimlet-dependent (never inert for that reason).
/// Loop: [inert while NotScrimlet] -> snapshot config -> Running -> reconcile -> Idle ->
/// wait first of (biased): config changed, scrimlet status changed, period elapsed since last activation ended.
///
/// The first activation's reason is `Startup`, unless the task starts inert,
/// in which case it is `ScrimletStatusChanged` (that is what woke it).
#[cfg_attr(
    feature = "mutants",
    racksim_mutants::mutant(IgnoreConfigChanges, IgnoreScrimletStatus)
)]
pub async fn run_reconciler_task<R: Reconciler>(
    reconciler: R,
    config: watch::Receiver<R::Config>,
    scrimlet: Option<watch::Receiver<ScrimletStatus>>,
    period: Duration,
    status: watch::Sender<TaskStatus<R::Status>>,
) {
    activations(reconciler, config, scrimlet, period, status).await
}

/// The loop of [`run_reconciler_task`], from its inputs as given.
pub(crate) async fn activations<R: Reconciler>(
    mut reconciler: R,
    mut config: watch::Receiver<R::Config>,
    mut scrimlet: Option<watch::Receiver<ScrimletStatus>>,
    period: Duration,
    status: watch::Sender<TaskStatus<R::Status>>,
) {
    let mut reason = ActivationReason::Startup;
    let mut activation_count: u64 = 0;
    let mut last_completion: Option<Completion<R::Status>> = None;

    loop {
        // Inert while not a scrimlet. `borrow_and_update` marks the current
        // value seen, so a change that arrived while we were reconciling is
        // acted on here and does not also fire `changed()` below.
        if let Some(rx) = scrimlet.as_mut() {
            if *rx.borrow_and_update() == ScrimletStatus::NotScrimlet {
                let inert = InertReason::NoLongerAScrimlet;
                tracing::info!(task = R::NAME, inert = ?inert, "{}: inert ({inert:?})", R::NAME);
                status.send_replace(TaskStatus::Inert {
                    reason: inert,
                    last_completion: last_completion.clone(),
                });
                if wait_until_scrimlet(rx, &mut config).await.is_err() {
                    exit_unexpectedly::<R>(&status, last_completion);
                    return;
                }
                reason = ActivationReason::ScrimletStatusChanged;
            }
        }

        // Snapshot the config: the reconciler works on one consistent
        // version, and a change during the run re-activates us afterwards.
        let snapshot = config.borrow_and_update().clone();
        activation_count += 1;
        status.send_replace(TaskStatus::Running {
            activation_reason: reason,
            activation_count,
            last_completion: last_completion.clone(),
        });
        let started = Instant::now();
        tracing::debug!(task = R::NAME, activation = activation_count, reason = %reason, "activation started");
        let result = reconciler.reconcile(&snapshot, reason).await;
        let ran_for = started.elapsed();
        tracing::info!(
            task = R::NAME,
            activation = activation_count,
            reason = %reason,
            ran_for_us = ran_for.as_micros() as u64,
            "{} #{activation_count} {reason}: {result}",
            R::NAME,
        );
        let completion = Completion {
            activation_reason: reason,
            activation_count,
            ran_for,
            status: result,
        };
        last_completion = Some(completion.clone());
        let carry_on = carries_on_after(&completion.status);
        status.send_replace(TaskStatus::Idle {
            last_completion: completion,
        });
        if !carry_on {
            return;
        }

        // The period counts from the end of the activation, so a slow
        // reconcile (timeouts against a dead switch) never runs back to back.
        let next_periodic = Instant::now() + period;
        reason = tokio::select! {
            biased;
            // Cancel-safe: `watch::Receiver::changed` only marks a version
            // seen when it completes; if another arm wins, the change is
            // still pending and is seen on the next wait (or absorbed by the
            // `borrow_and_update` snapshot above).
            changed = config_changed(&mut config) => match changed {
                Ok(()) => ActivationReason::SystemNetworkingConfigChanged,
                Err(InputClosed) => {
                    exit_unexpectedly::<R>(&status, last_completion);
                    return;
                }
            },
            // Cancel-safe for the same reason (`changed` again); with no
            // scrimlet channel this arm is a never-completing future.
            changed = scrimlet_changed(&mut scrimlet) => match changed {
                Ok(()) => ActivationReason::ScrimletStatusChanged,
                Err(InputClosed) => {
                    exit_unexpectedly::<R>(&status, last_completion);
                    return;
                }
            },
            // Cancel-safe: a sleep holds no state but its deadline, and the
            // deadline is recomputed after every activation.
            () = period_elapsed(next_periodic) => ActivationReason::PeriodicTimer,
        };
    }
}

/// Whether the task carries on after an activation that ended in `status`:
/// always. A failed activation is an ordinary completion — its error is in
/// the status, for whoever reads it — and the next activation tries again.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(StopAtFirstFailure))]
fn carries_on_after<S: ActivationStatus>(_status: &S) -> bool {
    true
}

/// What wakes an idle task, first of three: its config changed.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(IgnoreConfigChanges))]
async fn config_changed<C>(config: &mut watch::Receiver<C>) -> Result<(), InputClosed> {
    config.changed().await.map_err(|_| InputClosed)
}

/// Waits until the scrimlet status is `Scrimlet`. Config changes while
/// waiting are left unseen-or-seen as they come: the snapshot taken on resume
/// is the latest anyway. Err if either channel closes.
pub(crate) async fn wait_until_scrimlet<C>(
    scrimlet: &mut watch::Receiver<ScrimletStatus>,
    config: &mut watch::Receiver<C>,
) -> Result<(), InputClosed> {
    loop {
        tokio::select! {
            biased;
            // Cancel-safe: see `run_reconciler_task`.
            changed = scrimlet.changed() => {
                changed.map_err(|_| InputClosed)?;
                if *scrimlet.borrow_and_update() == ScrimletStatus::Scrimlet {
                    return Ok(());
                }
            }
            // Only watched to notice a closed channel while inert; the new
            // config itself is picked up by the snapshot on resume.
            // Cancel-safe: see `run_reconciler_task`.
            changed = config.changed() => changed.map_err(|_| InputClosed)?,
        }
    }
}

/// Second: the sled's scrimlet status changed (never, for a task that does
/// not depend on it).
async fn scrimlet_changed(
    scrimlet: &mut Option<watch::Receiver<ScrimletStatus>>,
) -> Result<(), InputClosed> {
    match scrimlet {
        Some(rx) => rx.changed().await.map_err(|_| InputClosed),
        None => std::future::pending().await,
    }
}

/// Third: the period since the last activation ended has elapsed.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(NoPeriodicTimer))]
async fn period_elapsed(deadline: Instant) {
    sleep_until(deadline).await
}

fn exit_unexpectedly<R: Reconciler>(
    status: &watch::Sender<TaskStatus<R::Status>>,
    last_completion: Option<Completion<R::Status>>,
) {
    let inert = InertReason::TaskExitedUnexpectedly;
    tracing::warn!(task = R::NAME, inert = ?inert, "{}: inert ({inert:?})", R::NAME);
    status.send_replace(TaskStatus::Inert {
        reason: inert,
        last_completion,
    });
}

#[cfg(test)]
mod tests;

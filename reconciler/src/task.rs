//! The generic reconciler task (seed 003's control flow).
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
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;
    use tokio::task::JoinHandle;

    use super::*;

    /// Records every activation (config, reason, time since test start) and
    /// takes `work` of simulated time per activation.
    #[derive(Clone)]
    struct Recorder {
        log: Arc<Mutex<Vec<(u32, ActivationReason, Duration)>>>,
        start: Instant,
        work: Duration,
    }

    /// The recorder's statuses never report a failure.
    impl ActivationStatus for String {
        fn failed(&self) -> bool {
            false
        }
    }

    impl Reconciler for Recorder {
        const NAME: &'static str = "recorder";
        type Config = u32;
        type Status = String;

        async fn reconcile(&mut self, config: &u32, reason: ActivationReason) -> String {
            self.log
                .lock()
                .unwrap()
                .push((*config, reason, self.start.elapsed()));
            tokio::time::sleep(self.work).await;
            format!("config {config}")
        }
    }

    struct Harness {
        log: Arc<Mutex<Vec<(u32, ActivationReason, Duration)>>>,
        config: Option<watch::Sender<u32>>,
        scrimlet: Option<watch::Sender<ScrimletStatus>>,
        status: watch::Receiver<TaskStatus<String>>,
        task: JoinHandle<()>,
    }

    impl Harness {
        fn start(initial_scrimlet: Option<ScrimletStatus>, work: Duration) -> Self {
            let log = Arc::new(Mutex::new(Vec::new()));
            let recorder = Recorder {
                log: log.clone(),
                start: Instant::now(),
                work,
            };
            let (config_tx, config_rx) = watch::channel(1);
            let (scrimlet_tx, scrimlet_rx) = match initial_scrimlet {
                Some(s) => {
                    let (tx, rx) = watch::channel(s);
                    (Some(tx), Some(rx))
                }
                None => (None, None),
            };
            let (status_tx, status_rx) = watch::channel(TaskStatus::NotYetRun);
            let task = tokio::spawn(run_reconciler_task(
                recorder,
                config_rx,
                scrimlet_rx,
                DEFAULT_PERIOD,
                status_tx,
            ));
            Harness {
                log,
                config: Some(config_tx),
                scrimlet: scrimlet_tx,
                status: status_rx,
                task,
            }
        }

        fn activations(&self) -> Vec<(u32, ActivationReason, Duration)> {
            self.log.lock().unwrap().clone()
        }

        fn status(&self) -> TaskStatus<String> {
            self.status.borrow().clone()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Lets every ready task run without advancing the clock past `by`.
    async fn advance(by: Duration) {
        tokio::time::sleep(by).await;
    }

    #[tokio::test(start_paused = true)]
    async fn startup_then_periodic_every_30s_after_each_activation_ends() {
        let h = Harness::start(None, secs(2));
        assert_eq!(h.status(), TaskStatus::NotYetRun);
        advance(Duration::from_millis(1)).await;
        assert_eq!(
            h.status(),
            TaskStatus::Running {
                activation_reason: ActivationReason::Startup,
                activation_count: 1,
                last_completion: None,
            }
        );
        advance(secs(2)).await;
        assert_eq!(
            h.status(),
            TaskStatus::Idle {
                last_completion: Completion {
                    activation_reason: ActivationReason::Startup,
                    activation_count: 1,
                    ran_for: secs(2),
                    status: "config 1".to_string(),
                }
            }
        );
        // Activations start at 0, 32, 64, 96: each ends 2 s after it starts
        // and the next comes 30 s after that.
        advance(secs(100)).await;
        assert_eq!(
            h.activations(),
            vec![
                (1, ActivationReason::Startup, secs(0)),
                (1, ActivationReason::PeriodicTimer, secs(32)),
                (1, ActivationReason::PeriodicTimer, secs(64)),
                (1, ActivationReason::PeriodicTimer, secs(96)),
            ]
        );
        // At 102 s the fourth activation (96 s to 98 s) has completed.
        assert_eq!(h.status().last_completion().unwrap().activation_count, 4);
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn config_change_activates_immediately_and_resets_the_timer() {
        let h = Harness::start(None, Duration::ZERO);
        advance(secs(10)).await;
        h.config.as_ref().unwrap().send_replace(2);
        advance(Duration::from_millis(1)).await;
        let activations = h.activations();
        assert_eq!(activations.len(), 2);
        assert_eq!(activations[1].0, 2);
        assert_eq!(
            activations[1].1,
            ActivationReason::SystemNetworkingConfigChanged
        );
        assert_eq!(activations[1].2, secs(10));
        // Next periodic activation is 30 s after the config-change one.
        advance(secs(29)).await;
        assert_eq!(h.activations().len(), 2);
        advance(secs(2)).await;
        assert_eq!(
            h.activations()[2],
            (2, ActivationReason::PeriodicTimer, secs(40))
        );
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn config_change_during_a_run_reactivates_with_the_new_snapshot() {
        let h = Harness::start(None, secs(5));
        advance(secs(1)).await;
        h.config.as_ref().unwrap().send_replace(2);
        h.config.as_ref().unwrap().send_replace(3);
        advance(secs(5)).await;
        assert_eq!(
            h.activations(),
            vec![
                (1, ActivationReason::Startup, secs(0)),
                // Two sends while running coalesce into one activation that
                // sees the latest value.
                (3, ActivationReason::SystemNetworkingConfigChanged, secs(5)),
            ]
        );
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn inert_while_not_a_scrimlet_and_resumes_on_status_change() {
        let h = Harness::start(Some(ScrimletStatus::Scrimlet), Duration::ZERO);
        advance(secs(1)).await;
        assert_eq!(h.activations().len(), 1);

        let scrimlet = h.scrimlet.as_ref().unwrap();
        scrimlet.send_replace(ScrimletStatus::NotScrimlet);
        advance(Duration::from_millis(1)).await;
        let status = h.status();
        match &status {
            TaskStatus::Inert {
                reason,
                last_completion,
            } => {
                assert_eq!(*reason, InertReason::NoLongerAScrimlet);
                assert_eq!(last_completion.as_ref().unwrap().activation_count, 1);
            }
            other => panic!("expected inert, got {other:?}"),
        }
        // No activations while inert: not periodic, not on config change.
        h.config.as_ref().unwrap().send_replace(5);
        advance(secs(300)).await;
        assert_eq!(h.activations().len(), 1);
        assert!(matches!(
            h.status(),
            TaskStatus::Inert {
                reason: InertReason::NoLongerAScrimlet,
                ..
            }
        ));
        // Resuming runs at once, with the config that changed meanwhile.
        scrimlet.send_replace(ScrimletStatus::Scrimlet);
        advance(Duration::from_millis(1)).await;
        let activations = h.activations();
        assert_eq!(activations.len(), 2);
        assert_eq!(
            activations[1],
            (
                5,
                ActivationReason::ScrimletStatusChanged,
                Duration::from_millis(301_001)
            )
        );
        assert!(matches!(h.status(), TaskStatus::Idle { .. }));
        // And periodic activations carry on.
        advance(secs(30)).await;
        assert_eq!(h.activations()[2].1, ActivationReason::PeriodicTimer);
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn starting_as_not_a_scrimlet_waits_for_the_status() {
        let h = Harness::start(Some(ScrimletStatus::NotScrimlet), Duration::ZERO);
        advance(secs(60)).await;
        assert!(h.activations().is_empty());
        assert_eq!(
            h.status(),
            TaskStatus::Inert {
                reason: InertReason::NoLongerAScrimlet,
                last_completion: None
            }
        );
        h.scrimlet
            .as_ref()
            .unwrap()
            .send_replace(ScrimletStatus::Scrimlet);
        advance(Duration::from_millis(1)).await;
        assert_eq!(
            h.activations(),
            vec![(1, ActivationReason::ScrimletStatusChanged, secs(60))]
        );
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn losing_scrimlet_status_mid_run_goes_inert_after_the_run() {
        let h = Harness::start(Some(ScrimletStatus::Scrimlet), secs(10));
        advance(secs(1)).await;
        h.scrimlet
            .as_ref()
            .unwrap()
            .send_replace(ScrimletStatus::NotScrimlet);
        advance(secs(1)).await;
        assert!(matches!(h.status(), TaskStatus::Running { .. }));
        advance(secs(9)).await;
        assert!(matches!(
            h.status(),
            TaskStatus::Inert {
                reason: InertReason::NoLongerAScrimlet,
                last_completion: Some(_)
            }
        ));
        assert_eq!(h.activations().len(), 1);
        h.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_config_sender_ends_the_task() {
        let mut h = Harness::start(None, Duration::ZERO);
        advance(secs(1)).await;
        drop(h.config.take());
        advance(Duration::from_millis(1)).await;
        assert!(h.task.is_finished());
        match h.status() {
            TaskStatus::Inert {
                reason,
                last_completion,
            } => {
                assert_eq!(reason, InertReason::TaskExitedUnexpectedly);
                assert_eq!(
                    last_completion.unwrap().activation_reason,
                    ActivationReason::Startup
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        // And it stays that way: no more activations.
        advance(secs(120)).await;
        assert_eq!(h.activations().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_an_input_while_inert_ends_the_task() {
        let mut h = Harness::start(Some(ScrimletStatus::NotScrimlet), Duration::ZERO);
        advance(secs(1)).await;
        drop(h.config.take());
        advance(Duration::from_millis(1)).await;
        assert!(h.task.is_finished());
        assert_eq!(
            h.status(),
            TaskStatus::Inert {
                reason: InertReason::TaskExitedUnexpectedly,
                last_completion: None
            }
        );

        let mut h = Harness::start(Some(ScrimletStatus::Scrimlet), Duration::ZERO);
        advance(secs(1)).await;
        drop(h.scrimlet.take());
        advance(Duration::from_millis(1)).await;
        assert!(h.task.is_finished());
        assert!(matches!(
            h.status(),
            TaskStatus::Inert {
                reason: InertReason::TaskExitedUnexpectedly,
                last_completion: Some(_)
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn works_without_status_receivers() {
        let (config_tx, config_rx) = watch::channel(7u32);
        let (status_tx, status_rx) = watch::channel(TaskStatus::NotYetRun);
        drop(status_rx);
        let log = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder {
            log: log.clone(),
            start: Instant::now(),
            work: Duration::ZERO,
        };
        let task = tokio::spawn(run_reconciler_task(
            recorder,
            config_rx,
            None,
            DEFAULT_PERIOD,
            status_tx,
        ));
        advance(secs(61)).await;
        assert_eq!(log.lock().unwrap().len(), 3);
        drop(config_tx);
        advance(Duration::from_millis(1)).await;
        assert!(task.is_finished());
    }

    #[test]
    fn status_serializes() {
        let status: TaskStatus<String> = TaskStatus::Idle {
            last_completion: Completion {
                activation_reason: ActivationReason::PeriodicTimer,
                activation_count: 4,
                ran_for: Duration::from_micros(1_234_567),
                status: "ok".to_string(),
            },
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"state": "idle", "last_completion": {
                "activation_reason": "PeriodicTimer",
                "activation_count": 4,
                "ran_for": 1234,
                "status": "ok",
            }})
        );
        assert_eq!(
            serde_json::to_value(TaskStatus::<String>::Inert {
                reason: InertReason::NoLongerAScrimlet,
                last_completion: None
            })
            .unwrap(),
            json!({"state": "inert", "reason": "NoLongerAScrimlet", "last_completion": null})
        );
        assert_eq!(
            serde_json::to_value(TaskStatus::<String>::NotYetRun).unwrap(),
            json!({"state": "not_yet_run"})
        );
    }
}

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

/// Why a task activated, as its log lines name it.
#[test]
fn activation_reasons_read_as_words() {
    let names = [
        ActivationReason::Startup,
        ActivationReason::PeriodicTimer,
        ActivationReason::SystemNetworkingConfigChanged,
        ActivationReason::ScrimletStatusChanged,
    ]
    .map(|r| r.to_string());
    assert_eq!(
        names,
        [
            "startup",
            "periodic timer",
            "system networking config changed",
            "scrimlet status changed"
        ]
    );
}

/// A status published again unchanged does not wake the watchers.
#[test]
fn an_unchanged_status_is_not_a_change() {
    let tx = watch::Sender::new(ActivationReason::Startup);
    let mut rx = tx.subscribe();
    let mut log = StatusLog::new(&tx, "t", "");
    log.set(ActivationReason::Startup, false);
    assert!(!rx.has_changed().unwrap(), "the same status again");
    log.set(ActivationReason::PeriodicTimer, false);
    assert!(rx.has_changed().unwrap());
    rx.mark_unchanged();
    log.set(ActivationReason::PeriodicTimer, false);
    assert!(!rx.has_changed().unwrap());
    assert_eq!(*rx.borrow(), ActivationReason::PeriodicTimer);
}

/// Each change of a status line is logged once, at info level (warn when
/// failing), after the prefix; the same line again only at debug level, so
/// that a path retrying for ever does not drown the log.
#[test]
fn a_status_line_is_logged_when_it_changes_and_only_at_debug_when_repeated() {
    let tx = watch::Sender::new(ActivationReason::Startup);
    let captured = crate::testing::Captured::at(tracing::Level::TRACE);
    {
        let _guard = captured.install();
        let mut log = StatusLog::new(&tx, "t", "t: ");
        log.set(ActivationReason::Startup, false);
        log.set(ActivationReason::Startup, false);
        log.set(ActivationReason::PeriodicTimer, true);
        log.set(ActivationReason::PeriodicTimer, true);
        log.set(ActivationReason::Startup, false);
    }
    assert_eq!(
        captured.lines(),
        [
            "INFO t: startup",
            "DEBUG t: startup (again)",
            "WARN t: periodic timer",
            "DEBUG t: periodic timer (again)",
            "INFO t: startup",
        ]
    );
}

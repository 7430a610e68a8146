//! A strategy of a test's own, run in the simulation without registering
//! it: the strategy API as a user meets it (public API only).

use std::time::Duration;

use racksim_reconciler::{
    discovery::SwitchSlot,
    nat::NatEntry,
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, TaskStatus},
};
use racksim_sim::{
    run, Action, NatStrategy, Plan, RackSpec, RunConfig, ServiceNat, ServiceNatEra, SledContext,
    SledStrategy, Verdict,
};
use tokio::sync::watch;

/// The per-sled task with its config fixed at the zones the sled booted
/// with, activated every `period` (the shipped task's is 30 s); with no
/// period it runs nothing at all, on an era whose Nexus writes no service
/// NAT, so nothing programs the switches.
struct SledTaskEvery(Option<Duration>);

static NOTHING: SledTaskEvery = SledTaskEvery(None);
static FAST_SLED_TASK: SledTaskEvery = SledTaskEvery(Some(Duration::from_secs(10)));

impl NatStrategy for SledTaskEvery {
    fn name(&self) -> &'static str {
        match self.0 {
            None => "nothing",
            Some(_) => "fast-sled-task",
        }
    }
    fn era(&self) -> ServiceNatEra {
        match self.0 {
            None => ServiceNatEra::Target,
            Some(_) => ServiceNatEra::Proposal,
        }
    }
    fn start_on_sled(&self, sled: &SledContext, zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        let Some(period) = self.0.filter(|_| !zones.is_empty()) else {
            return Box::new(());
        };
        let (config_tx, config_rx) = watch::channel(zones.to_vec());
        let reconciler = SledNatReconciler::new(sled.connector(), sled.resolver().clone());
        sled.spawn(run_reconciler_task(
            reconciler,
            config_rx,
            None,
            period,
            watch::Sender::new(TaskStatus::NotYetRun),
        ));
        // The sender lives as long as the sled's software.
        Box::new(Keep(config_tx))
    }
}

struct Keep(#[allow(dead_code)] watch::Sender<Vec<NatEntry>>);
impl SledStrategy for Keep {}

/// dpd restarts on switch1 at 10 minutes: its table is empty again.
fn dpd_restart(strategy: ServiceNat, seed: u64) -> RunConfig {
    RunConfig::new(RackSpec::standard(), strategy, seed)
        .with_plan(Plan::new().at(
            Duration::from_secs(600),
            Action::DpdRestart(SwitchSlot::Switch1),
        ))
        .with_deadline(Duration::from_secs(3600))
}

#[test]
fn a_strategy_that_does_nothing_fails_with_the_gaps_it_left() {
    let out = run(&dpd_restart(ServiceNat::new(&NOTHING), 1));
    let Verdict::NotConverged { gaps, .. } = out.verdict else {
        panic!("nothing converged: {:?}", out.verdict);
    };
    assert!(
        gaps.iter().any(|g| g.contains("lacks the NAT entry of")),
        "{gaps:?}"
    );
}

#[test]
fn a_faster_sled_task_of_a_tests_own_converges_and_replays() {
    let mine = ServiceNat::new(&FAST_SLED_TASK);
    let a = run(&dpd_restart(mine, 7));
    let Verdict::Converged { at } = a.verdict else {
        panic!("fast-sled-task did not converge: {:?}", a.verdict);
    };
    // The restart at 10 minutes is repaired within about one 10 s period
    // (the shipped task's is 30 s).
    assert!(at <= Duration::from_secs(600 + 11), "{at:?}");
    let repair = a
        .timing
        .repairs
        .first()
        .and_then(|r| r.took())
        .expect("the restart was repaired");
    assert!(repair <= Duration::from_secs(11), "{repair:?}");
    // Its activations are traced like the shipped task's (`sled-task #2
    // periodic timer: …`), here every 10 s.
    let timer = |l: &&racksim_sim::trace::TraceLine| l.text.contains("periodic timer");
    let host = &a
        .trace
        .iter()
        .find(timer)
        .expect("a periodic activation")
        .host;
    let activations: Vec<Duration> = a
        .trace
        .iter()
        .filter(|l| timer(l) && l.host == *host)
        .map(|l| l.at)
        .collect();
    assert!(activations.len() >= 3, "{activations:?}");
    let gap = activations[1] - activations[0];
    assert!(
        gap < Duration::from_secs(11) && gap >= Duration::from_secs(10),
        "{activations:?}"
    );
    let b = run(&dpd_restart(mine, 7));
    let text = |o: &racksim_sim::RunOutcome| {
        o.trace
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(text(&a), text(&b), "same seed, same trace");
}

/// The handle's name before issue 41 (`Strategy`, now the word for what a
/// cell runs under) still builds, as the same type, so a strategy written
/// against the old name keeps working.
#[test]
#[allow(deprecated)]
fn the_old_name_of_the_handle_still_builds() {
    let old: racksim_sim::Strategy = racksim_sim::Strategy::SLED_TASK;
    assert_eq!(old, ServiceNat::SLED_TASK);
    assert_eq!(racksim_sim::Strategy::ALL, ServiceNat::ALL);
}

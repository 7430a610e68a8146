//! The scenario suite: every catalogued scenario × every strategy × 32
//! seeds (8 on the full rack), each meeting its expectation. One test per scenario, so a failure
//! names it; each test runs its seeds on every core.

use std::time::Duration;

use racksim::{catalogue, file::Variant, matrix};
use racksim_sim::Strategy;

const SEEDS: u64 = 32;
/// Seeds for scenarios on the 32-sled `full` rack: each run simulates 35
/// hosts, so the suite samples fewer draws there (`racksim matrix` and
/// `racksim sweep` run as many as wanted).
const FULL_RACK_SEEDS: u64 = 8;

/// Seeds for the cells of `scrimlet-local-with-zone-start` (today's
/// shipped code): its reconcilers are scrimlet-local's and its zone-start
/// path legacy's, both already sampled at `SEEDS`, so its cells sample
/// fewer draws to keep the suite's time down (its expectations were
/// measured over seeds 1..32 with `racksim sweep`).
const SHIPPED_SEEDS: u64 = 8;

fn check(name: &str) {
    let scenario = catalogue::get(name).expect("catalogued");
    let n = if scenario.rack_name == "full" {
        FULL_RACK_SEEDS
    } else {
        SEEDS
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    // The shipped strategy's cell on its own, at fewer seeds.
    let shipped = Variant::Nat(Strategy::ScrimletLocalWithZoneStart);
    let mut rest = scenario.clone();
    let mut only_shipped = scenario.clone();
    rest.expectations.remove(&shipped);
    only_shipped.expectations.retain(|v, _| *v == shipped);
    let mut cells = matrix::matrix(
        std::slice::from_ref(&rest),
        &(1..=n).collect::<Vec<u64>>(),
        threads,
        &|_, _| {},
    );
    if !only_shipped.expectations.is_empty() {
        cells.extend(matrix::matrix(
            std::slice::from_ref(&only_shipped),
            &(1..=n.min(SHIPPED_SEEDS)).collect::<Vec<u64>>(),
            threads,
            &|_, _| {},
        ));
    }
    assert_eq!(cells.len(), scenario.expectations.len());
    let unexpected: Vec<String> = cells
        .iter()
        .flat_map(|c| {
            c.unexpected.iter().map(move |u| {
                format!(
                    "{} seed {}: {}\n  replay: {}",
                    c.strategy, u.seed, u.why, u.replay
                )
            })
        })
        .collect();
    // A race that only some timings expose must be found by a sweep of this
    // size; the scenario says which invariant breaks. Judged as the matrix
    // and the sweep judge it.
    for c in &cells {
        if let Some(why) = c.some_seeds_violate.as_ref().and_then(|s| s.failure()) {
            panic!("{name} / {}: {why}", c.strategy);
        }
    }
    assert!(
        unexpected.is_empty(),
        "{name}: {} of {} runs did not meet their expectation:\n{}",
        unexpected.len(),
        cells.iter().map(|c| c.runs).sum::<usize>(),
        unexpected.join("\n")
    );
}

macro_rules! scenarios {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check($name);
            }
        )*

        /// Every catalogued scenario has a test above, and every scenario
        /// has an expectation for every strategy of its kind, so the matrix
        /// has no holes.
        #[test]
        fn the_suite_covers_the_catalogue() {
            let tested = [$($name),*];
            for name in catalogue::names() {
                assert!(tested.contains(&name), "scenario {name} has no suite test");
            }
            for s in catalogue::all() {
                let all: &[&str] = match s.kind {
                    racksim::file::Kind::ServiceNat => &["legacy", "sled-task", "scrimlet-local", "scrimlet-local-with-zone-start"],
                    racksim::file::Kind::Instances => &["legacy", "naive", "saga"],
                };
                for v in all {
                    let v = s.variant(v).unwrap();
                    assert!(s.expectations.contains_key(&v), "{} has no expectation for {v}", s.name);
                }
            }
        }
    };
}

scenarios! {
    madrid_one_switch => "madrid-one-switch",
    zone_start_blocked => "zone-start-blocked",
    switch_replaced_before_ensure => "switch-replaced-before-ensure",
    dpd_restart_control_plane_down => "dpd-restart-control-plane-down",
    sidecar_power_cycle => "sidecar-power-cycle",
    stale_entry => "stale-entry",
    entry_lost_behind_dpd => "entry-lost-behind-dpd",
    inventory_misses_a_sled => "inventory-misses-a-sled",
    shared_snat => "shared-snat",
    dns_and_nexus_loss => "dns-and-nexus-loss",
    full_rack_combined => "full-rack-combined",
    cold_boot => "cold-boot",
    network_faults => "network-faults",
    cold_boot_restart => "cold-boot-restart",
    cold_boot_restart_workaround => "cold-boot-restart-workaround",
    start_delete_race => "start-delete-race",
    concurrent_starts => "concurrent-starts",
    control_plane_crash_mid_saga => "control-plane-crash-mid-saga",
    instance_migrate_like_move => "instance-migrate-like-move",
    config_change => "config-change",
    config_invalid => "config-invalid",
}

/// Regression, found by the event-driven time model: the control plane
/// crashes after MARK_AS_STARTING's database write and before the saga log
/// records the node. The resumed saga must re-run the node and recognise
/// the write as its own (it used to refuse the start and leave the
/// instance Starting for ever). Under the 100 ms tick the crash could never
/// land in that 5 ms gap.
///
/// Seed 4 is the first seed whose crash falls in the gap; the test checks
/// that it still does, so a change that moves the crash elsewhere fails
/// here with a request to pick a seed that hits the gap again.
#[test]
fn crash_between_mark_as_starting_write_and_its_log_entry() {
    let scenario = catalogue::get("control-plane-crash-mid-saga").expect("catalogued");
    let saga = scenario.variant("saga").expect("saga variant");
    let judged = racksim::runner::run(&scenario, saga, 4).expect("has an expectation");
    let trace: Vec<String> = judged.outcome.trace.iter().map(|l| l.to_string()).collect();
    let crash = trace
        .iter()
        .position(|l| l.contains("control plane crashes"))
        .expect("the plan crashes the control plane");
    // The last MARK_AS_STARTING write before the crash (the create at 1m
    // ran a start saga of its own earlier), and that node's log entry.
    let write = trace[..crash]
        .iter()
        .rposition(|l| l.contains("stopped -> starting"))
        .expect("a MARK_AS_STARTING write before the crash");
    let logged = write
        + trace[write..]
            .iter()
            .position(|l| l.contains("MARK_AS_STARTING done"))
            .expect("the node is logged in the end");
    assert!(
        crash < logged,
        "seed 4 no longer crashes between the write (line {write}) and its log entry \
         (line {logged}); crash at line {crash}: pick a seed that does"
    );
    assert!(
        judged.outcome.verdict.converged(),
        "{:?}",
        judged.outcome.verdict
    );
    assert!(judged.judgement.is_ok(), "{:?}", judged.judgement);
}

/// Today's omicron runs both service-NAT paths. On madrid (switch1 hidden
/// at boot) the scrimlet reconcilers program the hidden switch1 within a
/// second of boot, while boundary NTP's zone start is still blocked in the
/// zone-start path until its 5-minute give-up; only then does time sync and
/// the rack converge, before switch1 is revealed. Under scrimlet-local (the
/// design after #9727) the same seed converges within a minute.
#[test]
fn shipped_code_programs_switch1_early_while_ntp_zone_start_waits_out_5_minutes() {
    let scenario = catalogue::get("madrid-one-switch").expect("catalogued");
    let shipped = scenario.variant("scrimlet-local-with-zone-start").unwrap();
    let judged = racksim::runner::run(&scenario, shipped, 1).expect("has an expectation");
    let trace = &judged.outcome.trace;
    let at = |what: &dyn Fn(&racksim_sim::trace::TraceLine) -> bool, name: &str| {
        trace
            .iter()
            .find(|l| what(l))
            .unwrap_or_else(|| panic!("no {name} in the trace"))
            .at
    };
    // boundary NTP's address (madrid: 198.51.100.1) on the hidden switch1.
    let switch1_entry = at(
        &|l| l.host == "switch1" && l.text.starts_with("dpd: NAT + 198.51.100.1/"),
        "switch1 entry",
    );
    let reconciled = at(
        &|l| l.host == "sled1" && l.text.contains("scrimlet-local #1 startup: switch1"),
        "switch1's startup activation",
    );
    let gave_up = at(
        &|l| {
            l.text
                .contains("legacy boundary-ntp: gave up waiting for [switch1]")
        },
        "boundary NTP's give-up",
    );
    let started = at(
        &|l| l.text.starts_with("zone boundary-ntp started"),
        "boundary NTP's zone start",
    );
    let synced = at(
        &|l| l.text.contains("time synchronized"),
        "time synchronisation",
    );
    let revealed = at(
        &|l| l.text.starts_with("discovery reveals switch1"),
        "the reveal",
    );
    assert!(switch1_entry < Duration::from_secs(1), "{switch1_entry:?}");
    assert!(reconciled < Duration::from_secs(1), "{reconciled:?}");
    assert!(gave_up >= Duration::from_secs(300), "{gave_up:?}");
    assert!(
        started >= gave_up && synced >= started,
        "{started:?} {synced:?}"
    );
    assert!(revealed > synced, "converges with switch1 still hidden");
    assert!(
        judged.outcome.verdict.converged(),
        "{:?}",
        judged.outcome.verdict
    );
    assert!(judged.judgement.is_ok(), "{:?}", judged.judgement);

    let target = scenario.variant("scrimlet-local").unwrap();
    let judged = racksim::runner::run(&scenario, target, 1).expect("has an expectation");
    let synced = judged
        .outcome
        .trace
        .iter()
        .find(|l| l.text.contains("time synchronized"))
        .expect("time synchronises")
        .at;
    assert!(synced < Duration::from_secs(60), "{synced:?}");
}

/// The shipped combination's finding (regression
/// shipped-zone-start-stuck-on-a-retired-switch-address): every switch holds
/// every desired entry, yet the run never converges, because boundary NTP's
/// zone start retries the replaced scrimlet's old address for ever.
#[test]
fn shipped_code_stays_down_with_complete_nat_when_a_scrimlet_is_replaced_mid_ensure() {
    let scenario = catalogue::get("switch-replaced-before-ensure").expect("catalogued");
    let shipped = scenario.variant("scrimlet-local-with-zone-start").unwrap();
    let judged = racksim::runner::run(&scenario, shipped, 1).expect("has an expectation");
    let verdict = judged.outcome.verdict.lines().join("\n");
    assert!(!judged.outcome.verdict.converged(), "{verdict}");
    assert!(
        !verdict.contains("NAT entry"),
        "the reconcilers left a NAT gap:\n{verdict}"
    );
    assert!(verdict.contains("NTP unsynchronised"), "{verdict}");
    let trace = &judged.outcome.trace;
    assert!(
        !trace
            .iter()
            .any(|l| l.text.starts_with("zone boundary-ntp started")),
        "boundary NTP's zone started"
    );
    let last_retry = trace
        .iter()
        .rfind(|l| {
            l.text
                .contains("legacy boundary-ntp: ensure on switch1 failing")
        })
        .expect("the ensure retries");
    assert!(
        last_retry.text.contains("retired-switch1"),
        "{}",
        last_retry.text
    );
}

//! Scenario tests that look inside a run: a crash landing in a 5 ms gap,
//! and the shipped code's two paths side by side. The catalogue's cells
//! (every scenario × strategy over its seeds) are `tests/cells.rs`, one
//! test per cell.

use std::time::Duration;

use racksim::catalogue;

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
    let saga = scenario.strategy("saga").expect("saga strategy");
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
    let shipped = scenario.strategy("scrimlet-local-with-zone-start").unwrap();
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
        &|l| l.text.contains("boundary-ntp: time synchronised"),
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

    let target = scenario.strategy("scrimlet-local").unwrap();
    let judged = racksim::runner::run(&scenario, target, 1).expect("has an expectation");
    let synced = judged
        .outcome
        .trace
        .iter()
        .find(|l| l.text.contains("boundary-ntp: time synchronised"))
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
    let shipped = scenario.strategy("scrimlet-local-with-zone-start").unwrap();
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
    // The ensure on switch1 fails and retries; the scrimlet is replaced
    // after; the zone start never looks the switches up again, so it keeps
    // retrying the address that is now retired (a down host: each try times
    // out, the error unchanged, so no line repeats it).
    let first_failure = trace
        .iter()
        .position(|l| {
            l.text
                .contains("legacy boundary-ntp: ensure on switch1 failing")
        })
        .expect("the ensure retries");
    let replaced = trace
        .iter()
        .position(|l| l.text.starts_with("scrimlet of switch1 replaced"))
        .expect("the scrimlet is replaced");
    assert!(first_failure < replaced);
    assert!(
        !trace[replaced..].iter().any(|l| l
            .text
            .contains("legacy boundary-ntp: looking up switch zones")
            || l.text
                .contains("legacy boundary-ntp: ensuring NAT entry on switch1")),
        "the zone start looked the switches up again"
    );
}

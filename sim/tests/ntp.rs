//! Time synchronisation is per sled: each sled's NTP zone synchronises on
//! its own, and a sled's Nexus starts only once that sled's zone has.

use std::time::Duration;

use racksim_sim::{run, Action, Plan, RackSpec, RunConfig, ServiceNat, Verdict};

/// When `host`'s trace first has a line containing `text`.
fn first(trace: &[racksim_sim::trace::TraceLine], host: &str, text: &str) -> Option<Duration> {
    trace
        .iter()
        .find(|l| l.host == host && l.text.contains(text))
        .map(|l| l.at)
}

/// madrid: boundary NTP on sled2, Nexus on sled0. With sled0 cut off from
/// sled2 for the first two minutes, sled1 synchronises from sled2 at once,
/// sled0 only after the heal, and Nexus — which needs its own sled's time
/// — comes up after that, not when the rack's first clock does.
#[test]
fn nexus_waits_for_its_own_sleds_ntp_zone() {
    let heal = Duration::from_secs(120);
    let cut = || (vec!["sled0".to_string()], vec!["sled2".to_string()]);
    let (a, b) = cut();
    let (c, d) = cut();
    let plan = Plan::new()
        .at(
            Duration::ZERO,
            Action::Partition {
                a,
                b,
                oneway: false,
            },
        )
        .at(
            heal,
            Action::Heal {
                a: c,
                b: d,
                oneway: false,
            },
        );
    let config = RunConfig::new(RackSpec::madrid(), ServiceNat::SCRIMLET_LOCAL, 1)
        .with_plan(plan)
        .with_deadline(Duration::from_secs(1200));
    let outcome = run(&config);
    let trace = &outcome.trace;

    let boundary = first(trace, "sled2", "boundary-ntp: time synchronised").expect("sled2 syncs");
    let sled1 = first(trace, "sled1", "internal-ntp: time synchronised").expect("sled1 syncs");
    let sled0 = first(trace, "sled0", "internal-ntp: time synchronised").expect("sled0 syncs");
    let nexus = first(trace, "sled0", "nexus: control plane up").expect("Nexus comes up");

    // Reachable at once: both first bursts.
    assert!(boundary < Duration::from_secs(5), "{boundary:?}");
    assert!(sled1 < Duration::from_secs(10), "{sled1:?}");
    // sled0's polls went unanswered until the heal, then took their
    // backed-off intervals.
    assert!(sled0 > heal, "{sled0:?}");
    assert!(sled0 < heal + Duration::from_secs(110), "{sled0:?}");
    // sled-agent's 5 s retry.
    assert!(
        nexus >= sled0 && nexus <= sled0 + Duration::from_secs(5),
        "{nexus:?} {sled0:?}"
    );
    assert!(
        matches!(outcome.verdict, Verdict::Converged { .. }),
        "{:?}",
        outcome.verdict
    );
}

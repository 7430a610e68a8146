//! The checker: what a stuck saga reports, and that every invariant it
//! can report is listed.

use std::collections::BTreeSet;

use racksim_nexus::instances::{NodeFailure, SagaNode, SagaRecord, SagaState};
use racksim_sim::check::*;

/// A stuck saga is a gap naming the saga, its instance and sled, the
/// undo that failed and the failure that started the unwind; no other
/// state of a saga is.
#[test]
fn a_stuck_saga_is_a_gap_and_no_other_saga_state_is() {
    let failed = NodeFailure {
        node: SagaNode::Run,
        error: "sled1 went away".into(),
    };
    let mut saga = SagaRecord {
        done: vec![SagaNode::MarkAsStarting, SagaNode::DpdEnsure],
        state: SagaState::Stuck {
            failed: failed.clone(),
            undo: NodeFailure {
                node: SagaNode::DpdEnsure,
                error: "database unavailable".into(),
            },
        },
        ..SagaRecord::new(3, 1, 1)
    };
    assert_eq!(
        stuck_saga_gap(&saga, "web1", "sled1").as_deref(),
        Some(
            "saga 3 (start of web1 on sled1) is stuck: undo of DPD_ENSURE failed: \
             database unavailable (after RUN failed: sled1 went away)"
        )
    );
    for state in [
        SagaState::Running,
        SagaState::Unwinding {
            failed: failed.clone(),
        },
        SagaState::Unwound { failed },
        SagaState::Done,
    ] {
        saga.state = state;
        assert_eq!(
            stuck_saga_gap(&saga, "web1", "sled1"),
            None,
            "{:?}",
            saga.state
        );
    }
}

/// The name a `Violation { invariant: X, .. }` of this module's code
/// reports: a string literal, or a `pub const X: &str` declared here.
fn reported_name(code: &str, value: &str) -> Option<String> {
    if let Some(lit) = value.strip_prefix('"') {
        return Some(lit.trim_end_matches('"').to_string());
    }
    let decl = format!("pub const {value}: &str = \"");
    let at = code.find(&decl)? + decl.len();
    Some(code[at..].split('"').next()?.to_string())
}

/// Every invariant the checker can report is in [`INVARIANTS`] (the
/// list scenario files are checked against), and every listed one is
/// reported somewhere: read from this module's own source, so a new
/// `Violation` with an unlisted name fails here rather than in a
/// scenario file that names it.
#[test]
fn every_reported_invariant_is_listed_and_every_listed_one_reported() {
    let code = include_str!("../src/check.rs");
    let mut reported = BTreeSet::new();
    for line in code.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        let Some(value) = line.strip_prefix("invariant: ") else {
            continue;
        };
        let value = value.trim_end_matches(',');
        let name = reported_name(code, value)
            .unwrap_or_else(|| panic!("cannot tell which invariant `{line}` reports"));
        assert!(
            INVARIANTS.contains(&name.as_str()),
            "check.rs reports {name:?}, which INVARIANTS does not list"
        );
        reported.insert(name);
    }
    let listed: BTreeSet<String> = INVARIANTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(reported, listed, "listed invariants nothing reports");
}

/// A run's recheck judges afresh only a snapshot the checks would read
/// differently from the judged one (`Snapshot::same_as`); one that is the
/// same is judged the same. So every change of what the checks read must
/// make the snapshot differ, whether or not the world counted it (a
/// change it did not count is what a recheck is there to find), and a
/// change of nothing they read must not.
#[test]
fn a_snapshot_tells_every_change_the_checks_read() {
    use std::{net::Ipv4Addr, sync::Arc};

    use racksim_reconciler::discovery::SwitchSlot;
    use racksim_sim::{
        era::Era,
        rack::RackSpec,
        services::ServiceTimes,
        world::{RunParams, World},
        ServiceNat,
    };
    use racksim_wire::{
        dpd::{Ipv4Nat, MacAddr, NatTarget},
        sled_agent::VirtualNetworkInterfaceHost,
    };

    let rack = RackSpec::madrid();
    let strategy = ServiceNat::SLED_TASK;
    let start = racksim_nexus::instances::StartImpl::Saga;
    let world = World::new(RunParams {
        ntp_return_switch: SwitchSlot::Switch0,
        rack: Arc::new(rack),
        strategy,
        start,
        era: Era::of(strategy.era(), start),
        instances: Vec::new(),
        seed: 1,
        sabotage: None,
        ip_pool: None,
        service_times: ServiceTimes::default(),
    });
    world
        .lock()
        .switches
        .dpd
        .insert(SwitchSlot::Switch0, racksim_fakes::dpd::DpdState::new(0));
    world.lock().sleds.up.insert(0);
    world.lock().sleds.agents.insert(0, Arc::default());
    let judged = observe(&world);
    assert!(observe(&world).same_as(&judged), "nothing changed");
    world.lock().trace.clear();
    assert!(
        observe(&world).same_as(&judged),
        "the trace is not what the checks read"
    );

    // Each change below, made without counting it, must show.
    type Change = Box<dyn Fn(&World)>;
    let changes: Vec<(&str, Change)> = vec![
        (
            "an entry planted in a dpd's table",
            Box::new(|w| {
                let target = NatTarget {
                    internal_ip: racksim_sim::rack::sled_address(0),
                    inner_mac: MacAddr {
                        a: [2, 0, 0, 0, 0, 1],
                    },
                    vni: 7,
                };
                let mut st = w.lock();
                let dpd = st.switches.dpd.get_mut(&SwitchSlot::Switch0).unwrap();
                dpd.ipv4_plant(Ipv4Nat {
                    external: Ipv4Addr::new(203, 0, 113, 9),
                    low: 0,
                    high: 16383,
                    target,
                });
            }),
        ),
        (
            "a mapping in a sled-agent's table",
            Box::new(|w| {
                let mut st = w.lock();
                let agent = Arc::make_mut(st.sleds.agents.get_mut(&0).unwrap());
                agent.v2p.insert(VirtualNetworkInterfaceHost {
                    virtual_ip: Ipv4Addr::new(172, 30, 0, 5).into(),
                    virtual_mac: MacAddr {
                        a: [2, 0, 0, 0, 0, 2],
                    },
                    physical_host_ip: racksim_sim::rack::sled_address(1),
                    vni: 7,
                });
            }),
        ),
        (
            "a sled coming up",
            Box::new(|w| {
                w.lock().sleds.up.insert(1);
            }),
        ),
        (
            "a cut between two hosts",
            Box::new(|w| {
                let cut = ("switch0".to_string(), "sled1".to_string());
                w.lock().net.cuts.insert(cut);
            }),
        ),
        (
            "an address named anew",
            Box::new(|w| {
                let addr = racksim_sim::rack::switch_zone_address(0);
                w.lock().names.insert(addr, "retired-switch0".to_string());
            }),
        ),
        (
            "a switch zone moving",
            Box::new(|w| {
                let addr = racksim_sim::rack::sled_address(9);
                w.lock()
                    .switches
                    .addresses
                    .insert(SwitchSlot::Switch1, addr);
            }),
        ),
    ];
    for (what, change) in changes {
        let before = observe(&world);
        change(&world);
        assert!(!observe(&world).same_as(&before), "{what} did not show");
    }
}

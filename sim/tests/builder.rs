//! The testbed from Rust, without a scenario file: the madrid case built
//! with the builder API, run under both strategies of the zone-start NAT issue.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{
    rack::{RackBuilder, ZoneKind},
    run, Action, Plan, RackSpec, RunConfig, ServiceNat, Verdict,
};

fn madrid_plan() -> Plan {
    Plan::new()
        .at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1))
        .between(
            Duration::from_secs(330),
            Duration::from_secs(480),
            Action::RevealSwitch(SwitchSlot::Switch1),
        )
}

#[test]
fn sled_task_converges_and_legacy_does_not() {
    let config = |strategy| {
        RunConfig::new(RackSpec::madrid(), strategy, 3)
            .with_plan(madrid_plan())
            .with_ntp_return_switch(SwitchSlot::Switch1)
            .with_deadline(Duration::from_secs(3600))
    };
    let sled_task = run(&config(ServiceNat::SLED_TASK));
    match sled_task.verdict {
        // The reveal by 480 s, sled-task's 30 s pass, then boundary and
        // internal NTP's backed-off polls (<= 105.3 s each) and sled-agent's
        // 5 s retry: by 480 + 246 s.
        Verdict::Converged { at } => assert!(at <= Duration::from_secs(730), "{at:?}"),
        other => panic!("sled-task did not converge: {other:?}"),
    }
    let legacy = run(&config(ServiceNat::LEGACY));
    let Verdict::NotConverged { gaps, .. } = legacy.verdict else {
        panic!("legacy converged on madrid: {:?}", legacy.verdict);
    };
    assert!(
        gaps.iter()
            .any(|g| g.starts_with("switch1 lacks the NAT entry of boundary-ntp")),
        "{gaps:?}"
    );
    // The real 5-minute wait is in the trace.
    let waited = legacy
        .zone_starts
        .iter()
        .find(|(_, zone, _)| *zone == ZoneKind::BoundaryNtp)
        .map(|(_, _, took)| *took)
        .expect("boundary NTP's zone started");
    assert!(waited >= Duration::from_secs(300), "{waited:?}");
}

#[test]
fn a_custom_rack_without_uplink_on_switch1_needs_no_entries_there() {
    // switch1 has no uplink: nothing is required of it, even while hidden.
    let rack = RackBuilder::new("one-uplink")
        .scrimlet(SwitchSlot::Switch0)
        .scrimlet(SwitchSlot::Switch1)
        .without_uplink(SwitchSlot::Switch1)
        .sled()
        .zone(
            ZoneKind::BoundaryNtp,
            2,
            "198.51.100.1".parse().unwrap(),
            16384,
            32767,
        )
        .zone(
            ZoneKind::Nexus,
            0,
            "198.51.100.2".parse().unwrap(),
            0,
            65535,
        )
        // One zone of each kind: scrimlet-local refuses a rack config
        // without one (as omicron's ServiceZoneNatEntries does).
        .zone(
            ZoneKind::ExternalDns,
            1,
            "198.51.100.3".parse().unwrap(),
            0,
            65535,
        )
        .internal_dns_on(1)
        .build();
    let plan = Plan::new().at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1));
    for strategy in [ServiceNat::SLED_TASK, ServiceNat::SCRIMLET_LOCAL] {
        let outcome = run(&RunConfig::new(rack.clone(), strategy, 1)
            .with_plan(plan.clone())
            .with_deadline(Duration::from_secs(1200)));
        assert!(
            outcome.verdict.converged(),
            "{strategy}: {:?}",
            outcome.verdict
        );
        // The trace names hosts, never addresses that depend on registration order.
        assert!(outcome.trace.iter().all(|l| !l.host.contains(':')));
    }
}

/// Crash is not stop. The same start saga, interrupted 40 ms in (after
/// MARK_AS_STARTING, mid-way through the ensures): an orderly stop lets it
/// finish before the control plane goes down; a crash abandons it where it
/// is, and the next incarnation resumes it from the saga log.
#[test]
fn an_orderly_stop_finishes_the_saga_in_flight_and_a_crash_leaves_it_to_resume() {
    let run_with = |interrupt: Action| {
        let plan = Plan::new()
            .at(
                Duration::from_secs(60),
                Action::InstanceCreate {
                    instance: "web1".into(),
                    sled: "sled2".into(),
                },
            )
            .at(
                Duration::from_secs(120),
                Action::InstanceStop {
                    instance: "web1".into(),
                },
            )
            .at(
                Duration::from_secs(180),
                Action::InstanceStart {
                    instance: "web1".into(),
                    sled: "sled1".into(),
                },
            )
            .at(Duration::from_millis(180_040), interrupt)
            .at(Duration::from_secs(300), Action::ControlPlaneUp);
        let mut cfg = RunConfig::new(RackSpec::madrid(), ServiceNat::SLED_TASK, 1)
            .with_plan(plan)
            .with_deadline(Duration::from_secs(600));
        cfg.instances = vec![racksim_sim::InstanceSpec {
            name: "web1".into(),
        }];
        let out = run(&cfg);
        assert!(out.verdict.converged(), "{:?}", out.verdict);
        out.trace
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<String>>()
    };
    let position = |trace: &[String], needle: &str| {
        trace
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line contains {needle:?}"))
    };

    let stopped = run_with(Action::ControlPlaneDown);
    let done = position(&stopped, "start web1 on sled1: ok, running");
    let down = position(
        &stopped,
        "control plane stopped; in-flight operations finished first",
    );
    assert!(done < down, "the start finished before the stop");
    assert!(!stopped.iter().any(|l| l.contains("resumed saga")));

    let crashed = run_with(Action::ControlPlaneCrash);
    let down = position(
        &crashed,
        "control plane crashed; in-flight operations abandoned",
    );
    let resumed = position(&crashed, "resumed saga");
    assert!(down < resumed);
    assert!(
        crashed[resumed].contains("ok, running"),
        "{}",
        crashed[resumed]
    );
}

/// Every preset is a rack Omicron could run, and `full` has the shape the
/// docs/racks.md promises.
#[test]
fn presets_validate_and_full_has_redundant_services() {
    for name in RackSpec::NAMES {
        let rack = RackSpec::by_name(name).unwrap();
        assert_eq!(rack.validate(), Ok(()), "{name}");
    }
    let full = RackSpec::full();
    assert_eq!(full.sleds.len(), 32);
    assert_eq!(full.internal_dns.len(), 3);
    let count = |k: ZoneKind| full.zones.iter().filter(|z| z.kind == k).count();
    assert_eq!(count(ZoneKind::Nexus), 3);
    assert_eq!(count(ZoneKind::ExternalDns), 2);
    assert_eq!(count(ZoneKind::BoundaryNtp), 2);
    let ntp: Vec<_> = full
        .zones
        .iter()
        .filter(|z| z.kind == ZoneKind::BoundaryNtp)
        .map(|z| (z.external_ip, z.first_port, z.last_port))
        .collect();
    assert_eq!(ntp[0].0, ntp[1].0, "the NTP zones share one SNAT IP");
    assert_eq!(
        (ntp[0].1, ntp[0].2, ntp[1].1, ntp[1].2),
        (0, 16383, 16384, 32767)
    );
    // No service on a scrimlet.
    for z in &full.zones {
        assert!(full.sleds[z.sled].scrimlet_of.is_none());
    }
}

/// A bad rack names the part it is about.
#[test]
fn validation_rejects_what_omicron_would_not_run() {
    use racksim_sim::rack::RackPart;
    let base = || {
        RackBuilder::new("t")
            .scrimlet(SwitchSlot::Switch0)
            .scrimlet(SwitchSlot::Switch1)
            .sled()
            .internal_dns_on(2)
            .zone(
                ZoneKind::ExternalDns,
                2,
                std::net::Ipv4Addr::new(198, 51, 100, 3),
                0,
                65535,
            )
    };
    let ntp = |b: RackBuilder, first: u16| {
        b.zone(
            ZoneKind::BoundaryNtp,
            2,
            std::net::Ipv4Addr::new(198, 51, 100, 1),
            first,
            first + 16383,
        )
    };
    let nexus = |b: RackBuilder| {
        b.zone(
            ZoneKind::Nexus,
            2,
            std::net::Ipv4Addr::new(198, 51, 100, 2),
            0,
            65535,
        )
    };
    assert_eq!(nexus(ntp(base(), 0)).build().validate(), Ok(()));
    let part = |r: racksim_sim::RackSpec| r.validate().unwrap_err().part;
    assert_eq!(part(nexus(base()).build()), RackPart::Whole);
    assert_eq!(part(ntp(base(), 0).build()), RackPart::Whole);
    // Two NTP zones on one sled: Omicron runs one per sled.
    assert_eq!(
        part(nexus(ntp(ntp(base(), 0), 0)).build()),
        RackPart::ZoneSled(2)
    );
    // On two sleds, with overlapping source-NAT ranges.
    let ntp_on_3 = |b: RackBuilder| {
        b.zone(
            ZoneKind::BoundaryNtp,
            3,
            std::net::Ipv4Addr::new(198, 51, 100, 1),
            0,
            16383,
        )
    };
    assert_eq!(
        part(nexus(ntp_on_3(ntp(base(), 0))).build()),
        RackPart::Zone(2)
    );
    assert_eq!(
        part(
            nexus(ntp(base(), 0))
                .zone(
                    ZoneKind::Nexus,
                    9,
                    std::net::Ipv4Addr::new(1, 1, 1, 1),
                    0,
                    1
                )
                .build()
        ),
        RackPart::Zone(3)
    );
    let no_dns = RackBuilder::new("t")
        .scrimlet(SwitchSlot::Switch0)
        .scrimlet(SwitchSlot::Switch1)
        .sled()
        .zone(
            ZoneKind::ExternalDns,
            2,
            std::net::Ipv4Addr::new(198, 51, 100, 3),
            0,
            65535,
        );
    assert_eq!(part(nexus(ntp(no_dns, 0)).build()), RackPart::InternalDns);
    let one_scrimlet = RackBuilder::new("t")
        .scrimlet(SwitchSlot::Switch0)
        .sled()
        .sled()
        .internal_dns_on(2);
    assert_eq!(
        part(nexus(ntp(one_scrimlet, 0)).build()),
        RackPart::Scrimlets
    );
}

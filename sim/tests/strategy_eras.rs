//! The era each preset stands for: a strategy's and an instance start's
//! control plane ([`Era::of`], in racksim-nexus), against the strategies.

use racksim_nexus::{
    era::{Era, InstanceEra, NexusServiceNat, PeriodicTask, ServiceNatEra},
    instances::StartImpl,
};

use racksim_sim::strategy::ServiceNat;

#[test]
fn each_strategy_and_start_runs_its_eras_control_plane() {
    use NexusServiceNat::{InventoryTracker, Off};
    let service_nat = |s: ServiceNat| Era::of(s.era(), StartImpl::Saga).nexus_service_nat;
    for s in ServiceNat::ALL {
        // The instance-start networking issue's time had no tracker, whatever ran on the sleds.
        assert_eq!(Era::of(s.era(), StartImpl::Inline).nexus_service_nat, Off);
    }
    assert_eq!(service_nat(ServiceNat::LEGACY), InventoryTracker);
    assert_eq!(service_nat(ServiceNat::SLED_TASK), InventoryTracker);
    assert_eq!(service_nat(ServiceNat::SCRIMLET_LOCAL), Off);
    assert_eq!(service_nat(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START), Off);
    for strategy in ServiceNat::ALL {
        // Instance networking follows the start alone, whatever the
        // service-NAT strategy.
        for (start, task) in [
            (StartImpl::Inline, PeriodicTask::Off),
            (StartImpl::Naive, PeriodicTask::On),
            (StartImpl::Saga, PeriodicTask::On),
        ] {
            let era = Era::of(strategy.era(), start);
            assert_eq!(era.nexus_v2p, task, "{start}");
            // dpd pulls wherever someone writes rows for it: instance
            // operations of the current era, or the tracker (which
            // only the current era has).
            assert_eq!(era.dpd_nat_rpw, task, "{strategy} {start}");
            assert_eq!(
                (era.instance_watcher, era.reincarnation),
                (task, task),
                "{start}"
            );
            // ... and service NAT the strategy, in the current era.
            if task == PeriodicTask::On {
                assert_eq!(era.nexus_service_nat, service_nat(strategy));
            }
        }
    }
    assert_eq!(
        ServiceNat::ALL.map(|s| s.era().as_str()),
        ["legacy", "proposal", "target", "shipped"]
    );
    assert_eq!(
        StartImpl::ALL.map(|s| InstanceEra::of(s).as_str()),
        ["pre-rpw", "current", "current"]
    );
}

/// Each strategy's sled-side code: which of the two service-NAT paths
/// it runs. Today's shipped code is the only one with both, and its
/// era's Nexus is the target's (the tracker went in the same PR).
#[test]
fn each_strategy_runs_its_paths_and_the_shipped_one_runs_both() {
    let paths = |s: ServiceNat| {
        let parts = s.live().expect("a shipped strategy");
        (s.blocks_zone_start(), parts.scrimlet_reconcilers)
    };
    assert_eq!(paths(ServiceNat::LEGACY), (true, false));
    assert_eq!(paths(ServiceNat::SLED_TASK), (false, false));
    assert_eq!(paths(ServiceNat::SCRIMLET_LOCAL), (false, true));
    assert_eq!(
        paths(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START),
        (true, true)
    );
    assert_eq!(
        ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START.era(),
        ServiceNatEra::Shipped
    );
    assert!(ServiceNatEra::Shipped.upstream().contains("b848b6df"));
    assert!(ServiceNatEra::Target
        .upstream()
        .starts_with("the design after #9727"));
    for start in StartImpl::ALL {
        assert_eq!(
            Era::of(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START.era(), start),
            Era::of(ServiceNat::SCRIMLET_LOCAL.era(), start),
            "{start}"
        );
    }
    assert_eq!(
        "scrimlet-local-with-zone-start".parse::<ServiceNat>(),
        Ok(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START)
    );
    assert_eq!(
        ServiceNat::ALL.map(|s| s.name()),
        [
            "legacy",
            "sled-task",
            "scrimlet-local",
            "scrimlet-local-with-zone-start"
        ]
    );
}

#[test]
fn the_control_plane_reads_as_one_line_and_serialises_by_name() {
    let legacy = Era::of(ServiceNat::LEGACY.era(), StartImpl::Inline);
    assert_eq!(
        legacy.to_string(),
        "nexus service-NAT task off, dpd NAT RPW off, nexus V2P task off, \
         instance watcher off, reincarnation off"
    );
    let target = Era::of(ServiceNat::SCRIMLET_LOCAL.era(), StartImpl::Saga);
    assert_eq!(
        target.to_string(),
        "nexus service-NAT task off, dpd NAT RPW on, nexus V2P task on, \
         instance watcher on, reincarnation on"
    );
    let json = serde_json::to_value(target).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "nexus_service_nat": "off",
            "dpd_nat_rpw": "on",
            "nexus_v2p": "on",
            "instance_watcher": "on",
            "reincarnation": "on",
            "nat_ensure": "live-only",
            "dpd_notify": "logged",
            "remove_notify": "logged",
            "nat_changeset": "version-order",
            "nat_conflict": "takeover",
            "switch_lookup": "dpd",
        })
    );
    assert_eq!(serde_json::from_value::<Era>(json.clone()).unwrap(), target);
    // JSON written before the mechanism existed reads as today's code.
    let mut older = json;
    older.as_object_mut().unwrap().remove("nat_conflict");
    older.as_object_mut().unwrap().remove("switch_lookup");
    assert_eq!(serde_json::from_value::<Era>(older).unwrap(), target);
}

//! The rack's zone set under config changes.

use std::net::Ipv4Addr;

use racksim_sim::{
    plan::{ConfigChange, ZoneRef},
    rack::{sled_address, RackSpec, ZoneKind},
    world::ZoneSet,
};

fn add(kind: ZoneKind, ip: Option<Ipv4Addr>) -> ConfigChange {
    ConfigChange::AddZone {
        kind,
        sled: String::new(),
        external_ip: ip,
    }
}

fn zone(s: &str) -> ZoneRef {
    s.parse().unwrap()
}

/// The standard rack: boundary NTP on sled2 (198.51.100.1, ports
/// 16384-32767), Nexus (.2) and external DNS (.3) on sled3.
#[test]
fn zones_are_named_allocated_moved_and_removed() {
    let set = ZoneSet::from_rack(&RackSpec::standard());
    let names: Vec<String> = set.zones().iter().map(|z| z.id.to_string()).collect();
    assert_eq!(names, ["boundary-ntp.0", "nexus.0", "external-dns.0"]);

    // A second NTP zone shares the SNAT address, in the free port block.
    let set = set
        .apply(&add(ZoneKind::BoundaryNtp, None), Some(1))
        .unwrap();
    let ntp1 = set
        .get(set.resolve(&zone("boundary-ntp.1")).unwrap())
        .unwrap();
    assert_eq!(
        (
            ntp1.spec.external_ip,
            ntp1.spec.first_port,
            ntp1.spec.last_port,
            ntp1.spec.sled
        ),
        (Ipv4Addr::new(198, 51, 100, 1), 0, 16383, 1)
    );
    // A second Nexus takes the lowest unused address and a fresh MAC.
    let set = set.apply(&add(ZoneKind::Nexus, None), Some(0)).unwrap();
    let nexus1 = set
        .get(set.resolve(&zone("nexus.1")).unwrap())
        .unwrap()
        .clone();
    assert_eq!(nexus1.spec.external_ip, Ipv4Addr::new(198, 51, 100, 4));
    assert!(
        set.zones()
            .iter()
            .filter(|z| z.spec.mac == nexus1.spec.mac)
            .count()
            == 1
    );
    assert!(set
        .resolve(&zone("nexus"))
        .unwrap_err()
        .contains("ambiguous"));
    assert_eq!(set.config(2, sled_address).validate(), Ok(()));

    // Not onto a sled that already runs a Nexus (sled3's nexus.0).
    let move_to = |sled| {
        set.apply(
            &ConfigChange::MoveZone {
                zone: zone("nexus.1"),
                sled: String::new(),
            },
            Some(sled),
        )
    };
    assert!(move_to(3)
        .unwrap_err()
        .contains("already runs a nexus zone"));
    // A move keeps the zone's address and repoints its entry.
    let moved = move_to(1).unwrap();
    let entry = |s: &ZoneSet| {
        s.config(3, sled_address)
            .service_nat
            .into_iter()
            .find(|z| z.zone == "nexus.1")
            .unwrap()
            .entry
    };
    assert_eq!(entry(&moved).external_ip, entry(&set).external_ip);
    assert_eq!(entry(&moved).target.internal_ip, sled_address(1));
    assert_eq!(entry(&set).target.internal_ip, sled_address(0));

    // Ordinals are never reused: after removing nexus.0, `nexus` is
    // nexus.1 and a new Nexus is nexus.2.
    let set = moved
        .apply(
            &ConfigChange::RemoveZone {
                zone: zone("nexus.0"),
            },
            None,
        )
        .unwrap();
    assert_eq!(set.resolve(&zone("nexus")).unwrap().ordinal, 1);
    let set = set.apply(&add(ZoneKind::Nexus, None), Some(2)).unwrap();
    assert!(set.resolve(&zone("nexus.2")).is_ok());
    assert!(set
        .resolve(&zone("nexus.0"))
        .unwrap_err()
        .contains("no zone nexus.0"));
}

/// What makes a config invalid is left to the reconciler crate's
/// validation; the set only builds it.
#[test]
fn invalid_sets_build_configs_that_validate_refuses() {
    let set = ZoneSet::from_rack(&RackSpec::standard());
    let no_dns = set
        .apply(
            &ConfigChange::RemoveZone {
                zone: zone("external-dns"),
            },
            None,
        )
        .unwrap();
    assert!(matches!(
        no_dns.config(2, sled_address).validate(),
        Err(
            racksim_reconciler::scrimlet_local::InvalidSystemNetworkingConfig::MissingZoneKinds { .. }
        )
    ));
    let clash = set
        .apply(
            &add(ZoneKind::Nexus, Some(Ipv4Addr::new(198, 51, 100, 3))),
            Some(2),
        )
        .unwrap();
    assert!(matches!(
        clash.config(2, sled_address).validate(),
        Err(
            racksim_reconciler::scrimlet_local::InvalidSystemNetworkingConfig::OverlappingEntries { .. }
        )
    ));
    assert!(set
        .apply(
            &ConfigChange::MoveZone {
                zone: zone("nexus"),
                sled: String::new()
            },
            Some(3)
        )
        .unwrap_err()
        .contains("already on that sled"));
}

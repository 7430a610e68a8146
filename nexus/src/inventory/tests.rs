use std::net::{Ipv4Addr, Ipv6Addr};

use racksim_reconciler::{
    dpd::{MacAddr, NatTarget},
    SERVICES_VNI,
};

use super::*;

fn zone(kind: ServiceZoneKind, n: u8) -> ServiceZoneNat {
    ServiceZoneNat {
        zone: format!("{kind:?}.{n}"),
        kind,
        entry: NatEntry {
            external_ip: Ipv4Addr::new(198, 51, 100, n),
            first_port: 0,
            last_port: 65535,
            target: NatTarget {
                internal_ip: Ipv6Addr::new(0xfd00, 0, 0, n as u16, 0, 0, 0, 1),
                inner_mac: MacAddr {
                    a: [0xa8, 0x40, 0x25, 0xff, 0, n],
                },
                vni: SERVICES_VNI,
            },
        },
    }
}

fn sled(name: &str, zones: Option<Vec<ServiceZoneNat>>) -> SledInventory {
    SledInventory {
        sled: name.into(),
        zones,
    }
}

#[test]
fn a_collection_yields_the_running_zones_rows_and_skips_silent_sleds() {
    use ServiceZoneKind::*;
    let c = Collection {
        id: 3,
        sleds: vec![
            sled("sled0", Some(vec![zone(BoundaryNtp, 1), zone(Nexus, 2)])),
            sled("sled1", None),
            sled("sled2", Some(vec![zone(ExternalDns, 3)])),
        ],
    };
    assert_eq!(
        c.service_zone_nat().unwrap(),
        vec![
            zone(BoundaryNtp, 1).entry,
            zone(Nexus, 2).entry,
            zone(ExternalDns, 3).entry
        ]
    );
    assert_eq!(
        c.summary(),
        "collection #3: 3 service zone(s) from 2 of 3 sled(s) (sled1 did not answer)"
    );
}

#[test]
fn a_collection_missing_a_kind_of_zone_is_refused_as_upstream_refuses_it() {
    use ServiceZoneKind::*;
    let only = |zones| Collection {
        id: 1,
        sleds: vec![sled("sled0", Some(zones))],
    };
    assert_eq!(
        only(vec![]).service_zone_nat().unwrap_err(),
        "no service zone NAT values could be generated from inventory"
    );
    // Checked in upstream's order: DNS, then NTP, then Nexus.
    assert!(only(vec![zone(BoundaryNtp, 1), zone(Nexus, 2)])
        .service_zone_nat()
        .unwrap_err()
        .ends_with("number of dns zones"));
    assert!(only(vec![zone(ExternalDns, 1), zone(Nexus, 2)])
        .service_zone_nat()
        .unwrap_err()
        .ends_with("number of ntp zones"));
    assert!(only(vec![zone(ExternalDns, 1), zone(BoundaryNtp, 2)])
        .service_zone_nat()
        .unwrap_err()
        .ends_with("number of nexus zones"));
}

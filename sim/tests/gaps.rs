//! The gaps between what the rack should hold and what it holds, from
//! hand-made views of a rack (no simulation).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use racksim_nexus::instances::{
    ExternalIp, InstanceRecord, InstanceState, Nic, VirtualNetworkInterfaceHost, VmmInfo, VmmState,
};
use racksim_reconciler::{
    discovery::SwitchSlot,
    dpd::{Ipv4Nat, Ipv6Nat, MacAddr, NatTarget},
    nat::NatEntry,
    SERVICES_VNI,
};
use racksim_sim::{check::gaps::*, rack::ZoneKind};

const SLED0: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1);
const SLED1: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x102, 0, 0, 0, 1);
const SLED2: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x103, 0, 0, 0, 1);

fn entry(ip: [u8; 4], sled: Ipv6Addr, vni: u32) -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::from(ip),
        first_port: 0,
        last_port: 16383,
        target: NatTarget {
            internal_ip: sled,
            inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0, ip[3]]),
            vni,
        },
    }
}

fn sled_view(index: usize, address: Ipv6Addr) -> SledView {
    SledView {
        index,
        name: format!("sled{index}"),
        address,
        agent: Default::default(),
    }
}

fn names(a: Ipv6Addr) -> String {
    match a {
        SLED0 => "sled0".into(),
        SLED1 => "sled1".into(),
        SLED2 => "sled2".into(),
        other => other.to_string(),
    }
}

fn sled_of(i: usize) -> (String, Ipv6Addr) {
    (format!("sled{i}"), [SLED0, SLED1, SLED2][i])
}

/// Service NAT: an uplinked switch that lacks a desired entry, or holds
/// one nobody wants, has a gap naming it and the zone; a switch that is
/// not uplinked, and a zone whose sled is down, have none; instance
/// entries (another VNI) are not service NAT's business.
#[test]
fn service_nat_gaps_name_the_switch_the_zone_and_the_entry() {
    let nexus = entry([198, 51, 100, 1], SLED1, SERVICES_VNI);
    let dns = entry([198, 51, 100, 2], SLED2, SERVICES_VNI);
    let desired = [
        DesiredNat {
            entry: nexus,
            zone: Some((ZoneKind::Nexus, 1)),
            sled_up: true,
        },
        DesiredNat {
            entry: dns,
            zone: Some((ZoneKind::ExternalDns, 2)),
            sled_up: false,
        },
    ];
    let stale = entry([198, 51, 100, 9], SLED0, SERVICES_VNI);
    let guest = entry([203, 0, 113, 7], SLED0, 1007);
    let switches = [
        SwitchTable {
            slot: SwitchSlot::Switch0,
            uplinked: true,
            entries: vec![stale.to_dpd(), guest.to_dpd()].into(),
            entries_v6: vec![],
            pulled_to: None,
        },
        SwitchTable {
            slot: SwitchSlot::Switch1,
            uplinked: false,
            entries: vec![].into(),
            entries_v6: vec![],
            pulled_to: None,
        },
    ];
    let view = RackView {
        desired: &desired,
        switches: &switches,
        sleds: &[sled_view(0, SLED0), sled_view(1, SLED1)],
        instances: &[],
        nat_row_versions: &Default::default(),
        reincarnation: true,
        stop_removes_nat: true,
        host: &names,
        sled: &sled_of,
    };
    let gaps = service_nat_gaps(&view);
    let nexus_kind = ZoneKind::Nexus;
    assert_eq!(
        gaps,
        vec![
            Gap {
                at: "switch0".into(),
                message: format!(
                    "switch0 lacks the NAT entry of {nexus_kind} on sled1: \
                     198.51.100.1/0-16383 -> sled1 (a8:40:25:ff:00:01, vni {SERVICES_VNI})"
                ),
            },
            Gap {
                at: "switch0".into(),
                message: format!(
                    "switch0 holds a stale NAT entry: \
                     198.51.100.9/0-16383 -> sled0 (a8:40:25:ff:00:09, vni {SERVICES_VNI})"
                ),
            },
        ]
    );
    // The same gaps as data, as a simulated run keeps them between looks:
    // the zone by kind and sled index, the entries as they are.
    assert_eq!(
        ServiceGap::find_all(&view),
        vec![
            ServiceGap {
                slot: SwitchSlot::Switch0,
                kind: ServiceGapKind::Lacks {
                    zone: Some((ZoneKind::Nexus, 1)),
                    entry: nexus,
                },
            },
            ServiceGap {
                slot: SwitchSlot::Switch0,
                kind: ServiceGapKind::Stale { entry: stale },
            },
        ]
    );
}

/// An instance record at generation 1 with no VMM, its external IP
/// 203.0.113.`id` over all ports.
fn record(
    id: u32,
    name: &str,
    state: InstanceState,
    sled: Option<u32>,
    nics: Vec<Nic>,
) -> InstanceRecord {
    InstanceRecord {
        id,
        name: name.into(),
        state,
        generation: 1,
        sled,
        vmm: None,
        external_ips: vec![ExternalIp {
            ip: Ipv4Addr::new(203, 0, 113, id as u8),
            first_port: 0,
            last_port: 65535,
        }],
        nics,
        auto_restart: Default::default(),
    }
}

/// The NIC the instance tests give `web`.
fn web_nic() -> Nic {
    Nic {
        virtual_ip: IpAddr::V4(Ipv4Addr::new(172, 30, 0, 5)),
        mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 7]),
        vni: 1007,
    }
}

/// Instances: a running one lacks its VMM on its sled, its NAT entry on
/// each uplinked switch and its V2P mapping on each other up sled; a
/// stopped one that still has a VMM leaks it; each gap says where.
#[test]
fn instance_gaps_say_where_each_piece_is_missing() {
    let nic = web_nic();
    let record = |id, name, state, sled| record(id, name, state, sled, vec![nic]);
    let instances = [
        record(1, "web", InstanceState::Running, Some(1)),
        record(2, "db", InstanceState::Stopped, None),
    ];
    let mut sled0 = sled_view(0, SLED0);
    std::sync::Arc::make_mut(&mut sled0.agent).vmms.insert(
        20,
        VmmInfo {
            instance_id: 2,
            vmm_id: 20,
            state: VmmState::Running,
        },
    );
    // sled2 has web's mapping; sled0 has none.
    let mut sled2 = sled_view(2, SLED2);
    std::sync::Arc::make_mut(&mut sled2.agent)
        .v2p
        .insert(VirtualNetworkInterfaceHost {
            virtual_ip: nic.virtual_ip,
            virtual_mac: nic.mac,
            physical_host_ip: SLED1,
            vni: nic.vni,
        });
    let switches = [SwitchTable {
        slot: SwitchSlot::Switch1,
        uplinked: true,
        entries: vec![].into(),
        entries_v6: vec![],
        pulled_to: None,
    }];
    let view = RackView {
        desired: &[],
        switches: &switches,
        sleds: &[sled0, sled_view(1, SLED1), sled2],
        instances: &instances.map(std::sync::Arc::new),
        nat_row_versions: &Default::default(),
        reincarnation: true,
        stop_removes_nat: true,
        host: &names,
        sled: &sled_of,
    };
    let gaps: Vec<(String, String)> = instance_gaps(&view)
        .into_iter()
        .map(|g| (g.at, g.message))
        .collect();
    let pair = |at: &str, m: &str| (at.to_string(), m.to_string());
    assert_eq!(
        gaps,
        vec![
            pair(
                "sled1",
                "instance web is running on sled1, which has no VMM for it"
            ),
            pair(
                "switch1",
                "switch1 lacks the NAT entry of instance web: 203.0.113.1/0-65535 -> sled1"
            ),
            pair(
                "sled0",
                "sled0 lacks the V2P mapping of instance web: 172.30.0.5 -> sled1"
            ),
            pair(
                "sled0",
                "instance db is stopped but sled0 still runs a vmm for it"
            ),
        ]
    );
}

/// Under a control plane whose stop removes NAT (saga's), a stopped
/// instance's entry left on a switch is a gap; under inline's and naive's,
/// whose stop keeps it by design, it is not.
#[test]
fn a_stopped_instance_s_entry_is_a_gap_where_the_stop_removes_it() {
    let stopped = record(3, "web", InstanceState::Stopped, None, vec![]);
    let left = Ipv4Nat {
        external: Ipv4Addr::new(203, 0, 113, 3),
        low: 0,
        high: 65535,
        target: NatTarget {
            internal_ip: SLED2,
            inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 3]),
            vni: 1001,
        },
    };
    let switches = [SwitchTable {
        slot: SwitchSlot::Switch0,
        uplinked: true,
        entries: vec![left].into(),
        entries_v6: vec![],
        pulled_to: None,
    }];
    let instances = [stopped];
    let gaps = |stop_removes_nat| {
        instance_gaps(&RackView {
            desired: &[],
            switches: &switches,
            sleds: &[],
            instances: &instances.clone().map(std::sync::Arc::new),
            nat_row_versions: &Default::default(),
            reincarnation: true,
            stop_removes_nat,
            host: &names,
            sled: &sled_of,
        })
        .into_iter()
        .map(|g| g.message)
        .collect::<Vec<_>>()
    };
    assert_eq!(
        gaps(true),
        vec![
            "switch0 still holds the NAT entry of stopped instance web: \
              203.0.113.3/0-65535 -> sled2 (a8:40:25:f0:00:03, vni 1001)"
                .to_string()
        ]
    );
    assert!(gaps(false).is_empty());
}

fn vmm(instance_id: u32, vmm_id: u64, state: VmmState) -> (u64, VmmInfo) {
    (
        vmm_id,
        VmmInfo {
            instance_id,
            vmm_id,
            state,
        },
    )
}

/// `one-vmm`: two VMMs of one instance past registration breach it on one
/// sled as across sleds (a sled keys VMMs by propolis id, so it may hold
/// several of an instance); a VMM only registered is no guest, and another
/// instance's VMM is not counted.
#[test]
fn a_second_guest_on_the_same_sled_or_another_breaches_one_vmm() {
    use VmmState::{Running, Starting};
    let mut sled0 = sled_view(0, SLED0);
    std::sync::Arc::make_mut(&mut sled0.agent).vmms.extend([
        vmm(1, 10, Running),
        vmm(1, 11, Starting),
        vmm(2, 12, Running),
    ]);
    let sled1 = sled_view(1, SLED1);
    let mut sleds = vec![sled0, sled1];
    let second_guest =
        |sleds: &[SledView], id, name: &str| VmmIndex::new(sleds).second_guest(id, name);
    assert_eq!(second_guest(&sleds, 1, "web"), None);
    assert_eq!(
        VmmIndex::new(&sleds)
            .of(1)
            .map(|(s, v)| (s.name.as_str(), v.vmm_id))
            .collect::<Vec<_>>(),
        [("sled0", 10), ("sled0", 11)]
    );
    // The registered one runs: two guests on sled0.
    std::sync::Arc::make_mut(&mut sleds[0].agent)
        .vmms
        .get_mut(&11)
        .unwrap()
        .state = Running;
    assert_eq!(
        second_guest(&sleds, 1, "web").as_deref(),
        Some("instance web has 2 VMMs: VMM 10 on sled0, VMM 11 on sled0")
    );
    // Across sleds, as before.
    std::sync::Arc::make_mut(&mut sleds[0].agent)
        .vmms
        .remove(&11);
    std::sync::Arc::make_mut(&mut sleds[1].agent)
        .vmms
        .extend([vmm(1, 13, Running)]);
    assert_eq!(
        second_guest(&sleds, 1, "web").as_deref(),
        Some("instance web has 2 VMMs: VMM 10 on sled0, VMM 13 on sled1")
    );
    assert_eq!(second_guest(&sleds, 2, "db"), None);
}

/// A sled that holds another VMM of a running instance than the one its
/// record names has not got the instance's VMM: a gap.
#[test]
fn a_running_instance_needs_its_own_vmm_on_its_sled() {
    let nic = Nic {
        virtual_ip: IpAddr::from([172, 30, 0, 5]),
        mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 1]),
        vni: 1001,
    };
    let mut web = InstanceRecord {
        id: 1,
        name: "web".into(),
        state: InstanceState::Running,
        sled: Some(0),
        vmm: Some(10),
        generation: 2,
        external_ips: vec![],
        nics: vec![nic],
        auto_restart: Default::default(),
    };
    let mut sled0 = sled_view(0, SLED0);
    std::sync::Arc::make_mut(&mut sled0.agent)
        .vmms
        .extend([vmm(1, 11, VmmState::Running)]);
    let sleds = [sled0];
    let gaps_of = |web: &InstanceRecord| {
        let instances = [web.clone()];
        let view = RackView {
            desired: &[],
            switches: &[],
            sleds: &sleds,
            instances: &instances.map(std::sync::Arc::new),
            nat_row_versions: &Default::default(),
            reincarnation: false,
            stop_removes_nat: true,
            host: &names,
            sled: &sled_of,
        };
        instance_gaps(&view)
            .into_iter()
            .map(|g| g.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        gaps_of(&web),
        ["instance web is running on sled0, which has no VMM for it"]
    );
    web.vmm = Some(11);
    assert_eq!(gaps_of(&web), Vec::<String>::new());
}

/// What no desired state explains is a gap (issue 39): a VMM, a V2P
/// mapping and an instance NAT entry of no known instance, and any IPv6
/// NAT entry. A known instance's state, in any of its states, is judged by
/// `instance_gaps`, not here.
#[test]
fn state_nothing_explains_is_a_gap() {
    let nic = web_nic();
    let known = record(1, "web", InstanceState::Stopped, None, vec![nic]);
    let mut sled0 = sled_view(0, SLED0);
    for (vmm_id, instance_id) in [(10, 1), (99, 42)] {
        std::sync::Arc::make_mut(&mut sled0.agent).vmms.insert(
            vmm_id,
            VmmInfo {
                instance_id,
                vmm_id,
                state: VmmState::Running,
            },
        );
    }
    for (ip, vni) in [
        ([172, 30, 0, 5], 1007),
        ([172, 30, 0, 9], 1007),
        ([172, 30, 0, 5], 2000),
    ] {
        std::sync::Arc::make_mut(&mut sled0.agent)
            .v2p
            .insert(VirtualNetworkInterfaceHost {
                virtual_ip: IpAddr::V4(Ipv4Addr::from(ip)),
                virtual_mac: nic.mac,
                physical_host_ip: SLED1,
                vni,
            });
    }
    let v6 = Ipv6Nat {
        external: "2001:db8::7".parse().unwrap(),
        low: 0,
        high: 16383,
        target: entry([0, 0, 0, 7], SLED1, 1007).target,
    };
    let switches = [SwitchTable {
        slot: SwitchSlot::Switch0,
        // Not uplinked: unexplained state is a gap wherever it is.
        uplinked: false,
        // In dpd's key order, as a switch lists them.
        entries: vec![
            // A service entry is service NAT's to judge.
            entry([198, 51, 100, 9], SLED0, SERVICES_VNI).to_dpd(),
            entry([203, 0, 113, 1], SLED0, 1007).to_dpd(),
            entry([203, 0, 113, 8], SLED0, 1007).to_dpd(),
        ]
        .into(),
        entries_v6: vec![v6],
        pulled_to: None,
    }];
    let view = RackView {
        desired: &[],
        switches: &switches,
        sleds: &[sled0],
        instances: &[known.into()],
        nat_row_versions: &Default::default(),
        reincarnation: true,
        stop_removes_nat: false,
        host: &names,
        sled: &sled_of,
    };
    let messages: Vec<String> = unexplained_gaps(&view)
        .into_iter()
        .map(|g| format!("{}: {}", g.at, g.message))
        .collect();
    assert_eq!(
        messages,
        [
            "sled0: sled0 holds VMM 99 of instance id 42, which no known instance explains",
            "sled0: sled0 holds a V2P mapping no known instance explains: 172.30.0.5 (vni 2000) -> sled1",
            "sled0: sled0 holds a V2P mapping no known instance explains: 172.30.0.9 (vni 1007) -> sled1",
            "switch0: switch0 holds a NAT entry no known instance explains: \
             203.0.113.8/0-16383 -> sled0 (a8:40:25:ff:00:08, vni 1007)",
            "switch0: switch0 holds an IPv6 NAT entry nothing explains (racksim's services and \
             instances are IPv4): 2001:db8::7/0-16383 -> sled1 (a8:40:25:ff:00:07, vni 1007)",
        ]
    );
    // And `rack_gaps` counts them: a rack holding them has not converged.
    assert!(rack_gaps(&view).len() >= messages.len());
}

/// `entries_of` finds an address's entries, in port order, by binary
/// search in a table in dpd's key order, and nothing for an address the
/// table lacks (before, between or after the others).
#[test]
fn entries_of_finds_an_address_in_the_ordered_table() {
    let nat = |ip: [u8; 4], low: u16| Ipv4Nat {
        external: ip.into(),
        low,
        high: low + 16383,
        target: entry([0, 0, 0, 1], SLED0, 1007).target,
    };
    let table = SwitchTable {
        slot: SwitchSlot::Switch0,
        uplinked: true,
        entries: vec![
            nat([198, 51, 100, 9], 0),
            nat([203, 0, 113, 1], 0),
            nat([203, 0, 113, 1], 16384),
            nat([203, 0, 113, 8], 0),
        ]
        .into(),
        entries_v6: vec![],
        pulled_to: None,
    };
    assert!(table.is_in_key_order());
    let lows =
        |ip: [u8; 4]| -> Vec<u16> { table.entries_of(ip.into()).iter().map(|e| e.low).collect() };
    assert_eq!(lows([203, 0, 113, 1]), [0, 16384]);
    assert_eq!(lows([198, 51, 100, 9]), [0]);
    assert_eq!(lows([203, 0, 113, 8]), [0]);
    for absent in [[10, 0, 0, 1], [203, 0, 113, 5], [255, 0, 0, 1]] {
        assert_eq!(lows(absent), Vec::<u16>::new(), "{absent:?}");
    }
    let unordered = SwitchTable {
        entries: table
            .entries
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .into(),
        ..table.clone()
    };
    assert!(!unordered.is_in_key_order());
}

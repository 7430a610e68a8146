//! The shape of a simulated rack: sleds, scrimlets and their switches, the
//! service zones and where they live.
//!
//! Addresses follow the rack's conventions: sled *i* owns the underlay subnet
//! `fd00:1122:3344:(101+i)::/64` and answers on `::1`; a scrimlet's switch zone
//! answers on `::2` of its subnet. They are fixed by the rack shape, never by
//! registration order, so a trace that names hosts is stable.

use std::net::{Ipv4Addr, Ipv6Addr};

use racksim_reconciler::{
    discovery::SwitchSlot,
    dpd::{MacAddr, NatTarget},
    nat::NatEntry,
    SERVICES_VNI,
};

/// Address of the upstream (outside) NTP server.
pub const UPSTREAM_NTP_ADDR: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x123);
/// Host name of the upstream NTP server in traces.
pub const UPSTREAM_NTP_NAME: &str = "upstream-ntp";

/// Kinds of zone with external connectivity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZoneKind {
    BoundaryNtp,
    Nexus,
    ExternalDns,
}

impl ZoneKind {
    pub fn name(self) -> &'static str {
        match self {
            ZoneKind::BoundaryNtp => "boundary-ntp",
            ZoneKind::Nexus => "nexus",
            ZoneKind::ExternalDns => "external-dns",
        }
    }
}

impl std::fmt::Display for ZoneKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SledSpec {
    pub name: String,
    pub address: Ipv6Addr,
    /// The switch this sled is cabled to, if it is a scrimlet.
    pub scrimlet_of: Option<SwitchSlot>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchSpec {
    pub slot: SwitchSlot,
    /// Index of the scrimlet in [`RackSpec::sleds`].
    pub scrimlet: usize,
    /// Underlay address of the switch zone.
    pub zone_address: Ipv6Addr,
    pub uplinked: bool,
}

impl SwitchSpec {
    pub fn name(&self) -> String {
        self.slot.to_string()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneSpec {
    pub kind: ZoneKind,
    /// Index of the hosting sled in [`RackSpec::sleds`].
    pub sled: usize,
    pub external_ip: Ipv4Addr,
    pub first_port: u16,
    pub last_port: u16,
    pub mac: MacAddr,
}

/// A rack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackSpec {
    pub name: String,
    pub sleds: Vec<SledSpec>,
    pub switches: Vec<SwitchSpec>,
    pub zones: Vec<ZoneSpec>,
    /// Sled hosting the internal DNS zone (discovery).
    pub internal_dns_sled: usize,
}

/// Underlay address of sled `index` (`fd00:1122:3344:(101+i)::1`).
pub fn sled_address(index: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x0101 + index as u16, 0, 0, 0, 1)
}

/// Underlay address of the switch zone on scrimlet `index` (`::2`).
pub fn switch_zone_address(index: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x0101 + index as u16, 0, 0, 0, 2)
}

impl RackSpec {
    /// The madrid rack of seed 000: two scrimlets (sled0 on switch0, sled1 on
    /// switch1), both switches uplinked, and a third sled. Boundary NTP runs
    /// on sled2, Nexus on sled0, external DNS on sled1; internal DNS on sled1.
    /// Six simulated hosts in all (two switch zones, three sleds, upstream
    /// NTP): turmoil's step cost grows with the cube of the host count.
    pub fn madrid() -> Self {
        RackBuilder::new("madrid")
            .scrimlet(SwitchSlot::Switch0)
            .scrimlet(SwitchSlot::Switch1)
            .sled()
            .service_zones(2, 0, 1)
            .internal_dns_on(1)
            .build()
    }

    /// A rack whose scrimlets host no zones, for faults that take a
    /// scrimlet away (replacement, sidecar power cycles) without taking
    /// zones with it: sled0 and sled1 are scrimlets; boundary NTP and
    /// internal DNS run on sled2, Nexus and external DNS on sled3. Seven
    /// simulated hosts.
    pub fn standard() -> Self {
        RackBuilder::new("standard")
            .scrimlet(SwitchSlot::Switch0)
            .scrimlet(SwitchSlot::Switch1)
            .sled()
            .sled()
            .service_zones(2, 3, 3)
            .internal_dns_on(2)
            .build()
    }

    /// A rack shape by name, as scenario files name them.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "madrid" => Some(RackSpec::madrid()),
            "standard" => Some(RackSpec::standard()),
            _ => None,
        }
    }

    /// Names of the racks [`RackSpec::by_name`] knows.
    pub const NAMES: [&'static str; 2] = ["madrid", "standard"];

    /// Names of the hosts a plan can refer to.
    pub fn host_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.sleds.iter().map(|s| s.name.clone()).collect();
        names.extend(self.switches.iter().map(|s| s.name()));
        names.push(UPSTREAM_NTP_NAME.to_string());
        names
    }

    pub fn switch(&self, slot: SwitchSlot) -> Option<&SwitchSpec> {
        self.switches.iter().find(|s| s.slot == slot)
    }

    /// The desired NAT entry of a zone: its external address and ports,
    /// pointing at its sled.
    pub fn nat_entry(&self, zone: &ZoneSpec) -> NatEntry {
        NatEntry {
            external_ip: zone.external_ip,
            first_port: zone.first_port,
            last_port: zone.last_port,
            target: NatTarget {
                internal_ip: self.sleds[zone.sled].address,
                inner_mac: zone.mac,
                vni: SERVICES_VNI,
            },
        }
    }

    /// Every zone's desired entry, sorted.
    pub fn desired_nat(&self) -> Vec<NatEntry> {
        let mut all: Vec<NatEntry> = self.zones.iter().map(|z| self.nat_entry(z)).collect();
        all.sort();
        all
    }

    /// The zone, if any, whose external address and ports cover `(ip, port)`.
    pub fn zone_for(&self, ip: Ipv4Addr, port: u16) -> Option<&ZoneSpec> {
        self.zones
            .iter()
            .find(|z| z.external_ip == ip && (z.first_port..=z.last_port).contains(&port))
    }

    pub fn uplinked_switches(&self) -> Vec<SwitchSlot> {
        self.switches
            .iter()
            .filter(|s| s.uplinked)
            .map(|s| s.slot)
            .collect()
    }
}

/// Builds a [`RackSpec`] with the rack's address conventions.
#[derive(Clone, Debug)]
pub struct RackBuilder {
    rack: RackSpec,
}

impl RackBuilder {
    pub fn new(name: &str) -> Self {
        RackBuilder {
            rack: RackSpec {
                name: name.to_string(),
                sleds: Vec::new(),
                switches: Vec::new(),
                zones: Vec::new(),
                internal_dns_sled: 0,
            },
        }
    }

    /// Add a plain sled.
    pub fn sled(mut self) -> Self {
        let i = self.rack.sleds.len();
        self.rack.sleds.push(SledSpec {
            name: format!("sled{i}"),
            address: sled_address(i),
            scrimlet_of: None,
        });
        self
    }

    /// Add a scrimlet cabled to `slot`, whose switch is uplinked.
    pub fn scrimlet(mut self, slot: SwitchSlot) -> Self {
        let i = self.rack.sleds.len();
        self.rack.sleds.push(SledSpec {
            name: format!("sled{i}"),
            address: sled_address(i),
            scrimlet_of: Some(slot),
        });
        self.rack.switches.push(SwitchSpec {
            slot,
            scrimlet: i,
            zone_address: switch_zone_address(i),
            uplinked: true,
        });
        self
    }

    /// Mark a switch as having no uplink.
    pub fn without_uplink(mut self, slot: SwitchSlot) -> Self {
        if let Some(s) = self.rack.switches.iter_mut().find(|s| s.slot == slot) {
            s.uplinked = false;
        }
        self
    }

    /// Place a zone with external connectivity on sled `sled`.
    pub fn zone(
        mut self,
        kind: ZoneKind,
        sled: usize,
        external_ip: Ipv4Addr,
        first_port: u16,
        last_port: u16,
    ) -> Self {
        let n = self.rack.zones.len() as u8;
        // Oxide's OUI-based guest/service MAC range.
        let mac = MacAddr {
            a: [0xa8, 0x40, 0x25, 0xff, 0x00, n + 1],
        };
        self.rack.zones.push(ZoneSpec {
            kind,
            sled,
            external_ip,
            first_port,
            last_port,
            mac,
        });
        self
    }

    /// The three zones with external connectivity, at the rack's usual
    /// external addresses: boundary NTP (`198.51.100.1`, source-NAT ports
    /// 16384-32767), Nexus (`.2`) and external DNS (`.3`), all ports.
    pub fn service_zones(self, ntp_sled: usize, nexus_sled: usize, dns_sled: usize) -> Self {
        self.zone(
            ZoneKind::BoundaryNtp,
            ntp_sled,
            Ipv4Addr::new(198, 51, 100, 1),
            16384,
            32767,
        )
        .zone(
            ZoneKind::Nexus,
            nexus_sled,
            Ipv4Addr::new(198, 51, 100, 2),
            0,
            65535,
        )
        .zone(
            ZoneKind::ExternalDns,
            dns_sled,
            Ipv4Addr::new(198, 51, 100, 3),
            0,
            65535,
        )
    }

    pub fn internal_dns_on(mut self, sled: usize) -> Self {
        self.rack.internal_dns_sled = sled;
        self
    }

    pub fn build(self) -> RackSpec {
        self.rack
    }
}

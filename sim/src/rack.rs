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

racksim_wire::enum_names!(ZoneKind {
    BoundaryNtp => "boundary-ntp",
    Nexus => "nexus",
    ExternalDns => "external-dns",
});

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
    /// Sleds hosting an internal DNS server (discovery asks any of them),
    /// in the order the resolver tries them.
    pub internal_dns: Vec<usize>,
}

/// Size of a boundary NTP zone's source-NAT port range: Omicron hands out
/// source NAT in chunks of 2^14 ports (`NUM_SOURCE_NAT_PORTS`), so up to
/// four zones share one external IP, each on an aligned chunk.
pub const SOURCE_NAT_PORTS: u16 = 1 << 14;

/// What part of a rack definition a [`RackError`] is about, so a scenario
/// file can point at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RackPart {
    Sleds,
    Scrimlets,
    Uplinked,
    InternalDns,
    /// A zone, by index in [`RackSpec::zones`].
    Zone(usize),
    /// The sled a zone is on, by the zone's index.
    ZoneSled(usize),
    /// The rack as a whole (e.g. a required zone kind is missing).
    Whole,
}

/// A rack definition that cannot be a rack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackError {
    pub part: RackPart,
    pub message: String,
    pub hint: Option<String>,
}

impl std::fmt::Display for RackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for RackError {}

/// Underlay address of sled `index` (`fd00:1122:3344:(101+i)::1`).
pub fn sled_address(index: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x0101 + index as u16, 0, 0, 0, 1)
}

/// Underlay address of the switch zone on scrimlet `index` (`::2`).
pub fn switch_zone_address(index: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x0101 + index as u16, 0, 0, 0, 2)
}

impl RackSpec {
    /// The madrid rack of the zone-start NAT issue: two scrimlets (sled0 on switch0, sled1 on
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

    /// A full rack: 32 sleds; sled14 and sled16 are the scrimlets (an Oxide
    /// rack's switches sit between cubbies 14 and 16), both switches
    /// uplinked. Services are spread over the other sleds as the rack setup
    /// service spreads them: three internal DNS servers (sled2, sled3,
    /// sled4), three Nexus (sled5, sled6, sled7 at `198.51.100.2..4`), two
    /// external DNS (sled8, sled9 at `.5`, `.6`) and two boundary NTP zones
    /// (sled10, sled11) sharing the source-NAT IP `198.51.100.1` on port
    /// ranges 0-16383 and 16384-32767. No zone runs on a scrimlet, so a
    /// scrimlet fault takes no service with it. 35 simulated hosts.
    pub fn full() -> Self {
        let mut b = RackBuilder::new("full");
        for i in 0..32 {
            b = match i {
                14 => b.scrimlet(SwitchSlot::Switch0),
                16 => b.scrimlet(SwitchSlot::Switch1),
                _ => b.sled(),
            };
        }
        let snat = Ipv4Addr::new(198, 51, 100, 1);
        b.internal_dns_on(2)
            .internal_dns_on(3)
            .internal_dns_on(4)
            .zone(ZoneKind::BoundaryNtp, 10, snat, 0, SOURCE_NAT_PORTS - 1)
            .zone(
                ZoneKind::BoundaryNtp,
                11,
                snat,
                SOURCE_NAT_PORTS,
                2 * SOURCE_NAT_PORTS - 1,
            )
            .zone(ZoneKind::Nexus, 5, Ipv4Addr::new(198, 51, 100, 2), 0, 65535)
            .zone(ZoneKind::Nexus, 6, Ipv4Addr::new(198, 51, 100, 3), 0, 65535)
            .zone(ZoneKind::Nexus, 7, Ipv4Addr::new(198, 51, 100, 4), 0, 65535)
            .zone(
                ZoneKind::ExternalDns,
                8,
                Ipv4Addr::new(198, 51, 100, 5),
                0,
                65535,
            )
            .zone(
                ZoneKind::ExternalDns,
                9,
                Ipv4Addr::new(198, 51, 100, 6),
                0,
                65535,
            )
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
            "full" => Some(RackSpec::full()),
            _ => None,
        }
    }

    /// Names of the racks [`RackSpec::by_name`] knows.
    pub const NAMES: [&'static str; 3] = ["madrid", "standard", "full"];

    /// Check that this is a rack Omicron could run: two scrimlets, one per
    /// switch; at least one uplinked switch; internal DNS, and boundary NTP,
    /// Nexus and external DNS zones somewhere; every zone on a sled of the rack; no two zones'
    /// external (IP, port range) overlapping; boundary NTP on an aligned
    /// source-NAT chunk.
    pub fn validate(&self) -> Result<(), RackError> {
        let fail = |part, message: String, hint: Option<String>| {
            Err(RackError {
                part,
                message,
                hint,
            })
        };
        let names: Vec<&str> = self.sleds.iter().map(|s| s.name.as_str()).collect();
        if self.sleds.is_empty() {
            return fail(RackPart::Sleds, "a rack needs sleds".into(), None);
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return fail(RackPart::Sleds, format!("sled {n:?} is listed twice"), None);
            }
        }
        if self.switches.len() != 2 {
            return fail(
                RackPart::Scrimlets,
                format!(
                    "a rack has exactly 2 scrimlets (one per switch), this one has {}",
                    self.switches.len()
                ),
                Some("name one sled for switch0 and one for switch1".into()),
            );
        }
        if self.switches[0].slot == self.switches[1].slot
            || self.switches[0].scrimlet == self.switches[1].scrimlet
        {
            return fail(
                RackPart::Scrimlets,
                "the two scrimlets must be different sleds on different switches".into(),
                None,
            );
        }
        if !self.switches.iter().any(|s| s.uplinked) {
            return fail(
                RackPart::Uplinked,
                "no switch is uplinked: nothing outside the rack is reachable".into(),
                Some("list at least one switch in `uplinked`".into()),
            );
        }
        if self.internal_dns.is_empty() {
            return fail(
                RackPart::InternalDns,
                "the rack has no internal DNS server: nothing can discover the switch zones".into(),
                Some("list the sleds of the internal DNS servers (Omicron runs three)".into()),
            );
        }
        for (i, d) in self.internal_dns.iter().enumerate() {
            if self.internal_dns[..i].contains(d) {
                return fail(
                    RackPart::InternalDns,
                    format!("two internal DNS servers on {}", self.sleds[*d].name),
                    None,
                );
            }
        }
        for (i, z) in self.zones.iter().enumerate() {
            if z.sled >= self.sleds.len() {
                return fail(
                    RackPart::Zone(i),
                    format!("zone {} is on a sled the rack does not have", z.kind),
                    Some(format!("sleds of this rack: {}", names.join(", "))),
                );
            }
            if let Some(other) = self.zones[..i]
                .iter()
                .find(|o| o.sled == z.sled && o.kind == z.kind)
            {
                return fail(
                    RackPart::ZoneSled(i),
                    format!("two {} zones on {}", other.kind, self.sleds[z.sled].name),
                    Some("Omicron puts at most one zone of a kind on a sled".into()),
                );
            }
            if z.first_port > z.last_port {
                return fail(
                    RackPart::Zone(i),
                    format!(
                        "zone {}: port range {}-{} is empty",
                        z.kind, z.first_port, z.last_port
                    ),
                    None,
                );
            }
            if z.kind == ZoneKind::BoundaryNtp
                && (z.first_port % SOURCE_NAT_PORTS != 0
                    || u32::from(z.last_port) + 1 != u32::from(z.first_port) + 16384)
            {
                return fail(
                    RackPart::Zone(i),
                    format!(
                        "boundary NTP's source-NAT range {}-{} is not an aligned chunk of {} ports",
                        z.first_port, z.last_port, SOURCE_NAT_PORTS
                    ),
                    Some("use 0-16383, 16384-32767, 32768-49151 or 49152-65535".into()),
                );
            }
            if let Some(other) = self.zones[..i].iter().find(|o| {
                o.external_ip == z.external_ip
                    && o.first_port <= z.last_port
                    && z.first_port <= o.last_port
            }) {
                return fail(
                    RackPart::Zone(i),
                    format!(
                        "zone {} at {} {}-{} overlaps zone {} at {} {}-{}",
                        z.kind,
                        z.external_ip,
                        z.first_port,
                        z.last_port,
                        other.kind,
                        other.external_ip,
                        other.first_port,
                        other.last_port
                    ),
                    Some("zones may share an external IP only on disjoint port ranges".into()),
                );
            }
        }
        // Omicron's service NAT config refuses a rack without each kind
        // (scrimlet-local would report InvalidSystemNetworkingConfig).
        for kind in [
            ZoneKind::BoundaryNtp,
            ZoneKind::Nexus,
            ZoneKind::ExternalDns,
        ] {
            if !self.zones.iter().any(|z| z.kind == kind) {
                return fail(
                    RackPart::Whole,
                    format!("the rack has no {kind} zone"),
                    Some(format!("add a [[rack.zone]] with kind = \"{kind}\"")),
                );
            }
        }
        Ok(())
    }

    /// Underlay addresses of the internal DNS servers, in resolver order.
    pub fn internal_dns_addresses(&self) -> Vec<Ipv6Addr> {
        self.internal_dns
            .iter()
            .map(|&i| self.sleds[i].address)
            .collect()
    }

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
                internal_dns: Vec::new(),
            },
        }
    }

    /// Add a plain sled.
    pub fn sled(self) -> Self {
        let i = self.rack.sleds.len();
        self.named_sled(&format!("sled{i}"))
    }

    /// Add a plain sled with its own name (its address still follows its
    /// position).
    pub fn named_sled(mut self, name: &str) -> Self {
        let i = self.rack.sleds.len();
        self.rack.sleds.push(SledSpec {
            name: name.to_string(),
            address: sled_address(i),
            scrimlet_of: None,
        });
        self
    }

    /// Add a scrimlet cabled to `slot`, whose switch is uplinked.
    pub fn scrimlet(self, slot: SwitchSlot) -> Self {
        let i = self.rack.sleds.len();
        self.sled().make_scrimlet(i, slot)
    }

    /// Make sled `i` the scrimlet cabled to `slot` (whose switch is uplinked).
    pub fn make_scrimlet(mut self, i: usize, slot: SwitchSlot) -> Self {
        if let Some(s) = self.rack.sleds.get_mut(i) {
            s.scrimlet_of = Some(slot);
        }
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

    /// Add an internal DNS server on sled `sled`.
    pub fn internal_dns_on(mut self, sled: usize) -> Self {
        self.rack.internal_dns.push(sled);
        self
    }

    pub fn build(self) -> RackSpec {
        self.rack
    }
}

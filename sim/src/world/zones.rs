//! The rack's service zones and the networking config they imply.
//!
//! A run can change which service zones the rack has: a config change adds,
//! moves or removes one (`RackSpec::zones` is only the initial set). The
//! [`ZoneSet`] is that set as plain data with pure operations — name a
//! zone, allocate a new one's address, apply a change, build the config the
//! bootstore carries — so that the scenario-file checker and live mode can
//! run a plan's changes on their own copy, and the world keeps the live one
//! in a watch channel (see `World::change_config`).

use std::{
    collections::BTreeMap,
    fmt,
    net::{Ipv4Addr, Ipv6Addr},
};

use racksim_reconciler::{
    dpd::MacAddr,
    nat::NatEntry,
    scrimlet_local::{ServiceZoneKind, ServiceZoneNat, SystemNetworkingConfig},
    SERVICES_VNI,
};

use crate::{
    plan::{ConfigChange, ZoneRef},
    rack::{RackSpec, ZoneKind, ZoneSpec},
};

/// A service zone's identity: its kind and its ordinal among the zones of
/// that kind the rack has ever had (declared ones first, in rack order,
/// then added ones). Shown as `nexus.0`; never reused, so a removed zone's
/// name cannot come to mean another zone. (Omicron names zones by UUID.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneId {
    pub kind: ZoneKind,
    pub ordinal: u32,
}

impl fmt::Display for ZoneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.kind, self.ordinal)
    }
}

/// A service zone as the rack has it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveZone {
    pub id: ZoneId,
    pub spec: ZoneSpec,
}

/// Where a new zone's external address comes from when the plan gives none.
const SERVICE_IP_BASE: [u8; 3] = [198, 51, 100];
/// Boundary NTP's source-NAT port blocks: zones share one address, each
/// with its own quarter of the port space.
const NTP_PORT_BLOCK: u16 = 16384;

/// The rack's service zones, as the current config describes them.
///
/// Plain data with pure operations, so that the scenario-file checker can
/// run a plan's changes on its own copy and know what later steps may
/// refer to; the world holds the live copy in a watch channel that sleds
/// follow (zones start and stop) and the checks read (desired state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneSet {
    zones: Vec<LiveZone>,
    next_ordinal: BTreeMap<ZoneKind, u32>,
    /// Zones ever created, for fresh MAC addresses.
    created: usize,
}

impl ZoneSet {
    /// The rack's declared zones, named in declaration order.
    pub fn from_rack(rack: &RackSpec) -> Self {
        let mut set = ZoneSet {
            zones: Vec::new(),
            next_ordinal: BTreeMap::new(),
            created: 0,
        };
        for z in &rack.zones {
            set.insert(z.clone());
        }
        set
    }

    fn insert(&mut self, spec: ZoneSpec) -> ZoneId {
        let n = self.next_ordinal.entry(spec.kind).or_insert(0);
        let id = ZoneId {
            kind: spec.kind,
            ordinal: *n,
        };
        *n += 1;
        self.created += 1;
        self.zones.push(LiveZone { id, spec });
        self.zones.sort_by_key(|z| z.id);
        id
    }

    /// Every zone, by id.
    pub fn zones(&self) -> &[LiveZone] {
        &self.zones
    }

    /// The zones on sled `index`, by id.
    pub fn on_sled(&self, index: usize) -> Vec<LiveZone> {
        self.zones
            .iter()
            .filter(|z| z.spec.sled == index)
            .cloned()
            .collect()
    }

    pub fn get(&self, id: ZoneId) -> Option<&LiveZone> {
        self.zones.iter().find(|z| z.id == id)
    }

    /// The zone a plan means: `nexus.1` names one; `nexus` names the only
    /// Nexus zone, and is an error when there are several.
    pub fn resolve(&self, r: &ZoneRef) -> Result<ZoneId, String> {
        let of_kind: Vec<ZoneId> = self
            .zones
            .iter()
            .filter(|z| z.id.kind == r.kind)
            .map(|z| z.id)
            .collect();
        let names = || {
            if of_kind.is_empty() {
                format!("the rack has no {} zone at that point", r.kind)
            } else {
                let v: Vec<String> = of_kind.iter().map(|id| id.to_string()).collect();
                format!("{} zones at that point: {}", r.kind, v.join(", "))
            }
        };
        match r.ordinal {
            Some(n) => of_kind
                .iter()
                .find(|id| id.ordinal == n)
                .copied()
                .ok_or_else(|| format!("no zone {r} ({})", names())),
            None if of_kind.len() == 1 => Ok(of_kind[0]),
            None if of_kind.is_empty() => Err(names()),
            None => Err(format!(
                "{r} is ambiguous: {}; name one with its ordinal",
                names()
            )),
        }
    }

    /// The set after `change`; `sled` is the index of the sled the change
    /// names (add, move). Structural errors only (no such zone, a move to
    /// where it already is); whether the result is a valid config is
    /// [`SystemNetworkingConfig::validate`]'s business.
    pub fn apply(&self, change: &ConfigChange, sled: Option<usize>) -> Result<ZoneSet, String> {
        let mut next = self.clone();
        match change {
            ConfigChange::AddZone {
                kind, external_ip, ..
            } => {
                let sled = sled.ok_or("add-zone needs a sled")?;
                let (ip, first_port, last_port) = self.allocate(*kind, *external_ip);
                // Oxide's OUI-based service MAC range, continuing the
                // rack builder's numbering.
                let n = (self.created + 1) as u8;
                next.insert(ZoneSpec {
                    kind: *kind,
                    sled,
                    external_ip: ip,
                    first_port,
                    last_port,
                    mac: MacAddr {
                        a: [0xa8, 0x40, 0x25, 0xff, 0x00, n],
                    },
                });
            }
            ConfigChange::MoveZone { zone, .. } => {
                let sled = sled.ok_or("move-zone needs a sled")?;
                let id = self.resolve(zone)?;
                let z = next
                    .zones
                    .iter_mut()
                    .find(|z| z.id == id)
                    .expect("resolved");
                if z.spec.sled == sled {
                    return Err(format!("zone {id} is already on that sled"));
                }
                z.spec.sled = sled;
            }
            ConfigChange::RemoveZone { zone } => {
                let id = self.resolve(zone)?;
                next.zones.retain(|z| z.id != id);
            }
        }
        // Omicron's planner puts at most one zone of a kind on a sled; two
        // would also share a sled's Nexus port, its NTP sync and its saga
        // executor name here.
        let landing = match change {
            ConfigChange::AddZone { kind, .. } => Some(*kind),
            ConfigChange::MoveZone { zone, .. } => Some(self.resolve(zone)?.kind),
            ConfigChange::RemoveZone { .. } => None,
        };
        if let (Some(kind), Some(sled)) = (landing, sled) {
            let here = next
                .zones
                .iter()
                .filter(|z| z.spec.sled == sled && z.id.kind == kind);
            if here.count() > 1 {
                return Err(format!("that sled already runs a {kind} zone"));
            }
        }
        Ok(next)
    }

    /// External address and ports for a new zone of `kind`. Given an
    /// address, the kind's usual range there (a plan can make a clash on
    /// purpose); otherwise Nexus and external DNS take the lowest address
    /// no zone uses, and boundary NTP the lowest free port block at the
    /// address the NTP zones share.
    fn allocate(&self, kind: ZoneKind, ip: Option<Ipv4Addr>) -> (Ipv4Addr, u16, u16) {
        let used = |ip: Ipv4Addr, lo: u16, hi: u16| {
            self.zones.iter().any(|z| {
                z.spec.external_ip == ip && z.spec.first_port <= hi && lo <= z.spec.last_port
            })
        };
        let fresh = || {
            (1..=254u8)
                .map(|n| {
                    Ipv4Addr::new(
                        SERVICE_IP_BASE[0],
                        SERVICE_IP_BASE[1],
                        SERVICE_IP_BASE[2],
                        n,
                    )
                })
                .find(|ip| !self.zones.iter().any(|z| z.spec.external_ip == *ip))
                .unwrap_or(Ipv4Addr::new(198, 51, 100, 255))
        };
        let ntp_default = (NTP_PORT_BLOCK, 2 * NTP_PORT_BLOCK - 1);
        match (kind, ip) {
            (ZoneKind::BoundaryNtp, Some(ip)) => (ip, ntp_default.0, ntp_default.1),
            (_, Some(ip)) => (ip, 0, u16::MAX),
            (ZoneKind::BoundaryNtp, None) => {
                let shared = self
                    .zones
                    .iter()
                    .find(|z| z.spec.kind == ZoneKind::BoundaryNtp)
                    .map(|z| z.spec.external_ip);
                shared
                    .and_then(|ip| {
                        (0..4u16)
                            .map(|b| {
                                (
                                    b * NTP_PORT_BLOCK,
                                    b * NTP_PORT_BLOCK + (NTP_PORT_BLOCK - 1),
                                )
                            })
                            .find(|(lo, hi)| !used(ip, *lo, *hi))
                            .map(|(lo, hi)| (ip, lo, hi))
                    })
                    .unwrap_or_else(|| (fresh(), ntp_default.0, ntp_default.1))
            }
            (_, None) => (fresh(), 0, u16::MAX),
        }
    }

    /// A config change as Nexus's blueprint execution applies it: the new
    /// zone set and the config the bootstore gets under `generation + 1`.
    /// `sled` finds a (live) sled by name. Refused as a whole — with a
    /// message that says so — when the sled or zone does not exist or the
    /// new config is invalid: omicron's validated type cannot even be built
    /// from an invalid config, so it never reaches the bootstore. Shared by
    /// the simulation and live mode.
    pub fn change(
        &self,
        change: &ConfigChange,
        sled: impl Fn(&str) -> Option<usize>,
        generation: u64,
        sled_address: impl Fn(usize) -> Ipv6Addr,
    ) -> Result<(ZoneSet, SystemNetworkingConfig), String> {
        let sled = match change {
            ConfigChange::AddZone { sled: name, .. }
            | ConfigChange::MoveZone { sled: name, .. } => {
                Some(sled(name).ok_or_else(|| format!("refused: no sled {name} in the rack"))?)
            }
            ConfigChange::RemoveZone { .. } => None,
        };
        let next = self
            .apply(change, sled)
            .map_err(|e| format!("refused: {e}"))?;
        let config = next.config(generation + 1, sled_address);
        if let Err(e) = config.validate() {
            return Err(format!(
                "refused: invalid system networking config ({e}); zones unchanged, \
                 the bootstore keeps generation {generation}"
            ));
        }
        Ok((next, config))
    }

    /// The config the bootstore would carry for this set.
    pub fn config(
        &self,
        generation: u64,
        sled_address: impl Fn(usize) -> Ipv6Addr,
    ) -> SystemNetworkingConfig {
        SystemNetworkingConfig {
            generation,
            service_nat: self
                .zones
                .iter()
                .map(|z| ServiceZoneNat {
                    zone: z.id.to_string(),
                    kind: service_kind(z.id.kind),
                    entry: zone_nat_entry(&z.spec, sled_address(z.spec.sled)),
                })
                .collect(),
        }
    }

    /// The zone, if any, whose external address and ports cover `(ip, port)`.
    pub fn zone_for(&self, ip: Ipv4Addr, port: u16) -> Option<&LiveZone> {
        self.zones.iter().find(|z| {
            z.spec.external_ip == ip && (z.spec.first_port..=z.spec.last_port).contains(&port)
        })
    }
}

/// The reconciler crate's name for a zone kind.
pub fn service_kind(kind: ZoneKind) -> ServiceZoneKind {
    match kind {
        ZoneKind::BoundaryNtp => ServiceZoneKind::BoundaryNtp,
        ZoneKind::Nexus => ServiceZoneKind::Nexus,
        ZoneKind::ExternalDns => ServiceZoneKind::ExternalDns,
    }
}

/// A zone's desired NAT entry: its external address and ports, pointing at
/// the sled at `sled_address`.
pub fn zone_nat_entry(zone: &ZoneSpec, sled_address: Ipv6Addr) -> NatEntry {
    NatEntry {
        external_ip: zone.external_ip,
        first_port: zone.first_port,
        last_port: zone.last_port,
        target: racksim_reconciler::dpd::NatTarget {
            internal_ip: sled_address,
            inner_mac: zone.mac,
            vni: SERVICES_VNI,
        },
    }
}

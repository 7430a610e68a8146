//! The simulated world's shared state: what the fakes hold, what the driver
//! changes, what the checks read, and the trace.
//!
//! Every simulated host runs on turmoil's single thread, one after another,
//! so a plain mutex is never contended; it only lets the state be shared
//! between host software, which turmoil may restart, and the driver. The lock
//! is never held across an `.await`.
//!
//! The rack's shape is fixed at the start ([`RunParams::rack`]), but a run
//! can change it: a replaced scrimlet brings a new sled and moves its switch
//! zone to a new address, and a config change adds, moves or removes service
//! zones ([`ZoneSet`]; `RackSpec::zones` is only the initial set). What can
//! change lives in [`State`] and in the world's watch channels.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    net::{Ipv4Addr, Ipv6Addr},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use racksim_reconciler::{
    discovery::SwitchSlot,
    dpd::MacAddr,
    instances::StartImpl,
    nat::NatEntry,
    scrimlet_local::{ServiceZoneKind, ServiceZoneNat, SystemNetworkingConfig},
    task::ScrimletStatus,
    SERVICES_VNI,
};
use tokio::sync::watch;

use crate::{
    era::ControlPlaneEra,
    fakes::dpd::DpdState,
    plan::{ConfigChange, Strategy, ZoneRef},
    rack::{RackSpec, SledSpec, ZoneKind, ZoneSpec, UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME},
    trace::{Kind, TraceLine},
};

/// Everything fixed for one run.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub rack: Arc<RackSpec>,
    pub strategy: Strategy,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Which control-plane tasks run (the hosts read this, never the
    /// strategy, to decide).
    pub era: ControlPlaneEra,
    /// The instances the scenario declares (their records exist from the start).
    pub instances: Vec<InstanceSpec>,
    pub seed: u64,
    /// The switch through which the outside world's NTP replies return.
    pub ntp_return_switch: SwitchSlot,
    /// A deliberate failure of the testbed (tests only).
    pub sabotage: Option<crate::testbed::Sabotage>,
    /// The widest window of one NAT statement of the database: each
    /// statement's is drawn from the seed, uniformly in `0..=nat_window`
    /// ([`World::nat_window`]). Zero (the default): every statement is
    /// visible at once.
    pub nat_window: Duration,
}

/// A fault injected into one dpd for a window of simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DpdFault {
    /// Every request is answered with a 500.
    Errors { until: Duration },
    /// Requests are held until the window ends, then answered with a 503:
    /// clients see their timeouts.
    Hang { until: Duration },
}

impl DpdFault {
    pub fn until(self) -> Duration {
        match self {
            DpdFault::Errors { until } | DpdFault::Hang { until } => until,
        }
    }
}

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

/// An instance a scenario declares; addresses follow from its index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSpec {
    pub name: String,
}

/// The control plane's database and the instance API's requests are
/// Nexus's (`racksim-nexus`), which the world holds so that they outlive
/// every Nexus incarnation.
pub use racksim_nexus::{instance_record, Db, InstanceRequest};

/// One sled-agent's volatile state (lost when the sled restarts): the fake
/// sled-agent's state machine.
pub use racksim_fakes::sled_agent::SledAgentState;

/// Mutable state of the world, grouped by who owns it: the control plane,
/// the switches, the sleds and internal DNS each own their part (the fake
/// services' state machines — dpd, sled-agent — come from `racksim-fakes`);
/// the rest is the run's bookkeeping.
#[derive(Debug)]
pub struct State {
    pub control_plane: ControlPlaneState,
    pub switches: SwitchesState,
    pub sleds: SledsState,
    pub dns: DnsState,
    /// The partitions the driver has made (turmoil enforces them; the
    /// checks read them).
    pub net: NetState,
    /// Names of every address ever in the rack, for traces.
    pub names: BTreeMap<Ipv6Addr, String>,
    /// Times each host's software has started (derives per-boot RNG seeds).
    pub boots: BTreeMap<String, u64>,
    /// Bumped whenever something the checks read changes.
    pub version: u64,
    pub trace: Vec<TraceLine>,
    /// The first failure of the testbed itself, if any: it ends the run.
    pub testbed_error: Option<crate::testbed::TestbedFailure>,
}

/// What the control plane owns: its database (which outlives Nexus), the
/// requests waiting for its API, which Nexus zones are up, and the facts it
/// reports about instance operations for the checks.
#[derive(Debug, Default)]
pub struct ControlPlaneState {
    /// The control plane's database.
    pub db: Db,
    /// Instance API requests waiting for Nexus. Simplified: one queue for
    /// the rack, served by whichever Nexus takes a request first (the
    /// seed orders them), as a load balancer in front of the Nexus zones
    /// would; upstream's external API has one per Nexus.
    pub requests: std::collections::VecDeque<InstanceRequest>,
    /// Sleds whose Nexus is up and running its background tasks (the
    /// control plane is up while any is).
    pub nexus_up: BTreeSet<usize>,
    /// When each instance's record last became Running (for invariants
    /// that apply once a running instance has had time to converge).
    pub running_since: BTreeMap<u32, Duration>,
    /// Instances whose delete operation has completed (returned success),
    /// and when: from then on nothing may remain of them.
    pub deletes_completed: BTreeMap<u32, Duration>,
    /// When a Nexus last came up.
    pub last_up: Duration,
    /// Draws the NAT statements' windows (seeded on first use from the
    /// run's seed): the database's, whichever Nexus runs the statement.
    pub nat_rng: Option<rand::rngs::SmallRng>,
}

/// Which hosts cannot reach which, as the driver's partitions left them:
/// directed pairs of host names (`(a, b)`: what `a` sends to `b` is lost),
/// and when a partition was last healed. Read by the checks, so that an
/// invariant about what crosses the network does not demand it across a
/// cut.
#[derive(Clone, Debug, Default)]
pub struct NetState {
    pub cuts: BTreeSet<(String, String)>,
    pub last_heal: Duration,
}

impl NetState {
    /// Whether `a` and `b` can exchange requests and replies (both
    /// directions are needed for one).
    pub fn connected(&self, a: &str, b: &str) -> bool {
        !self.cuts.contains(&(a.to_string(), b.to_string()))
            && !self.cuts.contains(&(b.to_string(), a.to_string()))
    }
}

/// What the switches own: each running dpd's state machine, the faults
/// injected into them, their data path's drop state, and where each switch
/// zone is.
#[derive(Debug, Default)]
pub struct SwitchesState {
    /// The NAT table of each running switch zone; absent while it is down.
    pub dpd: BTreeMap<SwitchSlot, DpdState>,
    /// Faults injected into dpds.
    pub faults: BTreeMap<SwitchSlot, DpdFault>,
    /// Per switch: whether it is currently dropping inbound traffic (the
    /// trace records changes, not every packet).
    pub dropping: BTreeMap<SwitchSlot, bool>,
    /// Current underlay address of each switch zone (it moves when its
    /// scrimlet is replaced).
    pub addresses: BTreeMap<SwitchSlot, Ipv6Addr>,
    /// What wakes each running dpd's instance NAT RPW (a trigger, or a
    /// restart of dpd: a dpd pulls as soon as it starts).
    pub nat_rpw: BTreeMap<SwitchSlot, Arc<crate::fakes::dpd::NatRpwTimer>>,
}

/// What the sleds own: which exist and run, each sled-agent's state
/// machine, scrimlet status, boundary NTP sync and zone start times.
#[derive(Debug, Default)]
pub struct SledsState {
    /// Every sled: the rack's, then replacements, by index.
    pub specs: Vec<SledSpec>,
    /// Sleds whose software is running.
    pub up: BTreeSet<usize>,
    /// Sleds gone for good (replaced scrimlets).
    pub retired: BTreeSet<usize>,
    /// Volatile state of each running sled-agent, by sled index.
    pub agents: BTreeMap<usize, SledAgentState>,
    /// Whether each scrimlet currently has its sidecar (by sled index).
    pub scrimlet_status: BTreeMap<usize, watch::Sender<ScrimletStatus>>,
    /// Sleds whose boundary NTP zone has had a reply from upstream (the
    /// rack's time is synchronised once any has).
    pub ntp_synced: BTreeSet<usize>,
    /// How long each zone start took: `(sled, zone, duration)`.
    pub zone_starts: Vec<(String, ZoneKind, Duration)>,
    /// The zones each running sled-agent has started and not stopped
    /// (what its inventory reports as running; a zone blocked in the legacy
    /// zone-start path is not running yet).
    pub running_zones: BTreeMap<usize, BTreeSet<ZoneId>>,
}

/// What internal DNS owns: the switch zones it does not advertise.
#[derive(Debug, Default)]
pub struct DnsState {
    pub hidden: BTreeSet<SwitchSlot>,
}

/// Handle to the world, cloned into every host.
#[derive(Clone, Debug)]
pub struct World {
    pub params: Arc<RunParams>,
    state: Arc<Mutex<State>>,
    /// Whether the operator wants the control plane running.
    nexus: Arc<watch::Sender<NexusCommand>>,
    /// The bootstore's copy of the rack-wide networking config.
    bootstore: Arc<watch::Sender<Option<SystemNetworkingConfig>>>,
    /// The rack's service zones now (sleds start and stop theirs as it
    /// changes; the checks derive the desired NAT state from it).
    zones: Arc<watch::Sender<ZoneSet>>,
    /// Rung when an instance request is queued.
    doorbell: Arc<watch::Sender<u64>>,
}

impl State {
    /// Some boundary NTP zone has synchronised with upstream.
    pub fn time_synced(&self) -> bool {
        !self.sleds.ntp_synced.is_empty()
    }

    /// Some Nexus is up.
    pub fn control_plane_up(&self) -> bool {
        !self.control_plane.nexus_up.is_empty()
    }
}

impl World {
    pub fn new(params: RunParams) -> Self {
        let rack = &params.rack;
        let mut names: BTreeMap<Ipv6Addr, String> = rack
            .sleds
            .iter()
            .map(|s| (s.address, s.name.clone()))
            .collect();
        names.extend(rack.switches.iter().map(|s| (s.zone_address, s.name())));
        names.insert(UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME.to_string());
        let scrimlet_status = rack
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| s.scrimlet_of.is_some())
            .map(|(i, _)| (i, watch::Sender::new(ScrimletStatus::Scrimlet)))
            .collect();
        let mut db = Db::default();
        for (i, spec) in params.instances.iter().enumerate() {
            let id = i as u32 + 1;
            db.declare(id, &spec.name);
        }
        let state = State {
            control_plane: ControlPlaneState {
                db,
                ..Default::default()
            },
            switches: SwitchesState {
                // Each switch's ASIC table exists before its zone boots, so
                // a plan step at 0s can leave an entry from before the run.
                dpd: rack
                    .switches
                    .iter()
                    .map(|s| (s.slot, DpdState::new(s.slot.index())))
                    .collect(),
                addresses: rack
                    .switches
                    .iter()
                    .map(|s| (s.slot, s.zone_address))
                    .collect(),
                ..Default::default()
            },
            sleds: SledsState {
                specs: rack.sleds.clone(),
                scrimlet_status,
                ..Default::default()
            },
            dns: DnsState::default(),
            net: NetState::default(),
            names,
            boots: BTreeMap::new(),
            version: 0,
            trace: Vec::new(),
            testbed_error: None,
        };
        let zones = ZoneSet::from_rack(rack);
        let bootstore = zones.config(1, |i| rack.sleds[i].address);
        World {
            zones: Arc::new(watch::Sender::new(zones)),
            state: Arc::new(Mutex::new(state)),
            nexus: Arc::new(watch::Sender::new(NexusCommand::Run)),
            doorbell: Arc::new(watch::Sender::new(0)),
            bootstore: Arc::new(watch::Sender::new(Some(bootstore))),
            params: Arc::new(params),
        }
    }

    pub fn rack(&self) -> &RackSpec {
        &self.params.rack
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock already fails the run; the state
        // is still worth reading for the report.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record an event from inside a simulated host (stamped with the
    /// host's simulated time).
    pub fn trace(&self, host: &str, kind: Kind, text: impl Into<String>) {
        self.record(self.line(host, kind, text));
    }

    /// A trace line stamped now, to add fields to before [`World::record`].
    pub fn line(&self, host: &str, kind: Kind, text: impl Into<String>) -> TraceLine {
        let at = turmoil::sim_elapsed().unwrap_or_default();
        TraceLine::new(at, host, kind, text)
    }

    /// Record an event at an explicit time (the driver's events).
    pub fn trace_at(&self, at: Duration, host: &str, kind: Kind, text: impl Into<String>) {
        self.record(TraceLine::new(at, host, kind, text));
    }

    /// Record a trace line.
    pub fn record(&self, line: TraceLine) {
        self.lock().trace.push(line);
    }

    /// The testbed itself failed on `host` (a fake's server stopped, a
    /// socket could not be bound): a trace line, and the run ends with a
    /// testbed error (the first one reported wins).
    pub fn testbed_error(&self, host: &str, error: impl Into<String>) {
        let error = error.into();
        let line = self.line(host, Kind::TestbedError, format!("TESTBED ERROR: {error}"));
        let at = line.at;
        self.record(line);
        self.lock()
            .testbed_error
            .get_or_insert(crate::testbed::TestbedFailure {
                at,
                host: host.to_string(),
                error,
            });
    }

    /// Count a boot of `host`; returns the boot number (1 for the first).
    pub fn boot(&self, host: &str) -> u64 {
        let mut st = self.lock();
        let n = st.boots.entry(host.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    /// The window of one NAT statement, between its `nextval` and its
    /// write intent (`racksim_nexus::store::nat_statements`): uniform in
    /// `0..=params.nat_window`, to the microsecond, from the database's
    /// seeded generator. No draw at all when the parameter is zero, so a
    /// run without a window is the run it always was.
    pub fn nat_window(&self) -> Duration {
        use rand::{Rng, SeedableRng};
        let max = self.params.nat_window;
        if max.is_zero() {
            return Duration::ZERO;
        }
        let seed = self.derive_seed("nat-sequence", 0);
        let mut st = self.lock();
        let rng = st
            .control_plane
            .nat_rng
            .get_or_insert_with(|| rand::rngs::SmallRng::seed_from_u64(seed));
        Duration::from_micros(rng.random_range(0..=max.as_micros() as u64))
    }

    /// A seed for one boot of one host's software, derived from the run seed
    /// so every random choice in the run replays from it.
    pub fn derive_seed(&self, host: &str, boot: u64) -> u64 {
        // FNV-1a over the name: stable across processes and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in host.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.params.seed ^ h ^ boot.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    pub fn take_trace(&self) -> Vec<TraceLine> {
        std::mem::take(&mut self.lock().trace)
    }

    /// A sled by index (the rack's or a replacement).
    pub fn sled(&self, index: usize) -> SledSpec {
        self.lock().sleds.specs[index].clone()
    }

    /// Where a switch zone is now.
    pub fn switch_zone_address(&self, slot: SwitchSlot) -> Option<Ipv6Addr> {
        self.lock().switches.addresses.get(&slot).copied()
    }

    /// The name of an underlay address, for traces.
    pub fn name_of(&self, addr: Ipv6Addr) -> String {
        self.lock()
            .names
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| addr.to_string())
    }

    /// Replace every known underlay address in `text` by its name, so
    /// traces read `switch1:12224` rather than `[fd00:1122:3344:102::2]:12224`.
    pub fn name_addrs(&self, text: &str) -> String {
        let names = self.lock().names.clone();
        let mut out = text.to_string();
        for (addr, name) in names.iter().rev() {
            out = out
                .replace(&format!("[{addr}]"), name)
                .replace(&addr.to_string(), name);
        }
        out
    }

    /// Scrimlet status of a sled, if it is a scrimlet.
    pub fn scrimlet_status(&self, sled: usize) -> Option<watch::Receiver<ScrimletStatus>> {
        self.lock()
            .sleds
            .scrimlet_status
            .get(&sled)
            .map(|tx| tx.subscribe())
    }

    /// What the operator (the plan) wants of the control plane.
    pub fn nexus_command(&self) -> watch::Receiver<NexusCommand> {
        self.nexus.subscribe()
    }

    /// Simplified: the operator's command is rack-wide — a stop, crash or
    /// start acts on every Nexus zone at once, not on one.
    pub fn command_nexus(&self, command: NexusCommand) {
        self.nexus.send_replace(command);
        self.lock().version += 1;
    }

    /// The operator wants the control plane running.
    pub fn nexus_is_enabled(&self) -> bool {
        *self.nexus.borrow() == NexusCommand::Run
    }

    /// Queue an instance API request for Nexus.
    pub fn request(&self, req: InstanceRequest) {
        self.lock().control_plane.requests.push_back(req);
        self.doorbell.send_modify(|n| *n += 1);
    }

    pub fn doorbell(&self) -> watch::Receiver<u64> {
        self.doorbell.subscribe()
    }

    /// An instance's name by id, for traces.
    pub fn instance_name(&self, id: u32) -> String {
        self.params
            .instances
            .get(id as usize - 1)
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("instance-{id}"))
    }

    pub fn bootstore(&self) -> watch::Receiver<Option<SystemNetworkingConfig>> {
        self.bootstore.subscribe()
    }

    /// The rack's service zones now.
    pub fn zones(&self) -> ZoneSet {
        self.zones.borrow().clone()
    }

    /// `f` of the rack's service zones now, without copying them.
    pub fn with_zones<T>(&self, f: impl FnOnce(&ZoneSet) -> T) -> T {
        f(&self.zones.borrow())
    }

    /// Follow the rack's service zones.
    pub fn subscribe_zones(&self) -> watch::Receiver<ZoneSet> {
        self.zones.subscribe()
    }

    /// Every current zone's desired NAT entry, sorted: what the checks
    /// judge and what Nexus's database holds.
    pub fn desired_nat(&self) -> Vec<NatEntry> {
        let zones = self.zones();
        let sleds = self.lock().sleds.specs.clone();
        zones.config(0, |i| sleds[i].address).nat_entries()
    }

    /// What an inventory collection by the Nexus on host `from` finds: each
    /// in-service sled whose sled-agent is up and can reach `from`, with
    /// the service zones it reports running, each with the NAT entry its
    /// omicron zone config implies (external IP and ports, the sled's
    /// underlay address, the zone's NIC).
    ///
    /// Simplified: upstream's collector asks each sled-agent over its API
    /// (`GET /inventory`); the simulation reads the same facts from the
    /// world, for exactly the sleds such a request would reach.
    pub fn inventory(&self, from: &str) -> Vec<racksim_nexus::SledInventory> {
        let zones = self.zones();
        let st = self.lock();
        (0..st.sleds.specs.len())
            .filter(|i| !st.sleds.retired.contains(i))
            .map(|i| {
                let spec = &st.sleds.specs[i];
                let answered = st.sleds.up.contains(&i) && st.net.connected(from, &spec.name);
                let zones = answered.then(|| {
                    let running = st.sleds.running_zones.get(&i);
                    zones
                        .on_sled(i)
                        .into_iter()
                        .filter(|z| running.is_some_and(|r| r.contains(&z.id)))
                        .map(|z| ServiceZoneNat {
                            zone: z.id.to_string(),
                            kind: service_kind(z.id.kind),
                            entry: zone_nat_entry(&z.spec, spec.address),
                        })
                        .collect()
                });
                racksim_nexus::SledInventory {
                    sled: spec.name.clone(),
                    zones,
                }
            })
            .collect()
    }

    /// The desired NAT entry of one zone, pointing at its current sled.
    pub fn zone_nat_entry(&self, zone: &ZoneSpec) -> NatEntry {
        zone_nat_entry(zone, self.sled(zone.sled).address)
    }

    /// Apply a config change as Nexus's blueprint execution would: the
    /// new zone set, and the new config written to the bootstore under the
    /// next generation. An invalid config is refused as a whole — zones
    /// and bootstore stay as they were (omicron's validated type cannot
    /// even be built from it, so it never reaches the bootstore). Returns
    /// what happened, for the trace.
    pub fn change_config(&self, change: &ConfigChange) -> Result<String, String> {
        let generation = self.bootstore.borrow().as_ref().map_or(0, |c| c.generation);
        let sleds = self.lock().sleds.specs.clone();
        let current = self.zones();
        let (next, config) = {
            let st = self.lock();
            current.change(
                change,
                |name| {
                    (0..st.sleds.specs.len())
                        .find(|&i| st.sleds.specs[i].name == name && !st.sleds.retired.contains(&i))
                },
                generation,
                |i| sleds[i].address,
            )?
        };
        let what = match change {
            ConfigChange::AddZone { .. } => {
                let added = next
                    .zones()
                    .iter()
                    .find(|z| current.get(z.id).is_none())
                    .expect("an add adds a zone");
                format!(
                    "zone {} added on {} ({})",
                    added.id,
                    sleds[added.spec.sled].name,
                    self.name_addrs(
                        &zone_nat_entry(&added.spec, sleds[added.spec.sled].address).to_string()
                    )
                )
            }
            ConfigChange::MoveZone { zone, .. } | ConfigChange::RemoveZone { zone } => {
                let id = current.resolve(zone).expect("applied");
                let from = &sleds[current.get(id).expect("resolved").spec.sled].name;
                match next.get(id) {
                    Some(z) => {
                        format!("zone {id} moves from {from} to {}", sleds[z.spec.sled].name)
                    }
                    None => format!("zone {id} removed from {from}"),
                }
            }
        };
        self.zones.send_replace(next);
        self.bootstore.send_replace(Some(config));
        self.lock().version += 1;
        Ok(format!(
            "{what}; the bootstore now holds generation {}",
            generation + 1
        ))
    }

    /// A host's software stopped (crash, power loss): what lived in it is gone.
    pub fn host_down(&self, host: &HostKind) {
        let mut st = self.lock();
        match host {
            HostKind::SwitchZone(slot) => {
                st.switches.dpd.remove(slot);
                st.switches.dropping.remove(slot);
                st.switches.nat_rpw.remove(slot);
            }
            HostKind::Sled(index) => {
                st.sleds.up.remove(index);
                st.sleds.agents.remove(index);
                // Its zones go with it.
                st.sleds.running_zones.remove(index);
                st.sleds.ntp_synced.remove(index);
                st.control_plane.nexus_up.remove(index);
            }
            HostKind::UpstreamNtp => {}
        }
        st.version += 1;
    }
}

/// What the operator wants of the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NexusCommand {
    /// Run (start once time has synchronised).
    Run,
    /// An orderly stop: take no new API requests, let the operations and
    /// background-task activations in flight finish, then stop.
    Stop,
    /// A crash: everything in flight dies where it is (the database and its
    /// saga log survive).
    Crash,
}

/// What a simulated host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostKind {
    SwitchZone(SwitchSlot),
    Sled(usize),
    UpstreamNtp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::sled_address;

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
            Err(racksim_reconciler::scrimlet_local::InvalidSystemNetworkingConfig::MissingZoneKinds { .. })
        ));
        let clash = set
            .apply(
                &add(ZoneKind::Nexus, Some(Ipv4Addr::new(198, 51, 100, 3))),
                Some(2),
            )
            .unwrap();
        assert!(matches!(
            clash.config(2, sled_address).validate(),
            Err(racksim_reconciler::scrimlet_local::InvalidSystemNetworkingConfig::OverlappingEntries { .. })
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
}

//! A run's plan: the timed steps (faults and
//! actions) the driver applies to the world.
//!
//! Steps may carry a jitter window (`at = 5m..8m`); [`Plan::resolve`] draws
//! the concrete times from the run's seed *before* the simulation starts, so
//! the drawn values can be printed up front and a run replays from its seed.

use std::{fmt, str::FromStr, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;
use rand::{rngs::SmallRng, Rng, SeedableRng};

use crate::{rack::ZoneKind, trace::fmt_duration};

/// When a step happens: a fixed time, or a window drawn from the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Fixed(Duration),
    /// Inclusive window; the time is drawn uniformly at millisecond grain.
    Window(Duration, Duration),
}

impl At {
    pub fn latest(self) -> Duration {
        match self {
            At::Fixed(d) | At::Window(_, d) => d,
        }
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Fixed(d) => f.write_str(&fmt_duration(*d)),
            At::Window(a, b) => write!(f, "{}..{}", fmt_duration(*a), fmt_duration(*b)),
        }
    }
}

/// What a step does to the world. Hosts are named as in traces: `sled0`,
/// `switch1` (the switch zone), `upstream-ntp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Internal DNS stops advertising this switch zone (the madrid case).
    HideSwitch(SwitchSlot),
    /// Internal DNS advertises the switch zone again.
    RevealSwitch(SwitchSlot),
    /// A host's software stops (everything in it is lost).
    Crash(String),
    /// A host's software starts again (from nothing, as after a reboot).
    Restart(String),
    /// dpd restarts inside its switch zone: its NAT table is empty again.
    DpdRestart(SwitchSlot),
    /// Messages between the two groups are dropped (only from `a` to `b`
    /// when `oneway`).
    Partition {
        a: Vec<String>,
        b: Vec<String>,
        oneway: bool,
    },
    /// Undo a partition.
    Heal {
        a: Vec<String>,
        b: Vec<String>,
        oneway: bool,
    },
    /// Fixed message latency on the links between the two groups.
    Latency {
        a: Vec<String>,
        b: Vec<String>,
        latency: Duration,
    },
    /// dpd answers every request with a 500 for a while.
    DpdErrors {
        switch: SwitchSlot,
        window: Duration,
    },
    /// dpd holds every request for a while (clients time out).
    DpdHang {
        switch: SwitchSlot,
        window: Duration,
    },
    /// The switch zone's management gateway answers every request with a
    /// 500 for a while (dpd is fine).
    MgsErrors {
        switch: SwitchSlot,
        window: Duration,
    },
    /// The switch zone's management gateway holds every request for a
    /// while (clients time out; dpd is fine).
    MgsHang {
        switch: SwitchSlot,
        window: Duration,
    },
    /// The control plane's database stalls for a while: a CockroachDB node
    /// dies, and the ranges whose lease it held are unavailable until the
    /// lease moves (about 9 s: the node's liveness record expires). Every
    /// statement that reads or writes a table waits until the stall ends;
    /// the NAT version sequence's `nextval` does not (sequence increments
    /// are non-transactional), so a NAT statement that draws its version
    /// meanwhile holds it invisible until the end.
    DbStall { window: Duration },
    /// The control plane's database answers every statement with a
    /// transient error for a while (CockroachDB's retryable `40001`
    /// "restart transaction"): nothing is read or written.
    DbErrors { window: Duration },
    /// The sidecar loses power: its switch zone goes away and its scrimlet
    /// is no longer a scrimlet.
    SidecarPowerOff(SwitchSlot),
    /// The sidecar is back: the switch zone starts (empty table) and the
    /// sled is a scrimlet again.
    SidecarPowerOn(SwitchSlot),
    /// The switch's scrimlet reboots: the sled (its sled-agent, its zones,
    /// its reconcilers) and the switch zone it runs go down together, as a
    /// real reboot takes both; everything in them is lost.
    ScrimletReboot(SwitchSlot),
    /// The rebooted scrimlet is back: its sled-agent starts, and with it
    /// the switch zone (an empty NAT table, dpd's NAT RPW from generation
    /// 0), as when the sled boots.
    ScrimletBack(SwitchSlot),
    /// The switch's scrimlet dies for good; a new sled with a new address
    /// takes its place, and its switch zone registers in internal DNS.
    ReplaceScrimlet(SwitchSlot),
    /// An operator stops the control plane.
    ControlPlaneDown,
    /// An operator starts the control plane again.
    ControlPlaneUp,
    /// Nexus crashes: its in-flight operations die mid-step; the database
    /// (and its saga log) survives. It stays down until `ControlPlaneUp`.
    ControlPlaneCrash,
    /// The whole rack loses power (the outside world keeps running).
    PowerOff,
    /// The rack boots from cold: every host starts from nothing.
    ColdBoot,
    /// Plant an entry for `zone` on `switch` that has the right internal IP
    /// but a wrong MAC: stale state that only a full comparison notices.
    StaleEntry {
        switch: SwitchSlot,
        zone: crate::rack::ZoneKind,
    },
    /// `zone`'s entry vanishes from `switch`'s table behind dpd's back (an
    /// operator's `swadm nat del`, a bug): the table changes, no database
    /// version does, so only an owner that reads the table notices.
    LostEntry {
        switch: SwitchSlot,
        zone: crate::rack::ZoneKind,
    },
    /// Instance API: create the instance and start it on a sled.
    InstanceCreate { instance: String, sled: String },
    /// Instance API: start the (stopped) instance on a sled.
    InstanceStart { instance: String, sled: String },
    /// Instance API: stop the instance.
    InstanceStop { instance: String },
    /// Instance API: delete the instance.
    InstanceDelete { instance: String },
    /// The rack's service zones change and the new system networking
    /// config is written to the bootstore (what Nexus's blueprint execution
    /// does). Refused as a whole if the new config is invalid.
    ConfigChange(ConfigChange),
}

/// Every kind of zone with external connectivity.
pub const ZONE_KINDS: [ZoneKind; 3] = [
    ZoneKind::BoundaryNtp,
    ZoneKind::Nexus,
    ZoneKind::ExternalDns,
];

/// A zone as a plan refers to it: its kind and, when the rack has (or had)
/// several of that kind, its ordinal (`nexus`, `nexus.1`). Ordinals are
/// given in the order zones were declared or added, from 0, and never
/// reused, so a reference keeps meaning the same zone after others are
/// removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneRef {
    pub kind: ZoneKind,
    pub ordinal: Option<u32>,
}

impl FromStr for ZoneRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, ordinal) = match s.split_once('.') {
            None => (s, None),
            Some((k, n)) => (
                k,
                Some(
                    n.parse::<u32>()
                        .map_err(|_| format!("{n:?} is not a zone ordinal (0, 1, ...)"))?,
                ),
            ),
        };
        let kind = ZoneKind::from_name(kind).ok_or_else(|| {
            format!("unknown zone kind {kind:?} (expected boundary-ntp, nexus or external-dns)")
        })?;
        Ok(ZoneRef { kind, ordinal })
    }
}

impl fmt::Display for ZoneRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ordinal {
            None => write!(f, "{}", self.kind),
            Some(n) => write!(f, "{}.{n}", self.kind),
        }
    }
}

/// A change of the rack's service zones (a move is a stop on one sled and
/// a start on the other, keeping the zone's external address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    /// A new zone of `kind` on `sled`, at `external_ip` if given (with its
    /// kind's usual port range), else at an address nothing uses.
    AddZone {
        kind: ZoneKind,
        sled: String,
        external_ip: Option<std::net::Ipv4Addr>,
    },
    MoveZone {
        zone: ZoneRef,
        sled: String,
    },
    RemoveZone {
        zone: ZoneRef,
    },
}

impl ConfigChange {
    /// The change's name as scenario files write it.
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigChange::AddZone { .. } => "add-zone",
            ConfigChange::MoveZone { .. } => "move-zone",
            ConfigChange::RemoveZone { .. } => "remove-zone",
        }
    }
}

impl fmt::Display for ConfigChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigChange::AddZone {
                kind,
                sled,
                external_ip: None,
            } => write!(f, "add zone {kind} on {sled}"),
            ConfigChange::AddZone {
                kind,
                sled,
                external_ip: Some(ip),
            } => write!(f, "add zone {kind} on {sled} at {ip}"),
            ConfigChange::MoveZone { zone, sled } => write!(f, "move zone {zone} to {sled}"),
            ConfigChange::RemoveZone { zone } => write!(f, "remove zone {zone}"),
        }
    }
}

impl Action {
    /// The window of a fault that ends by itself (a service answering
    /// errors or hanging), if this is one.
    pub fn window(&self) -> Option<Duration> {
        match self {
            Action::DpdErrors { window, .. }
            | Action::DpdHang { window, .. }
            | Action::MgsErrors { window, .. }
            | Action::MgsHang { window, .. }
            | Action::DbStall { window }
            | Action::DbErrors { window } => Some(*window),
            _ => None,
        }
    }

    /// [`Action::window`], to change.
    pub fn window_mut(&mut self) -> Option<&mut Duration> {
        match self {
            Action::DpdErrors { window, .. }
            | Action::DpdHang { window, .. }
            | Action::MgsErrors { window, .. }
            | Action::MgsHang { window, .. }
            | Action::DbStall { window }
            | Action::DbErrors { window } => Some(window),
            _ => None,
        }
    }

    /// The action's name as scenario files write it (`hide-switch`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::HideSwitch(_) => "hide-switch",
            Action::RevealSwitch(_) => "reveal-switch",
            Action::Crash(_) => "crash",
            Action::Restart(_) => "restart",
            Action::DpdRestart(_) => "dpd-restart",
            Action::Partition { .. } => "partition",
            Action::Heal { .. } => "heal",
            Action::Latency { .. } => "latency",
            Action::DpdErrors { .. } => "dpd-errors",
            Action::DpdHang { .. } => "dpd-hang",
            Action::MgsErrors { .. } => "mgs-errors",
            Action::MgsHang { .. } => "mgs-hang",
            Action::DbStall { .. } => "db-stall",
            Action::DbErrors { .. } => "db-errors",
            Action::SidecarPowerOff(_) => "sidecar-power-off",
            Action::SidecarPowerOn(_) => "sidecar-power-on",
            Action::ScrimletReboot(_) => "reboot-scrimlet",
            Action::ScrimletBack(_) => "scrimlet-back",
            Action::ReplaceScrimlet(_) => "replace-scrimlet",
            Action::ControlPlaneDown => "control-plane-down",
            Action::ControlPlaneUp => "control-plane-up",
            Action::ControlPlaneCrash => "control-plane-crash",
            Action::PowerOff => "power-off",
            Action::ColdBoot => "cold-boot",
            Action::StaleEntry { .. } => "stale-entry",
            Action::LostEntry { .. } => "lost-entry",
            Action::InstanceCreate { .. } => "instance-create",
            Action::InstanceStart { .. } => "instance-start",
            Action::InstanceStop { .. } => "instance-stop",
            Action::InstanceDelete { .. } => "instance-delete",
            Action::ConfigChange(_) => "config-change",
        }
    }
}

fn group(hosts: &[String]) -> String {
    if hosts.len() == 1 {
        hosts[0].clone()
    } else {
        format!("[{}]", hosts.join(", "))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::HideSwitch(s) => write!(f, "discovery hides {s}"),
            Action::RevealSwitch(s) => write!(f, "discovery reveals {s}"),
            Action::Crash(h) => write!(f, "crash {h}"),
            Action::Restart(h) => write!(f, "restart {h}"),
            Action::DpdRestart(s) => write!(f, "restart dpd on {s} (NAT table lost)"),
            Action::Partition {
                a,
                b,
                oneway: false,
            } => write!(f, "partition {} <-> {}", group(a), group(b)),
            Action::Partition { a, b, oneway: true } => {
                write!(f, "partition {} -> {} (one way)", group(a), group(b))
            }
            Action::Heal {
                a,
                b,
                oneway: false,
            } => write!(f, "heal {} <-> {}", group(a), group(b)),
            Action::Heal { a, b, oneway: true } => {
                write!(f, "heal {} -> {} (one way)", group(a), group(b))
            }
            Action::Latency { a, b, latency } => {
                write!(
                    f,
                    "latency {} <-> {} set to {}",
                    group(a),
                    group(b),
                    fmt_duration(*latency)
                )
            }
            Action::DpdErrors { switch, window } => {
                write!(
                    f,
                    "dpd on {switch} answers 500s for {}",
                    fmt_duration(*window)
                )
            }
            Action::DpdHang { switch, window } => {
                write!(f, "dpd on {switch} hangs for {}", fmt_duration(*window))
            }
            Action::MgsErrors { switch, window } => {
                write!(
                    f,
                    "MGS on {switch} answers 500s for {}",
                    fmt_duration(*window)
                )
            }
            Action::MgsHang { switch, window } => {
                write!(f, "MGS on {switch} hangs for {}", fmt_duration(*window))
            }
            Action::DbStall { window } => write!(
                f,
                "database stalls for {} (a node's leases move; nextval still answers)",
                fmt_duration(*window)
            ),
            Action::DbErrors { window } => write!(
                f,
                "database answers retryable errors (40001) for {}",
                fmt_duration(*window)
            ),
            Action::SidecarPowerOff(s) => write!(f, "sidecar {s} powered off"),
            Action::SidecarPowerOn(s) => write!(f, "sidecar {s} powered on"),
            Action::ScrimletReboot(s) => {
                write!(
                    f,
                    "{s}'s scrimlet reboots (the sled and its switch zone go down)"
                )
            }
            Action::ScrimletBack(s) => {
                write!(
                    f,
                    "{s}'s scrimlet is back (the sled and its switch zone start)"
                )
            }
            Action::ReplaceScrimlet(s) => write!(f, "scrimlet of {s} replaced"),
            Action::ControlPlaneDown => write!(f, "control plane taken down"),
            Action::ControlPlaneUp => write!(f, "control plane brought up"),
            Action::ControlPlaneCrash => write!(
                f,
                "control plane crashes (in-flight operations die; the database survives)"
            ),
            Action::PowerOff => write!(f, "rack powered off"),
            Action::ColdBoot => write!(f, "rack cold boots"),
            Action::StaleEntry { switch, zone } => {
                write!(
                    f,
                    "plant a stale NAT entry for {zone} on {switch} (wrong MAC)"
                )
            }
            Action::LostEntry { switch, zone } => {
                write!(f, "delete {zone}'s NAT entry on {switch} behind dpd's back")
            }
            Action::InstanceCreate { instance, sled } => {
                write!(f, "API: create instance {instance} on {sled}")
            }
            Action::InstanceStart { instance, sled } => {
                write!(f, "API: start instance {instance} on {sled}")
            }
            Action::InstanceStop { instance } => write!(f, "API: stop instance {instance}"),
            Action::InstanceDelete { instance } => write!(f, "API: delete instance {instance}"),
            Action::ConfigChange(c) => write!(f, "config change: {c}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub at: At,
    pub action: Action,
}

/// A plan as written: steps with possibly-jittered times.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
}

/// A step with its time drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedStep {
    pub at: Duration,
    pub action: Action,
    /// The window it was drawn from, if any (printed with the options).
    pub drawn_from: Option<At>,
}

impl Plan {
    /// An empty plan, to build with [`Plan::at`] and [`Plan::between`]:
    ///
    /// ```
    /// use std::time::Duration;
    /// use racksim_reconciler::discovery::SwitchSlot;
    /// use racksim_sim::{Action, Plan};
    ///
    /// let plan = Plan::new()
    ///     .at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1))
    ///     .between(
    ///         Duration::from_secs(330),
    ///         Duration::from_secs(480),
    ///         Action::RevealSwitch(SwitchSlot::Switch1),
    ///     );
    /// assert_eq!(plan.steps.len(), 2);
    /// ```
    pub fn new() -> Self {
        Plan::default()
    }

    /// Add a step at a fixed time.
    pub fn at(mut self, at: Duration, action: Action) -> Self {
        self.steps.push(Step {
            at: At::Fixed(at),
            action,
        });
        self
    }

    /// Add a step at a time drawn from the seed within `[from, to]`.
    pub fn between(mut self, from: Duration, to: Duration, action: Action) -> Self {
        self.steps.push(Step {
            at: At::Window(from.min(to), from.max(to)),
            action,
        });
        self
    }

    /// Draw every jittered time from `seed`. Steps come back in time order;
    /// steps at the same time keep their written order.
    pub fn resolve(&self, seed: u64) -> Vec<ResolvedStep> {
        // A stream of its own, so adding randomness elsewhere in the run does
        // not shift the drawn plan.
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x706c_616e_5f6a_6974);
        let mut steps: Vec<ResolvedStep> = self
            .steps
            .iter()
            .map(|s| match s.at {
                At::Fixed(d) => ResolvedStep {
                    at: d,
                    action: s.action.clone(),
                    drawn_from: None,
                },
                At::Window(a, b) => {
                    // Drawn to the microsecond: the time model has no quantum.
                    let us = rng.random_range(a.as_micros() as u64..=b.as_micros() as u64);
                    ResolvedStep {
                        at: Duration::from_micros(us),
                        action: s.action.clone(),
                        drawn_from: Some(s.at),
                    }
                }
            })
            .collect();
        steps.sort_by_key(|s| s.at);
        steps
    }
}

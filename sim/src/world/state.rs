//! The world's mutable state, grouped by who owns it.
//!
//! The control plane, the switches, the sleds and internal DNS each own
//! their part; the fake services' state machines in it (dpd's NAT table,
//! each sled-agent's VMMs and V2P mappings) are `racksim-fakes`'s, the
//! control plane's database is `racksim-nexus`'s. Host software changes
//! its part, the driver injects faults into it, and the checks read all of
//! it; every change the checks can see bumps [`State::version`], which is
//! how the driver knows when to judge again.
//!
//! Also here: the few values the world keeps in watch channels rather than
//! in [`State`] ([`NexusCommand`]), and the faults the driver injects
//! ([`ServiceFault`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::{net::Ipv6Addr, sync::Arc, time::Duration};

use racksim_fakes::dpd::{DpdState, NatRpwTimer};
use racksim_fakes::sled_agent::SledAgentState;
use racksim_nexus::{Db, InstanceRequest};
use racksim_reconciler::{discovery::SwitchSlot, legacy::LegacyProgress, task::ScrimletStatus};
use tokio::sync::{mpsc, watch};

use super::zones::ZoneId;
use crate::rack::{SledSpec, ZoneKind};
use crate::{testbed::TestbedFailure, trace::TraceLine};

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
    pub names: AddrNames,
    /// Times each host's software has started (derives per-boot RNG seeds).
    pub boots: BTreeMap<String, u64>,
    /// Bumped whenever something the checks read changes.
    pub version: u64,
    pub trace: Vec<TraceLine>,
    /// The first failure of the testbed itself, if any: it ends the run.
    pub testbed_error: Option<TestbedFailure>,
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
    pub requests: VecDeque<InstanceRequest>,
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
    /// The database's faults: until when it stalls, until when it answers
    /// errors (plan steps `db-stall`, `db-errors`).
    pub db_stall_until: Option<Duration>,
    pub db_errors_until: Option<Duration>,
    /// The database's draws (seeded on first use from the run's seed):
    /// when each statement a stall held reaches the new leaseholder, and
    /// the retry wrapper's backoffs, whichever Nexus runs the statement.
    pub db_rng: Option<rand::rngs::SmallRng>,
}

/// Which hosts cannot reach which, as the driver's partitions left them:
/// directed pairs of host names (`(a, b)`: what `a` sends to `b` is lost),
/// and when a partition was last healed. Read by the checks, so that an
/// invariant about what crosses the network does not demand it across a
/// cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    pub faults: BTreeMap<SwitchSlot, ServiceFault>,
    /// Faults injected into the switch zones' management gateways.
    pub mgs_faults: BTreeMap<SwitchSlot, ServiceFault>,
    /// Per switch: whether it is currently dropping inbound traffic (the
    /// trace records changes, not every packet).
    pub dropping: BTreeMap<SwitchSlot, bool>,
    /// Current underlay address of each switch zone (it moves when its
    /// scrimlet is replaced).
    pub addresses: BTreeMap<SwitchSlot, Ipv6Addr>,
    /// What wakes each running dpd's instance NAT RPW (a trigger, or a
    /// restart of dpd: a dpd pulls as soon as it starts).
    pub nat_rpw: BTreeMap<SwitchSlot, Arc<NatRpwTimer>>,
}

/// What the sleds own: which exist and run, each sled-agent's state
/// machine, scrimlet status, boundary NTP sync and zone start times.
#[derive(Debug, Default)]
pub struct SledsState {
    /// Every sled: the rack's, then replacements, by index.
    ///
    /// Shared: a look at the rack (`check::observe`) keeps the specs of
    /// the moment, and they change only when a sled joins.
    pub specs: Arc<Vec<SledSpec>>,
    /// Sleds whose software is running.
    pub up: BTreeSet<usize>,
    /// Sleds gone for good (replaced scrimlets).
    pub retired: BTreeSet<usize>,
    /// Volatile state of each running sled-agent, by sled index. Shared
    /// with the checks' snapshots (`check::observe`), and copied only when
    /// a sled-agent changes while a snapshot still holds it: a look at a
    /// rack of a hundred instances copied every sled's V2P table.
    pub agents: BTreeMap<usize, std::sync::Arc<SledAgentState>>,
    /// Whether each scrimlet currently has its sidecar (by sled index).
    pub scrimlet_status: BTreeMap<usize, watch::Sender<ScrimletStatus>>,
    /// Each running sled's NTP zone, by sled index: its kind, and whether
    /// its time is synchronised (sled-agent's `GET /timesync` answers
    /// from it).
    pub ntp: BTreeMap<usize, NtpClock>,
    /// Where OPTE hands each boundary NTP zone its replies from upstream
    /// (the switch each came through).
    pub ntp_replies: BTreeMap<usize, mpsc::UnboundedSender<SwitchSlot>>,
    /// How long each zone start took: `(sled, zone, duration)`.
    pub zone_starts: Vec<(String, ZoneKind, Duration)>,
    /// The zones each running sled-agent has started and not stopped
    /// (what its inventory reports as running; a zone blocked in the legacy
    /// zone-start path is not running yet).
    pub running_zones: BTreeMap<usize, BTreeSet<ZoneId>>,
    /// The zone starts blocked in the zone-start NAT path, by sled index
    /// and zone: where each is ([`LegacyProgress`]), so that a verdict can
    /// say why a zone never ran (a start waiting on a retired switch
    /// address is upstream's defect, not a missing reply).
    pub blocked_starts: BTreeMap<(usize, ZoneId), watch::Receiver<LegacyProgress>>,
}

/// What internal DNS owns: the switch zones it does not advertise.
#[derive(Debug, Default)]
pub struct DnsState {
    pub hidden: BTreeSet<SwitchSlot>,
}

/// A sled's NTP zone, as the checks and sled-agent see it (its polling
/// state is the zone's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NtpClock {
    pub zone: NtpZone,
    /// Whether the zone has made its first clock update.
    pub synchronised: bool,
}

impl NtpClock {
    pub fn new(zone: NtpZone) -> Self {
        Self {
            zone,
            synchronised: false,
        }
    }
}

/// The two kinds of NTP zone: every sled runs one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NtpZone {
    /// Synchronises with the upstream server, through NAT.
    Boundary,
    /// Synchronises with the rack's boundary zones, over the underlay.
    Internal,
}

racksim_wire::enum_names!(NtpZone {
    Boundary => "boundary-ntp",
    Internal => "internal-ntp",
});

impl SledsState {
    /// Whether sled `index`'s NTP zone has synchronised its time.
    pub fn time_synced(&self, index: usize) -> bool {
        self.ntp.get(&index).is_some_and(|c| c.synchronised)
    }

    /// The sleds whose boundary NTP zone has synchronised with upstream.
    pub fn boundary_synced(&self) -> BTreeSet<usize> {
        self.ntp
            .iter()
            .filter(|(_, c)| c.zone == NtpZone::Boundary && c.synchronised)
            .map(|(i, _)| *i)
            .collect()
    }
}

impl State {
    /// Some Nexus is up.
    pub fn control_plane_up(&self) -> bool {
        !self.control_plane.nexus_up.is_empty()
    }
}

/// A fault injected into one dpd (or one MGS) for a window of simulated
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceFault {
    /// Every request is answered with a 500.
    Errors { until: Duration },
    /// Requests are held until the window ends, then answered with a 503:
    /// clients see their timeouts.
    Hang { until: Duration },
}

impl ServiceFault {
    pub fn until(self) -> Duration {
        match self {
            ServiceFault::Errors { until } | ServiceFault::Hang { until } => until,
        }
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

/// The name of every underlay address ever in the rack, with each address
/// already written out as traces meet it (`fd00:…::1` and `[fd00:…::1]`),
/// so that naming the addresses in a trace line formats none of them again
/// (issue 40: formatting every address for every line was a few percent of
/// a fuzz seed, more on the 32-sled rack).
#[derive(Debug, Default)]
pub struct AddrNames {
    names: BTreeMap<Ipv6Addr, NamedAddr>,
    /// How many names were given (a name given again counts: a retired
    /// switch zone's address is renamed).
    given: u64,
}

#[derive(Debug)]
struct NamedAddr {
    name: String,
    bare: String,
    bracketed: String,
}

impl AddrNames {
    pub fn insert(&mut self, addr: Ipv6Addr, name: String) {
        let bare = addr.to_string();
        let bracketed = format!("[{bare}]");
        self.given += 1;
        self.names.insert(
            addr,
            NamedAddr {
                name,
                bare,
                bracketed,
            },
        );
    }

    /// How many names were given so far: what changes when any name does.
    pub fn given(&self) -> u64 {
        self.given
    }

    pub fn get(&self, addr: &Ipv6Addr) -> Option<&String> {
        self.names.get(addr).map(|n| &n.name)
    }

    /// `text` with every known address replaced by its name: bracketed
    /// (`[addr]:port`) first, then bare, highest address first, so that an
    /// address that is a prefix of another (`::1` of `::10`) never eats
    /// part of it.
    pub fn name_addrs(&self, text: &str) -> String {
        let mut out = text.to_string();
        for n in self.names.values().rev() {
            // `contains` first: most lines hold few addresses, and a
            // replace allocates whether or not it finds one.
            if out.contains(&n.bracketed) {
                out = out.replace(&n.bracketed, &n.name);
            }
            if out.contains(&n.bare) {
                out = out.replace(&n.bare, &n.name);
            }
        }
        out
    }
}

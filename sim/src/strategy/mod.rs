//! Service-NAT strategies: what a sled (or scrimlet) runs to keep its
//! switches' NAT tables right, behind one interface.
//!
//! A strategy is an implementation of [`NatStrategy`]. The sled host calls
//! it once per boot of sled-agent, before any zone starts
//! ([`NatStrategy::start_on_sled`]), and tells what it started each time
//! the sled's zones change ([`SledStrategy::zones_changed`]). Everything
//! it needs from the simulation comes through the [`SledContext`]: the
//! sled's identity, turmoil's connector, the internal DNS resolver, the
//! scrimlet's switch zone and status, the bootstore, and a seed for its
//! randomness. Time is tokio's, which the simulation drives: a strategy
//! sleeps and times out with `tokio::time` as in production.
//!
//! Two things stay the sled-agent's, not the strategy's, because they are
//! upstream code a strategy only opts into: the legacy blocking zone-start
//! path ([`NatStrategy::blocks_zone_start`]: sled-agent's
//! `ensure_zone_nat` before a zone runs), and the control plane of the era
//! the strategy stands for ([`NatStrategy::era`], from which
//! [`crate::Era::of`] derives Nexus's tasks).
//!
//! The built-in strategies are racksim's reconciler parts, one module each
//! ([`sled_task`], [`scrimlet_local`]), combined with or without the
//! zone-start path in [`builtin`]; [`ServiceNat::ALL`] is the one
//! registration: it names them on the CLI and in scenario files. A
//! strategy with code of its own is a module with an implementation of
//! [`NatStrategy`].
//! A strategy of a test's own needs no registration: [`ServiceNat::new`]
//! makes a handle any [`crate::RunConfig`] takes (see
//! `docs/strategy-api.md`).
//!
//! ## What can run inside the simulation
//!
//! Code runs on turmoil's simulated network when it does its I/O through
//! the seams the reconciler crate defines: a [`Connector`] (here
//! [`TurmoilConnector`]) for TCP and a
//! [`SwitchZoneResolver`](racksim_reconciler::discovery::SwitchZoneResolver)
//! for discovery. It runs on the one current-thread runtime every host
//! shares, so it spawns with `tokio::task::spawn_local` (or
//! [`SledContext::spawn`]), and it may hold `!Send` state. Code that opens
//! its own sockets (reqwest, `tokio::net`), reads the wall clock
//! (`std::time::SystemTime`), spawns OS threads or draws from an unseeded
//! RNG cannot run here: it would escape the simulated network or break
//! replay by seed. Such code can still be tested against live mode's fakes
//! (`docs/testing-your-reconciler.md`).
//!
//! [`Connector`]: racksim_reconciler::http::Connector

pub mod builtin;
pub mod scrimlet_local;
pub mod sled_task;

use std::{cmp::Ordering, fmt, future::Future, hash, net::Ipv6Addr, str::FromStr};

use racksim_reconciler::{
    discovery::SwitchSlot, nat::NatEntry, scrimlet_local::SystemNetworkingConfig,
    task::ScrimletStatus,
};
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    era::ServiceNatEra,
    net::{InternalDnsResolver, TurmoilConnector},
    world::World,
};

/// A service-NAT strategy: what runs on each sled to keep the switches'
/// NAT tables right, and the era of upstream's code it stands for.
///
/// Implementations are stateless values (usually a unit struct in a
/// `static`); what they start on a sled lives in the [`SledStrategy`]
/// [`start_on_sled`](NatStrategy::start_on_sled) returns.
pub trait NatStrategy: Sync + 'static {
    /// Its name on the CLI, in scenario files and in traces: lower case,
    /// words joined by `-`.
    fn name(&self) -> &'static str;

    /// The era of upstream's code it stands for: which control-plane tasks
    /// run around it ([`crate::Era::of`]).
    fn era(&self) -> ServiceNatEra;

    /// Whether sled-agent blocks each zone with external connectivity on
    /// the legacy zone-start path (discovery with its 5-minute wait, then a
    /// retry-forever ensure on each switch found) before the zone runs.
    fn blocks_zone_start(&self) -> bool {
        false
    }

    /// Starts what the strategy runs on a sled, once per boot of its
    /// sled-agent and before any of its zones: `zones` are the NAT entries
    /// of the zones the sled is about to start.
    fn start_on_sled(&self, sled: &SledContext, zones: &[NatEntry]) -> Box<dyn SledStrategy>;

    /// Which of racksim's reconciler parts live mode (which runs the
    /// reconciler crate on real sockets, with its own hosts) starts for
    /// this strategy; `None` if live mode cannot run it. Only the shipped
    /// strategies say.
    fn live(&self) -> Option<Parts> {
        None
    }
}

/// What a strategy started on one boot of one sled. It lives as long as
/// the sled's software; tasks it spawned die with it.
pub trait SledStrategy {
    /// The sled's zones changed (a config change added, removed or moved
    /// one): `zones` are the NAT entries of the zones it runs now.
    fn zones_changed(&mut self, _sled: &SledContext, _zones: &[NatEntry]) {}
}

/// A strategy that starts nothing on a sled (the zone-start path alone).
impl SledStrategy for () {}

/// Which of racksim's reconciler parts a strategy runs: what the shipped
/// strategies are made of, and what live mode starts on its own hosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// The per-scrimlet reconcilers of the scrimlet's own switch zone.
    pub scrimlet_reconcilers: bool,
    /// The per-sled periodic task, configured with the sled's zones.
    pub sled_task: bool,
}

impl Parts {
    /// Neither part (the zone-start path alone, or nothing).
    pub const NONE: Parts = Parts {
        scrimlet_reconcilers: false,
        sled_task: false,
    };
}

/// What a strategy on a sled can use of the simulation.
pub struct SledContext {
    world: World,
    index: usize,
    name: String,
    boot: u64,
    resolver: InternalDnsResolver,
}

/// A scrimlet's view of its own switch.
pub struct Scrimlet {
    /// Which switch the scrimlet is attached to.
    pub slot: SwitchSlot,
    /// The switch zone's underlay address, where its dpd and MGS listen.
    pub switch_zone: Ipv6Addr,
    /// Whether the sled is a scrimlet now (a powered-off sidecar makes it
    /// an ordinary sled until it is back).
    pub status: watch::Receiver<ScrimletStatus>,
}

impl SledContext {
    pub(crate) fn new(
        world: &World,
        index: usize,
        boot: u64,
        resolver: InternalDnsResolver,
    ) -> SledContext {
        let name = world.sled(index).name;
        SledContext {
            world: world.clone(),
            index,
            name,
            boot,
            resolver,
        }
    }

    /// The sled's index in the rack (replacements follow the rack's sleds).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The sled's host name, as traces name it (`sled0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The connector of turmoil's simulated network, for the reconciler
    /// crate's HTTP clients.
    pub fn connector(&self) -> TurmoilConnector {
        TurmoilConnector
    }

    /// The internal DNS resolver the sled's software uses to find switch
    /// zones (every internal DNS server, asked at once).
    pub fn resolver(&self) -> &InternalDnsResolver {
        &self.resolver
    }

    /// The sled's own switch, if it is a scrimlet whose switch zone exists.
    pub fn scrimlet(&self) -> Option<Scrimlet> {
        let slot = self.world.sled(self.index).scrimlet_of?;
        let status = self.world.scrimlet_status(self.index)?;
        let switch_zone = self.world.switch_zone_address(slot)?;
        Some(Scrimlet {
            slot,
            switch_zone,
            status,
        })
    }

    /// The bootstore's copy of the rack-wide networking config, as it
    /// changes.
    pub fn bootstore(&self) -> watch::Receiver<Option<SystemNetworkingConfig>> {
        self.world.bootstore()
    }

    /// A seed for this boot's random choices (derived from the run's seed,
    /// the sled's name and boot, and `purpose`: one name per use), so
    /// they replay.
    pub fn seed(&self, purpose: &str) -> u64 {
        self.world
            .derive_seed(&format!("{}/{purpose}", self.name), self.boot)
    }

    /// Spawns a task of the sled's software on the simulation's runtime.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        tokio::task::spawn_local(task)
    }
}

/// A handle to a service-NAT strategy (a [`NatStrategy`]): cheap to copy,
/// compared by name. A cell's strategy, which may be an instance start
/// instead, is `racksim_scenario::file::Strategy`.
#[derive(Clone, Copy)]
pub struct ServiceNat(&'static dyn NatStrategy);

impl ServiceNat {
    /// Per-sled blocking zone-start path, bugs included
    /// ([`builtin::LEGACY`]).
    pub const LEGACY: ServiceNat = ServiceNat(&builtin::LEGACY);
    /// Periodic per-sled task, the zone-start NAT issue's proposal
    /// ([`builtin::SLED_TASK`]).
    pub const SLED_TASK: ServiceNat = ServiceNat(&builtin::SLED_TASK);
    /// Per-scrimlet reconcilers of their own switch zone, alone: the
    /// design after omicron #9727 removes the zone-start path
    /// ([`builtin::SCRIMLET_LOCAL`]).
    pub const SCRIMLET_LOCAL: ServiceNat = ServiceNat(&builtin::SCRIMLET_LOCAL);
    /// What ships today (omicron #10961, at b848b6df): the per-scrimlet
    /// reconcilers *and* the legacy blocking zone-start path
    /// ([`builtin::SCRIMLET_LOCAL_WITH_ZONE_START`]).
    pub const SCRIMLET_LOCAL_WITH_ZONE_START: ServiceNat =
        ServiceNat(&builtin::SCRIMLET_LOCAL_WITH_ZONE_START);

    /// The registered strategies: the names the CLI and scenario files
    /// accept, in the order reports list them. Adding a strategy to the
    /// catalogue's matrix is one line here (and its module).
    pub const ALL: [ServiceNat; 4] = [
        ServiceNat::LEGACY,
        ServiceNat::SLED_TASK,
        ServiceNat::SCRIMLET_LOCAL,
        ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START,
    ];

    /// A handle to any strategy, registered or not: a test's own strategy
    /// runs through a [`crate::RunConfig`] without being in [`Self::ALL`].
    pub const fn new(strategy: &'static dyn NatStrategy) -> ServiceNat {
        ServiceNat(strategy)
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The era of upstream's code it stands for.
    pub fn era(self) -> ServiceNatEra {
        self.0.era()
    }

    /// See [`NatStrategy::blocks_zone_start`].
    pub fn blocks_zone_start(self) -> bool {
        self.0.blocks_zone_start()
    }

    /// See [`NatStrategy::live`].
    pub fn live(self) -> Option<Parts> {
        self.0.live()
    }

    /// See [`NatStrategy::start_on_sled`].
    pub fn start_on_sled(self, sled: &SledContext, zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        self.0.start_on_sled(sled, zones)
    }

    /// Where it stands in [`Self::ALL`]; unregistered ones come after.
    fn rank(self) -> usize {
        ServiceNat::ALL
            .iter()
            .position(|s| s.name() == self.name())
            .unwrap_or(ServiceNat::ALL.len())
    }
}

impl PartialEq for ServiceNat {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ServiceNat {}

impl hash::Hash for ServiceNat {
    fn hash<H: hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl Ord for ServiceNat {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.rank(), self.name()).cmp(&(other.rank(), other.name()))
    }
}

impl PartialOrd for ServiceNat {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ServiceNat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceNat({})", self.name())
    }
}

impl fmt::Display for ServiceNat {
    /// The strategy's name, as the CLI, scenario files and traces spell it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ServiceNat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ServiceNat::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ServiceNat::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown strategy {s:?} (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

//! The handle to the world that every host, the driver and the checks hold.
//!
//! Every simulated host runs on turmoil's single thread, one after another,
//! so the plain mutex around [`State`] is never contended; it only lets the
//! state be shared between host software, which turmoil may restart, and
//! the driver. The lock is never held across an `.await`.
//!
//! This module has the handle itself: building the world for a run,
//! recording trace lines, counting boots and deriving their seeds, naming
//! addresses, and forgetting what a stopped host held. What the handle
//! offers the control plane and the networking config is in the sibling
//! modules `control_plane` and `config`.

use std::{
    collections::BTreeMap,
    net::Ipv6Addr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use racksim_fakes::dpd::DpdState;
use racksim_nexus::Db;
use racksim_reconciler::{
    discovery::SwitchSlot, scrimlet_local::SystemNetworkingConfig, task::ScrimletStatus,
};
use tokio::sync::watch;

use super::{
    params::RunParams,
    state::{
        AddrNames, ControlPlaneState, DnsState, NetState, NexusCommand, SledsState, State,
        SwitchesState,
    },
    zones::ZoneSet,
};
use crate::{
    rack::{RackSpec, SledSpec, UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME},
    testbed::TestbedFailure,
    trace::{Kind, TraceLine},
};

/// Handle to the world, cloned into every host.
#[derive(Clone, Debug)]
pub struct World {
    pub params: Arc<RunParams>,
    state: Arc<Mutex<State>>,
    /// Whether the operator wants the control plane running.
    pub(super) nexus: Arc<watch::Sender<NexusCommand>>,
    /// The bootstore's copy of the rack-wide networking config.
    pub(super) bootstore: Arc<watch::Sender<Option<SystemNetworkingConfig>>>,
    /// The rack's service zones now (sleds start and stop theirs as it
    /// changes; the checks derive the desired NAT state from it).
    pub(super) zones: Arc<watch::Sender<ZoneSet>>,
    /// Rung when an instance request is queued.
    pub(super) doorbell: Arc<watch::Sender<u64>>,
}

impl World {
    pub fn new(params: RunParams) -> Self {
        let rack = &params.rack;
        let mut names = AddrNames::default();
        for s in &rack.sleds {
            names.insert(s.address, s.name.clone());
        }
        for s in &rack.switches {
            names.insert(s.zone_address, s.name());
        }
        names.insert(UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME.to_string());
        let scrimlet_status = rack
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| s.scrimlet_of.is_some())
            .map(|(i, _)| (i, watch::Sender::new(ScrimletStatus::Scrimlet)))
            .collect();
        let mut db = Db::new(params.era.nat_ensure, params.era.nat_changeset)
            .with_nat_conflict(params.era.nat_conflict)
            .with_ip_pool(params.ip_pool);
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
                specs: Arc::new(rack.sleds.clone()),
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

    pub fn take_trace(&self) -> Vec<TraceLine> {
        std::mem::take(&mut self.lock().trace)
    }

    /// The testbed itself failed on `host` (a fake's server stopped, a
    /// socket could not be bound): a trace line, and the run ends with a
    /// testbed error (the first one reported wins).
    pub fn testbed_error(&self, host: &str, error: impl Into<String>) {
        let error = error.into();
        let line = self.line(host, Kind::TestbedError, format!("TESTBED ERROR: {error}"));
        let at = line.at;
        self.record(line);
        self.lock().testbed_error.get_or_insert(TestbedFailure {
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

    /// A sled by index (the rack's or a replacement).
    pub fn sled(&self, index: usize) -> SledSpec {
        self.lock().sleds.specs[index].clone()
    }

    /// Sled `index`'s underlay address (without copying its spec: the
    /// checks ask it for every running instance at every look).
    pub fn sled_address(&self, index: usize) -> Ipv6Addr {
        self.lock().sleds.specs[index].address
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
        self.lock().names.name_addrs(text)
    }

    /// Scrimlet status of a sled, if it is a scrimlet.
    pub fn scrimlet_status(&self, sled: usize) -> Option<watch::Receiver<ScrimletStatus>> {
        self.lock()
            .sleds
            .scrimlet_status
            .get(&sled)
            .map(|tx| tx.subscribe())
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
                st.sleds.blocked_starts.retain(|(sled, _), _| sled != index);
                st.sleds.ntp.remove(index);
                st.sleds.ntp_replies.remove(index);
                st.control_plane.nexus_up.remove(index);
            }
            HostKind::UpstreamNtp => {}
        }
        st.version += 1;
    }
}

/// What a simulated host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostKind {
    SwitchZone(SwitchSlot),
    Sled(usize),
    UpstreamNtp,
}

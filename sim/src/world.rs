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
//! zone to a new address. What can change lives in [`State`].

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv6Addr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use racksim_reconciler::{
    discovery::SwitchSlot,
    dpd::MacAddr,
    instances::{
        ExternalIp, InstanceRecord, InstanceState, NatTable, Nic, SagaRecord, StartImpl,
        VirtualNetworkInterfaceHost, VmmInfo, GUEST_VNI,
    },
    scrimlet_local::SystemNetworkingConfig,
    task::ScrimletStatus,
};
use tokio::sync::watch;

use crate::{
    fakes::dpd::DpdState,
    plan::Strategy,
    rack::{RackSpec, SledSpec, ZoneKind, UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME},
    trace::{Kind, TraceLine},
};

/// Everything fixed for one run.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub rack: Arc<RackSpec>,
    pub strategy: Strategy,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// The instances the scenario declares (their records exist from the start).
    pub instances: Vec<InstanceSpec>,
    pub seed: u64,
    /// The switch through which the outside world's NTP replies return.
    pub ntp_return_switch: SwitchSlot,
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

/// An instance a scenario declares; addresses follow from its index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSpec {
    pub name: String,
}

/// The control plane's database. It lives outside Nexus: a control-plane
/// crash loses Nexus's memory, never this.
#[derive(Clone, Debug, Default)]
pub struct Db {
    pub instances: BTreeMap<u32, InstanceRecord>,
    /// The instance NAT table (versioned; dpd pulls its changes).
    pub nat: NatTable,
    pub sagas: BTreeMap<u64, SagaRecord>,
    /// Which Nexus (by host name) executes each saga.
    pub saga_sec: BTreeMap<u64, String>,
    pub next_id: u64,
}

/// One sled-agent's volatile state: lost when the sled restarts.
#[derive(Clone, Debug, Default)]
pub struct SledAgentState {
    /// VMMs by instance id.
    pub vmms: BTreeMap<u32, VmmInfo>,
    pub v2p: BTreeSet<VirtualNetworkInterfaceHost>,
}

/// A request to the control plane's instance API, queued by the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceRequest {
    Create { instance: u32, sled: u32 },
    Start { instance: u32, sled: u32 },
    Stop { instance: u32 },
    Delete { instance: u32 },
}

/// Mutable state of the world.
#[derive(Debug)]
pub struct State {
    /// The control plane's database.
    pub db: Db,
    /// Volatile state of each running sled-agent, by sled index.
    pub sled_agents: BTreeMap<usize, SledAgentState>,
    /// Sleds whose software is running.
    pub sleds_up: BTreeSet<usize>,
    /// Sleds gone for good (replaced scrimlets).
    pub retired_sleds: BTreeSet<usize>,
    /// Instance API requests waiting for Nexus.
    pub requests: std::collections::VecDeque<InstanceRequest>,
    /// When each instance's record last became Running (for invariants
    /// that apply once a running instance has had time to converge).
    pub running_since: BTreeMap<u32, Duration>,
    /// Instances whose delete operation has completed (returned success),
    /// and when: from then on nothing may remain of them.
    pub deletes_completed: BTreeMap<u32, Duration>,
    /// The NAT table of each running switch zone; absent while it is down.
    pub dpd: BTreeMap<SwitchSlot, DpdState>,
    /// Faults injected into dpds.
    pub dpd_faults: BTreeMap<SwitchSlot, DpdFault>,
    /// Switch zones internal DNS does not advertise.
    pub hidden: BTreeSet<SwitchSlot>,
    /// Every sled: the rack's, then replacements, by index.
    pub sleds: Vec<SledSpec>,
    /// Current underlay address of each switch zone (it moves when its
    /// scrimlet is replaced).
    pub switch_zones: BTreeMap<SwitchSlot, Ipv6Addr>,
    /// Names of every address ever in the rack, for traces.
    pub names: BTreeMap<Ipv6Addr, String>,
    /// Whether each scrimlet currently has its sidecar (by sled index).
    pub scrimlet_status: BTreeMap<usize, watch::Sender<ScrimletStatus>>,
    /// Sleds whose boundary NTP zone has had a reply from upstream (the
    /// rack's time is synchronised once any has).
    pub ntp_synced: BTreeSet<usize>,
    /// Sleds whose Nexus is up and running its background tasks (the
    /// control plane is up while any is).
    pub nexus_up: BTreeSet<usize>,
    /// Times each host's software has started (derives per-boot RNG seeds).
    pub boots: BTreeMap<String, u64>,
    /// Per switch: whether it is currently dropping inbound traffic (the
    /// trace records changes, not every packet).
    pub dropping: BTreeMap<SwitchSlot, bool>,
    /// How long each zone start took: `(sled, zone, duration)`.
    pub zone_starts: Vec<(String, ZoneKind, Duration)>,
    /// Bumped whenever something the checks read changes.
    pub version: u64,
    pub trace: Vec<TraceLine>,
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
    /// Rung when an instance request is queued.
    doorbell: Arc<watch::Sender<u64>>,
}

impl State {
    /// Some boundary NTP zone has synchronised with upstream.
    pub fn time_synced(&self) -> bool {
        !self.ntp_synced.is_empty()
    }

    /// Some Nexus is up.
    pub fn control_plane_up(&self) -> bool {
        !self.nexus_up.is_empty()
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
            db.instances.insert(id, instance_record(id, &spec.name));
        }
        let state = State {
            db,
            sled_agents: BTreeMap::new(),
            sleds_up: BTreeSet::new(),
            retired_sleds: BTreeSet::new(),
            requests: Default::default(),
            running_since: BTreeMap::new(),
            deletes_completed: BTreeMap::new(),
            // Each switch's ASIC table exists before its zone boots, so a
            // plan step at 0s can leave an entry from before the run.
            dpd: rack
                .switches
                .iter()
                .map(|s| (s.slot, DpdState::new(s.slot.index())))
                .collect(),
            dpd_faults: BTreeMap::new(),
            hidden: BTreeSet::new(),
            sleds: rack.sleds.clone(),
            switch_zones: rack
                .switches
                .iter()
                .map(|s| (s.slot, s.zone_address))
                .collect(),
            names,
            scrimlet_status,
            ntp_synced: BTreeSet::new(),
            nexus_up: BTreeSet::new(),
            boots: BTreeMap::new(),
            dropping: BTreeMap::new(),
            zone_starts: Vec::new(),
            version: 0,
            trace: Vec::new(),
        };
        let bootstore = SystemNetworkingConfig {
            generation: 1,
            service_nat: rack.desired_nat(),
        };
        World {
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

    pub fn take_trace(&self) -> Vec<TraceLine> {
        std::mem::take(&mut self.lock().trace)
    }

    /// A sled by index (the rack's or a replacement).
    pub fn sled(&self, index: usize) -> SledSpec {
        self.lock().sleds[index].clone()
    }

    /// Where a switch zone is now.
    pub fn switch_zone_address(&self, slot: SwitchSlot) -> Option<Ipv6Addr> {
        self.lock().switch_zones.get(&slot).copied()
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
            .scrimlet_status
            .get(&sled)
            .map(|tx| tx.subscribe())
    }

    /// What the operator (the plan) wants of the control plane.
    pub fn nexus_command(&self) -> watch::Receiver<NexusCommand> {
        self.nexus.subscribe()
    }

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
        self.lock().requests.push_back(req);
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

    /// A host's software stopped (crash, power loss): what lived in it is gone.
    pub fn host_down(&self, host: &HostKind) {
        let mut st = self.lock();
        match host {
            HostKind::SwitchZone(slot) => {
                st.dpd.remove(slot);
                st.dropping.remove(slot);
            }
            HostKind::Sled(index) => {
                st.sleds_up.remove(index);
                st.sled_agents.remove(index);
                // Its zones go with it.
                st.ntp_synced.remove(index);
                st.nexus_up.remove(index);
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

/// The database record of declared instance `id` (1-based): one external
/// IP (`203.0.113.(10+id)`, all ports) and one NIC (`172.30.0.(10+id)`) in
/// the guest VPC, created in state `Creating`.
pub fn instance_record(id: u32, name: &str) -> InstanceRecord {
    let n = id as u8;
    InstanceRecord {
        id,
        name: name.to_string(),
        state: InstanceState::Creating,
        generation: 1,
        sled: None,
        vmm: None,
        external_ips: vec![ExternalIp {
            ip: std::net::Ipv4Addr::new(203, 0, 113, 10 + n),
            first_port: 0,
            last_port: 65535,
        }],
        nics: vec![Nic {
            virtual_ip: std::net::IpAddr::V4(std::net::Ipv4Addr::new(172, 30, 0, 10 + n)),
            mac: MacAddr {
                a: [0xa8, 0x40, 0x25, 0xf0, 0x00, n],
            },
            vni: GUEST_VNI,
        }],
    }
}

//! The simulated world's shared state: what the fakes hold, what the driver
//! changes, what the checks read, and the trace.
//!
//! Every simulated host runs on turmoil's single thread, one after another,
//! so a plain mutex is never contended; it only lets the state be shared
//! between host software, which turmoil may restart, and the driver. The lock
//! is never held across an `.await`.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use racksim_reconciler::discovery::SwitchSlot;

use crate::{fakes::dpd::DpdState, plan::Strategy, rack::RackSpec, trace::TraceLine};

/// Everything fixed for one run.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub rack: Arc<RackSpec>,
    pub strategy: Strategy,
    pub seed: u64,
    /// The switch through which the outside world's NTP replies return.
    pub ntp_return_switch: SwitchSlot,
}

/// Mutable state of the world.
#[derive(Debug, Default)]
pub struct State {
    /// The NAT table of each running switch zone; absent while it is down.
    pub dpd: BTreeMap<SwitchSlot, DpdState>,
    /// Switch zones internal DNS does not advertise.
    pub hidden: BTreeSet<SwitchSlot>,
    /// Boundary NTP has received a reply from upstream.
    pub ntp_synced: bool,
    /// The control plane (Nexus) is up and running its background tasks.
    pub control_plane_up: bool,
    /// Times each host's software has started (derives per-boot RNG seeds).
    pub boots: BTreeMap<String, u64>,
    /// Per switch: whether it is currently dropping inbound traffic (the
    /// trace records changes, not every packet).
    pub dropping: BTreeMap<SwitchSlot, bool>,
    /// Bumped whenever something the checks read changes.
    pub version: u64,
    pub trace: Vec<TraceLine>,
}

/// Handle to the world, cloned into every host.
#[derive(Clone, Debug)]
pub struct World {
    pub params: Arc<RunParams>,
    state: Arc<Mutex<State>>,
}

impl World {
    pub fn new(params: RunParams) -> Self {
        World {
            params: Arc::new(params),
            state: Arc::new(Mutex::new(State::default())),
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
    pub fn trace(&self, host: &str, text: impl Into<String>) {
        let at = turmoil::sim_elapsed().unwrap_or_default();
        self.trace_at(at, host, text);
    }

    /// Record an event at an explicit time (the driver's events).
    pub fn trace_at(&self, at: Duration, host: &str, text: impl Into<String>) {
        self.lock().trace.push(TraceLine {
            at,
            host: host.to_string(),
            text: text.into(),
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

    pub fn take_trace(&self) -> Vec<TraceLine> {
        std::mem::take(&mut self.lock().trace)
    }
}

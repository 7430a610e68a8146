//! What the world offers the control plane: the operator's command, the
//! instance API's request queue, inventory, and the database's faults.
//!
//! The database itself and the instance API's request type are Nexus's
//! (`racksim-nexus`); the world holds the database
//! ([`ControlPlaneState::db`](super::state::ControlPlaneState::db)) so that
//! it outlives every Nexus incarnation, and the queue, so that the driver
//! can hand a plan's instance actions to whichever Nexus is up.

use std::time::Duration;

use racksim_nexus::{InstanceRequest, SledInventory};
use racksim_reconciler::scrimlet_local::ServiceZoneNat;
use tokio::sync::watch;

use super::{
    handle::World,
    state::NexusCommand,
    zones::{service_kind, zone_nat_entry},
};

impl World {
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

    /// What an inventory collection by the Nexus on host `from` finds: each
    /// in-service sled whose sled-agent is up and can reach `from`, with
    /// the service zones it reports running, each with the NAT entry its
    /// omicron zone config implies (external IP and ports, the sled's
    /// underlay address, the zone's NIC).
    ///
    /// Simplified: upstream's collector asks each sled-agent over its API
    /// (`GET /inventory`); the simulation reads the same facts from the
    /// world, for exactly the sleds such a request would reach.
    pub fn inventory(&self, from: &str) -> Vec<SledInventory> {
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
                SledInventory {
                    sled: spec.name.clone(),
                    zones,
                }
            })
            .collect()
    }

    /// Until when the database stalls, if it stalls now (a `db-stall`
    /// step).
    pub fn db_stall_until(&self) -> Option<Duration> {
        let now = turmoil::sim_elapsed().unwrap_or_default();
        self.lock()
            .control_plane
            .db_stall_until
            .filter(|until| *until > now)
    }

    /// Whether the database answers errors now (a `db-errors` step).
    pub fn db_errors(&self) -> bool {
        let now = turmoil::sim_elapsed().unwrap_or_default();
        self.lock()
            .control_plane
            .db_errors_until
            .is_some_and(|until| until > now)
    }

    /// A duration uniform in `0..=max`, to the microsecond, from the
    /// database's seeded generator (drawn only when a fault needs it, so
    /// a run without database faults draws nothing).
    pub fn db_draw(&self, max: Duration) -> Duration {
        use rand::{Rng, SeedableRng};
        let seed = self.derive_seed("database", 0);
        let mut st = self.lock();
        let rng = st
            .control_plane
            .db_rng
            .get_or_insert_with(|| rand::rngs::SmallRng::seed_from_u64(seed));
        Duration::from_micros(rng.random_range(0..=max.as_micros() as u64))
    }
}

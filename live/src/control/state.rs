//! Reading a live rack: the state dump (`GET /state`) and what the rack
//! still lacks (`GET /gaps`, `POST /wait`), read with the simulation's own
//! convergence checks.

use racksim_reconciler::{dpd::Ipv4Nat, legacy::LegacyProgress};
use racksim_sim::{
    check::gaps::{rack_gaps, DesiredNat, Gap, RackView, SledView, SwitchTable},
    era::PeriodicTask,
    world::zone_nat_entry,
};

use super::{
    Control, Convergence, InstanceDump, NexusDump, SledDump, StateDump, SwitchDump, ZoneStartDump,
};

/// How often a wait looks at the rack again. Each look copies the tables
/// under their locks, as `GET /state` does; the rack's state changes on
/// requests and timers, not on a signal a waiter could subscribe to.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

impl Control {
    pub async fn dump(&self) -> StateDump {
        let hosts = self.hosts.lock().await;
        let switches = hosts
            .switches
            .values()
            .map(|s| {
                let d = s.dpd.lock();
                let scrimlet = hosts
                    .sleds
                    .iter()
                    .find(|x| x.scrimlet_of == Some(s.slot) && !x.retired);
                SwitchDump {
                    switch: s.slot.to_string(),
                    up: s.up(),
                    dpd: s.dpd_addr.to_string(),
                    mgs: s.mgs_addr.to_string(),
                    zone: s.zone.to_string(),
                    hidden: self.env.shared.resolver.is_hidden(s.slot),
                    scrimlet: scrimlet.map(|x| x.name.clone()),
                    scrimlet_status: scrimlet
                        .and_then(|x| x.status.as_ref())
                        .map(|st| format!("{:?}", *st.borrow())),
                    nat_generation: d.generation(),
                    nat: d.ipv4_entries(),
                    nat_ipv6: d.ipv6_entries(),
                }
            })
            .collect();
        let sleds = hosts
            .sleds
            .iter()
            .map(|s| {
                let a = s.agent.lock();
                SledDump {
                    sled: s.name.clone(),
                    up: s.up(),
                    retired: s.retired,
                    sled_agent: s.agent_addr.to_string(),
                    v2p: a.v2p_list(),
                    vmms: a.vmm_list(),
                    zone_starts: s
                        .zone_starts
                        .iter()
                        .map(|(id, z)| {
                            let p = z.progress.borrow();
                            ZoneStartDump {
                                zone: id.to_string(),
                                started: matches!(*p, LegacyProgress::Done { .. }),
                                progress: p.to_string(),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let mut desired_nat: Vec<Ipv4Nat> = hosts
            .zones
            .zones()
            .iter()
            .map(|z| zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address).to_dpd())
            .collect();
        desired_nat.sort();
        let nexus = {
            let n = self.nexus.lock().await;
            let sled_name = |id: u32| {
                hosts
                    .sleds
                    .get(id as usize)
                    .map_or_else(|| format!("sled {id}"), |s| s.name.clone())
            };
            NexusDump {
                host: n.host().to_string(),
                up: n.up(),
                nat_version: n.nat_version(),
                instances: n
                    .instances()
                    .into_iter()
                    .map(|r| InstanceDump {
                        instance: r.name.clone(),
                        state: r.state.to_string(),
                        sled: r.sled.map(sled_name),
                        generation: r.generation,
                    })
                    .collect(),
            }
        };
        StateDump {
            switches,
            sleds,
            nexus,
            desired_nat,
        }
    }

    /// What the rack still lacks, read as the simulation's checks read a
    /// simulated world: the service zones' entries on every live uplinked
    /// switch, and each instance's VMM, NAT entries and V2P mappings.
    pub async fn gaps(&self) -> Vec<Gap> {
        let hosts = self.hosts.lock().await;
        let instances = self.nexus.lock().await.instances_asked_for();
        let sled_up = |i: usize| hosts.sleds.get(i).is_some_and(|s| s.up());
        let desired: Vec<DesiredNat> = hosts
            .zones
            .zones()
            .iter()
            .map(|z| DesiredNat {
                entry: zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address),
                zone: Some((z.id.kind, z.spec.sled)),
                sled_up: sled_up(z.spec.sled),
            })
            .collect();
        let switches: Vec<SwitchTable> = hosts
            .switches
            .values()
            .filter(|s| s.up())
            .map(|s| {
                // One lock for both reads: a second `lock()` in the same
                // expression would wait on the first's guard.
                let dpd = s.dpd.lock();
                SwitchTable {
                    slot: s.slot,
                    uplinked: self
                        .env
                        .spec
                        .switches
                        .iter()
                        .any(|x| x.slot == s.slot && x.uplinked),
                    entries: dpd.ipv4_entries_shared(),
                    entries_v6: dpd.ipv6_entries(),
                    pulled_to: Some(dpd.generation()),
                }
            })
            .collect();
        let sleds: Vec<SledView> = hosts
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| s.up())
            .map(|(index, s)| SledView {
                index,
                name: s.name.clone(),
                address: s.address,
                agent: std::sync::Arc::new(s.agent.lock().clone()),
            })
            .collect();
        let names: std::collections::BTreeMap<std::net::Ipv6Addr, String> = hosts
            .sleds
            .iter()
            .map(|s| (s.address, s.name.clone()))
            .chain(
                hosts
                    .switches
                    .values()
                    .map(|s| (s.zone, s.slot.to_string())),
            )
            .collect();
        let host = |a: std::net::Ipv6Addr| names.get(&a).cloned().unwrap_or_else(|| a.to_string());
        let sled = |i: usize| {
            hosts.sleds.get(i).map_or_else(
                || (format!("sled {i}"), std::net::Ipv6Addr::UNSPECIFIED),
                |s| (s.name.clone(), s.address),
            )
        };
        // Live mode's checks do not read the rows' versions: a switch that
        // lacks an entry is named without saying whether it pulled past it.
        let nat_row_versions = Default::default();
        rack_gaps(&RackView {
            desired: &desired,
            switches: &switches,
            sleds: &sleds,
            instances: &instances,
            nat_row_versions: &nat_row_versions,
            reincarnation: self.env.shared.era.reincarnation == PeriodicTask::On,
            stop_removes_nat: self.env.shared.start == racksim_nexus::instances::StartImpl::Saga,
            host: &host,
            sled: &sled,
        })
    }

    /// Waits until the rack has no gaps or `timeout` has passed.
    pub async fn wait(&self, timeout: std::time::Duration) -> Convergence {
        let started = tokio::time::Instant::now();
        loop {
            let gaps = self.gaps().await;
            let waited = started.elapsed();
            if gaps.is_empty() || waited >= timeout {
                return Convergence {
                    converged: gaps.is_empty(),
                    waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    gaps,
                };
            }
            tokio::time::sleep(WAIT_POLL.min(timeout - waited)).await;
        }
    }
}

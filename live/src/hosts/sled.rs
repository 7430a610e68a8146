//! A sled of the live rack: its sled-agent, served by dropshot on
//! loopback, the strategy's reconcilers and, on a scrimlet, the scrimlet
//! reconcilers; its zones' starts through the zone-start NAT path.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv6Addr, SocketAddr},
    sync::Arc,
};

use dropshot::HttpServer;
use racksim_fakes::sled_agent::{SledAgentChange, SledAgentState};
use racksim_nexus::instances::SLED_AGENT_PORT;
use racksim_reconciler::{
    discovery::SwitchSlot,
    legacy::{self, LegacyProgress},
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, ScrimletStatus, TaskStatus},
};
use racksim_servers::{serve_sled_agent, SledAgentContext};
use racksim_sim::{
    strategy::sled_task::follow_entries,
    world::{zone_nat_entry, ZoneId},
};
use rand::{rngs::SmallRng, SeedableRng};
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

use super::{closed, loopback, Env, Hosts};
use crate::{net::LinkConnector, trace::sled_agent_line};

/// A sled: its sled-agent and the strategy's reconcilers.
pub(crate) struct SledHost {
    pub name: String,
    /// Its underlay address: where its zones' NAT entries point.
    pub address: Ipv6Addr,
    pub scrimlet_of: Option<SwitchSlot>,
    pub agent_addr: SocketAddr,
    pub agent: SledAgentContext,
    pub(super) server: Option<HttpServer<SledAgentContext>>,
    pub(super) closing: Vec<JoinHandle<()>>,
    pub(super) tasks: Vec<JoinHandle<()>>,
    /// sled-task: its task's config, this sled's zones' entries.
    pub(super) config: Option<watch::Sender<Vec<NatEntry>>>,
    /// scrimlet-local: whether it is a scrimlet now.
    pub status: Option<watch::Sender<ScrimletStatus>>,
    /// The strategies that block zone start: each of its zones' start,
    /// in the zone-start NAT path or done.
    pub zone_starts: BTreeMap<ZoneId, ZoneStart>,
    /// Replaced: it never comes back.
    pub retired: bool,
}
impl SledHost {
    pub fn up(&self) -> bool {
        self.server.is_some()
    }
}
/// Its reconcilers and zone starts end with it (see [`SwitchHost`]'s `Drop`).
impl Drop for SledHost {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for z in self.zone_starts.values() {
            z.task.abort();
        }
    }
}
/// One zone's start in the blocking zone-start NAT path (`legacy`,
/// `scrimlet-local-with-zone-start`): where the path is, and its task.
pub(crate) struct ZoneStart {
    pub progress: watch::Receiver<LegacyProgress>,
    pub(super) task: JoinHandle<()>,
}

impl Env {
    pub(super) fn new_sled(
        &self,
        name: &str,
        address: Ipv6Addr,
        scrimlet_of: Option<SwitchSlot>,
    ) -> SledHost {
        let trace = self.shared.trace.clone();
        let host = name.to_string();
        self.inventory.add_sled(name, address);
        SledHost {
            name: name.to_string(),
            address,
            scrimlet_of,
            agent_addr: loopback(),
            agent: SledAgentContext::new(SledAgentState::default()).with_observer(Arc::new(
                move |c: &SledAgentChange| trace.record(&host, sled_agent_line(c)),
            )),
            server: None,
            closing: Vec::new(),
            tasks: Vec::new(),
            config: None,
            status: None,
            zone_starts: BTreeMap::new(),
            retired: false,
        }
    }
}

impl Hosts {
    /// Starts sled `index` from nothing, with its reconcilers.
    pub async fn start_sled(&mut self, env: &Env, index: usize) -> Result<(), String> {
        let sled = &mut self.sleds[index];
        if sled.up() || sled.retired {
            return Ok(());
        }
        closed(&mut sled.closing, &sled.name).await?;
        *sled.agent.lock() = SledAgentState::default();
        sled.agent.resume();
        let server = serve_sled_agent(sled.agent_addr, sled.agent.clone())
            .map_err(|e| format!("{} sled-agent: {e}", sled.name))?;
        sled.agent_addr = server.local_addr();
        env.shared.links.serves(&sled.name, sled.agent_addr);
        env.shared.links.maps(
            SocketAddr::new(sled.address.into(), SLED_AGENT_PORT),
            sled.agent_addr,
        );
        sled.server = Some(server);
        if env.shared.reconcilers == crate::Reconcilers::None {
            return Ok(());
        }
        // The strategy's parts, as live mode runs them on its own hosts
        // (`LiveRack::start` refuses a strategy without them).
        let parts = env.shared.strategy.live().unwrap_or_default();
        if parts.scrimlet_reconcilers {
            self.start_scrimlet_reconcilers(env, index);
        }
        if env.shared.strategy.blocks_zone_start() {
            self.start_zones(env, index);
        }
        if parts.sled_task {
            self.follow_zones(env, index);
        }
        Ok(())
    }
    /// Stops sled `index`: its reconcilers and its sled-agent's state.
    pub fn stop_sled(&mut self, index: usize) {
        let sled = &mut self.sleds[index];
        for t in sled.tasks.drain(..) {
            t.abort();
        }
        sled.config = None;
        sled.status = None;
        for (_, z) in std::mem::take(&mut sled.zone_starts) {
            z.task.abort();
        }
        if let Some(server) = sled.server.take() {
            sled.agent.interrupt();
            sled.closing.push(tokio::spawn(async move {
                let _ = server.close().await;
            }));
            *sled.agent.lock() = SledAgentState::default();
        }
    }
    /// the scrimlet-reconcilers PR's design: a scrimlet reconciles its own switch zone from
    /// the bootstore's config, told its switch zone's services directly
    /// (live mode has no underlay addresses to find them by).
    pub(super) fn start_scrimlet_reconcilers(&mut self, env: &Env, index: usize) {
        let Some(slot) = self.sleds[index].scrimlet_of else {
            return;
        };
        let switch = &self.switches[&slot];
        let status = watch::Sender::new(if self.sidecars_off.contains(&slot) {
            ScrimletStatus::NotScrimlet
        } else {
            ScrimletStatus::Scrimlet
        });
        let sled = &mut self.sleds[index];
        let (_handle, driver) = scrimlet_reconcilers(
            LinkConnector {
                from: sled.name.clone(),
                links: env.shared.links.clone(),
            },
            SwitchZoneServices::Explicit {
                dpd: switch.dpd_addr,
                mgs: switch.mgs_addr,
            },
            self.bootstore.subscribe(),
            status.subscribe(),
            env.shared.period,
        );
        sled.tasks.push(tokio::spawn(
            driver.instrument(tracing::info_span!("host", host = %sled.name)),
        ));
        sled.status = Some(status);
    }
    /// The strategies that block zone start: each zone of the sled not yet
    /// started runs the zone-start NAT path (omicron's sled-agent before
    /// #9727: look the uplinked switches up, waiting up to 5 minutes for
    /// all, then ensure the zone's entry on each, retrying forever) and is
    /// started when the path returns. The trace says when each zone starts
    /// and how long its start took. Live mode's zones serve nothing: its one
    /// Nexus is up from the start whatever its zone's start does (see
    /// [`super::nexus`]), so a blocked start shows in the trace and the
    /// state, not in what the rack can do.
    pub(super) fn start_zones(&mut self, env: &Env, index: usize) {
        let sled = &mut self.sleds[index];
        if !sled.up() {
            return;
        }
        let zones = self.zones.on_sled(index);
        // A zone moved away (or expunged) stops, mid-start or not.
        sled.zone_starts.retain(|id, z| {
            let kept = zones.iter().any(|l| l.id == *id);
            if !kept {
                z.task.abort();
            }
            kept
        });
        let expected: BTreeSet<SwitchSlot> = env.spec.uplinked_switches().into_iter().collect();
        for zone in zones {
            if sled.zone_starts.contains_key(&zone.id) {
                continue;
            }
            let entry = zone_nat_entry(&zone.spec, sled.address);
            let (progress, rx) = watch::channel(LegacyProgress::LookingUpSwitches);
            let connector = LinkConnector {
                from: sled.name.clone(),
                links: env.shared.links.clone(),
            };
            let resolver = env.shared.resolver.clone();
            let trace = env.shared.trace.clone();
            let host = sled.name.clone();
            let expected = expected.clone();
            let what = zone.id.to_string();
            // The backoff's jitter only: live mode is not a replay.
            let mut rng = SmallRng::seed_from_u64(u64::from(zone.id.ordinal));
            let task = tokio::spawn(
                async move {
                    trace.record(&host, format!("starting zone {what}"));
                    let started = tokio::time::Instant::now();
                    legacy::ensure_zone_nat(
                        &connector, &resolver, &expected, &entry, &mut rng, &progress,
                    )
                    .await;
                    trace.record(
                        &host,
                        format!(
                            "zone {what} started (start took {})",
                            racksim_sim::trace::fmt_duration(started.elapsed())
                        ),
                    );
                }
                .instrument(tracing::info_span!("host", host = %sled.name)),
            );
            sled.zone_starts
                .insert(zone.id, ZoneStart { progress: rx, task });
        }
    }
    /// sled-task: the sled's task's config is its zones' entries; the task
    /// starts with the sled's first zone and then follows the set.
    pub(super) fn follow_zones(&mut self, env: &Env, index: usize) {
        let sled = &mut self.sleds[index];
        if !sled.up() {
            return;
        }
        let entries: Vec<NatEntry> = self
            .zones
            .on_sled(index)
            .iter()
            .map(|z| zone_nat_entry(&z.spec, sled.address))
            .collect();
        if let Some(config_rx) = follow_entries(&mut sled.config, entries) {
            let reconciler = SledNatReconciler::new(
                LinkConnector {
                    from: sled.name.clone(),
                    links: env.shared.links.clone(),
                },
                env.shared.resolver.clone(),
            );
            let status = watch::Sender::new(TaskStatus::NotYetRun);
            sled.tasks.push(tokio::spawn(
                run_reconciler_task(reconciler, config_rx, None, env.shared.period, status)
                    .instrument(tracing::info_span!("host", host = %sled.name)),
            ));
        }
    }
}

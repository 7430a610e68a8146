//! The NAT reconcilers a strategy runs on a sled beside its zones: they
//! start with sled-agent, independently of zone start, and the per-sled
//! task's config follows the sled's zones.

use racksim_reconciler::{
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, TaskStatus, DEFAULT_PERIOD},
};
use tokio::sync::watch;

use crate::{
    net::{InternalDnsResolver, TurmoilConnector},
    world::{LiveZone, World},
};

/// sled-task: the per-sled task's config is this sled's zones' entries. It
/// starts with the sled's first zone and then follows the set. The task
/// owns the addresses of the zones in its config, so a zone moved here
/// takes its address over, while a zone removed (or moved away) leaves
/// an address nobody here owns: its entry is left for Nexus's task.
pub(super) fn follow_zones_in_sled_task(
    world: &World,
    resolver: &InternalDnsResolver,
    config: &mut Option<watch::Sender<Vec<NatEntry>>>,
    zones: &[LiveZone],
) {
    let entries: Vec<NatEntry> = zones
        .iter()
        .map(|z| world.zone_nat_entry(&z.spec))
        .collect();
    if let Some(config_rx) = follow_entries(config, entries) {
        // The task logs its activations (`tracing`); the run's
        // subscriber turns them into trace lines (`crate::logging`).
        let status_tx = watch::Sender::new(TaskStatus::NotYetRun);
        let reconciler = SledNatReconciler::new(TurmoilConnector, resolver.clone());
        tokio::task::spawn_local(run_reconciler_task(
            reconciler,
            config_rx,
            None,
            DEFAULT_PERIOD,
            status_tx,
        ));
    }
}

/// The per-sled task's config follows `entries`, its sled's zones'
/// entries: once the task runs, a change is sent to it; before, the first
/// non-empty set creates the config, and its receiver is returned — the
/// caller starts the task with it. Shared by the simulation and live mode.
pub fn follow_entries(
    config: &mut Option<watch::Sender<Vec<NatEntry>>>,
    entries: Vec<NatEntry>,
) -> Option<watch::Receiver<Vec<NatEntry>>> {
    match config {
        Some(tx) => {
            tx.send_if_modified(|current| {
                let changed = *current != entries;
                *current = entries;
                changed
            });
            None
        }
        None if !entries.is_empty() => {
            let (config_tx, config_rx) = watch::channel(entries);
            *config = Some(config_tx);
            Some(config_rx)
        }
        None => None,
    }
}

/// the scrimlet-reconcilers PR's design: a scrimlet reconciles its own switch zone from the
/// rack-wide config the bootstore carries.
pub(super) fn start_scrimlet_reconcilers(world: &World, index: usize) {
    let sled = world.sled(index);
    let (Some(slot), Some(scrimlet)) = (sled.scrimlet_of, world.scrimlet_status(index)) else {
        return;
    };
    let Some(zone) = world.switch_zone_address(slot) else {
        return;
    };
    // Its statuses are logged by the reconciler itself (`tracing`).
    let (_handle, driver) = scrimlet_reconcilers(
        TurmoilConnector,
        SwitchZoneServices::UnderlayIp(zone),
        world.bootstore(),
        scrimlet,
        DEFAULT_PERIOD,
    );
    tokio::task::spawn_local(driver);
}

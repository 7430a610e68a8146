//! The NAT reconcilers a strategy runs on a sled beside its zones: they
//! start with sled-agent, independently of zone start.

use racksim_reconciler::{
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, TaskStatus, DEFAULT_PERIOD},
};
use tokio::sync::watch;

use crate::{
    net::{InternalDnsResolver, TurmoilConnector},
    plan::Strategy,
    world::World,
};

/// Starts the reconcilers of the run's strategy for sled `index`, whose
/// zones need `entries`. The sender returned (if any) feeds the task its
/// config: the caller keeps it for as long as the host's software runs.
pub(super) fn start(
    world: &World,
    index: usize,
    resolver: &InternalDnsResolver,
    entries: &[NatEntry],
) -> Option<watch::Sender<Vec<NatEntry>>> {
    match world.params.strategy {
        Strategy::SledTask if !entries.is_empty() => {
            let (config_tx, config_rx) = watch::channel(entries.to_vec());
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
            Some(config_tx)
        }
        Strategy::ScrimletLocal => {
            start_scrimlet_reconcilers(world, index);
            None
        }
        _ => None,
    }
}

/// seed 003's design: a scrimlet reconciles its own switch zone from the
/// rack-wide config the bootstore carries.
fn start_scrimlet_reconcilers(world: &World, index: usize) {
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

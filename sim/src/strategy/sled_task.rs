//! The per-sled task (the zone-start NAT issue's proposal, strategy
//! `sled-task`): each sled runs one periodic task that owns its own zones'
//! entries on every switch it discovers.
//!
//! The task's config is the sled's zones' entries. It starts with the
//! sled's first zone and then follows the set: the task owns the addresses
//! of the zones in its config, so a zone moved here takes its address
//! over, while a zone removed (or moved away) leaves an address nobody here
//! owns — its entry is left for Nexus's task.

use racksim_reconciler::{
    nat::NatEntry,
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, TaskStatus, DEFAULT_PERIOD},
};
use tokio::sync::watch;

use super::{SledContext, SledStrategy};

/// Starts the per-sled task's part on a sled about to start `zones`.
pub(super) fn start(sled: &SledContext, zones: &[NatEntry]) -> impl SledStrategy {
    let mut on_sled = OnSled { config: None };
    on_sled.zones_changed(sled, zones);
    on_sled
}

/// The task's config, once the sled has had a zone.
struct OnSled {
    config: Option<watch::Sender<Vec<NatEntry>>>,
}

impl SledStrategy for OnSled {
    fn zones_changed(&mut self, sled: &SledContext, zones: &[NatEntry]) {
        if let Some(config_rx) = follow_entries(&mut self.config, zones.to_vec()) {
            // The task logs its activations (`tracing`); the run's
            // subscriber turns them into trace lines (`crate::logging`).
            let status_tx = watch::Sender::new(TaskStatus::NotYetRun);
            let reconciler = SledNatReconciler::new(sled.connector(), sled.resolver().clone());
            sled.spawn(run_reconciler_task(
                reconciler,
                config_rx,
                None,
                DEFAULT_PERIOD,
                status_tx,
            ));
        }
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

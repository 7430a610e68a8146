//! Nexus's background tasks (RPWs), each a loop that runs one activation at
//! a time and returns at once if the era does not have it
//! ([`Era`](crate::era::Era)). An orderly stop waits for the
//! activation in progress, never interrupts it. Each is quiet when it had
//! nothing to do — the trace records changes. The legacy era's
//! service-zone NAT task and the inventory collector are in
//! [`crate::inventory`].
//!
//! Instance NAT has no Nexus-side task: operations write versioned rows
//! and trigger dpd, and each dpd pulls them ([`crate::internal_api`]).

use std::{future::Future, net::SocketAddr, time::Duration};

use crate::instances::{
    v2p_sync,
    watcher::{
        instance_updater as update_instances, instance_watcher as watch_instances, reincarnate,
        VmmCheck, INSTANCE_UPDATER_PERIOD, INSTANCE_WATCHER_PERIOD, REINCARNATION_PERIOD,
    },
    StoreError,
};
use tokio::{
    sync::{watch, Notify},
    time::{interval, Interval, MissedTickBehavior},
};

use crate::{fmt_op, stop_requested, Event, Lane, NexusHost, NexusStore, Ops};

/// An interval whose missed ticks are delayed, not lost or bunched.
pub(crate) fn every(period: std::time::Duration) -> Interval {
    let mut interval = interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// Waits for `interval`'s next tick; false if an orderly stop is asked
/// for first. The stop wins a tie, so no activation starts after it.
pub(crate) async fn tick_unless_stopped(
    interval: &mut Interval,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    // Cancel-safe: observing a watch channel, and an interval's tick.
    tokio::select! {
        biased;
        () = stop_requested(stop) => false,
        _ = interval.tick() => true,
    }
}

/// Records what one activation of `task` did: `parts` joined in one line
/// after `what`, on `lane`; nothing when it did nothing.
fn record_parts<H: NexusHost>(
    host: &H,
    lane: Lane,
    what: &str,
    task: &'static str,
    parts: &[String],
) {
    if !parts.is_empty() {
        host.record(Event::new(lane, format!("{what}: {}", parts.join("; "))).field("task", task));
    }
}

/// The V2P task: every period and whenever an instance operation activates
/// it (`v2p_task`), push each sled the guest V2P mappings the database
/// implies.
pub async fn v2p<H: NexusHost>(
    host: &H,
    store: &NexusStore<H>,
    v2p_task: &Notify,
    mut stop: watch::Receiver<bool>,
) {
    if host.era().nexus_v2p != crate::era::PeriodicTask::On {
        return;
    }
    let mut interval = every(host.rpw_period());
    let connector = host.connector();
    loop {
        // Cancel-safe: observing a watch channel; an interval's tick (a
        // missed tick is delayed, not lost); and `Notify::notified`, whose
        // notification, if one reached it, is handed on when it is dropped
        // (and `notify_one` with no waiter leaves a permit), so an
        // activation is never lost.
        tokio::select! {
            biased;
            () = stop_requested(&mut stop) => return,
            () = v2p_task.notified() => {}
            _ = interval.tick() => {}
        }
        let mut parts = Vec::new();
        match v2p_sync(&connector, store).await {
            Err(e) => parts.push(format!("database: {e}")),
            Ok(sleds) => {
                for (sled, outcome) in sleds {
                    let name = host.sled_name(sled);
                    match outcome {
                        Ok(o) if o.removed == 0 && o.added == 0 && o.failures.is_empty() => {}
                        Ok(o) => parts.push(format!(
                            "{name}: unchanged {}, removed {}, added {}{}",
                            o.unchanged,
                            o.removed,
                            o.added,
                            if o.failures.is_empty() {
                                String::new()
                            } else {
                                format!(", failures: {}", host.names(&o.failures.join("; ")))
                            }
                        )),
                        Err(e) => parts.push(format!("{name}: failed: {}", host.names(&e))),
                    }
                }
            }
        }
        record_parts(host, Lane::Reconciler, "nexus V2P RPW", "nexus-v2p", &parts);
    }
}

/// The instance watcher, every [`INSTANCE_WATCHER_PERIOD`]: asks each
/// Running instance's sled-agent for its VMM, asks MGS about a sled that
/// does not answer, and runs the instance-update saga for each VMM found
/// gone (`crate::instances::watcher`).
pub async fn instance_watcher<H: NexusHost>(host: &H, ops: &Ops<H>, stop: watch::Receiver<bool>) {
    let connector = &host.connector();
    let activation = move || async move {
        let mgs: Vec<SocketAddr> = host.mgs();
        let watched = watch_instances(ops, connector, &mgs).await?;
        Ok(watched
            .into_iter()
            .filter(|w| w.check != VmmCheck::Healthy)
            .map(|w| {
                let update = match &w.update {
                    None => String::new(),
                    Some(outcome) => format!("; instance update: {}", fmt_op(outcome)),
                };
                host.names(&format!(
                    "{}'s VMM {} on {} {}{update}",
                    host.instance_name(w.instance),
                    w.vmm,
                    host.sled_name(w.sled),
                    w.check
                ))
            })
            .collect())
    };
    every_period(
        host,
        host.era().instance_watcher == crate::era::PeriodicTask::On,
        INSTANCE_WATCHER_PERIOD,
        ("nexus instance watcher", "instance-watcher"),
        stop,
        activation,
    )
    .await
}

/// The instance updater, every [`INSTANCE_UPDATER_PERIOD`]: finishes the
/// update of an instance whose VMM is gone but whose update never ran (a
/// stop whose Nexus died after the sled destroyed the VMM;
/// `crate::instances::watcher::instance_updater`). Runs where
/// the instance watcher does: the same era.
pub async fn instance_updater<H: NexusHost>(host: &H, ops: &Ops<H>, stop: watch::Receiver<bool>) {
    let activation = move || async move {
        let done = update_instances(ops).await?;
        Ok(done
            .into_iter()
            .map(|u| {
                host.names(&format!(
                    "{} stopping with its VMM destroyed: {}",
                    host.instance_name(u.instance),
                    fmt_op(&u.outcome)
                ))
            })
            .collect())
    };
    every_period(
        host,
        host.era().instance_watcher == crate::era::PeriodicTask::On,
        INSTANCE_UPDATER_PERIOD,
        ("nexus instance updater", "instance-updater"),
        stop,
        activation,
    )
    .await
}

/// Instance reincarnation, every [`REINCARNATION_PERIOD`]: starts Failed
/// instances again under their auto-restart policy and cooldown, measured
/// by the host's clock ([`NexusHost::now`]). Quiet while instances cool
/// down: the restart line says when it acts.
pub async fn reincarnation<H: NexusHost>(host: &H, ops: &Ops<H>, stop: watch::Receiver<bool>) {
    let activation = move || async move {
        let done = reincarnate(ops, host.now()).await?;
        Ok(done
            .into_iter()
            .filter_map(|r| {
                let outcome = fmt_op(r.start.as_ref()?);
                Some(host.names(&format!(
                    "restart {} on {}: {outcome}",
                    host.instance_name(r.instance),
                    host.sled_name(r.sled)
                )))
            })
            .collect())
    };
    every_period(
        host,
        host.era().reincarnation == crate::era::PeriodicTask::On,
        REINCARNATION_PERIOD,
        ("nexus instance reincarnation", "instance-reincarnation"),
        stop,
        activation,
    )
    .await
}

/// A periodic instance task: nothing unless the era has it (`enabled`);
/// otherwise, every `period` until an orderly stop, one `activation`,
/// whose lines (or the database's error) are recorded in one line on the
/// instance lane, after `what` and with `task` as its task field.
async fn every_period<H: NexusHost, Lines: Future<Output = Result<Vec<String>, StoreError>>>(
    host: &H,
    enabled: bool,
    period: Duration,
    (what, task): (&str, &'static str),
    mut stop: watch::Receiver<bool>,
    mut activation: impl FnMut() -> Lines,
) {
    if !enabled {
        return;
    }
    let mut interval = every(period);
    while tick_unless_stopped(&mut interval, &mut stop).await {
        let parts = activation()
            .await
            .unwrap_or_else(|e| vec![format!("database: {e}")]);
        record_parts(host, Lane::Instance, what, task, &parts);
    }
}

//! # racksim-nexus: the control plane, once
//!
//! racksim's Nexus is reduced to what service and instance networking need,
//! and it exists exactly once: the deterministic simulation
//! (`racksim_sim::hosts::control_plane`, on turmoil's sockets and clock) and
//! live mode (`racksim serve`, on loopback sockets and the wall clock) both
//! run this crate's [`serve`]. What differs between them is only where Nexus
//! runs, and that is one trait, [`NexusHost`]: how it connects, where its
//! database's lock is, what time it is, where its trace lines go, what the
//! inventory says.
//!
//! ```text
//!   instance API requests --> api::instance_api --.
//!                                                 |   InstanceOps (instances:
//!   every 30 s / activation --> tasks::{v2p,      +-> sagas, the instance watcher,
//!      watcher, updater, reincarnation}  --------'    reincarnation, V2P sync)
//!
//!   every 600 s --> inventory::collector --> Db.inventory
//!   every 30 s  --> inventory::service_zone_nat --> Db.nat (VNI 100 rows) + dpd triggers
//!                                                          |
//!   dpd's NAT RPW --> internal_api (changesets) --> NexusStore<H> --> Db (under H's lock)
//! ```
//!
//! * [`db`] — the database: instance records with generation-checked
//!   updates, the versioned instance NAT table, the saga log (which Nexus
//!   executes each saga). It outlives every Nexus incarnation.
//! * [`store`] — [`NexusStore`], the one implementation of the reconciler
//!   crate's `InstanceStore` over that database: each method one
//!   transaction after the host's round trip, each write told to the host
//!   (the simulation's checks look again) and traced.
//! * [`api`] — the instance API: each request in its own task, so requests
//!   race as against a real API; an orderly stop refuses what has not
//!   started and lets what has finish.
//! * [`tasks`] — the background tasks (RPWs) of the run's era: the V2P
//!   task, the instance watcher with its update saga, the instance updater
//!   and instance reincarnation.
//! * [`inventory`] — the inventory collector and the legacy era's
//!   service-zone NAT task, which writes service zones' rows from the
//!   latest collection into the versioned NAT table (it never reads dpd).
//! * [`internal_api`] — the part of Nexus's internal API dpd pulls:
//!   `GET /nat/ipv4/changeset/{from_gen}`, as a framework-neutral router
//!   (the simulation's server); `racksim-servers` serves the same store
//!   call with dropshot (live mode's).
//! * `woken` — how [`serve`] joins the tasks: each polled only when
//!   something woke it, in the join's own order, so a wake of one task
//!   does not poll the other seven for nothing.
//!
//! What stays with the host is the lifecycle: when Nexus comes up (the
//! simulation waits for time synchronisation; live mode starts at once),
//! and how it goes down. An orderly stop is the `stop` channel [`serve`]
//! watches: no new requests, what is in flight finishes, each background
//! task finishes its activation. A crash is dropping [`serve`]'s future:
//! everything is abandoned where it is — possibly between a database write
//! and its saga log entry — and the next incarnation resumes its own
//! unfinished sagas from the log.

use std::{future::Future, net::Ipv6Addr, net::SocketAddr, sync::Arc, time::Duration};

use racksim_reconciler::{
    discovery::{SwitchSlot, SwitchZoneResolver},
    http::Connector,
};

use crate::instances::{InstanceOps, InstanceRecord, OpError, SledRef, StartImpl, StoreError};
use crate::woken::Woken;
use tokio::{
    sync::{watch, Notify},
    task::JoinSet,
};

pub mod api;
pub mod db;
pub mod era;
pub mod instances;
pub mod internal_api;
pub mod inventory;
pub mod store;
pub mod tasks;
mod woken;

#[cfg(feature = "mutants")]
mod mutants;

pub use api::Requests;
pub use db::{instance_record, Db, InstanceRequest, IpPool};
pub use inventory::{Collection, SledInventory};
pub use store::NexusStore;

/// Port of Nexus's internal API on its zone's address (Omicron's
/// `NEXUS_INTERNAL_PORT`).
pub const NEXUS_INTERNAL_PORT: u16 = 12221;

/// Period of Nexus's V2P and service-zone NAT tasks (upstream's 30 s).
/// The instance watcher and reincarnation have their own
/// (`crate::instances::watcher`).
pub const RPW_PERIOD: Duration = Duration::from_secs(30);

/// Where a trace line belongs (the simulation's lanes; live mode's log
/// ignores them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Instance records, operations, the watcher and reincarnation.
    Instance,
    /// Saga log entries.
    Saga,
    /// Background tasks that reconcile the rack (V2P, service NAT).
    Reconciler,
}

/// One thing Nexus did, for its host's trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub lane: Lane,
    pub text: String,
    /// Structured fields (`task`, `instance`, `saga`, `state`, …), in the
    /// order given.
    pub fields: Vec<(&'static str, String)>,
}

impl Event {
    pub fn new(lane: Lane, text: impl Into<String>) -> Self {
        Event {
            lane,
            text: text.into(),
            fields: Vec::new(),
        }
    }

    pub fn field(mut self, key: &'static str, value: impl ToString) -> Self {
        self.fields.push((key, value.to_string()));
        self
    }
}

/// A write to the database the host may want to hear of (the simulation's
/// checks read the database, so each write is a change of the world).
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// An instance record's conditional update went through.
    Record {
        before: crate::instances::InstanceState,
        after: &'a InstanceRecord,
    },
    /// The instance NAT table changed.
    Nat,
}

/// Everything Nexus needs from the rack it runs in. The simulation and
/// live mode each implement it once; the rest of Nexus is this crate's.
pub trait NexusHost: Clone + Send + Sync + 'static {
    /// How Nexus reaches sled-agents, dpds and MGS.
    type Connector: Connector;
    /// Internal DNS, where Nexus finds the switch zones (its instance
    /// operations' switch lookup, its service-NAT task).
    type Resolver: SwitchZoneResolver;

    /// The host Nexus runs on: its trace lines' host, and its identity as
    /// saga executor (a Nexus recovers only its own sagas).
    fn name(&self) -> &str;
    /// The run's era: which tasks run, and which code each mechanism has
    /// ([`era::Era`], decided once per run).
    fn era(&self) -> era::Era;
    /// How instance starts are carried out (and whether sagas are logged).
    fn start(&self) -> StartImpl;
    /// Period of the V2P and service-zone NAT tasks ([`RPW_PERIOD`] but in
    /// a live rack run at another period).
    fn rpw_period(&self) -> Duration;
    fn connector(&self) -> Self::Connector;
    fn resolver(&self) -> Self::Resolver;

    /// Runs one transaction on the database, under the host's lock.
    fn db<R>(&self, f: impl FnOnce(&mut Db) -> R) -> R;
    /// The round trip of one statement to the database: its latency (the
    /// simulation's few milliseconds; nothing in live mode), then what a
    /// database fault does to it — a stall ([`NexusHost::stall`]) is
    /// waited out, and while the database answers errors the statement
    /// fails with one ([`StoreError::Unavailable`], CockroachDB's
    /// retryable `40001`). Nothing is read or written when it fails.
    fn round_trip(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// The round trip of a statement whose first step is the NAT version
    /// sequence's `nextval`: latency and errors, but never a stall —
    /// sequence increments are non-transactional and the sequence's range
    /// is not the table's, so `nextval` answers while the table's ranges
    /// are unavailable ([`store::nat_statements`] then waits out the stall
    /// with [`NexusHost::stall`] before the write). Defaults to
    /// [`NexusHost::round_trip`].
    fn sequence_round_trip(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.round_trip()
    }
    /// What a database fault does to a statement now, without its
    /// latency: waits out a stall in progress, then fails while the
    /// database answers errors. The default: nothing.
    fn faults(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }
    /// Whether the database stalls now (see [`NexusHost::stall`]).
    fn stalled(&self) -> bool {
        false
    }
    /// Waits out a database stall in progress (the ranges whose lease a
    /// dead node held are unavailable until the lease moves): returns at
    /// once, without yielding, when there is none (the default).
    fn stall(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
    /// The wait before a retryable transaction's next attempt: upstream's
    /// `RetryHelper` draws it uniformly in `0..50 ms`
    /// ([`store::RETRY_BACKOFF_MAX`]). The default is the mean.
    fn retry_backoff(&self) -> Duration {
        store::RETRY_BACKOFF_MAX / 2
    }
    /// A write went through (after its transaction).
    fn wrote(&self, write: Write<'_>);
    /// The inventory's in-service sleds.
    fn sleds(&self) -> Vec<SledRef>;
    /// The boundary switches: those the database has an uplink
    /// configured for. Where their dpds are, Nexus looks up itself
    /// (internal DNS, then each zone: [`era::Era::switch_lookup`]).
    fn boundary_switches(&self) -> Vec<SwitchSlot>;
    /// The management gateways the instance watcher asks about a sled
    /// that does not answer.
    fn mgs(&self) -> Vec<SocketAddr>;
    /// What an inventory collection by this Nexus finds now: each
    /// in-service sled, with the service zones its sled-agent reports
    /// running, or `None` if it does not answer (the collector,
    /// [`inventory::collector`]).
    fn inventory(&self) -> Vec<SledInventory>;
    /// The clock reincarnation's cooldown is measured by (upstream's
    /// `time_last_auto_restarted` is a timestamp).
    fn now(&self) -> Duration;

    /// Records a trace line from this Nexus.
    fn record(&self, event: Event);
    fn instance_name(&self, id: u32) -> String;
    fn sled_name(&self, id: u32) -> String;
    /// A switch zone's name, by address.
    fn zone_name(&self, zone: Ipv6Addr) -> String;
    /// `text` with the addresses it names replaced by host names, where the
    /// host knows them.
    fn names(&self, text: &str) -> String;

    /// Spawns an instance operation into `set`, whose owner (the instance
    /// API's future) aborts it on a crash. The simulation spawns on its
    /// host's local set, live mode on the runtime.
    fn spawn(&self, set: &mut JoinSet<()>, op: impl Future<Output = ()> + Send + 'static);
    /// An instance operation finished (the simulation notes completed
    /// deletes for its checks).
    fn op_done(&self, req: &InstanceRequest, outcome: &Result<InstanceRecord, OpError>);
    /// An orderly stop began: the instance API takes no more requests.
    fn stopping(&self);
}

/// The instance operations a Nexus on `H` runs.
pub type Ops<H> = InstanceOps<<H as NexusHost>::Connector, NexusStore<H>>;

/// An operation's outcome as the trace says it (`ok, running`, `failed: …`).
pub fn fmt_op(outcome: &Result<InstanceRecord, OpError>) -> String {
    match outcome {
        Ok(rec) => format!("ok, {}", rec.state),
        Err(e) => format!("failed: {e}"),
    }
}

/// Resolves once an orderly stop is asked for (or its sender is gone).
/// Cancel-safe: it only observes a watch channel.
pub async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One Nexus incarnation, from the moment it is up: resumes its own
/// unfinished sagas, then runs the instance API (serving `requests`), the
/// era's background tasks and the internal API (`internal_api`, given this
/// incarnation's store) until an orderly stop on `stop`, which lets them
/// finish what they are doing. A crash is dropping this future.
pub async fn serve<H, F>(
    host: &H,
    requests: impl Requests,
    stop: watch::Receiver<bool>,
    internal_api: impl FnOnce(NexusStore<H>) -> F,
) where
    H: NexusHost,
    F: Future<Output = ()>,
{
    let (era, start) = (host.era(), host.start());
    let store = NexusStore::new(host.clone());
    let v2p_task = Arc::new(Notify::new());
    let ops: Ops<H> = InstanceOps::new(host.connector(), store.clone(), start)
        .with_switch_zones(host.resolver())
        .with_switch_lookup(era.switch_lookup)
        .with_v2p_task(v2p_task.clone())
        .with_dpd_notify(era.dpd_notify)
        .with_remove_notify(era.remove_notify)
        .with_propagation(era.nat_propagation(), era.v2p_propagation());
    if start == StartImpl::Saga {
        // What a previous incarnation left half done is finished first.
        for (saga, instance, outcome) in ops.resume_sagas().await {
            host.record(Event::new(
                Lane::Saga,
                format!(
                    "nexus: resumed saga {saga} of {}: {}",
                    host.instance_name(instance),
                    fmt_op(&outcome)
                ),
            ));
        }
    }
    // One owner per era: Nexus's service-zone NAT task existed while the
    // legacy path and the per-sled task did; upstream removed it once the
    // scrimlet reconcilers owned service NAT (two owners of one table
    // duel), so in the target era it does not run. Each task is polled
    // only when something woke it (`woken`): a wake of one does not poll
    // the other seven, and the join's order is tokio's, as before.
    tokio::join!(
        Woken::new(inventory::collector(host, stop.clone())),
        Woken::new(inventory::service_zone_nat(host, stop.clone())),
        Woken::new(tasks::instance_watcher(host, &ops, stop.clone())),
        Woken::new(tasks::reincarnation(host, &ops, stop.clone())),
        Woken::new(tasks::instance_updater(host, &ops, stop.clone())),
        Woken::new(tasks::v2p(host, &store, &v2p_task, stop.clone())),
        Woken::new(api::instance_api(host, &ops, requests, stop.clone())),
        Woken::new(internal_api(store.clone())),
    );
}

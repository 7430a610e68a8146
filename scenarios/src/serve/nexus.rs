//! Live mode's control plane: a Nexus running the reconciler crate's
//! instance operations ([`InstanceOps`]) and background tasks against the
//! live fakes, over a database of the simulation's kind ([`Db`]).
//!
//! As in the simulation (`racksim_sim::hosts::control_plane`):
//!
//! * the instance API runs each request in its own task, so requests race
//!   as they would against a real API; requests made while the control
//!   plane is down wait for it;
//! * instance NAT is written to the database's versioned table and each
//!   dpd is triggered; every switch zone's dpd pulls the changes since its
//!   generation from Nexus's internal API (`GET
//!   /nat/ipv4/changeset/{from_gen}`), every period and on trigger — a
//!   restarted dpd pulls from generation 0 ([`dpd_nat_rpw`]);
//! * the V2P task runs every period and when an operation activates it;
//! * Nexus's service-zone NAT task runs where it ran upstream (`sled-task`;
//!   under `scrimlet-local` the scrimlets own service NAT alone);
//! * `control-plane-down` is an orderly stop (no new requests, those in
//!   flight finish, the background tasks finish their activation);
//!   `control-plane-crash` abandons everything where it is, and the next
//!   start resumes the unfinished sagas from the saga log.
//!
//! What live mode simplifies: one Nexus, not one per Nexus zone, listening
//! on the underlay address of the rack's first Nexus zone; it runs beside
//! the rack rather than in that zone (a crash of its sled does not take it
//! down — the control-plane actions do), and it is up from the start
//! (there is no time synchronisation to wait for).

use std::{
    collections::VecDeque,
    net::{Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use dropshot::{
    ConfigDropshot, ConfigLogging, ConfigLoggingLevel, HttpError, HttpResponseOk, HttpServer, Path,
    Query, RequestContext, ServerBuilder,
};
use racksim_fakes::api::DpdContext;
use racksim_reconciler::{
    discovery::{SwitchSlot, SwitchZoneResolver},
    dpd::DpdClient,
    http::HttpClient,
    instances::{
        v2p_sync,
        watcher::{
            instance_watcher, reincarnate, VmmCheck, INSTANCE_WATCHER_PERIOD, REINCARNATION_PERIOD,
        },
        InstanceOps, InstanceRecord, InstanceStore, NatEntryView, OpError, RuntimeUpdate,
        SagaRecord, SledRef, StartImpl, StoreError,
    },
    nat::{reconcile_switch, NatEntry, Scope},
    DPD_PORT, SERVICES_VNI,
};
use racksim_sim::{
    hosts::{control_plane::NEXUS_INTERNAL_PORT, switch_zone::NAT_CHANGESET_LIMIT},
    world::{Db, InstanceRequest},
    Strategy,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::{
    sync::{mpsc, watch, Notify},
    task::{JoinHandle, JoinSet},
};

use super::{
    net::{FixedResolver, LinkConnector, Links},
    trace::LiveTrace,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the database knows of the rack's hardware: sleds (by id, their
/// index) and the boundary switches' zones.
#[derive(Clone, Default)]
pub(super) struct Inventory {
    inner: Arc<Mutex<InventoryInner>>,
}

#[derive(Default)]
struct InventoryInner {
    /// Name, underlay address, retired.
    sleds: Vec<(String, Ipv6Addr, bool)>,
    boundary: std::collections::BTreeMap<SwitchSlot, Ipv6Addr>,
}

impl Inventory {
    pub fn add_sled(&self, name: &str, address: Ipv6Addr) {
        lock(&self.inner)
            .sleds
            .push((name.to_string(), address, false));
    }

    pub fn retire_sled(&self, index: usize) {
        if let Some(s) = lock(&self.inner).sleds.get_mut(index) {
            s.2 = true;
        }
    }

    /// The switch zone in `slot` (an uplinked one) is at `zone`.
    pub fn boundary_switch(&self, slot: SwitchSlot, zone: Ipv6Addr) {
        lock(&self.inner).boundary.insert(slot, zone);
    }

    fn sled_name(&self, id: u32) -> String {
        lock(&self.inner)
            .sleds
            .get(id as usize)
            .map_or_else(|| format!("sled {id}"), |s| s.0.clone())
    }
}

/// The database as live mode's Nexus sees it: the simulation's [`Db`]
/// (the same transactions), the inventory, and the trace its writes go to.
#[derive(Clone)]
pub(super) struct LiveStore {
    db: Arc<Mutex<Db>>,
    inventory: Inventory,
    /// The Nexus it serves, for trace lines and as saga executor.
    host: String,
    trace: LiveTrace,
}

impl LiveStore {
    pub fn instances_now(&self) -> Vec<InstanceRecord> {
        lock(&self.db).instances.values().cloned().collect()
    }
}

impl InstanceStore for LiveStore {
    async fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        lock(&self.db).fetch(id)
    }

    async fn update_if(
        &self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<InstanceRecord, StoreError> {
        let (before, after) = lock(&self.db).update_if(id, expected_generation, update)?;
        let sled = after
            .sled
            .map(|s| format!(" on {}", self.inventory.sled_name(s)))
            .unwrap_or_default();
        self.trace.record(
            &self.host,
            format!(
                "db: {} {before} -> {}{sled} (generation {})",
                after.name, after.state, after.generation
            ),
        );
        Ok(after)
    }

    async fn sleds(&self) -> Result<Vec<SledRef>, StoreError> {
        Ok(lock(&self.inventory.inner)
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.2)
            .map(|(i, s)| SledRef {
                id: i as u32,
                address: s.1,
            })
            .collect())
    }

    async fn boundary_switches(&self) -> Result<Vec<SocketAddr>, StoreError> {
        Ok(lock(&self.inventory.inner)
            .boundary
            .values()
            .map(|zone| SocketAddr::new((*zone).into(), DPD_PORT))
            .collect())
    }

    async fn next_id(&self) -> Result<u64, StoreError> {
        Ok(lock(&self.db).next_id())
    }

    async fn nat_set_instance(&self, id: u32, entries: Vec<NatEntry>) -> Result<(), StoreError> {
        lock(&self.db).nat.set_instance(id, &entries);
        Ok(())
    }

    async fn nat_clear_instance(&self, id: u32) -> Result<(), StoreError> {
        lock(&self.db).nat.clear_instance(id);
        Ok(())
    }

    async fn nat_changeset(
        &self,
        from_gen: i64,
        limit: u32,
    ) -> Result<Vec<NatEntryView>, StoreError> {
        Ok(lock(&self.db).nat.changeset(from_gen, limit))
    }

    async fn note_auto_restart(&self, id: u32, at: std::time::Duration) -> Result<(), StoreError> {
        lock(&self.db).note_auto_restart(id, at)
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        Ok(self.instances_now())
    }

    async fn saga_create(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        lock(&self.db).saga_create(saga, &self.host);
        self.trace
            .record(&self.host, format!("saga {}: created", saga.id));
        Ok(())
    }

    async fn saga_update(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        lock(&self.db).sagas.insert(saga.id, saga.clone());
        Ok(())
    }

    async fn sagas_unfinished(&self) -> Result<Vec<SagaRecord>, StoreError> {
        Ok(lock(&self.db).sagas_unfinished(&self.host))
    }
}

/// `GET /nat/ipv4/changeset/{from_gen}`'s path.
#[derive(Deserialize, JsonSchema)]
pub struct ChangesetPath {
    pub from_gen: i64,
}

/// Its query.
#[derive(Deserialize, JsonSchema)]
pub struct ChangesetQuery {
    pub limit: u32,
}

/// The part of Nexus's internal API dpd's NAT RPW calls.
#[dropshot::api_description]
pub trait NexusInternalApi {
    type Context;

    /// The instance NAT changes after generation `from_gen`, oldest first.
    #[endpoint { method = GET, path = "/nat/ipv4/changeset/{from_gen}" }]
    async fn ipv4_nat_changeset(
        rqctx: RequestContext<Self::Context>,
        path: Path<ChangesetPath>,
        query: Query<ChangesetQuery>,
    ) -> Result<HttpResponseOk<Vec<NatEntryView>>, HttpError>;
}

enum NexusInternalImpl {}

impl NexusInternalApi for NexusInternalImpl {
    type Context = LiveStore;

    async fn ipv4_nat_changeset(
        rqctx: RequestContext<LiveStore>,
        path: Path<ChangesetPath>,
        query: Query<ChangesetQuery>,
    ) -> Result<HttpResponseOk<Vec<NatEntryView>>, HttpError> {
        let changes = rqctx
            .context()
            .nat_changeset(path.into_inner().from_gen, query.into_inner().limit)
            .await
            .map_err(|e| HttpError::for_unavail(None, format!("database: {e}")))?;
        Ok(HttpResponseOk(changes))
    }
}

fn serve_internal(store: LiveStore) -> Result<HttpServer<LiveStore>, String> {
    let api = nexus_internal_api_mod::api_description::<NexusInternalImpl>()
        .map_err(|e| e.to_string())?;
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger("racksim-nexus")
    .map_err(|e| e.to_string())?;
    ServerBuilder::new(api, store, log)
        .config(ConfigDropshot {
            bind_address: SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0),
            ..Default::default()
        })
        .start()
        .map_err(|e| format!("Nexus internal API: {e}"))
}

/// What the Nexus needs from the rack around it.
#[derive(Clone)]
pub(super) struct NexusEnv {
    pub strategy: Strategy,
    pub start: StartImpl,
    pub period: Duration,
    pub trace: LiveTrace,
    pub links: Links,
    pub resolver: FixedResolver,
    /// The service zones' desired NAT entries (the database's view).
    pub desired: watch::Receiver<Vec<NatEntry>>,
    /// Declared instances' names, by id - 1.
    pub instances: Vec<String>,
}

/// A running Nexus.
struct Running {
    requests: mpsc::UnboundedSender<InstanceRequest>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    server: HttpServer<LiveStore>,
}

/// Live mode's control plane.
pub(super) struct LiveNexus {
    env: NexusEnv,
    store: LiveStore,
    /// Where dpds reach its internal API (its zone's underlay address).
    pub internal: SocketAddr,
    /// Requests made while it is down.
    queue: VecDeque<InstanceRequest>,
    running: Option<Running>,
    /// Stopped incarnations finishing what they were doing.
    draining: Vec<JoinHandle<()>>,
}

impl LiveNexus {
    /// A Nexus in the zone on `host` (at `address`), not started.
    pub fn new(env: NexusEnv, host: &str, address: Ipv6Addr, inventory: Inventory) -> Self {
        let mut db = Db::default();
        for (i, name) in env.instances.iter().enumerate() {
            db.declare(i as u32 + 1, name);
        }
        let store = LiveStore {
            db: Arc::new(Mutex::new(db)),
            inventory,
            host: host.to_string(),
            trace: env.trace.clone(),
        };
        LiveNexus {
            env,
            store,
            internal: SocketAddr::new(address.into(), NEXUS_INTERNAL_PORT),
            queue: VecDeque::new(),
            running: None,
            draining: Vec::new(),
        }
    }

    pub fn host(&self) -> &str {
        &self.store.host
    }

    pub fn up(&self) -> bool {
        self.running.is_some()
    }

    pub fn instances(&self) -> Vec<InstanceRecord> {
        self.store.instances_now()
    }

    /// The instance NAT table's version.
    pub fn nat_version(&self) -> i64 {
        lock(&self.store.db).nat.version()
    }

    fn connector(&self) -> LinkConnector {
        LinkConnector {
            from: self.store.host.clone(),
            links: self.env.links.clone(),
        }
    }

    /// Starts the control plane: its internal API, the unfinished sagas,
    /// the requests waiting for it and its background tasks.
    pub fn start(&mut self) -> Result<(), String> {
        if self.running.is_some() {
            return Ok(());
        }
        let env = &self.env;
        let server = serve_internal(self.store.clone())?;
        env.links.serves(&self.store.host, server.local_addr());
        env.links.maps(self.internal, server.local_addr());
        let v2p = Arc::new(Notify::new());
        let ops = InstanceOps::new(self.connector(), self.store.clone(), env.start)
            .with_v2p_task(v2p.clone());
        let (stop, _) = watch::channel(false);
        let (requests, rx) = mpsc::unbounded_channel();
        for req in self.queue.drain(..) {
            let _ = requests.send(req);
        }
        let mut tasks = vec![tokio::spawn(instance_api(
            env.clone(),
            self.store.host.clone(),
            ops.clone(),
            rx,
            stop.subscribe(),
        ))];
        // The instance watcher and reincarnation: today's control plane,
        // not seed 002's (as in the simulation, `racksim_sim::era`).
        if env.start != StartImpl::Legacy {
            tasks.push(tokio::spawn(watcher_rpw(
                env.clone(),
                self.store.clone(),
                ops.clone(),
                stop.subscribe(),
            )));
            tasks.push(tokio::spawn(reincarnation_rpw(
                env.clone(),
                self.store.clone(),
                ops,
                stop.subscribe(),
            )));
        }
        if env.start != StartImpl::Legacy {
            tasks.push(tokio::spawn(v2p_rpw(
                env.clone(),
                self.store.clone(),
                self.connector(),
                v2p,
                stop.subscribe(),
            )));
        }
        // One owner per era: Nexus's service-zone NAT task existed while
        // the legacy path and the per-sled task did, not beside the
        // scrimlet reconcilers.
        if env.strategy != Strategy::ScrimletLocal {
            tasks.push(tokio::spawn(service_nat_rpw(
                env.clone(),
                self.store.host.clone(),
                self.connector(),
                stop.subscribe(),
            )));
        }
        env.trace.record(
            &self.store.host,
            "nexus: control plane up; starting background tasks",
        );
        self.running = Some(Running {
            requests,
            stop,
            tasks,
            server,
        });
        Ok(())
    }

    /// An orderly stop: no new requests; those in flight and the
    /// background tasks' activations finish.
    pub fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop.send_replace(true);
            let trace = self.env.trace.clone();
            let host = self.store.host.clone();
            self.draining.push(tokio::spawn(async move {
                for t in r.tasks {
                    let _ = t.await;
                }
                let _ = r.server.close().await;
                trace.record(
                    &host,
                    "nexus: control plane stopped; in-flight operations finished first",
                );
            }));
        }
    }

    /// A crash: everything in flight is abandoned where it is; the
    /// database (and its saga log) survives.
    pub fn crash(&mut self) {
        if let Some(r) = self.running.take() {
            for t in &r.tasks {
                t.abort();
            }
            self.draining.push(tokio::spawn(async move {
                let _ = r.server.close().await;
            }));
            self.env.trace.record(
                &self.store.host,
                "nexus: control plane crashed; in-flight operations abandoned",
            );
        }
    }

    /// Stops it without a word, when the live rack stops.
    pub async fn shut_down(&mut self) {
        if let Some(r) = self.running.take() {
            for t in &r.tasks {
                t.abort();
            }
            let _ = r.server.close().await;
        }
        for t in self.draining.drain(..) {
            let _ = t.await;
        }
    }

    /// A request to the instance API: run now, or when the control plane
    /// is next up.
    pub fn submit(&mut self, req: InstanceRequest) {
        match &self.running {
            Some(r) => {
                let _ = r.requests.send(req);
            }
            None => self.queue.push_back(req),
        }
    }
}

fn fmt_op(outcome: &Result<InstanceRecord, OpError>) -> String {
    match outcome {
        Ok(rec) => format!("ok, {}", rec.state),
        Err(e) => format!("failed: {e}"),
    }
}

/// The instance API: resumes the unfinished sagas first, then runs each
/// request in its own task until an orderly stop, which refuses what has
/// not started and waits for what has.
async fn instance_api(
    env: NexusEnv,
    host: String,
    ops: InstanceOps<LinkConnector, LiveStore>,
    mut requests: mpsc::UnboundedReceiver<InstanceRequest>,
    mut stop: watch::Receiver<bool>,
) {
    if ops.start_impl() == StartImpl::Saga {
        for (saga, instance, outcome) in ops.resume_sagas().await {
            env.trace.record(
                &host,
                format!(
                    "nexus: resumed saga {saga} of {}: {}",
                    name_of(&env, instance),
                    fmt_op(&outcome)
                ),
            );
        }
    }
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            // Cancel-safe: observing a watch channel.
            () = stopped(&mut stop) => {
                while let Ok(req) = requests.try_recv() {
                    env.trace.record(
                        &host,
                        format!(
                            "nexus: request for {} refused: the control plane is stopping",
                            name_of(&env, instance_of(&req))
                        ),
                    );
                }
                while running.join_next().await.is_some() {}
                return;
            }
            // Cancel-safe: a message not received stays in the channel.
            Some(req) = requests.recv() => {
                let (ops, env, host) = (ops.clone(), env.clone(), host.clone());
                running.spawn(async move {
                    let sled = |id: u32| ops.store().inventory.sled_name(id);
                    let (what, outcome) = match req {
                        InstanceRequest::Create { instance, sled: s } => (
                            format!("create {} on {}", name_of(&env, instance), sled(s)),
                            ops.create(instance, s).await,
                        ),
                        InstanceRequest::Start { instance, sled: s } => (
                            format!("start {} on {}", name_of(&env, instance), sled(s)),
                            ops.start(instance, s).await,
                        ),
                        InstanceRequest::Stop { instance } => (
                            format!("stop {}", name_of(&env, instance)),
                            ops.stop(instance).await,
                        ),
                        InstanceRequest::Delete { instance } => (
                            format!("delete {}", name_of(&env, instance)),
                            ops.delete(instance).await,
                        ),
                    };
                    env.trace.record(&host, format!("nexus: {what}: {}", fmt_op(&outcome)));
                });
            }
            // Cancel-safe: a task not yet joined stays in the set.
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
}

/// Resolves once an orderly stop is asked for (or the Nexus is gone).
/// Cancel-safe: it only observes a watch channel.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn instance_of(req: &InstanceRequest) -> u32 {
    match req {
        InstanceRequest::Create { instance, .. }
        | InstanceRequest::Start { instance, .. }
        | InstanceRequest::Stop { instance }
        | InstanceRequest::Delete { instance } => *instance,
    }
}

fn name_of(env: &NexusEnv, id: u32) -> String {
    env.instances
        .get(id as usize - 1)
        .cloned()
        .unwrap_or_else(|| format!("instance {id}"))
}

/// The V2P background task: every period and whenever an operation
/// activates it.
async fn v2p_rpw(
    env: NexusEnv,
    store: LiveStore,
    connector: LinkConnector,
    activate: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(env.period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Cancel-safe: a watch channel; an interval's tick (a missed tick
        // is delayed, not lost); `Notify::notified`, which hands on a
        // notification it got when dropped.
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            () = activate.notified() => {}
            _ = interval.tick() => {}
        }
        let mut parts = Vec::new();
        match v2p_sync(&connector, &store).await {
            Err(e) => parts.push(format!("database: {e}")),
            Ok(sleds) => {
                for (sled, outcome) in sleds {
                    let name = store.inventory.sled_name(sled);
                    match outcome {
                        Ok(o) if o.removed == 0 && o.added == 0 && o.failures.is_empty() => {}
                        Ok(o) => parts.push(format!(
                            "{name}: removed {}, added {}{}",
                            o.removed,
                            o.added,
                            if o.failures.is_empty() {
                                String::new()
                            } else {
                                format!(", failures: {}", o.failures.join("; "))
                            }
                        )),
                        Err(e) => parts.push(format!("{name}: failed: {e}")),
                    }
                }
            }
        }
        if !parts.is_empty() {
            env.trace
                .record(&store.host, format!("nexus V2P RPW: {}", parts.join("; ")));
        }
    }
}

/// The instance watcher, every [`INSTANCE_WATCHER_PERIOD`], with the
/// update saga for each VMM found gone (the simulation's Nexus runs the
/// same `racksim_reconciler::instances::watcher`). MGS is asked on each
/// boundary switch zone's underlay address.
async fn watcher_rpw(
    env: NexusEnv,
    store: LiveStore,
    ops: InstanceOps<LinkConnector, LiveStore>,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(INSTANCE_WATCHER_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let connector = ops_connector(&store, &env);
    loop {
        // Cancel-safe: a watch channel and an interval's tick.
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            _ = interval.tick() => {}
        }
        let mgs: Vec<SocketAddr> = match store.boundary_switches().await {
            Ok(dpds) => dpds
                .into_iter()
                .map(|a| SocketAddr::new(a.ip(), racksim_reconciler::MGS_PORT))
                .collect(),
            Err(_) => Vec::new(),
        };
        let parts: Vec<String> = match instance_watcher(&ops, &connector, &mgs).await {
            Err(e) => vec![format!("database: {e}")],
            Ok(watched) => watched
                .into_iter()
                .filter(|w| w.check != VmmCheck::Healthy)
                .map(|w| {
                    let what = &w.check;
                    let update = match &w.update {
                        None => String::new(),
                        Some(outcome) => format!("; instance update: {}", fmt_op(outcome)),
                    };
                    format!(
                        "{}'s VMM {} on {} {what}{update}",
                        name_of(&env, w.instance),
                        w.vmm,
                        store.inventory.sled_name(w.sled)
                    )
                })
                .collect(),
        };
        if !parts.is_empty() {
            env.trace.record(
                &store.host,
                format!("nexus instance watcher: {}", parts.join("; ")),
            );
        }
    }
}

/// Instance reincarnation, every [`REINCARNATION_PERIOD`]. Its cooldown's
/// clock is the wall clock (live mode runs in real time), as upstream's
/// `time_last_auto_restarted` is a timestamp.
async fn reincarnation_rpw(
    env: NexusEnv,
    store: LiveStore,
    ops: InstanceOps<LinkConnector, LiveStore>,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(REINCARNATION_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Cancel-safe: a watch channel and an interval's tick.
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            _ = interval.tick() => {}
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let parts: Vec<String> = match reincarnate(&ops, now).await {
            Err(e) => vec![format!("database: {e}")],
            Ok(done) => done
                .into_iter()
                .filter_map(|r| {
                    let outcome = fmt_op(r.start.as_ref()?);
                    Some(format!(
                        "restart {} on {}: {outcome}",
                        name_of(&env, r.instance),
                        store.inventory.sled_name(r.sled)
                    ))
                })
                .collect(),
        };
        if !parts.is_empty() {
            env.trace.record(
                &store.host,
                format!("nexus instance reincarnation: {}", parts.join("; ")),
            );
        }
    }
}

/// The connector of the Nexus zone `store` belongs to.
fn ops_connector(store: &LiveStore, env: &NexusEnv) -> LinkConnector {
    LinkConnector {
        from: store.host.clone(),
        links: env.links.clone(),
    }
}

/// Service NAT (`sled-task` only): make every discovered dpd's service
/// entries match the database.
async fn service_nat_rpw(
    env: NexusEnv,
    host: String,
    connector: LinkConnector,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(env.period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut activation = 0u64;
    loop {
        // Cancel-safe: a watch channel and an interval's tick.
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            _ = interval.tick() => {}
        }
        activation += 1;
        let desired = env.desired.borrow().clone();
        let line = match env.resolver.switch_zones().await {
            Err(e) => format!("discovery failed: {}", e.0),
            Ok(mut zones) => {
                zones.sort();
                let mut parts = Vec::new();
                for z in zones {
                    let dpd = DpdClient::new(HttpClient::new(
                        connector.clone(),
                        SocketAddr::new(z.into(), DPD_PORT),
                    ));
                    let outcome = reconcile_switch(&dpd, &desired, &Scope::Vni(SERVICES_VNI)).await;
                    parts.push(format!("{z}: {outcome}"));
                }
                parts.join("; ")
            }
        };
        env.trace.record(
            &host,
            format!("nexus service-NAT RPW #{activation}: {line}"),
        );
    }
}

/// dpd's instance NAT RPW (dendrite): at start — from generation 0, a
/// started dpd's table is empty — every period and on
/// `POST /rpw/nat/trigger`, pull the changes since this dpd's generation
/// from Nexus and apply them. Runs as long as the switch zone does.
pub(super) async fn dpd_nat_rpw(
    slot: SwitchSlot,
    dpd: DpdContext,
    nexus: SocketAddr,
    connector: LinkConnector,
    period: Duration,
    trace: LiveTrace,
) {
    racksim_fakes::dpd::run_nat_rpw(
        dpd.trigger(),
        period,
        || pull_nat(slot, &dpd, nexus, &connector, &trace),
        |e| trace.record(&slot.to_string(), format!("dpd NAT RPW: {e}")),
    )
    .await
}

/// One pull: changesets from this dpd's generation until one is empty.
async fn pull_nat(
    slot: SwitchSlot,
    dpd: &DpdContext,
    nexus: SocketAddr,
    connector: &LinkConnector,
    trace: &LiveTrace,
) -> Result<(), String> {
    let client = HttpClient::new(connector.clone(), nexus);
    loop {
        let from_gen = dpd.lock().generation();
        let changes: Vec<NatEntryView> = client
            .get(&format!(
                "/nat/ipv4/changeset/{from_gen}?limit={NAT_CHANGESET_LIMIT}"
            ))
            .await
            .map_err(|e| format!("Nexus did not answer: {e}"))?;
        let Some(last) = changes.last().map(|c| c.gen) else {
            return Ok(());
        };
        let failures = dpd.apply(|d| {
            let (mut done, mut failed) = (Vec::new(), Vec::new());
            for c in &changes {
                for r in d.apply_nat_change(c) {
                    match r {
                        Ok(change) => done.push(change),
                        Err(e) => failed.push(e),
                    }
                }
            }
            d.set_generation(last);
            (failed, done)
        });
        for e in failures {
            trace.record(&slot.to_string(), format!("dpd NAT RPW: {e}"));
        }
        trace.record(
            &slot.to_string(),
            format!(
                "dpd NAT RPW: applied {} change(s) from generation {from_gen} to {last}",
                changes.len()
            ),
        );
    }
}

//! The control plane (Nexus) in the simulation: the Nexus zone's host
//! software. Nexus itself is `racksim-nexus`'s, the one live mode runs too;
//! this module is where it runs here ([`SimNexus`], its [`NexusHost`]): it
//! comes up only once time is synchronised, serves its internal API on a
//! turmoil socket, reads the world as its inventory, writes the trace, and
//! an operator (a plan step) can stop it, crash it and bring it back.

use std::{
    future::Future,
    net::{Ipv6Addr, SocketAddr, SocketAddrV6},
    time::Duration,
};

use racksim_fakes::http::{ApiRequest, ApiResponse};
use racksim_nexus::instances::{InstanceRecord, InstanceState, OpError, SledRef, StoreError};
use racksim_nexus::{
    internal_api, Event, InstanceRequest, Lane, NexusHost, NexusStore, Requests, Write,
};
use racksim_reconciler::{discovery::SwitchSlot, http::HttpClient};

use crate::services::sled_agent::TimeSync;
use crate::{
    net::{InternalDnsResolver, TurmoilConnector, SLED_AGENT_PORT},
    services::{serve as serve_http, Handler},
    trace::Kind,
    world::{NexusCommand, World},
};
use tokio::{sync::watch, task::JoinSet};

pub use racksim_nexus::{NEXUS_INTERNAL_PORT, RPW_PERIOD};

/// How often Nexus checks whether time has synchronised before it starts.
pub const TIMESYNC_POLL: Duration = Duration::from_secs(5);
/// Simulated round trip of one database transaction.
pub const DB_LATENCY: Duration = Duration::from_millis(5);
/// The statements a stall held reach the new leaseholder within this of
/// the stall's end (each retries on its own: the order among them is
/// drawn). Simplified: a few milliseconds, CockroachDB's redirect to the
/// new leaseholder and the re-evaluation, not measured.
pub const STALL_RELEASE_SPREAD: Duration = Duration::from_millis(10);
/// What a statement answers while the database answers errors: what
/// CockroachDB's retryable error says.
pub const DB_ERROR: &str =
    "restart transaction: TransactionRetryWithProtoRefreshError (SQLSTATE 40001)";

/// Runs inside the Nexus zone on sled `index`, for as long as the zone runs.
///
/// Two ways down, as in a real rack: an orderly stop (`control-plane-down`)
/// takes no new requests and lets what is in flight finish; a crash
/// (`control-plane-crash`) abandons everything where it is — possibly
/// between a database write and its saga log entry — and the next
/// incarnation resumes from the saga log.
pub async fn run(world: World, index: usize, resolver: InternalDnsResolver) {
    let host = world.sled(index).name;
    let mut command = world.nexus_command();
    loop {
        if command.wait_for(|c| *c == NexusCommand::Run).await.is_err() {
            return;
        }
        // The operator's stop, latched for this incarnation: a stop that
        // is followed by a start while the incarnation still finishes its
        // work must still stop it (the start then begins the next
        // incarnation). Observing the command level instead would lose
        // the stop for a task that was busy while the command went
        // Stop -> Run, leaving a Nexus half stopped for good.
        let (stopping_tx, stopping) = watch::channel(false);
        let mut observed = command.clone();
        let latch = async move {
            // An error means the world is gone: stop as well.
            let _ = observed.wait_for(|c| *c != NexusCommand::Run).await;
            stopping_tx.send_replace(true);
            // Keep the sender alive: the incarnation watches it.
            std::future::pending::<()>().await
        };
        let incarnation = async {
            tokio::select! {
                // Cancel-safe: the latch only observes and sends on watch
                // channels; `serve` is polled to completion here.
                came_up = serve(&world, &host, index, &resolver, stopping) => came_up,
                () = latch => unreachable!("the latch never completes"),
            }
        };
        let what = tokio::select! {
            biased;
            // Cancel-safe: `wait_for` only observes the channel; dropping it
            // loses nothing.
            r = command.wait_for(|c| *c == NexusCommand::Crash) => {
                if r.is_err() {
                    return;
                }
                if world.lock().control_plane.nexus_up.contains(&index) {
                    "control plane crashed; in-flight operations abandoned"
                } else {
                    "control plane start cancelled (crash)"
                }
            }
            // Not cancel-safe in general, and it need not be: a crash
            // abandons whatever it was doing. It returns only after an
            // orderly stop has let its work finish.
            came_up = incarnation => {
                if came_up {
                    "control plane stopped; in-flight operations finished first"
                } else {
                    "control plane start cancelled"
                }
            }
        };
        // Requests the driver queued for this Nexus as it went down (a plan
        // step at the same instant) reached a Nexus that is gone: with no
        // other Nexus up to take them, their callers are refused. Left
        // queued, they would run whenever a Nexus next came up, as no
        // real caller's request does.
        let orphaned: Vec<InstanceRequest> = {
            let mut st = world.lock();
            st.control_plane.nexus_up.remove(&index);
            st.version += 1;
            if st.control_plane.nexus_up.is_empty() {
                st.control_plane.requests.drain(..).collect()
            } else {
                Vec::new()
            }
        };
        world.record(
            world
                .line(&host, Kind::ControlPlane, format!("nexus: {what}"))
                .field("state", "down"),
        );
        if !orphaned.is_empty() {
            let nexus = SimNexus {
                world: world.clone(),
                host: host.clone(),
                index,
                resolver: resolver.clone(),
            };
            racksim_nexus::api::refuse(&nexus, orphaned, "the control plane is down");
        }
    }
}

/// Resolves once the operator wants the control plane stopped (or crashed;
/// the caller handles a crash first).
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    racksim_nexus::stop_requested(stop).await
}

/// Wait for time sync, come up, then run the background tasks and the
/// instance API until an orderly stop, which lets them finish what they
/// are doing. Returns whether it came up at all.
async fn serve(
    world: &World,
    host: &str,
    index: usize,
    resolver: &InternalDnsResolver,
    mut stop: watch::Receiver<bool>,
) -> bool {
    // Nexus's sled-agent client: 60 s to connect, 60 s in all
    // (`NEXUS_SLED_AGENT_TIMEOUT`).
    let sled_agent = HttpClient::new(
        TurmoilConnector,
        SocketAddr::new(world.sled(index).address.into(), SLED_AGENT_PORT),
    )
    .with_timeouts(
        Some(racksim_nexus::instances::NEXUS_SLED_AGENT_TIMEOUT),
        Some(racksim_nexus::instances::NEXUS_SLED_AGENT_TIMEOUT),
    );
    loop {
        if let Ok(TimeSync { sync: true }) = sled_agent.get::<TimeSync>("/timesync").await {
            break;
        }
        tokio::select! {
            biased;
            // Cancel-safe: observing a watch channel.
            () = stop_requested(&mut stop) => return false,
            // Cancel-safe: a sleep holds nothing but its deadline.
            () = tokio::time::sleep(TIMESYNC_POLL) => {}
        }
    }
    {
        let mut st = world.lock();
        st.control_plane.nexus_up.insert(index);
        st.control_plane.last_up = turmoil::sim_elapsed().unwrap_or_default();
        st.version += 1;
    }
    world.record(
        world
            .line(
                host,
                Kind::ControlPlane,
                "nexus: control plane up (time synchronised); starting background tasks",
            )
            .field("state", "up"),
    );

    let nexus = SimNexus {
        world: world.clone(),
        host: host.to_string(),
        index,
        resolver: resolver.clone(),
    };
    let requests = WorldRequests {
        world: world.clone(),
        bell: world.doorbell(),
    };
    let internal_stop = stop.clone();
    racksim_nexus::serve(&nexus, requests, stop, |store| {
        internal_api(world, host, store, internal_stop)
    })
    .await;
    true
}

/// Where Nexus runs in the simulation: the Nexus zone on sled `index`.
#[derive(Clone)]
pub struct SimNexus {
    world: World,
    host: String,
    index: usize,
    resolver: InternalDnsResolver,
}

impl SimNexus {
    /// The error a statement answers now, if the database answers errors.
    fn errors(&self) -> Result<(), StoreError> {
        if self.world.db_errors() {
            Err(StoreError::Unavailable(DB_ERROR.into()))
        } else {
            Ok(())
        }
    }
}

impl NexusHost for SimNexus {
    type Connector = TurmoilConnector;
    type Resolver = InternalDnsResolver;

    fn name(&self) -> &str {
        &self.host
    }

    fn era(&self) -> racksim_nexus::era::Era {
        self.world.params.era
    }

    fn start(&self) -> racksim_nexus::instances::StartImpl {
        self.world.params.start
    }

    fn rpw_period(&self) -> Duration {
        RPW_PERIOD
    }

    fn connector(&self) -> TurmoilConnector {
        TurmoilConnector
    }

    fn resolver(&self) -> InternalDnsResolver {
        self.resolver.clone()
    }

    fn db<R>(&self, f: impl FnOnce(&mut racksim_nexus::Db) -> R) -> R {
        f(&mut self.world.lock().control_plane.db)
    }

    async fn round_trip(&self) -> Result<(), StoreError> {
        tokio::time::sleep(DB_LATENCY).await;
        self.faults().await
    }

    async fn sequence_round_trip(&self) -> Result<(), StoreError> {
        tokio::time::sleep(DB_LATENCY).await;
        self.errors()
    }

    async fn faults(&self) -> Result<(), StoreError> {
        if self.stalled() {
            self.stall().await;
        }
        self.errors()
    }

    fn stalled(&self) -> bool {
        self.world.db_stall_until().is_some()
    }

    /// Until the stall ends, then until the statement reaches the new
    /// leaseholder: each within [`STALL_RELEASE_SPREAD`] of the end, at
    /// its own drawn instant, so the statements a stall held go on in an
    /// order drawn from the seed. (Again if another stall has begun.)
    async fn stall(&self) {
        while let Some(until) = self.world.db_stall_until() {
            let now = turmoil::sim_elapsed().unwrap_or_default();
            let spread = self.world.db_draw(STALL_RELEASE_SPREAD);
            tokio::time::sleep(until.saturating_sub(now) + spread).await;
        }
    }

    /// Uniform in `0..=50 ms` (upstream's `0..50 ms`), from the database's
    /// generator.
    fn retry_backoff(&self) -> Duration {
        self.world.db_draw(racksim_nexus::store::RETRY_BACKOFF_MAX)
    }

    fn wrote(&self, write: Write<'_>) {
        let mut st = self.world.lock();
        if let Write::Record { before, after } = write {
            let now = turmoil::sim_elapsed().unwrap_or_default();
            if after.state == InstanceState::Running {
                if before != InstanceState::Running {
                    st.control_plane.running_since.insert(after.id, now);
                }
            } else {
                st.control_plane.running_since.remove(&after.id);
            }
        }
        // A change of the world: the checks look again now.
        st.version += 1;
    }

    fn sleds(&self) -> Vec<SledRef> {
        let st = self.world.lock();
        st.sleds
            .specs
            .iter()
            .enumerate()
            .filter(|(i, _)| !st.sleds.retired.contains(i))
            .map(|(i, s)| SledRef {
                id: i as u32,
                address: s.address,
            })
            .collect()
    }

    /// The rack's uplinked switches: the uplink configuration the
    /// database holds, whether their zones are up or not.
    fn boundary_switches(&self) -> Vec<SwitchSlot> {
        self.world
            .rack()
            .switches
            .iter()
            .filter(|s| s.uplinked)
            .map(|s| s.slot)
            .collect()
    }

    /// Nexus finds MGS through DNS; the simulation asks each switch zone's
    /// MGS, in slot order.
    fn mgs(&self) -> Vec<SocketAddr> {
        let st = self.world.lock();
        st.switches
            .addresses
            .values()
            .map(|a| SocketAddrV6::new(*a, racksim_reconciler::MGS_PORT, 0, 0).into())
            .collect()
    }

    fn inventory(&self) -> Vec<racksim_nexus::SledInventory> {
        self.world.inventory(&self.host)
    }

    /// Simulated time since the run began, which the database (and so the
    /// recorded restart times) lives as long as.
    fn now(&self) -> Duration {
        turmoil::sim_elapsed().unwrap_or_default()
    }

    fn record(&self, event: Event) {
        let kind = match event.lane {
            Lane::Instance => Kind::Instance,
            Lane::Saga => Kind::Saga,
            Lane::Reconciler => Kind::Reconciler,
        };
        let mut line = self.world.line(&self.host, kind, event.text);
        for (key, value) in event.fields {
            line = line.field(key, value);
        }
        self.world.record(line);
    }

    fn instance_name(&self, id: u32) -> String {
        self.world.instance_name(id)
    }

    fn sled_name(&self, id: u32) -> String {
        self.world.sled(id as usize).name
    }

    fn zone_name(&self, zone: Ipv6Addr) -> String {
        self.world.name_of(zone)
    }

    fn names(&self, text: &str) -> String {
        self.world.name_addrs(text)
    }

    fn spawn(&self, set: &mut JoinSet<()>, op: impl Future<Output = ()> + Send + 'static) {
        // The Nexus zone's host runs on turmoil's local set.
        crate::task::spawn_into(set, op);
    }

    fn op_done(&self, req: &InstanceRequest, outcome: &Result<InstanceRecord, OpError>) {
        if let (InstanceRequest::Delete { instance }, Ok(_)) = (req, outcome) {
            let now = turmoil::sim_elapsed().unwrap_or_default();
            let mut st = self.world.lock();
            st.control_plane.deletes_completed.insert(*instance, now);
            st.version += 1;
        }
    }

    fn stopping(&self) {
        self.world.lock().control_plane.nexus_up.remove(&self.index);
    }
}

/// The instance API's requests: one queue in the world for the rack,
/// served by whichever Nexus takes a request first (the seed orders
/// them), as a load balancer in front of the Nexus zones would.
struct WorldRequests {
    world: World,
    bell: watch::Receiver<u64>,
}

impl Requests for WorldRequests {
    fn take(&mut self) -> Vec<InstanceRequest> {
        self.world.lock().control_plane.requests.drain(..).collect()
    }

    async fn wait(&mut self) -> bool {
        // Cancel-safe: `changed` only observes the channel.
        self.bell.changed().await.is_ok()
    }
}

/// Nexus's internal API, for as long as this Nexus is up: the server is
/// part of [`serve`]'s future, so a crash (which drops that future) or an
/// orderly stop closes its listener and new requests are refused. (A
/// request already accepted finishes in its connection's task.)
async fn internal_api(
    world: &World,
    host: &str,
    store: NexusStore<SimNexus>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        biased;
        // Cancel-safe: observing a watch channel.
        () = racksim_nexus::stop_requested(&mut stop) => {}
        // Dropping the server drops its listener: that is the point.
        r = serve_http(NEXUS_INTERNAL_PORT, InternalApi { store }) => {
            if let Err(e) = r {
                world.testbed_error(
                    host,
                    format!("Nexus internal API on port {NEXUS_INTERNAL_PORT} stopped: {e}"),
                );
            }
        }
    }
}

/// The internal API's handler on the simulation's HTTP server.
struct InternalApi {
    store: NexusStore<SimNexus>,
}

impl Handler for InternalApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let store = self.store.clone();
        async move { internal_api::handle(&store, &req).await }
    }
}

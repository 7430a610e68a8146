//! The control plane (Nexus), reduced to what service and instance
//! networking need: it comes up only once time is synchronised, then runs
//! its background tasks (RPWs), the instance API and its internal API
//! (the instance NAT changesets dpd pulls). An operator (a plan step) can
//! take it down and bring it back.

use std::{
    future::Future,
    net::{SocketAddr, SocketAddrV6},
    sync::Arc,
    time::Duration,
};

use racksim_reconciler::{
    discovery::SwitchZoneResolver,
    dpd::DpdClient,
    http::HttpClient,
    nat::{reconcile_switch, Scope},
    DPD_PORT, SERVICES_VNI,
};

use racksim_reconciler::instances::{
    v2p_sync,
    watcher::{
        instance_watcher, reincarnate, VmmCheck, INSTANCE_WATCHER_PERIOD, REINCARNATION_PERIOD,
    },
    InstanceOps, InstanceRecord, InstanceStore, OpError, StartImpl,
};

use super::sled::TimeSync;
use crate::{
    era::{NexusServiceNat, Task},
    fakes::{
        database::SimStore,
        http::{serve as serve_http, ApiError, ApiRequest, ApiResponse, Handler},
    },
    net::{InternalDnsResolver, TurmoilConnector, SLED_AGENT_PORT},
    trace::Kind,
    world::{InstanceRequest, NexusCommand, World},
};
use http::Method;
use tokio::sync::{watch, Notify};

/// How often Nexus checks whether time has synchronised before it starts.
pub const TIMESYNC_POLL: Duration = Duration::from_secs(5);
/// Period of Nexus's background tasks (service NAT, V2P).
pub const RPW_PERIOD: Duration = Duration::from_secs(30);
/// Port of Nexus's internal API on its zone's address (Omicron's
/// `NEXUS_INTERNAL_PORT`). The simulation puts a Nexus zone on its sled's
/// address.
pub const NEXUS_INTERNAL_PORT: u16 = 12221;

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
        {
            let mut st = world.lock();
            st.control_plane.nexus_up.remove(&index);
            st.version += 1;
        }
        world.record(
            world
                .line(&host, Kind::ControlPlane, format!("nexus: {what}"))
                .field("state", "down"),
        );
    }
}

/// Resolves once the operator wants the control plane stopped (or crashed;
/// the caller handles a crash first).
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    // An error means the incarnation is gone: stop as well.
    let _ = stop.wait_for(|s| *s).await;
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
    let sled_agent = HttpClient::new(
        TurmoilConnector,
        SocketAddr::new(world.sled(index).address.into(), SLED_AGENT_PORT),
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

    let store = SimStore::new(world.clone(), host);
    let start = world.params.start;
    let v2p_task = Arc::new(Notify::new());
    let ops =
        InstanceOps::new(TurmoilConnector, store.clone(), start).with_v2p_task(v2p_task.clone());
    if start == StartImpl::Saga {
        // What a previous incarnation left half done is finished first.
        for (saga, instance, outcome) in ops.resume_sagas().await {
            world.trace(
                host,
                Kind::Saga,
                format!(
                    "nexus: resumed saga {saga} of {}: {}",
                    world.instance_name(instance),
                    fmt_op(&outcome)
                ),
            );
        }
    }
    // One owner per era: Nexus's service-zone NAT task existed while the
    // legacy path and the per-sled task did; upstream removed it once the
    // scrimlet reconcilers owned service NAT (two owners of one table
    // duel), so in the target era it does not run and the scrimlets' own
    // repairs are the only ones. The run's era says which (`crate::era`).
    let service_nat = async {
        match world.params.era.nexus_service_nat {
            NexusServiceNat::Off => {}
            NexusServiceNat::RepairsDpd => {
                service_nat_rpw(world, host, resolver, stop.clone()).await
            }
        }
    };
    tokio::join!(
        service_nat,
        watcher_rpw(world, host, &ops, stop.clone()),
        reincarnation_rpw(world, host, &ops, stop.clone()),
        v2p_rpw(world, host, &store, &v2p_task, stop.clone()),
        instance_api(world, host, index, &ops, stop.clone()),
        internal_api(world, host, &store, stop.clone()),
    );
    true
}

/// Nexus's internal API, for as long as this Nexus is up: the server is
/// part of [`serve`]'s future, so a crash (which drops that future) or an
/// orderly stop closes its listener and new requests are refused. (A
/// request already accepted finishes in its connection's task.)
async fn internal_api(
    world: &World,
    host: &str,
    store: &SimStore,
    mut stop: watch::Receiver<bool>,
) {
    let handler = NexusInternalApi {
        store: store.clone(),
    };
    tokio::select! {
        biased;
        // Cancel-safe: observing a watch channel.
        () = stop_requested(&mut stop) => {}
        // Dropping the server drops its listener: that is the point.
        r = serve_http(NEXUS_INTERNAL_PORT, handler) => {
            if let Err(e) = r {
                world.testbed_error(
                    host,
                    format!("Nexus internal API on port {NEXUS_INTERNAL_PORT} stopped: {e}"),
                );
            }
        }
    }
}

/// The part of Nexus's internal API the simulation needs:
/// `GET /nat/ipv4/changeset/{from_gen}?limit=N`, the instance NAT changes
/// after generation `from_gen` (at most `limit`, oldest first), which each
/// dpd's NAT RPW pulls.
struct NexusInternalApi<S> {
    store: S,
}

impl<S: InstanceStore> Handler for NexusInternalApi<S> {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let store = self.store.clone();
        async move {
            let (from_gen, limit) = match changeset_request(&req) {
                Ok(params) => params,
                Err(e) => return e.into_response(),
            };
            match store.nat_changeset(from_gen, limit).await {
                Ok(changes) => ApiResponse::json(&changes),
                Err(e) => ApiError::unavailable(format!("database: {e}")).into_response(),
            }
        }
    }
}

/// Parses `GET /nat/ipv4/changeset/{from_gen}?limit=N` strictly, as
/// dropshot would: `from_gen` an `i64`, `limit` a `u32`, both required.
fn changeset_request(req: &ApiRequest) -> Result<(i64, u32), ApiError> {
    let segments = req.segments();
    let [nat, ipv4, changeset, from_gen] = &segments[..] else {
        return Err(ApiError::not_found_route(req));
    };
    if (nat.as_str(), ipv4.as_str(), changeset.as_str()) != ("nat", "ipv4", "changeset") {
        return Err(ApiError::not_found_route(req));
    }
    if req.method != Method::GET {
        return Err(ApiError::new(
            http::StatusCode::METHOD_NOT_ALLOWED,
            Some("MethodNotAllowed"),
            format!("{} not allowed on {}", req.method, req.path),
        ));
    }
    let from_gen: i64 = from_gen.parse().map_err(|e| {
        ApiError::bad_request(format!("bad path parameter from_gen {from_gen:?}: {e}"))
    })?;
    let limit = req
        .query("limit")
        .ok_or_else(|| ApiError::bad_request("missing query parameter limit"))?;
    let limit: u32 = limit
        .parse()
        .map_err(|e| ApiError::bad_request(format!("bad query parameter limit {limit:?}: {e}")))?;
    Ok((from_gen, limit))
}

fn fmt_op(outcome: &Result<InstanceRecord, OpError>) -> String {
    match outcome {
        Ok(rec) => {
            let state = serde_json::to_value(rec.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("ok, {state}")
        }
        Err(e) => format!("failed: {e}"),
    }
}

/// Serve queued instance API requests, each in its own task so that
/// requests race as they would against a real API. The tasks belong to this
/// future: taking the control plane down aborts them mid-operation.
async fn instance_api<S: racksim_reconciler::instances::InstanceStore>(
    world: &World,
    host: &str,
    index: usize,
    ops: &InstanceOps<TurmoilConnector, S>,
    mut stop: watch::Receiver<bool>,
) {
    let mut bell = world.doorbell();
    let mut running = tokio::task::JoinSet::new();
    loop {
        let queued: Vec<InstanceRequest> = world.lock().control_plane.requests.drain(..).collect();
        for req in queued {
            let (ops, world, host) = (ops.clone(), world.clone(), host.to_string());
            running.spawn_local(async move {
                let instance = match req {
                    InstanceRequest::Create { instance, .. }
                    | InstanceRequest::Start { instance, .. }
                    | InstanceRequest::Stop { instance }
                    | InstanceRequest::Delete { instance } => world.instance_name(instance),
                };
                let name = |id: u32| world.instance_name(id);
                let sled = |id: u32| world.sled(id as usize).name;
                let (what, outcome) = match req {
                    InstanceRequest::Create { instance, sled: s } => (
                        format!("create {} on {}", name(instance), sled(s)),
                        ops.create(instance, s).await,
                    ),
                    InstanceRequest::Start { instance, sled: s } => (
                        format!("start {} on {}", name(instance), sled(s)),
                        ops.start(instance, s).await,
                    ),
                    InstanceRequest::Stop { instance } => {
                        (format!("stop {}", name(instance)), ops.stop(instance).await)
                    }
                    InstanceRequest::Delete { instance } => {
                        let outcome = ops.delete(instance).await;
                        if outcome.is_ok() {
                            let now = turmoil::sim_elapsed().unwrap_or_default();
                            let mut st = world.lock();
                            st.control_plane.deletes_completed.insert(instance, now);
                            st.version += 1;
                        }
                        (format!("delete {}", name(instance)), outcome)
                    }
                };
                world.record(
                    world
                        .line(
                            &host,
                            Kind::Instance,
                            format!("nexus: {what}: {}", world.name_addrs(&fmt_op(&outcome))),
                        )
                        .field("instance", &instance)
                        .field("outcome", if outcome.is_ok() { "ok" } else { "failed" }),
                );
            });
        }
        tokio::select! {
            biased;
            // An orderly stop: no more API (requests not yet started are
            // refused), and the operations in flight run to completion.
            // Cancel-safe: observing a watch channel.
            () = stop_requested(&mut stop) => {
                world.lock().control_plane.nexus_up.remove(&index);
                let refused: Vec<InstanceRequest> = world.lock().control_plane.requests.drain(..).collect();
                for req in refused {
                    let (InstanceRequest::Create { instance, .. }
                    | InstanceRequest::Start { instance, .. }
                    | InstanceRequest::Stop { instance }
                    | InstanceRequest::Delete { instance }) = req;
                    world.trace(
                        host,
                        Kind::Instance,
                        format!(
                            "nexus: request for {} refused: the control plane is stopping",
                            world.instance_name(instance)
                        ),
                    );
                }
                while running.join_next().await.is_some() {}
                return;
            }
            // Cancel-safe: `changed` only observes the channel.
            r = bell.changed() => {
                if r.is_err() {
                    return;
                }
            }
            // Cancel-safe: a task not yet joined stays in the set.
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
}

/// The V2P background task: every [`RPW_PERIOD`] and whenever an instance
/// operation activates it (`v2p_task`). Instance NAT has no Nexus-side
/// task: operations write versioned rows and trigger dpd, and each switch
/// zone's dpd pulls them (`switch_zone::nat_rpw`). The control plane of
/// seed 002's time (the era start `legacy` stands for) had neither; the
/// run's era says whether it runs.
async fn v2p_rpw<S: InstanceStore>(
    world: &World,
    host: &str,
    store: &S,
    v2p_task: &Notify,
    mut stop: watch::Receiver<bool>,
) {
    if world.params.era.nexus_v2p == Task::Off {
        return;
    }
    let mut interval = tokio::time::interval(RPW_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // An orderly stop waits for the activation in progress, never
        // interrupts it. Cancel-safe: observing a watch channel; an
        // interval's tick (a missed tick is delayed, not lost); and
        // `Notify::notified`, whose notification, if one reached it, is
        // handed on when it is dropped (and `notify_one` with no waiter
        // leaves a permit), so an activation is never lost.
        tokio::select! {
            biased;
            () = stop_requested(&mut stop) => return,
            () = v2p_task.notified() => {}
            _ = interval.tick() => {}
        }
        let mut parts = Vec::new();
        match v2p_sync(&TurmoilConnector, store).await {
            Err(e) => parts.push(format!("database: {e}")),
            Ok(sleds) => {
                for (sled, outcome) in sleds {
                    let name = world.sled(sled as usize).name;
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
                                format!(", failures: {}", world.name_addrs(&o.failures.join("; ")))
                            }
                        )),
                        Err(e) => parts.push(format!("{name}: failed: {}", world.name_addrs(&e))),
                    }
                }
            }
        }
        // Quiet when there was nothing to do: the trace records changes.
        if !parts.is_empty() {
            world.record(
                world
                    .line(
                        host,
                        Kind::Reconciler,
                        format!("nexus V2P RPW: {}", parts.join("; ")),
                    )
                    .field("task", "nexus-v2p"),
            );
        }
    }
}

/// Nexus's instance watcher, every [`INSTANCE_WATCHER_PERIOD`]: asks each
/// Running instance's sled-agent for its VMM, asks MGS about a sled that
/// does not answer, and runs the instance-update saga for each VMM found
/// gone (`racksim_reconciler::instances::watcher`). Quiet when every VMM
/// is where the records say.
async fn watcher_rpw<S: InstanceStore>(
    world: &World,
    host: &str,
    ops: &InstanceOps<TurmoilConnector, S>,
    mut stop: watch::Receiver<bool>,
) {
    if world.params.era.instance_watcher == Task::Off {
        return;
    }
    let mut interval = tokio::time::interval(INSTANCE_WATCHER_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // An orderly stop waits for the activation in progress. Cancel-safe:
        // observing a watch channel, and an interval's tick.
        tokio::select! {
            biased;
            () = stop_requested(&mut stop) => return,
            _ = interval.tick() => {}
        }
        // Nexus finds MGS through DNS; the simulation asks each switch
        // zone's MGS, in slot order.
        let mgs: Vec<SocketAddr> = {
            let st = world.lock();
            st.switches
                .addresses
                .values()
                .map(|a| SocketAddrV6::new(*a, racksim_reconciler::MGS_PORT, 0, 0).into())
                .collect()
        };
        let parts: Vec<String> = match instance_watcher(ops, &TurmoilConnector, &mgs).await {
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
                    world.name_addrs(&format!(
                        "{}'s VMM {} on {} {what}{update}",
                        world.instance_name(w.instance),
                        w.vmm,
                        world.sled(w.sled as usize).name
                    ))
                })
                .collect(),
        };
        if !parts.is_empty() {
            world.record(
                world
                    .line(
                        host,
                        Kind::Instance,
                        format!("nexus instance watcher: {}", parts.join("; ")),
                    )
                    .field("task", "instance-watcher"),
            );
        }
    }
}

/// Nexus's instance reincarnation, every [`REINCARNATION_PERIOD`]: starts
/// Failed instances again under their auto-restart policy and cooldown.
/// Quiet when there is nothing to restart.
async fn reincarnation_rpw<S: InstanceStore>(
    world: &World,
    host: &str,
    ops: &InstanceOps<TurmoilConnector, S>,
    mut stop: watch::Receiver<bool>,
) {
    if world.params.era.reincarnation == Task::Off {
        return;
    }
    let mut interval = tokio::time::interval(REINCARNATION_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Cancel-safe: observing a watch channel, and an interval's tick.
        tokio::select! {
            biased;
            () = stop_requested(&mut stop) => return,
            _ = interval.tick() => {}
        }
        // The cooldown's clock: simulated time since the run began, which
        // the database (and so the recorded restart times) lives as long as.
        let now = turmoil::sim_elapsed().unwrap_or_default();
        let parts: Vec<String> = match reincarnate(ops, now).await {
            Err(e) => vec![format!("database: {e}")],
            Ok(done) => {
                done.into_iter()
                    .filter_map(|r| {
                        let name = world.instance_name(r.instance);
                        let sled = world.sled(r.sled as usize).name;
                        match (&r.start, r.cooling) {
                            (Some(outcome), _) => Some(world.name_addrs(&format!(
                                "restart {name} on {sled}: {}",
                                fmt_op(outcome)
                            ))),
                            // Cooling down: said once per activation would
                            // be noise; the restart line says when it acts.
                            (None, _) => None,
                        }
                    })
                    .collect()
            }
        };
        if !parts.is_empty() {
            world.record(
                world
                    .line(
                        host,
                        Kind::Instance,
                        format!("nexus instance reincarnation: {}", parts.join("; ")),
                    )
                    .field("task", "instance-reincarnation"),
            );
        }
    }
}

/// Service NAT: make every dpd's service entries match the database.
async fn service_nat_rpw(
    world: &World,
    host: &str,
    resolver: &InternalDnsResolver,
    mut stop: watch::Receiver<bool>,
) {
    let mut activation = 0u64;
    let mut interval = tokio::time::interval(RPW_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // An orderly stop waits for the activation in progress, never
        // interrupts it. Cancel-safe: observing a watch channel, and an
        // interval's tick (a missed tick is delayed, not lost).
        tokio::select! {
            biased;
            () = stop_requested(&mut stop) => return,
            _ = interval.tick() => {}
        }
        activation += 1;
        // Read each time, as Nexus reads its database: zones move.
        let desired = world.desired_nat();
        let line = match resolver.switch_zones().await {
            Err(e) => format!("discovery failed: {}", world.name_addrs(&e.0)),
            Ok(mut zones) => {
                zones.sort();
                let mut parts = Vec::new();
                for z in zones {
                    let dpd = DpdClient::new(HttpClient::new(
                        TurmoilConnector,
                        SocketAddrV6::new(z, DPD_PORT, 0, 0).into(),
                    ));
                    let outcome = reconcile_switch(&dpd, &desired, &Scope::Vni(SERVICES_VNI)).await;
                    parts.push(format!(
                        "{}: {}",
                        world.name_of(z),
                        world.name_addrs(&outcome.to_string())
                    ));
                }
                parts.join("; ")
            }
        };
        world.record(
            world
                .line(
                    host,
                    Kind::Reconciler,
                    format!("nexus service-NAT RPW #{activation}: {line}"),
                )
                .field("task", "nexus-service-nat")
                .field("activation", activation),
        );
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, StatusCode};

    use super::changeset_request;
    use crate::fakes::http::ApiRequest;

    fn parse(method: Method, path: &str) -> Result<(i64, u32), StatusCode> {
        changeset_request(&ApiRequest::new(method, path, "")).map_err(|e| e.status)
    }

    #[test]
    fn changeset_requests_are_parsed_strictly() {
        assert_eq!(
            parse(Method::GET, "/nat/ipv4/changeset/0?limit=100"),
            Ok((0, 100))
        );
        assert_eq!(
            parse(Method::GET, "/nat/ipv4/changeset/42/?limit=7"),
            Ok((42, 7))
        );
        for bad in [
            "/nat/ipv4/changeset/x?limit=100",
            "/nat/ipv4/changeset/1.5?limit=100",
            "/nat/ipv4/changeset/1",
            "/nat/ipv4/changeset/1?limit=",
            "/nat/ipv4/changeset/1?limit=-1",
            "/nat/ipv4/changeset/1?limit=4294967296",
        ] {
            assert_eq!(
                parse(Method::GET, bad),
                Err(StatusCode::BAD_REQUEST),
                "{bad}"
            );
        }
        assert_eq!(
            parse(Method::POST, "/nat/ipv4/changeset/0?limit=1"),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            parse(Method::GET, "/nat/ipv4/changes/0?limit=1"),
            Err(StatusCode::NOT_FOUND)
        );
    }
}

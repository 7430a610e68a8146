//! A sled: sled-agent, the zones it hosts, and its OPTE (the end of the
//! data path that delivers NAT'd traffic to a zone).
//!
//! How a zone with external connectivity gets its NAT entries depends on the
//! run's strategy: `legacy` blocks the zone's start on
//! [`legacy::ensure_zone_nat`]; `sled-task` starts zones at once and runs
//! [`SledNatReconciler`] as a periodic task beside them.
//!
//! The sled runs the zones the rack's current config puts on it
//! ([`crate::world::ZoneSet`]): when a config change adds a zone here it
//! starts (the same way as at boot, so under `legacy` its start blocks on
//! the NAT ensure), and when one is removed or moved away it stops. Zones
//! start one after another, as sled-agent's zone starts did.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    net::{Ipv6Addr, SocketAddr},
    time::Duration,
};

use http::{Method, StatusCode};
use racksim_reconciler::{
    instances::{VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest},
    legacy::{self, LegacyProgress},
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, TaskStatus, DEFAULT_PERIOD},
};
use rand::{rngs::SmallRng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

use super::{control_plane, spawn_server, upstream::NTP_REPLY};
use crate::{
    fakes::{
        dataplane::{Geneve, NtpQuery},
        dns,
        http::{ApiError, ApiRequest, ApiResponse, Handler},
    },
    net::{
        InternalDnsResolver, TurmoilConnector, GENEVE_PORT, INTERNAL_DNS_PORT, NTP_PORT,
        SLED_AGENT_PORT,
    },
    plan::Strategy,
    rack::{ZoneKind, ZoneSpec, UPSTREAM_NTP_ADDR},
    trace::{fmt_duration, Kind},
    world::{LiveZone, SledAgentState, World, ZoneId},
};

/// How often boundary NTP queries upstream while unsynchronised.
pub const NTP_POLL_INTERVAL: Duration = Duration::from_secs(16);

/// sled-agent's `GET /timesync` answer (the fields we use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSync {
    pub sync: bool,
}

pub async fn run(world: World, index: usize) -> turmoil::Result {
    let rack = world.params.rack.clone();
    let sled = world.sled(index);
    let name = sled.name.clone();
    let boot = world.boot(&name);
    // Subscribed before the first zones start, so that a change while they
    // start (a legacy start can block for minutes) is seen afterwards.
    let mut zone_set = world.subscribe_zones();
    let zones: Vec<LiveZone> = zone_set.borrow_and_update().on_sled(index);
    {
        // sled-agent's instance and V2P state does not survive a restart.
        let mut st = world.lock();
        st.sleds_up.insert(index);
        st.sled_agents.insert(index, SledAgentState::default());
        st.version += 1;
    }
    world.trace(&name, Kind::Boot, "sled-agent up");
    spawn_server(
        &world,
        &name,
        SLED_AGENT_PORT,
        SledAgentApi {
            world: world.clone(),
            index,
        },
    );
    if rack.internal_dns.contains(&index) {
        spawn_server(
            &world,
            &name,
            INTERNAL_DNS_PORT,
            InternalDnsApi {
                world: world.clone(),
            },
        );
        world.record(
            world
                .line(&name, Kind::Zone, "zone internal-dns started")
                .field("zone", "internal-dns")
                .field("took_us", 0),
        );
    }
    tokio::task::spawn_local(opte(world.clone(), index));

    let resolver = InternalDnsResolver::new(rack.internal_dns_addresses());

    // The reconcilers start with sled-agent, independently of zones. Their
    // input senders live as long as this host's software.
    let mut sled_task: Option<watch::Sender<Vec<NatEntry>>> = None;
    match world.params.strategy {
        Strategy::SledTask => follow_zones_in_sled_task(&world, &resolver, &mut sled_task, &zones),
        Strategy::ScrimletLocal => start_scrimlet_reconcilers(&world, index),
        Strategy::Legacy => {}
    }

    let mut rng = SmallRng::seed_from_u64(world.derive_seed(&name, boot));
    let mut running: BTreeMap<ZoneId, Option<JoinHandle<()>>> = BTreeMap::new();
    for zone in &zones {
        let task = start_zone(&world, index, &name, &resolver, zone, &mut rng).await;
        running.insert(zone.id, task);
    }
    // Then follow the config: stop what left this sled, start what came.
    loop {
        if zone_set.changed().await.is_err() {
            return Ok(());
        }
        let now: Vec<LiveZone> = zone_set.borrow_and_update().on_sled(index);
        let gone: Vec<ZoneId> = running
            .keys()
            .filter(|id| !now.iter().any(|z| z.id == **id))
            .copied()
            .collect();
        for id in gone {
            if let Some(Some(task)) = running.remove(&id) {
                task.abort();
            }
            stop_zone(&world, index, &name, id);
        }
        if world.params.strategy == Strategy::SledTask {
            follow_zones_in_sled_task(&world, &resolver, &mut sled_task, &now);
        }
        for zone in &now {
            if running.contains_key(&zone.id) {
                continue;
            }
            let task = start_zone(&world, index, &name, &resolver, zone, &mut rng).await;
            running.insert(zone.id, task);
        }
    }
}

/// sled-task: the per-sled task's config is this sled's zones' entries. It
/// starts with the sled's first zone and then follows the set. The task
/// owns the addresses of the zones in its config, so a zone moved here
/// takes its address over, while a zone removed (or moved away) leaves
/// an address nobody here owns: its entry is left for Nexus's task.
fn follow_zones_in_sled_task(
    world: &World,
    resolver: &InternalDnsResolver,
    config: &mut Option<watch::Sender<Vec<NatEntry>>>,
    zones: &[LiveZone],
) {
    let entries: Vec<NatEntry> = zones
        .iter()
        .map(|z| world.zone_nat_entry(&z.spec))
        .collect();
    match config {
        Some(tx) => {
            tx.send_if_modified(|current| {
                let changed = *current != entries;
                *current = entries;
                changed
            });
        }
        None if !entries.is_empty() => {
            let (config_tx, config_rx) = watch::channel(entries);
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
            *config = Some(config_tx);
        }
        None => {}
    }
}

/// A zone stops (removed, or moved to another sled): what ran in it is gone.
fn stop_zone(world: &World, index: usize, host: &str, id: ZoneId) {
    let was_up = {
        let mut st = world.lock();
        // This sled's Nexus stops; others may still be up.
        let was_up = id.kind == ZoneKind::Nexus && st.nexus_up.remove(&index);
        st.version += 1;
        was_up
    };
    // Simplification: a stopped boundary NTP zone leaves the rack's clocks
    // synchronised (they hold time); a new one must still reach upstream.
    world.record(
        world
            .line(host, Kind::Zone, format!("zone {} stopped", id.kind))
            .field("zone", id.kind),
    );
    if was_up {
        world.record(
            world
                .line(
                    host,
                    Kind::ControlPlane,
                    "nexus: zone stopped; this Nexus is down",
                )
                .field("state", "down"),
        );
    }
}

/// Start one zone: under `legacy` only once its NAT entry is ensured (the
/// blocking path); then what runs in it. Returns that task, if any.
async fn start_zone(
    world: &World,
    index: usize,
    name: &str,
    resolver: &InternalDnsResolver,
    zone: &LiveZone,
    rng: &mut SmallRng,
) -> Option<JoinHandle<()>> {
    let rack = world.params.rack.clone();
    let zone = &zone.spec;
    let kind = zone.kind;
    world.record(
        world
            .line(name, Kind::Zone, format!("starting zone {kind}"))
            .field("zone", kind),
    );
    let started = tokio::time::Instant::now();
    if world.params.strategy == Strategy::Legacy {
        let entry = world.zone_nat_entry(zone);
        let expected: BTreeSet<_> = rack.uplinked_switches().into_iter().collect();
        let progress = watch::Sender::new(LegacyProgress::LookingUpSwitches);
        // The legacy path logs its phases; the `zone` span names the
        // zone in those lines (`crate::logging`).
        legacy::ensure_zone_nat(
            &TurmoilConnector,
            resolver,
            &expected,
            &entry,
            rng,
            &progress,
        )
        .instrument(tracing::info_span!("zone", zone = %kind))
        .await;
    }
    let took = started.elapsed();
    world
        .lock()
        .zone_starts
        .push((name.to_string(), kind, took));
    world.record(
        world
            .line(
                name,
                Kind::Zone,
                format!("zone {kind} started (start took {})", fmt_duration(took)),
            )
            .field("zone", kind)
            .field("took_us", took.as_micros()),
    );
    match kind {
        ZoneKind::BoundaryNtp => Some(tokio::task::spawn_local(ntp_client(
            world.clone(),
            index,
            name.to_string(),
            zone.clone(),
        ))),
        ZoneKind::Nexus => Some(tokio::task::spawn_local(control_plane::run(
            world.clone(),
            index,
            resolver.clone(),
        ))),
        ZoneKind::ExternalDns => None,
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

/// Boundary NTP: query upstream until a reply arrives (through NAT).
async fn ntp_client(world: World, index: usize, host: String, zone: ZoneSpec) {
    let sock = match turmoil::net::UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).await {
        Ok(s) => s,
        Err(e) => {
            return world.trace(
                &host,
                Kind::Bug,
                format!("BUG: boundary-ntp cannot bind: {e}"),
            )
        }
    };
    let query = NtpQuery {
        reply_ip: zone.external_ip,
        reply_port: zone.first_port,
    };
    let bytes = serde_json::to_vec(&query).expect("packets serialize");
    let upstream = SocketAddr::new(UPSTREAM_NTP_ADDR.into(), NTP_PORT);
    loop {
        if world.lock().ntp_synced.contains(&index) {
            return;
        }
        let _ = sock.send_to(&bytes, upstream).await;
        tokio::time::sleep(NTP_POLL_INTERVAL).await;
    }
}

/// OPTE: deliver Geneve traffic to the zone it is for, if VNI and MAC match.
async fn opte(world: World, index: usize) -> std::io::Result<()> {
    let host = world.sled(index).name;
    let sock = turmoil::net::UdpSocket::bind((Ipv6Addr::UNSPECIFIED, GENEVE_PORT)).await?;
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, _from) = sock.recv_from(&mut buf).await?;
        let Ok(g) = serde_json::from_slice::<Geneve>(&buf[..n]) else {
            continue;
        };
        // The zones here now: a zone moved away no longer takes traffic.
        let zone = world
            .zones()
            .zone_for(g.inner.dst_ip, g.inner.dst_port)
            .filter(|z| z.spec.sled == index)
            .map(|z| z.spec.clone());
        match zone {
            Some(z) if z.mac == g.inner_mac && g.vni == racksim_reconciler::SERVICES_VNI => {
                if z.kind == ZoneKind::BoundaryNtp && g.inner.payload == NTP_REPLY {
                    let newly = {
                        let mut st = world.lock();
                        let newly = st.ntp_synced.insert(index);
                        st.version += 1;
                        newly
                    };
                    if newly {
                        world.record(
                            world
                                .line(
                                    &host,
                                    Kind::Ntp,
                                    format!("boundary-ntp: time synchronized (reply came via {})", g.via),
                                )
                                .field("via", g.via),
                        );
                    }
                }
            }
            _ => world.trace(
                &host,
                Kind::Dataplane,
                format!(
                    "opte: dropped packet for {}:{} via {}: no zone here with that address, MAC and VNI",
                    g.inner.dst_ip, g.inner.dst_port, g.via
                ),
            ),
        }
    }
}

struct SledAgentApi {
    world: World,
    index: usize,
}

impl Handler for SledAgentApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let (resp, event) = match self.route(&req) {
            Ok(ok) => ok,
            Err(e) => (e.into_response(), None),
        };
        if let Some(Event { kind, text, fields }) = event {
            let host = self.world.sled(self.index).name;
            let mut line = self.world.line(&host, kind, text).field("sled", &host);
            for (k, v) in fields {
                line = line.field(k, v);
            }
            self.world.record(line);
        }
        std::future::ready(resp)
    }
}

/// A change of a sled-agent's state, for the trace.
struct Event {
    kind: Kind,
    text: String,
    fields: Vec<(&'static str, String)>,
}

/// A V2P change as an event.
fn v2p_event(
    world: &World,
    op: &'static str,
    sign: char,
    m: &VirtualNetworkInterfaceHost,
) -> Event {
    Event {
        kind: Kind::V2p,
        text: format!("sled-agent: V2P {sign} {}", fmt_v2p(world, m)),
        fields: vec![
            ("op", op.to_string()),
            ("virtual_ip", m.virtual_ip.to_string()),
            ("target", world.name_of(m.physical_host_ip)),
            ("vni", m.vni.to_string()),
        ],
    }
}

/// A VMM change as an event.
fn vmm_event(instance: &str, vmm: u64, op: &str) -> Event {
    Event {
        kind: Kind::Vmm,
        text: format!("sled-agent: VMM {vmm} of {instance} {op}"),
        fields: vec![
            ("instance", instance.to_string()),
            ("vmm", vmm.to_string()),
            ("op", op.to_string()),
        ],
    }
}

impl SledAgentApi {
    /// The response, and an event if the sled's state changed.
    fn route(&self, req: &ApiRequest) -> Result<(ApiResponse, Option<Event>), ApiError> {
        let w = &self.world;
        let segs = req.segments();
        let m = req.method.clone();
        match (m, segs.as_slice()) {
            // Internal NTP on every sled follows boundary NTP; one flag
            // stands for "this sled's clock is synchronised".
            (Method::GET, ["timesync"]) => Ok((
                ApiResponse::json(&TimeSync {
                    sync: w.lock().time_synced(),
                }),
                None,
            )),
            (Method::GET, ["v2p"]) => {
                let st = w.lock();
                let list: Vec<VirtualNetworkInterfaceHost> = st
                    .sled_agents
                    .get(&self.index)
                    .map(|a| a.v2p.iter().copied().collect())
                    .unwrap_or_default();
                Ok((ApiResponse::json(&list), None))
            }
            (Method::PUT, ["v2p"]) => {
                let m: VirtualNetworkInterfaceHost = json_body(req)?;
                let changed = self.with_agent(|a| {
                    let same = take_v2p(a, &m) == [m];
                    a.v2p.insert(m);
                    !same
                });
                let event = changed.then(|| v2p_event(w, "add", '+', &m));
                Ok((ApiResponse::no_content(), event))
            }
            (Method::DELETE, ["v2p"]) => {
                let m: VirtualNetworkInterfaceHost = json_body(req)?;
                let removed = self.with_agent(|a| take_v2p(a, &m));
                let event = removed.first().map(|o| v2p_event(w, "remove", '-', o));
                Ok((ApiResponse::no_content(), event))
            }
            (Method::GET, ["instances"]) => {
                let st = w.lock();
                let list: Vec<VmmInfo> = st
                    .sled_agents
                    .get(&self.index)
                    .map(|a| a.vmms.values().copied().collect())
                    .unwrap_or_default();
                Ok((ApiResponse::json(&list), None))
            }
            (Method::PUT, ["instances", id]) => {
                let id: u32 = id
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid instance id {id:?}")))?;
                let reg: VmmRegistration = json_body(req)?;
                let outcome = self.with_agent(|a| match a.vmms.get(&id) {
                    Some(v) if v.vmm_id == reg.vmm_id => Ok(false),
                    Some(v) => Err(v.vmm_id),
                    None => {
                        a.vmms.insert(
                            id,
                            VmmInfo {
                                instance_id: id,
                                vmm_id: reg.vmm_id,
                                state: VmmState::Starting,
                            },
                        );
                        Ok(true)
                    }
                });
                match outcome {
                    Ok(created) => {
                        let event = created
                            .then(|| vmm_event(&w.instance_name(id), reg.vmm_id, "registered"));
                        Ok((ApiResponse::no_content(), event))
                    }
                    Err(other) => Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "ObjectAlreadyExists",
                        format!("instance {id} already has VMM {other} on this sled"),
                    )),
                }
            }
            (Method::PUT, ["instances", id, "state"]) => {
                let id: u32 = id
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid instance id {id:?}")))?;
                let want: VmmStateRequest = json_body(req)?;
                let name = w.instance_name(id);
                // None: no such VMM; Some(None): nothing changed.
                let outcome: Option<Option<Event>> =
                    self.with_agent(|a| match (a.vmms.get_mut(&id), want.state) {
                        (None, _) => None,
                        (Some(v), VmmState::Stopped) => {
                            let vmm = v.vmm_id;
                            a.vmms.remove(&id);
                            Some(Some(vmm_event(&name, vmm, "destroyed")))
                        }
                        (Some(v), state) => {
                            let changed = v.state != state;
                            v.state = state;
                            let what = serde_json::to_value(state)
                                .ok()
                                .and_then(|s| s.as_str().map(str::to_string))
                                .unwrap_or_default();
                            Some(changed.then(|| vmm_event(&name, v.vmm_id, &what)))
                        }
                    });
                match outcome {
                    None => Err(ApiError::new(
                        StatusCode::NOT_FOUND,
                        "ObjectNotFound",
                        format!("no VMM for instance {id} on this sled"),
                    )),
                    Some(event) => Ok((ApiResponse::no_content(), event)),
                }
            }
            _ => Err(ApiError::not_found_route(req)),
        }
    }

    fn with_agent<T>(&self, f: impl FnOnce(&mut SledAgentState) -> T) -> T {
        let mut st = self.world.lock();
        st.version += 1;
        f(st.sled_agents.entry(self.index).or_default())
    }
}

/// Remove and return the mappings of `m`'s virtual address: sled-agent keys
/// V2P by `(vni, virtual_ip)`, so a PUT replaces and a DELETE removes by key.
fn take_v2p(
    agent: &mut SledAgentState,
    m: &VirtualNetworkInterfaceHost,
) -> Vec<VirtualNetworkInterfaceHost> {
    let old: Vec<_> = agent
        .v2p
        .iter()
        .filter(|x| x.vni == m.vni && x.virtual_ip == m.virtual_ip)
        .copied()
        .collect();
    for o in &old {
        agent.v2p.remove(o);
    }
    old
}

/// `172.30.0.11 -> sled2 (vni 1001)`
fn fmt_v2p(world: &World, m: &VirtualNetworkInterfaceHost) -> String {
    format!(
        "{} -> {} (vni {})",
        m.virtual_ip,
        world.name_of(m.physical_host_ip),
        m.vni
    )
}

fn json_body<T: serde::de::DeserializeOwned>(req: &ApiRequest) -> Result<T, ApiError> {
    serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("unable to parse JSON body: {e}")))
}

struct InternalDnsApi {
    world: World,
}

impl Handler for InternalDnsApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        std::future::ready(dns::handle(&self.world, &req))
    }
}

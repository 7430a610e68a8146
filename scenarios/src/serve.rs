//! `racksim serve`: a scenario's rack live, on loopback, in real time.
//!
//! Every fake of the rack runs as a dropshot server on `127.0.0.1` — per
//! switch a dpd and an MGS, per sled a sled-agent — serving the same state
//! machines (`racksim-fakes`) as the simulation, and the chosen strategy's
//! reconcilers (the real crate) run against them on tokio TCP sockets. A
//! control API (dropshot too) applies plan actions, dumps the state and
//! returns the trace so far; the trace is also streamed, stamped with the
//! wall clock, as the reconcilers converge.
//!
//! What live mode simplifies, against the simulation and a real rack:
//!
//! * **Addresses.** The services listen on loopback ports the OS picks, not
//!   on underlay addresses and fixed ports. `scrimlet-local` is given its
//!   switch zone's dpd and MGS addresses (as the reconciler's integration
//!   tests do, `SwitchZoneServices::Explicit`); `sled-task` discovers the
//!   switch zones by their underlay addresses from a fixed map (no internal
//!   DNS server) and connects through a connector that maps each underlay
//!   address and fixed port to the loopback port serving it.
//! * **No data path, no control plane.** Nothing sends NTP through the
//!   switches and there is no Nexus: live mode shows the reconcilers
//!   converging the switches' NAT tables and repairing them, not zones
//!   coming up. `legacy` (which blocks zone start) is therefore not offered.
//! * **Actions.** The control API applies the plan actions that act on the
//!   fakes and the reconcilers' inputs (see [`ACTIONS`]); the others act on
//!   the simulated network or hosts and are refused with a 400 naming them.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt, io,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use dropshot::{
    ConfigDropshot, ConfigLogging, ConfigLoggingLevel, HttpError, HttpResponseOk,
    HttpResponseUpdatedNoContent, HttpServer, RequestContext, ServerBuilder, TypedBody,
};
use racksim_fakes::{
    api::{serve_dpd, serve_mgs, serve_sled_agent, DpdContext, Fault, SledAgentContext},
    dpd::{DpdState, NatChange},
    mgs::MgsState,
    sled_agent::{SledAgentChange, SledAgentState},
};
use racksim_reconciler::{
    discovery::{DiscoveryError, SwitchSlot, SwitchZoneResolver},
    dpd::{Ipv4Nat, NatTarget},
    http::{Connector, TokioConnector},
    instances::{VirtualNetworkInterfaceHost, VmmInfo},
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices, SystemNetworkingConfig},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, ScrimletStatus, TaskStatus},
    DPD_PORT, MGS_PORT,
};
use racksim_sim::{RackSpec, Strategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

/// The plan actions the control API applies.
pub const ACTIONS: &[&str] = &[
    "dpd-restart",
    "dpd-errors",
    "dpd-hang",
    "hide-switch",
    "reveal-switch",
    "sidecar-power-off",
    "sidecar-power-on",
    "stale-entry",
];

/// How to run the rack.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub strategy: Strategy,
    /// Where the control API listens (port 0: any).
    pub control: SocketAddr,
    /// The reconcilers' period (production: 30 s).
    pub period: Duration,
}

/// One line of the live trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LiveLine {
    /// Wall-clock time, UTC, `HH:MM:SS.mmm`.
    pub at: String,
    pub host: String,
    pub text: String,
}

impl fmt::Display for LiveLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {:<12}  {}", self.at, self.host, self.text)
    }
}

/// The trace so far; printed as it grows when `echo`.
#[derive(Clone)]
pub struct LiveTrace {
    lines: Arc<Mutex<Vec<LiveLine>>>,
    echo: Arc<std::sync::atomic::AtomicBool>,
}

impl LiveTrace {
    /// An empty trace; `echo` prints each line on stdout as it happens.
    pub fn new(echo: bool) -> Self {
        LiveTrace {
            lines: Arc::default(),
            echo: Arc::new(echo.into()),
        }
    }

    /// Print each line from now on.
    pub fn set_echo(&self) {
        self.echo.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn record(&self, host: &str, text: impl Into<String>) {
        let line = LiveLine {
            at: wall_clock(SystemTime::now()),
            host: host.to_string(),
            text: text.into(),
        };
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if self.echo.load(std::sync::atomic::Ordering::SeqCst) {
            println!("{line}");
        }
        lines.push(line);
    }

    pub fn lines(&self) -> Vec<LiveLine> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `HH:MM:SS.mmm` (UTC) of `t`.
fn wall_clock(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        d.subsec_millis()
    )
}

/// A switch of the live rack.
pub struct LiveSwitch {
    pub slot: SwitchSlot,
    /// Underlay address of its switch zone (what discovery names).
    pub zone: Ipv6Addr,
    pub dpd: SocketAddr,
    pub mgs: SocketAddr,
    pub dpd_state: DpdContext,
    /// The scrimlet cabled to it, by sled index.
    pub scrimlet: usize,
    dpd_server: HttpServer<DpdContext>,
    mgs_server: HttpServer<MgsState>,
}

/// A sled of the live rack.
pub struct LiveSled {
    pub name: String,
    pub sled_agent: SocketAddr,
    pub state: SledAgentContext,
    server: HttpServer<SledAgentContext>,
}

/// What the control API and the reconcilers' inputs share.
struct Inputs {
    rack: RackSpec,
    trace: LiveTrace,
    /// Each switch's dpd (address and state) and MGS address.
    switches: BTreeMap<SwitchSlot, (SocketAddr, DpdContext, SocketAddr)>,
    /// Each sled's name, sled-agent address and state.
    sleds: Vec<(String, SocketAddr, SledAgentContext)>,
    /// Switch zones discovery does not see (`hide-switch`).
    hidden: Arc<Mutex<BTreeSet<SwitchSlot>>>,
    /// Each scrimlet's status, by switch.
    scrimlet: BTreeMap<SwitchSlot, watch::Sender<ScrimletStatus>>,
}

/// A running live rack. Dropping it does not stop it: call [`Self::stop`].
pub struct LiveRack {
    pub switches: Vec<LiveSwitch>,
    pub sleds: Vec<LiveSled>,
    pub control: SocketAddr,
    pub trace: LiveTrace,
    control_server: HttpServer<Arc<Inputs>>,
    tasks: Vec<JoinHandle<()>>,
    /// Kept for as long as the reconcilers run: their config inputs.
    _config: Vec<watch::Sender<Vec<NatEntry>>>,
    _bootstore: watch::Sender<Option<SystemNetworkingConfig>>,
}

/// `198.51.100.1/16384-32767 -> fd00:1122:3344:101::1 (a8:40:25:ff:00:01, vni 100)`
fn fmt_nat(ip: impl fmt::Display, low: u16, high: u16, t: &NatTarget) -> String {
    format!(
        "{ip}/{low}-{high} -> {} ({}, vni {})",
        t.internal_ip, t.inner_mac, t.vni
    )
}

fn nat_line(change: &NatChange) -> String {
    match change {
        NatChange::Created(e) => format!(
            "dpd: NAT + {}",
            fmt_nat(e.external, e.low, e.high, &e.target)
        ),
        NatChange::Deleted(e) => format!(
            "dpd: NAT - {}",
            fmt_nat(e.external, e.low, e.high, &e.target)
        ),
        NatChange::Created6(e) => format!(
            "dpd: NAT6 + {}",
            fmt_nat(e.external, e.low, e.high, &e.target)
        ),
        NatChange::Deleted6(e) => format!(
            "dpd: NAT6 - {}",
            fmt_nat(e.external, e.low, e.high, &e.target)
        ),
        NatChange::Reset { removed } => format!("dpd: NAT table reset ({removed} entries removed)"),
    }
}

fn sled_agent_line(change: &SledAgentChange) -> String {
    match change {
        SledAgentChange::V2pSet(m) => format!("sled-agent: V2P + {m}"),
        SledAgentChange::V2pRemoved(m) => format!("sled-agent: V2P - {m}"),
        SledAgentChange::VmmRegistered { instance, vmm } => {
            format!("sled-agent: VMM {vmm} of instance {instance} registered")
        }
        SledAgentChange::VmmState {
            instance,
            vmm,
            state,
        } => {
            format!("sled-agent: VMM {vmm} of instance {instance} {state:?}")
        }
        SledAgentChange::VmmDestroyed { instance, vmm } => {
            format!("sled-agent: VMM {vmm} of instance {instance} destroyed")
        }
    }
}

/// Maps the underlay addresses of the switch zones' services to the
/// loopback ports serving them, and connects with tokio TCP.
#[derive(Clone, Debug)]
pub struct MappedConnector {
    map: Arc<BTreeMap<SocketAddr, SocketAddr>>,
}

impl Connector for MappedConnector {
    type Io = tokio::net::TcpStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        let target = self.map.get(&addr).copied().unwrap_or(addr);
        TokioConnector.connect(target).await
    }
}

/// Discovery from a fixed map: every switch zone not hidden.
#[derive(Clone, Debug)]
pub struct FixedResolver {
    zones: Arc<BTreeMap<SwitchSlot, Ipv6Addr>>,
    hidden: Arc<Mutex<BTreeSet<SwitchSlot>>>,
}

impl SwitchZoneResolver for FixedResolver {
    fn switch_zones(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send {
        let hidden = self
            .hidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let zones = self
            .zones
            .iter()
            .filter(|(slot, _)| !hidden.contains(slot))
            .map(|(_, ip)| *ip)
            .collect();
        std::future::ready(Ok(zones))
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

/// Starts `rack` live: the fakes, the strategy's reconcilers and the
/// control API, recording into `trace`. Must run inside a tokio runtime.
pub fn start(rack: &RackSpec, opts: &LiveOptions, trace: LiveTrace) -> Result<LiveRack, String> {
    if !matches!(opts.strategy, Strategy::SledTask | Strategy::ScrimletLocal) {
        return Err(format!(
            "live mode runs the sled-task or scrimlet-local reconcilers, not {}: \
             legacy blocks zone start, and live mode starts no zones",
            opts.strategy
        ));
    }
    let mut switches = Vec::new();
    for s in &rack.switches {
        let name = s.slot.to_string();
        let observer_trace = trace.clone();
        let observer_name = name.clone();
        let dpd_state = DpdContext::new(DpdState::new(s.slot.index())).with_observer(Arc::new(
            move |c: &NatChange| observer_trace.record(&observer_name, nat_line(c)),
        ));
        let dpd_server = serve_dpd(loopback(), dpd_state.clone()).map_err(|e| e.to_string())?;
        let mgs_server = serve_mgs(
            loopback(),
            MgsState {
                slot: s.slot.index(),
            },
        )
        .map_err(|e| e.to_string())?;
        switches.push(LiveSwitch {
            slot: s.slot,
            zone: s.zone_address,
            dpd: dpd_server.local_addr(),
            mgs: mgs_server.local_addr(),
            dpd_state,
            scrimlet: s.scrimlet,
            dpd_server,
            mgs_server,
        });
    }
    let mut sleds = Vec::new();
    for sled in &rack.sleds {
        let observer_trace = trace.clone();
        let name = sled.name.clone();
        let state = SledAgentContext::new(SledAgentState::default()).with_observer(Arc::new(
            move |c: &SledAgentChange| observer_trace.record(&name, sled_agent_line(c)),
        ));
        let server = serve_sled_agent(loopback(), state.clone()).map_err(|e| e.to_string())?;
        sleds.push(LiveSled {
            name: sled.name.clone(),
            sled_agent: server.local_addr(),
            state,
            server,
        });
    }

    let hidden: Arc<Mutex<BTreeSet<SwitchSlot>>> = Arc::default();
    let mut scrimlet = BTreeMap::new();
    // The rack's declared zones, as the bootstore carries them.
    let bootstore = watch::Sender::new(Some(
        racksim_sim::world::ZoneSet::from_rack(rack).config(1, |i| rack.sleds[i].address),
    ));
    let mut tasks = Vec::new();
    let mut config = Vec::new();
    match opts.strategy {
        Strategy::ScrimletLocal => {
            for s in &switches {
                let status = watch::Sender::new(ScrimletStatus::Scrimlet);
                let (_handle, driver) = scrimlet_reconcilers(
                    TokioConnector,
                    SwitchZoneServices::Explicit {
                        dpd: s.dpd,
                        mgs: s.mgs,
                    },
                    bootstore.subscribe(),
                    status.subscribe(),
                    opts.period,
                );
                let host = rack.sleds[s.scrimlet].name.clone();
                tasks.push(tokio::spawn(
                    driver.instrument(tracing::info_span!("host", host = %host)),
                ));
                scrimlet.insert(s.slot, status);
            }
        }
        Strategy::SledTask => {
            let connector = MappedConnector {
                map: Arc::new(
                    switches
                        .iter()
                        .flat_map(|s| {
                            [
                                (SocketAddr::new(s.zone.into(), DPD_PORT), s.dpd),
                                (SocketAddr::new(s.zone.into(), MGS_PORT), s.mgs),
                            ]
                        })
                        .collect(),
                ),
            };
            let resolver = FixedResolver {
                zones: Arc::new(switches.iter().map(|s| (s.slot, s.zone)).collect()),
                hidden: hidden.clone(),
            };
            for (index, sled) in rack.sleds.iter().enumerate() {
                let entries: Vec<NatEntry> = rack
                    .zones
                    .iter()
                    .filter(|z| z.sled == index)
                    .map(|z| rack.nat_entry(z))
                    .collect();
                if entries.is_empty() {
                    continue;
                }
                let (config_tx, config_rx) = watch::channel(entries);
                let reconciler = SledNatReconciler::new(connector.clone(), resolver.clone());
                let status = watch::Sender::new(TaskStatus::NotYetRun);
                tasks.push(tokio::spawn(
                    run_reconciler_task(reconciler, config_rx, None, opts.period, status)
                        .instrument(tracing::info_span!("host", host = %sled.name)),
                ));
                config.push(config_tx);
            }
        }
        Strategy::Legacy => unreachable!("refused above"),
    }

    let inputs = Arc::new(Inputs {
        rack: rack.clone(),
        trace: trace.clone(),
        switches: switches
            .iter()
            .map(|s| (s.slot, (s.dpd, s.dpd_state.clone(), s.mgs)))
            .collect(),
        sleds: sleds
            .iter()
            .map(|s| (s.name.clone(), s.sled_agent, s.state.clone()))
            .collect(),
        hidden,
        scrimlet,
    });
    let control_server = serve_control(opts.control, inputs)?;
    trace.record(
        "live",
        format!(
            "rack {} up: {} switches, {} sleds; strategy {}",
            rack.name,
            switches.len(),
            sleds.len(),
            opts.strategy
        ),
    );
    Ok(LiveRack {
        control: control_server.local_addr(),
        switches,
        sleds,
        trace,
        control_server,
        tasks,
        _config: config,
        _bootstore: bootstore,
    })
}

impl LiveRack {
    /// Every service's address, one per line.
    pub fn addresses(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.switches {
            out.push(format!(
                "{}: dpd http://{}  MGS http://{}  (switch zone {})",
                s.slot, s.dpd, s.mgs, s.zone
            ));
        }
        for s in &self.sleds {
            out.push(format!("{}: sled-agent http://{}", s.name, s.sled_agent));
        }
        out.push(format!("control API: http://{}", self.control));
        out
    }

    /// The switch in `slot`.
    pub fn switch(&self, slot: SwitchSlot) -> Option<&LiveSwitch> {
        self.switches.iter().find(|s| s.slot == slot)
    }

    /// Stops the reconcilers and every server.
    pub async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        let _ = self.control_server.close().await;
        for s in self.switches {
            let _ = s.dpd_server.close().await;
            let _ = s.mgs_server.close().await;
        }
        for s in self.sleds {
            let _ = s.server.close().await;
        }
    }
}

/// A plan action, as in a scenario file's step (without `at`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ActionRequest {
    /// The action's name, e.g. `dpd-restart`.
    pub action: String,
    /// The switch it acts on (`switch0`, `switch1`), if it takes one.
    #[serde(default)]
    pub switch: Option<String>,
    /// The zone (`boundary-ntp`, `nexus`, `external-dns`), for `stale-entry`.
    #[serde(default)]
    pub zone: Option<String>,
    /// How long, for `dpd-errors` and `dpd-hang` (`30s`, `2m`).
    #[serde(default, rename = "for")]
    pub window: Option<String>,
}

/// One switch in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct SwitchDump {
    pub switch: String,
    /// Where its dpd and MGS listen.
    pub dpd: String,
    pub mgs: String,
    pub hidden: bool,
    pub scrimlet: Option<String>,
    pub nat_generation: i64,
    pub nat: Vec<Ipv4Nat>,
}

/// One sled in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct SledDump {
    pub sled: String,
    /// Where its sled-agent listens.
    pub sled_agent: String,
    pub v2p: Vec<VirtualNetworkInterfaceHost>,
    pub vmms: Vec<VmmInfo>,
}

/// `GET /state`.
#[derive(Serialize, JsonSchema)]
pub struct StateDump {
    pub switches: Vec<SwitchDump>,
    pub sleds: Vec<SledDump>,
}

/// The control API of a live rack.
#[dropshot::api_description]
pub trait ControlApi {
    type Context;

    /// Applies a plan action (see `racksim_sim::Action`) now.
    #[endpoint { method = POST, path = "/actions" }]
    async fn action_apply(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<ActionRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Every switch's NAT table and every sled-agent's state.
    #[endpoint { method = GET, path = "/state" }]
    async fn state_get(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<StateDump>, HttpError>;

    /// The trace so far.
    #[endpoint { method = GET, path = "/trace" }]
    async fn trace_get(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<LiveLine>>, HttpError>;
}

enum ControlImpl {}

fn bad(message: String) -> HttpError {
    HttpError::for_bad_request(None, message)
}

impl Inputs {
    fn slot(&self, req: &ActionRequest) -> Result<SwitchSlot, HttpError> {
        let raw = req
            .switch
            .as_deref()
            .ok_or_else(|| bad(format!("action {:?} takes a `switch`", req.action)))?;
        let slot: SwitchSlot = raw
            .parse()
            .map_err(|_| bad(format!("no switch {raw:?} (switch0 or switch1)")))?;
        if self.switches.contains_key(&slot) {
            Ok(slot)
        } else {
            Err(bad(format!("this rack has no {slot}")))
        }
    }

    fn apply(&self, req: &ActionRequest) -> Result<(), HttpError> {
        let dpd = |slot: SwitchSlot| &self.switches[&slot].1;
        match req.action.as_str() {
            "dpd-restart" => {
                let slot = self.slot(req)?;
                let d = dpd(slot);
                *d.lock() = DpdState::new(slot.index());
                self.trace
                    .record(&slot.to_string(), "dpd restarted: NAT table empty");
            }
            "dpd-errors" | "dpd-hang" => {
                let slot = self.slot(req)?;
                let raw = req
                    .window
                    .as_deref()
                    .ok_or_else(|| bad(format!("action {:?} takes `for`", req.action)))?;
                let window =
                    crate::file::parse_duration(raw).map_err(|e| bad(format!("`for`: {e}")))?;
                let (fault, what) = if req.action == "dpd-errors" {
                    (Fault::Errors, "answers 500s")
                } else {
                    (Fault::Hang, "hangs")
                };
                dpd(slot).inject(fault, window);
                self.trace
                    .record(&slot.to_string(), format!("dpd {what} for {raw}"));
            }
            "hide-switch" | "reveal-switch" => {
                let slot = self.slot(req)?;
                let mut hidden = self.hidden.lock().unwrap_or_else(|e| e.into_inner());
                let hide = req.action == "hide-switch";
                if hide {
                    hidden.insert(slot);
                } else {
                    hidden.remove(&slot);
                }
                let what = if hide { "hidden from" } else { "visible to" };
                self.trace
                    .record("live", format!("{slot} {what} discovery"));
            }
            "sidecar-power-off" | "sidecar-power-on" => {
                let slot = self.slot(req)?;
                let on = req.action == "sidecar-power-on";
                if !on {
                    // The switch zone goes with the sidecar: its table too.
                    *dpd(slot).lock() = DpdState::new(slot.index());
                }
                if let Some(status) = self.scrimlet.get(&slot) {
                    status.send_replace(if on {
                        ScrimletStatus::Scrimlet
                    } else {
                        ScrimletStatus::NotScrimlet
                    });
                }
                let what = if on { "on" } else { "off (NAT table lost)" };
                self.trace
                    .record(&slot.to_string(), format!("sidecar power {what}"));
            }
            "stale-entry" => {
                let slot = self.slot(req)?;
                let zone = req
                    .zone
                    .as_deref()
                    .ok_or_else(|| bad("action \"stale-entry\" takes a `zone`".to_string()))?;
                let z = self
                    .rack
                    .zones
                    .iter()
                    .find(|z| z.kind.to_string() == zone)
                    .ok_or_else(|| bad(format!("this rack has no zone {zone:?}")))?;
                let mut e = self.rack.nat_entry(z);
                e.target.inner_mac.a[5] ^= 0xff;
                let d = dpd(slot);
                d.change(|d| {
                    d.ipv4_delete(e.external_ip, e.first_port);
                    Ok((
                        (),
                        d.ipv4_create(e.external_ip, e.first_port, e.last_port, e.target)?,
                    ))
                })?;
            }
            other => {
                return Err(bad(format!(
                    "action {other:?} is not supported in live mode (it acts on the simulated \
                     network or hosts); supported: {}",
                    ACTIONS.join(", ")
                )))
            }
        }
        Ok(())
    }
}

impl ControlApi for ControlImpl {
    type Context = Arc<Inputs>;

    async fn action_apply(
        rqctx: RequestContext<Arc<Inputs>>,
        body: TypedBody<ActionRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().apply(&body.into_inner())?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn state_get(
        rqctx: RequestContext<Arc<Inputs>>,
    ) -> Result<HttpResponseOk<StateDump>, HttpError> {
        let inputs = rqctx.context();
        let hidden = inputs
            .hidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let switches = inputs
            .switches
            .iter()
            .map(|(slot, (dpd_addr, dpd, mgs_addr))| {
                let d = dpd.lock();
                SwitchDump {
                    switch: slot.to_string(),
                    dpd: dpd_addr.to_string(),
                    mgs: mgs_addr.to_string(),
                    hidden: hidden.contains(slot),
                    scrimlet: inputs
                        .scrimlet
                        .get(slot)
                        .map(|s| format!("{:?}", *s.borrow())),
                    nat_generation: d.generation(),
                    nat: d.ipv4_entries(),
                }
            })
            .collect();
        let sleds = inputs
            .sleds
            .iter()
            .map(|(name, addr, agent)| {
                let a = agent.lock();
                SledDump {
                    sled: name.clone(),
                    sled_agent: addr.to_string(),
                    v2p: a.v2p_list(),
                    vmms: a.instances(),
                }
            })
            .collect();
        Ok(HttpResponseOk(StateDump { switches, sleds }))
    }

    async fn trace_get(
        rqctx: RequestContext<Arc<Inputs>>,
    ) -> Result<HttpResponseOk<Vec<LiveLine>>, HttpError> {
        Ok(HttpResponseOk(rqctx.context().trace.lines()))
    }
}

fn serve_control(bind: SocketAddr, inputs: Arc<Inputs>) -> Result<HttpServer<Arc<Inputs>>, String> {
    let api = control_api_mod::api_description::<ControlImpl>().map_err(|e| e.to_string())?;
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger("racksim-control")
    .map_err(|e| e.to_string())?;
    ServerBuilder::new(api, inputs, log)
        .config(ConfigDropshot {
            bind_address: bind,
            ..Default::default()
        })
        .start()
        .map_err(|e| format!("control API on {bind}: {e}"))
}

/// The control API's OpenAPI document.
pub fn control_openapi() -> serde_json::Value {
    let api = control_api_mod::stub_api_description().expect("the control API is well formed");
    api.openapi(
        "racksim live-mode control API",
        semver::Version::new(1, 0, 0),
    )
    .json()
    .expect("OpenAPI documents serialize")
}

/// The reconciler's `tracing` events as live trace lines: the message of
/// each `INFO` event of the reconciler crate, on the host named by the
/// enclosing `host` span.
pub mod logging {
    use std::fmt;

    use tracing::{
        field::{Field, Visit},
        span, Event, Level, Subscriber,
    };
    use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

    use super::LiveTrace;

    struct Host(String);

    #[derive(Default)]
    struct Message {
        message: Option<String>,
        host: Option<String>,
    }

    impl Visit for Message {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            match field.name() {
                "message" => self.message = Some(format!("{value:?}")),
                "host" => self.host = Some(format!("{value:?}")),
                _ => {}
            }
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            match field.name() {
                "message" => self.message = Some(value.to_string()),
                "host" => self.host = Some(value.to_string()),
                _ => {}
            }
        }
    }

    /// Records the reconciler's events in a [`LiveTrace`].
    pub struct LiveLayer(pub LiveTrace);

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for LiveLayer {
        fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
            let mut m = Message::default();
            attrs.record(&mut m);
            if let (Some(host), Some(span)) = (m.host, ctx.span(id)) {
                span.extensions_mut().insert(Host(host));
            }
        }

        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            let meta = event.metadata();
            if !meta.target().starts_with("racksim_reconciler") || *meta.level() > Level::INFO {
                return;
            }
            let mut m = Message::default();
            event.record(&mut m);
            let host = ctx
                .event_scope(event)
                .and_then(|scope| {
                    scope
                        .from_root()
                        .find_map(|s| s.extensions().get::<Host>().map(|h| h.0.clone()))
                })
                .unwrap_or_else(|| "live".to_string());
            if let Some(message) = m.message {
                self.0.record(&host, message);
            }
        }
    }
}

/// `racksim serve`: runs `rack` until Ctrl-C.
pub async fn serve(rack: &RackSpec, opts: LiveOptions) -> Result<(), String> {
    let trace = LiveTrace::new(false);
    let subscriber = {
        use tracing_subscriber::layer::SubscriberExt;
        tracing_subscriber::registry().with(logging::LiveLayer(trace.clone()))
    };
    // The runtime is single-threaded: every task runs on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);
    let live = start(rack, &opts, trace)?;
    println!("racksim live: {} with {}", rack.name, opts.strategy);
    for line in live.addresses() {
        println!("  {line}");
    }
    // The lines so far (the reconcilers may have started), then each as it
    // comes.
    for line in live.trace.lines() {
        println!("{line}");
    }
    live.trace.set_echo();
    println!("Ctrl-C stops.");
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| format!("waiting for Ctrl-C: {e}"))?;
    println!("stopping");
    live.stop().await;
    Ok(())
}

/// The scenario `racksim serve` runs when none is named.
pub const DEFAULT_SCENARIO: &str = "sidecar-power-cycle";

/// `racksim serve SCENARIO [--strategy S] [--bind ADDR]`: checks the
/// arguments, then runs the rack on a single-threaded runtime until Ctrl-C.
pub fn command(
    scenario: &crate::file::Scenario,
    strategy: Option<&str>,
    bind: SocketAddr,
) -> Result<bool, String> {
    let strategy = match strategy {
        None => Strategy::ScrimletLocal,
        Some(name) => name
            .parse::<Strategy>()
            .map_err(|e| format!("error: --strategy {name:?}: {e}"))?,
    };
    let opts = LiveOptions {
        strategy,
        control: bind,
        period: racksim_reconciler::task::DEFAULT_PERIOD,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("error: starting the runtime: {e}"))?;
    runtime
        .block_on(serve(&scenario.rack, opts))
        .map_err(|e| format!("error: {e}"))?;
    Ok(true)
}

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
//! The modules follow the data path: `hosts` (the switch zones and sleds
//! and their lives), `nexus` (the control plane), `net` (addresses,
//! discovery, links), `control` (the control API) and `trace`.
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
//! * **No data path.** Nothing sends NTP through the switches and
//!   `upstream-ntp` is no host here. Under the strategies that block zone
//!   start (`legacy`, and `scrimlet-local-with-zone-start`, what ships)
//!   each zone starts through the zone-start NAT path on live sockets
//!   (`hosts`), but the zones serve nothing: a blocked start shows in
//!   the trace and the state dump, not in what the rack can do.
//! * **One Nexus** stands for the rack's Nexus zones (see `nexus`).
//! * **Links** are enforced where the reconcilers connect, not per packet
//!   (see `net`).

/// The scenarios a live rack starts from (`racksim-scenario`): a user of
/// live mode reaches the catalogue and the file parser through this crate
/// alone.
pub use racksim_scenario as scenario;

mod control;
mod hosts;
mod net;
mod nexus;
mod trace;

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc, time::Duration};

use dropshot::HttpServer;
use racksim_nexus::instances::StartImpl;
use racksim_reconciler::dpd::Ipv4Nat;
use racksim_sim::{rack::ZoneKind, Era, InstanceSpec, RackSpec, ServiceNat};
use tokio::sync::watch;

pub use control::{
    control_openapi, Convergence, InstanceDump, NexusDump, SledDump, StateDump, SwitchDump,
    WaitRequest, MAX_WAIT,
};
pub use racksim_reconciler::discovery::SwitchSlot;
pub use racksim_sim::check::gaps::Gap;
pub use trace::{LiveLine, LiveTrace};

use net::{FixedResolver, Links};

use control::{serve_control, Control};
use hosts::{Env, Hosts};
use nexus::{Inventory, LiveNexus, NexusEnv};

/// What every host of a live rack shares, the Nexus too: the strategy and
/// start implementation (the era), the reconcilers' period, the trace, the
/// links and discovery.
#[derive(Clone)]
struct Shared {
    strategy: ServiceNat,
    /// Whether the strategy's reconcilers run, or only the fakes and the
    /// control plane (a user's own reconciler is the one under test).
    reconcilers: Reconcilers,
    /// How the control plane starts instances; `inline` is the instance-start networking issue's
    /// time, when dpd had no NAT RPW.
    start: StartImpl,
    /// The control plane of the run's era, derived once from the strategy
    /// and the start ([`Era::of`]): every host reads it here.
    era: Era,
    period: Duration,
    trace: LiveTrace,
    links: Links,
    resolver: FixedResolver,
}

/// What `racksim serve` runs with no options, but on a port the OS picks
/// and with no instances: `scrimlet-local`, racksim's reconcilers, the
/// production period (30 s), the saga start.
impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            strategy: ServiceNat::SCRIMLET_LOCAL,
            reconcilers: Reconcilers::Racksim,
            control: SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0),
            period: racksim_reconciler::task::DEFAULT_PERIOD,
            start: StartImpl::Saga,
            instances: Vec::new(),
        }
    }
}

/// Which reconcilers a live rack runs on its sleds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reconcilers {
    /// The strategy's own: racksim's reconciler crate (the default).
    #[default]
    Racksim,
    /// None: the rack's fakes and control plane only (`racksim serve
    /// --reconcilers none`). No reconciler of racksim's writes a switch's
    /// NAT table, and zones start at once (the zone-start NAT path is the
    /// reconciler crate's too), so a reconciler pointed at the printed
    /// addresses is the only one at work. The strategy still chooses the
    /// era of the control plane: whether Nexus's service-zone NAT task and
    /// dpd's NAT RPW run (`racksim_nexus::era::Era`).
    None,
}

racksim_wire::enum_names!(Reconcilers {
    Racksim => "racksim",
    None => "none",
});

impl std::str::FromStr for Reconcilers {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reconcilers::from_name(s).ok_or_else(|| {
            format!("unknown reconcilers {s:?} (expected racksim, the strategy's own, or none)")
        })
    }
}

/// How to run the rack.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub strategy: ServiceNat,
    /// Whether the strategy's reconcilers run (see [`Reconcilers`]).
    pub reconcilers: Reconcilers,
    /// Where the control API listens (port 0: any).
    pub control: SocketAddr,
    /// The reconcilers' and background tasks' period (production: 30 s).
    pub period: Duration,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// The instances the instance actions may name.
    pub instances: Vec<InstanceSpec>,
}

/// Where a live rack's services listen now, as typed values (what
/// `racksim serve` prints as lines). A restarted host keeps its ports, so
/// these stay valid across crash and restart; a replaced scrimlet's sled
/// is gone from `sled_agents`' answers until it is back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// Each switch's dpd and MGS.
    pub switches: BTreeMap<SwitchSlot, SwitchAddresses>,
    /// Each sled's sled-agent, by sled name.
    pub sled_agents: BTreeMap<String, SocketAddr>,
    /// The control API (plan actions, state, trace; Nexus's instance API).
    pub control: SocketAddr,
}

/// One switch's services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchAddresses {
    pub dpd: SocketAddr,
    pub mgs: SocketAddr,
}

/// A running live rack. [`Self::stop`] stops it and waits until every
/// server has let go of its port; dropping it instead (a test that panics)
/// still stops everything — servers shut down, tasks are aborted — without
/// waiting.
pub struct LiveRack {
    pub control: SocketAddr,
    pub trace: LiveTrace,
    inner: Arc<Control>,
    control_server: HttpServer<Arc<Control>>,
}

/// Starts `rack` live: the fakes, the strategy's reconcilers and the
/// control API, recording into `trace`. Must run inside a tokio runtime.
async fn start_rack(
    rack: &RackSpec,
    opts: &LiveOptions,
    trace: LiveTrace,
) -> Result<LiveRack, String> {
    if opts.reconcilers == Reconcilers::Racksim && opts.strategy.live().is_none() {
        return Err(format!(
            "strategy {} does not say what live mode runs for it (NatStrategy::live): \
             run it in the simulation, or serve the rack with reconcilers none",
            opts.strategy
        ));
    }
    let nexus_zone = rack
        .zones
        .iter()
        .find(|z| z.kind == ZoneKind::Nexus)
        .ok_or_else(|| format!("rack {} has no Nexus zone", rack.name))?;
    let nexus_sled = &rack.sleds[nexus_zone.sled];
    let (desired, desired_rx) = watch::channel(Vec::new());
    let shared = Shared {
        strategy: opts.strategy,
        reconcilers: opts.reconcilers,
        start: opts.start,
        era: Era::of(opts.strategy.era(), opts.start),
        period: opts.period,
        trace: trace.clone(),
        links: Links::default(),
        resolver: FixedResolver::default(),
    };
    let env = Env {
        spec: rack.clone(),
        shared: shared.clone(),
        inventory: Inventory::default(),
        desired,
        nexus: SocketAddr::new(
            nexus_sled.address.into(),
            racksim_nexus::NEXUS_INTERNAL_PORT,
        ),
    };
    let instances: Vec<String> = opts.instances.iter().map(|i| i.name.clone()).collect();
    let mut nexus = LiveNexus::new(
        NexusEnv {
            shared,
            desired: desired_rx,
            instances: instances.clone(),
        },
        &nexus_sled.name,
        nexus_sled.address,
        env.inventory.clone(),
    );
    let mut hosts = Hosts::new(&env);
    nexus.start()?;
    hosts.start_all(&env).await?;
    let inner = Arc::new(Control {
        env,
        hosts: tokio::sync::Mutex::new(hosts),
        nexus: tokio::sync::Mutex::new(nexus),
        steps: tokio::sync::Mutex::new(racksim_scenario::file::StepChecker::new(
            rack,
            &opts.instances,
        )),
        instances,
    });
    let control_server = serve_control(opts.control, inner.clone())?;
    trace.record(
        "live",
        format!(
            "rack {} up: {} switches, {} sleds; strategy {}{}",
            rack.name,
            rack.switches.len(),
            rack.sleds.len(),
            opts.strategy,
            match opts.reconcilers {
                Reconcilers::Racksim => "",
                Reconcilers::None => "; reconcilers: none (its fakes and control plane only)",
            }
        ),
    );
    Ok(LiveRack {
        control: control_server.local_addr(),
        trace,
        inner,
        control_server,
    })
}

impl LiveRack {
    /// Starts `scenario`'s rack live with `opts`, its trace kept quiet (read
    /// it with [`LiveTrace::lines`]). With no instances in `opts`, the
    /// instance actions may name the scenario's ([`live_instances`]). Must
    /// run inside a tokio runtime; call [`Self::stop`] when done.
    pub async fn start(
        scenario: &racksim_scenario::file::Scenario,
        opts: LiveOptions,
    ) -> Result<LiveRack, String> {
        Self::start_with_trace(scenario, opts, LiveTrace::new(false)).await
    }

    /// [`Self::start`], recording into `trace`: one whose
    /// [`LiveTrace::subscriber`] the caller installed, so the reconcilers'
    /// activations are in it too (as `racksim serve` does), or one that
    /// echoes.
    pub async fn start_with_trace(
        scenario: &racksim_scenario::file::Scenario,
        opts: LiveOptions,
        trace: LiveTrace,
    ) -> Result<LiveRack, String> {
        let opts = LiveOptions {
            instances: if opts.instances.is_empty() {
                live_instances(scenario)
            } else {
                opts.instances
            },
            ..opts
        };
        start_rack(&scenario.rack, &opts, trace).await
    }

    /// Where every service listens, as typed values.
    pub async fn services(&self) -> Addresses {
        let hosts = self.inner.hosts.lock().await;
        Addresses {
            switches: hosts
                .switches
                .iter()
                .map(|(slot, s)| {
                    let a = SwitchAddresses {
                        dpd: s.dpd_addr,
                        mgs: s.mgs_addr,
                    };
                    (*slot, a)
                })
                .collect(),
            sled_agents: hosts
                .sleds
                .iter()
                .map(|s| (s.name.clone(), s.agent_addr))
                .collect(),
            control: self.control,
        }
    }

    /// Every service's address, one per line.
    pub async fn addresses(&self) -> Vec<String> {
        let state = self.inner.dump().await;
        let mut out = Vec::new();
        for s in &state.switches {
            out.push(format!(
                "{}: dpd http://{}  MGS http://{}  (switch zone {})",
                s.switch, s.dpd, s.mgs, s.zone
            ));
        }
        for s in &state.sleds {
            out.push(format!("{}: sled-agent http://{}", s.sled, s.sled_agent));
        }
        out.push(format!(
            "{}: Nexus (instance API through the control API), {}",
            state.nexus.host,
            if state.nexus.up { "up" } else { "down" }
        ));
        out.push(format!("control API: http://{}", self.control));
        out
    }

    /// What `GET /state` answers.
    pub async fn state(&self) -> StateDump {
        self.inner.dump().await
    }

    /// Every switch's IPv4 NAT table (empty while its zone is down).
    pub async fn nat_tables(&self) -> BTreeMap<SwitchSlot, Vec<Ipv4Nat>> {
        let hosts = self.inner.hosts.lock().await;
        hosts
            .switches
            .iter()
            .map(|(slot, s)| (*slot, s.dpd.lock().ipv4_entries()))
            .collect()
    }

    /// What the rack still lacks now (`GET /gaps`): each switch's missing
    /// and stale NAT entries, each sled's missing V2P mappings, each
    /// instance's unsettled state — the simulation's checks, in its words.
    pub async fn gaps(&self) -> Vec<Gap> {
        self.inner.gaps().await
    }

    /// Waits until the rack has converged (no gaps) or `timeout` has
    /// passed (`POST /wait`), and says which.
    pub async fn wait_for_convergence(&self, timeout: Duration) -> Convergence {
        self.inner.wait(timeout).await
    }

    /// Where the dpd of `slot` listens now.
    pub async fn dpd(&self, slot: SwitchSlot) -> Option<SocketAddr> {
        let hosts = self.inner.hosts.lock().await;
        hosts.switches.get(&slot).map(|s| s.dpd_addr)
    }

    /// Where the MGS of `slot` listens now.
    pub async fn mgs(&self, slot: SwitchSlot) -> Option<SocketAddr> {
        let hosts = self.inner.hosts.lock().await;
        hosts.switches.get(&slot).map(|s| s.mgs_addr)
    }

    /// Stops the reconcilers and every server.
    pub async fn stop(self) {
        let _ = self.control_server.close().await;
        self.inner.nexus.lock().await.shut_down().await;
        let mut hosts = self.inner.hosts.lock().await;
        hosts.stop_all();
        hosts.wait_closed().await;
    }
}

/// `racksim serve`: runs `scenario`'s rack until Ctrl-C — a
/// [`LiveRack`] whose trace is printed as it grows.
pub async fn serve(
    scenario: &racksim_scenario::file::Scenario,
    opts: LiveOptions,
) -> Result<(), String> {
    let trace = LiveTrace::new(false);
    // The runtime is single-threaded: every task runs on this thread, so
    // the thread's subscriber sees every reconciler's activations.
    let _guard = tracing::subscriber::set_default(trace.subscriber());
    let (strategy, reconcilers) = (opts.strategy, opts.reconcilers);
    let live = LiveRack::start_with_trace(scenario, opts, trace).await?;
    let rack = &scenario.rack.name;
    match reconcilers {
        Reconcilers::Racksim => println!("racksim live: {rack} with {strategy}"),
        Reconcilers::None => println!(
            "racksim live: {rack} with no reconcilers (the {strategy} era's control plane)"
        ),
    }
    for line in live.addresses().await {
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

/// The instances live mode declares: the scenario's, or `web` and `db`
/// when it declares none (a service-NAT scenario).
pub fn live_instances(scenario: &racksim_scenario::file::Scenario) -> Vec<InstanceSpec> {
    if scenario.instances.is_empty() {
        ["web", "db"]
            .iter()
            .map(|n| InstanceSpec {
                name: n.to_string(),
            })
            .collect()
    } else {
        scenario.instances.clone()
    }
}

/// The scenario `racksim serve` runs when none is named.
pub const DEFAULT_SCENARIO: &str = "sidecar-power-cycle";

/// `racksim serve SCENARIO [--strategy S] [--start I] [--reconcilers R]
/// [--bind ADDR]`: checks the
/// arguments, then runs the rack on a single-threaded runtime until Ctrl-C.
pub fn command(
    scenario: &racksim_scenario::file::Scenario,
    strategy: Option<&str>,
    start: Option<&str>,
    reconcilers: Option<&str>,
    bind: SocketAddr,
) -> Result<bool, String> {
    let strategy = match strategy {
        None => ServiceNat::SCRIMLET_LOCAL,
        Some(name) => name
            .parse::<ServiceNat>()
            .map_err(|e| format!("error: --strategy {name:?}: {e}"))?,
    };
    let start = match start {
        None => StartImpl::Saga,
        Some(name) => name
            .parse::<StartImpl>()
            .map_err(|e| format!("error: --start: {e}"))?,
    };
    let reconcilers = match reconcilers {
        None => Reconcilers::Racksim,
        Some(name) => name
            .parse::<Reconcilers>()
            .map_err(|e| format!("error: --reconcilers: {e}"))?,
    };
    let opts = LiveOptions {
        strategy,
        reconcilers,
        control: bind,
        start,
        ..LiveOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("error: starting the runtime: {e}"))?;
    runtime
        .block_on(serve(scenario, opts))
        .map_err(|e| format!("error: {e}"))?;
    Ok(true)
}

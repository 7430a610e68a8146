//! The control API of a live rack (dropshot): apply a plan action now,
//! dump the state, read the trace so far, and ask what the rack still
//! lacks — now (`GET /gaps`) or once it has converged or a timeout has
//! passed (`POST /wait`).
//!
//! An action is a scenario file's step without `at`, read by the file's
//! own parser ([`crate::file::StepChecker`]): the same names, the same
//! fields, the same refusals (an unknown host or instance, healing a
//! partition never made, powering on a sidecar that is on), each a 400
//! that changes nothing. Every plan action applies; the instance actions
//! are requests to the live Nexus's instance API, answered in the trace.

use std::{net::SocketAddr, sync::Arc};

use dropshot::{
    HttpError, HttpResponseOk, HttpResponseUpdatedNoContent, HttpServer, RequestContext, TypedBody,
};
use racksim_fakes::api::{quiet_server, Fault};
use racksim_nexus::InstanceRequest;
use racksim_reconciler::{
    dpd::Ipv4Nat,
    instances::{VirtualNetworkInterfaceHost, VmmInfo},
    legacy::LegacyProgress,
};
use racksim_sim::{
    check::gaps::{rack_gaps, DesiredNat, Gap, RackView, SledView, SwitchTable},
    era::{ControlPlaneEra, Task},
    rack::UPSTREAM_NTP_NAME,
    world::zone_nat_entry,
    Action,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    hosts::{Env, Hosts},
    nexus::LiveNexus,
    trace::LiveLine,
};
use crate::file::StepChecker;

/// One host, or several.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum HostList {
    One(String),
    Many(Vec<String>),
}

/// A plan action: a scenario file's `[[step]]` without `at`, with the
/// same fields (each action takes the ones its step takes).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// The action's name, e.g. `dpd-restart`.
    pub action: String,
    /// The switch it acts on (`switch0`, `switch1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    /// The host (`sled3`, `switch1`), for `crash` and `restart`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// One side of a link, for `partition`, `heal` and `latency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<HostList>,
    /// The other side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<HostList>,
    /// Only from `a` to `b`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oneway: Option<bool>,
    /// For `latency` (`250ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<String>,
    /// How long, for `dpd-errors` and `dpd-hang` (`30s`, `2m`).
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// A zone (`nexus`, `nexus.1`) or, for `add-zone`, a zone kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// For the instance actions: a declared instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The sled an instance starts on, or a zone goes to (`add-zone`,
    /// `move-zone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sled: Option<String>,
    /// For `config-change`: `add-zone`, `move-zone` or `remove-zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// For `add-zone`, optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_ip: Option<String>,
}

/// One switch in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct SwitchDump {
    pub switch: String,
    /// Whether its switch zone runs.
    pub up: bool,
    /// Where its dpd and MGS listen.
    pub dpd: String,
    pub mgs: String,
    /// Its switch zone's underlay address (what discovery names).
    pub zone: String,
    pub hidden: bool,
    /// Its scrimlet, and whether that is a scrimlet now (scrimlet-local).
    pub scrimlet: Option<String>,
    pub scrimlet_status: Option<String>,
    pub nat_generation: i64,
    pub nat: Vec<Ipv4Nat>,
}

/// One sled in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct SledDump {
    pub sled: String,
    pub up: bool,
    /// Replaced: it never comes back.
    pub retired: bool,
    /// Where its sled-agent listens.
    pub sled_agent: String,
    pub v2p: Vec<VirtualNetworkInterfaceHost>,
    pub vmms: Vec<VmmInfo>,
    /// Under the strategies that block zone start (`legacy`,
    /// `scrimlet-local-with-zone-start`): each of its zones' start, in the
    /// zone-start NAT path or done. Empty under the others.
    pub zone_starts: Vec<ZoneStartDump>,
}

/// One zone's start in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct ZoneStartDump {
    /// The zone, as `nexus.0`.
    pub zone: String,
    /// Whether the zone-start path has returned (the zone is started).
    pub started: bool,
    /// Where the path is: `looking up switches`, `waiting for …`,
    /// `ensuring NAT entry on …`, `NAT ensured on [...]`.
    pub progress: String,
}

/// One instance in the state dump, as the database has it.
#[derive(Serialize, JsonSchema)]
pub struct InstanceDump {
    pub instance: String,
    /// `creating`, `stopped`, `starting`, `running`, `stopping`,
    /// `deleted`, `failed`.
    pub state: String,
    pub sled: Option<String>,
    pub generation: u64,
}

/// The control plane in the state dump.
#[derive(Serialize, JsonSchema)]
pub struct NexusDump {
    /// The sled of the Nexus zone it stands for.
    pub host: String,
    pub up: bool,
    /// The instance NAT table's version (what dpds pull up to).
    pub nat_version: i64,
    pub instances: Vec<InstanceDump>,
}

/// `GET /state`.
#[derive(Serialize, JsonSchema)]
pub struct StateDump {
    pub switches: Vec<SwitchDump>,
    pub sleds: Vec<SledDump>,
    pub nexus: NexusDump,
    /// The service zones' NAT entries as the bootstore's config has them.
    pub desired_nat: Vec<Ipv4Nat>,
}

/// What the rack still lacks: `GET /gaps`, and `POST /wait`'s answer.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Convergence {
    /// Whether the rack holds everything it should (no gaps).
    pub converged: bool,
    /// How long `POST /wait` waited, in milliseconds (0 for `GET /gaps`).
    pub waited_ms: u64,
    /// Each switch's missing and stale NAT entries, each sled's missing
    /// V2P mappings and leaked VMMs, each instance's unsettled state: the
    /// simulation's convergence checks (`racksim_sim::check::gaps`), in
    /// the same words.
    pub gaps: Vec<Gap>,
}

/// `POST /wait`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// How long to wait at most, in a scenario file's duration syntax
    /// (`500ms`, `45s`, `5m`); at most [`MAX_WAIT`].
    pub timeout: String,
}

/// The longest `POST /wait` waits: a wait longer than this is a test that
/// should say what it waits for.
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// How often a wait looks at the rack again. Each look copies the tables
/// under their locks, as `GET /state` does; the rack's state changes on
/// requests and timers, not on a signal a waiter could subscribe to.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The control API of a live rack.
#[dropshot::api_description]
pub trait ControlApi {
    type Context;

    /// Applies a plan action (a scenario step without `at`) now.
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
    /// What the rack still lacks, now.
    #[endpoint { method = GET, path = "/gaps" }]
    async fn gaps_get(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Convergence>, HttpError>;

    /// Waits until the rack has converged or `timeout` has passed, and
    /// says which: the gaps that remain, if any.
    #[endpoint { method = POST, path = "/wait" }]
    async fn wait_post(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<WaitRequest>,
    ) -> Result<HttpResponseOk<Convergence>, HttpError>;

    #[endpoint { method = GET, path = "/trace" }]
    async fn trace_get(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<LiveLine>>, HttpError>;
}

/// What the control API acts on.
pub(super) struct Control {
    pub env: Env,
    pub hosts: tokio::sync::Mutex<Hosts>,
    pub nexus: tokio::sync::Mutex<LiveNexus>,
    /// What the applied steps have done, for reading the next; held for
    /// the whole of an action, so actions apply one at a time.
    pub steps: tokio::sync::Mutex<StepChecker>,
    /// Declared instances, by id - 1.
    pub instances: Vec<String>,
}

fn bad(message: String) -> HttpError {
    HttpError::for_bad_request(None, message)
}

impl Control {
    /// Reads `req` as a plan step: the action, or a 400 saying why not.
    /// Reads `req` as the next step after those `steps` has seen: the
    /// action, and the checker as it will be once the action is applied.
    fn read(steps: &StepChecker, req: &ActionRequest) -> Result<(Action, StepChecker), HttpError> {
        let fields = toml::to_string(req).map_err(|e| bad(format!("action: {e}")))?;
        let mut next = steps.clone();
        let action = next.check(&fields).map_err(bad)?;
        let names_upstream = match &action {
            Action::Crash(h) | Action::Restart(h) => h == UPSTREAM_NTP_NAME,
            Action::Partition { a, b, .. }
            | Action::Heal { a, b, .. }
            | Action::Latency { a, b, .. } => a.iter().chain(b).any(|h| h == UPSTREAM_NTP_NAME),
            _ => false,
        };
        if names_upstream {
            return Err(bad(format!(
                "live mode runs no {UPSTREAM_NTP_NAME} (no data path): name sleds and \
                 switch zones"
            )));
        }
        Ok((action, next))
    }

    fn instance_id(&self, name: &str) -> Result<u32, HttpError> {
        self.instances
            .iter()
            .position(|i| i == name)
            .map(|i| i as u32 + 1)
            .ok_or_else(|| bad(format!("no instance {name:?}")))
    }

    /// Applies `action` now, recording what happened in the trace.
    async fn apply(&self, action: &Action) -> Result<(), HttpError> {
        let env = &self.env;
        let trace = &env.shared.trace;
        trace.record("control", action.to_string());
        let mut hosts = self.hosts.lock().await;
        let internal = |e: String| HttpError::for_internal_error(e);
        match action {
            Action::DpdRestart(slot) => {
                let s = &hosts.switches[slot];
                if s.up() {
                    *s.dpd.lock() = racksim_fakes::dpd::DpdState::new(slot.index());
                    trace.record(&slot.to_string(), "dpd restarted: NAT table empty");
                } else {
                    trace.record(&slot.to_string(), "switch zone down: no dpd to restart");
                }
            }
            Action::DpdErrors { switch, window } | Action::DpdHang { switch, window } => {
                let (fault, what) = if matches!(action, Action::DpdErrors { .. }) {
                    (Fault::Errors, "answers 500s")
                } else {
                    (Fault::Hang, "hangs")
                };
                hosts.switches[switch].dpd.inject(fault, *window);
                trace.record(
                    &switch.to_string(),
                    format!(
                        "dpd {what} for {}",
                        racksim_sim::trace::fmt_duration(*window)
                    ),
                );
            }
            Action::MgsErrors { switch, window } | Action::MgsHang { switch, window } => {
                let (fault, what) = if matches!(action, Action::MgsErrors { .. }) {
                    (Fault::Errors, "answers 500s")
                } else {
                    (Fault::Hang, "hangs")
                };
                hosts.switches[switch].mgs.inject(fault, *window);
                trace.record(
                    &switch.to_string(),
                    format!(
                        "MGS {what} for {}",
                        racksim_sim::trace::fmt_duration(*window)
                    ),
                );
            }
            Action::HideSwitch(slot) | Action::RevealSwitch(slot) => {
                let hide = matches!(action, Action::HideSwitch(_));
                env.shared.resolver.hide(*slot, hide);
                let what = if hide { "hidden from" } else { "visible to" };
                trace.record("live", format!("{slot} {what} discovery"));
            }
            Action::SidecarPowerOff(slot) | Action::SidecarPowerOn(slot) => {
                let on = matches!(action, Action::SidecarPowerOn(_));
                hosts
                    .sidecar_power(env, *slot, on)
                    .await
                    .map_err(internal)?;
                let what = if on { "on" } else { "off (NAT table lost)" };
                trace.record(&slot.to_string(), format!("sidecar power {what}"));
            }
            Action::LostEntry { switch, zone } => {
                let Some(z) = hosts.zones.zones().iter().find(|z| z.id.kind == *zone) else {
                    return Err(bad(format!("the rack has no {zone} zone now")));
                };
                let e = zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address);
                let s = &hosts.switches[switch];
                if !s.up() {
                    trace.record(&switch.to_string(), "switch zone down: no entry to delete");
                    return Ok(());
                }
                s.dpd
                    .change(|d| Ok(d.ipv4_delete(e.external_ip, e.first_port)))?;
            }
            Action::StaleEntry { switch, zone } => {
                let Some(z) = hosts.zones.zones().iter().find(|z| z.id.kind == *zone) else {
                    return Err(bad(format!("the rack has no {zone} zone now")));
                };
                let mut e = zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address);
                e.target.inner_mac.a[5] ^= 0xff;
                let s = &hosts.switches[switch];
                if !s.up() {
                    trace.record(&switch.to_string(), "switch zone down: no entry planted");
                    return Ok(());
                }
                s.dpd.change(|d| {
                    d.ipv4_delete(e.external_ip, e.first_port);
                    Ok(d.ipv4_create(e.external_ip, e.first_port, e.last_port, e.target)?)
                })?;
            }
            Action::Crash(host) | Action::Restart(host) => {
                let up = matches!(action, Action::Restart(_));
                if let Ok(slot) = host.parse() {
                    if up {
                        hosts.start_switch(env, slot).await.map_err(internal)?;
                    } else {
                        hosts.stop_switch(slot);
                    }
                } else if let Some(i) = hosts.sled_index(host) {
                    if up {
                        hosts.start_sled(env, i).await.map_err(internal)?;
                    } else {
                        hosts.stop_sled(i);
                    }
                } else {
                    return Err(bad(format!("no host {host:?} runs in this live rack")));
                }
            }
            Action::Partition { a, b, oneway } | Action::Heal { a, b, oneway } => {
                let heal = matches!(action, Action::Heal { .. });
                env.shared.links.partition(a, b, heal);
                if !oneway {
                    env.shared.links.partition(b, a, heal);
                }
            }
            Action::Latency { a, b, latency } => env.shared.links.set_latency(a, b, *latency),
            Action::ScrimletReboot(slot) => {
                // The sled and the switch zone it hosts, together.
                if let Some(i) = hosts.scrimlet_of(*slot) {
                    hosts.stop_sled(i);
                }
                hosts.stop_switch(*slot);
            }
            Action::ScrimletBack(slot) => {
                if let Some(i) = hosts.scrimlet_of(*slot) {
                    hosts.start_sled(env, i).await.map_err(internal)?;
                }
                hosts.start_switch(env, *slot).await.map_err(internal)?;
            }
            Action::PowerOff => hosts.stop_all(),
            Action::ColdBoot => hosts.start_all(env).await.map_err(internal)?,
            Action::ReplaceScrimlet(slot) => {
                let what = hosts.replace_scrimlet(env, *slot).await.map_err(internal)?;
                trace.record("control", format!("  {what}"));
            }
            Action::ConfigChange(change) => {
                let what = hosts.change_config(env, change).map_err(bad)?;
                trace.record("control", format!("  {what}"));
            }
            Action::ControlPlaneDown => self.nexus.lock().await.stop(),
            Action::ControlPlaneCrash => self.nexus.lock().await.crash(),
            Action::ControlPlaneUp => self.nexus.lock().await.start().map_err(internal)?,
            Action::InstanceCreate { instance, sled }
            | Action::InstanceStart { instance, sled } => {
                let id = self.instance_id(instance)?;
                let sled = hosts
                    .sled_index(sled)
                    .ok_or_else(|| bad(format!("no sled {sled} runs now")))?
                    as u32;
                let req = if matches!(action, Action::InstanceCreate { .. }) {
                    InstanceRequest::Create { instance: id, sled }
                } else {
                    InstanceRequest::Start { instance: id, sled }
                };
                self.nexus.lock().await.submit(req);
            }
            Action::InstanceStop { instance } => {
                let instance = self.instance_id(instance)?;
                self.nexus
                    .lock()
                    .await
                    .submit(InstanceRequest::Stop { instance });
            }
            Action::InstanceDelete { instance } => {
                let instance = self.instance_id(instance)?;
                self.nexus
                    .lock()
                    .await
                    .submit(InstanceRequest::Delete { instance });
            }
        }
        Ok(())
    }

    pub async fn dump(&self) -> StateDump {
        let hosts = self.hosts.lock().await;
        let switches = hosts
            .switches
            .values()
            .map(|s| {
                let d = s.dpd.lock();
                let scrimlet = hosts
                    .sleds
                    .iter()
                    .find(|x| x.scrimlet_of == Some(s.slot) && !x.retired);
                SwitchDump {
                    switch: s.slot.to_string(),
                    up: s.up(),
                    dpd: s.dpd_addr.to_string(),
                    mgs: s.mgs_addr.to_string(),
                    zone: s.zone.to_string(),
                    hidden: self.env.shared.resolver.is_hidden(s.slot),
                    scrimlet: scrimlet.map(|x| x.name.clone()),
                    scrimlet_status: scrimlet
                        .and_then(|x| x.status.as_ref())
                        .map(|st| format!("{:?}", *st.borrow())),
                    nat_generation: d.generation(),
                    nat: d.ipv4_entries(),
                }
            })
            .collect();
        let sleds = hosts
            .sleds
            .iter()
            .map(|s| {
                let a = s.agent.lock();
                SledDump {
                    sled: s.name.clone(),
                    up: s.up(),
                    retired: s.retired,
                    sled_agent: s.agent_addr.to_string(),
                    v2p: a.v2p_list(),
                    vmms: a.instances(),
                    zone_starts: s
                        .zone_starts
                        .iter()
                        .map(|(id, z)| {
                            let p = z.progress.borrow();
                            ZoneStartDump {
                                zone: id.to_string(),
                                started: matches!(*p, LegacyProgress::Done { .. }),
                                progress: p.to_string(),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let mut desired_nat: Vec<Ipv4Nat> = hosts
            .zones
            .zones()
            .iter()
            .map(|z| zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address).to_dpd())
            .collect();
        desired_nat.sort();
        let nexus = {
            let n = self.nexus.lock().await;
            let sled_name = |id: u32| {
                hosts
                    .sleds
                    .get(id as usize)
                    .map_or_else(|| format!("sled {id}"), |s| s.name.clone())
            };
            NexusDump {
                host: n.host().to_string(),
                up: n.up(),
                nat_version: n.nat_version(),
                instances: n
                    .instances()
                    .into_iter()
                    .map(|r| InstanceDump {
                        instance: r.name.clone(),
                        state: r.state.to_string(),
                        sled: r.sled.map(sled_name),
                        generation: r.generation,
                    })
                    .collect(),
            }
        };
        StateDump {
            switches,
            sleds,
            nexus,
            desired_nat,
        }
    }
}

impl Control {
    /// What the rack still lacks, read as the simulation's checks read a
    /// simulated world: the service zones' entries on every live uplinked
    /// switch, and each instance's VMM, NAT entries and V2P mappings.
    pub async fn gaps(&self) -> Vec<Gap> {
        let hosts = self.hosts.lock().await;
        let instances = self.nexus.lock().await.instances_asked_for();
        let sled_up = |i: usize| hosts.sleds.get(i).is_some_and(|s| s.up());
        let desired: Vec<DesiredNat> = hosts
            .zones
            .zones()
            .iter()
            .map(|z| DesiredNat {
                entry: zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address),
                zone: Some((z.id.kind, z.spec.sled)),
                sled_up: sled_up(z.spec.sled),
            })
            .collect();
        let switches: Vec<SwitchTable> = hosts
            .switches
            .values()
            .filter(|s| s.up())
            .map(|s| SwitchTable {
                slot: s.slot,
                uplinked: self
                    .env
                    .spec
                    .switches
                    .iter()
                    .any(|x| x.slot == s.slot && x.uplinked),
                entries: s.dpd.lock().ipv4_entries(),
            })
            .collect();
        let sleds: Vec<SledView> = hosts
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| s.up())
            .map(|(index, s)| SledView {
                index,
                name: s.name.clone(),
                address: s.address,
                agent: s.agent.lock().clone(),
            })
            .collect();
        let names: std::collections::BTreeMap<std::net::Ipv6Addr, String> = hosts
            .sleds
            .iter()
            .map(|s| (s.address, s.name.clone()))
            .chain(
                hosts
                    .switches
                    .values()
                    .map(|s| (s.zone, s.slot.to_string())),
            )
            .collect();
        let host = |a: std::net::Ipv6Addr| names.get(&a).cloned().unwrap_or_else(|| a.to_string());
        let sled = |i: usize| {
            hosts.sleds.get(i).map_or_else(
                || (format!("sled {i}"), std::net::Ipv6Addr::UNSPECIFIED),
                |s| (s.name.clone(), s.address),
            )
        };
        let era = ControlPlaneEra::of(self.env.shared.strategy.era(), self.env.shared.start);
        rack_gaps(&RackView {
            desired: &desired,
            switches: &switches,
            sleds: &sleds,
            instances: &instances,
            reincarnation: era.reincarnation == Task::On,
            stop_removes_nat: self.env.shared.start
                == racksim_reconciler::instances::StartImpl::Saga,
            host: &host,
            sled: &sled,
        })
    }

    /// Waits until the rack has no gaps or `timeout` has passed.
    pub async fn wait(&self, timeout: std::time::Duration) -> Convergence {
        let started = tokio::time::Instant::now();
        loop {
            let gaps = self.gaps().await;
            let waited = started.elapsed();
            if gaps.is_empty() || waited >= timeout {
                return Convergence {
                    converged: gaps.is_empty(),
                    waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    gaps,
                };
            }
            tokio::time::sleep(WAIT_POLL.min(timeout - waited)).await;
        }
    }
}

enum ControlImpl {}

impl ControlApi for ControlImpl {
    type Context = Arc<Control>;

    async fn action_apply(
        rqctx: RequestContext<Arc<Control>>,
        body: TypedBody<ActionRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let control = rqctx.context();
        let mut steps = control.steps.lock().await;
        let (action, next) = Control::read(&steps, &body.into_inner())?;
        if let Err(e) = control.apply(&action).await {
            control
                .env
                .shared
                .trace
                .record("control", format!("  refused: {}", e.external_message));
            // Refused: the step counts as not done.
            return Err(e);
        }
        *steps = next;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn state_get(
        rqctx: RequestContext<Arc<Control>>,
    ) -> Result<HttpResponseOk<StateDump>, HttpError> {
        Ok(HttpResponseOk(rqctx.context().dump().await))
    }

    async fn gaps_get(
        rqctx: RequestContext<Arc<Control>>,
    ) -> Result<HttpResponseOk<Convergence>, HttpError> {
        let gaps = rqctx.context().gaps().await;
        Ok(HttpResponseOk(Convergence {
            converged: gaps.is_empty(),
            waited_ms: 0,
            gaps,
        }))
    }

    async fn wait_post(
        rqctx: RequestContext<Arc<Control>>,
        body: TypedBody<WaitRequest>,
    ) -> Result<HttpResponseOk<Convergence>, HttpError> {
        let req = body.into_inner();
        let timeout =
            crate::file::parse_duration(&req.timeout).map_err(|e| bad(format!("timeout: {e}")))?;
        if timeout > MAX_WAIT {
            return Err(bad(format!(
                "timeout {:?} is longer than the longest wait, {}",
                req.timeout,
                racksim_sim::trace::fmt_duration(MAX_WAIT)
            )));
        }
        Ok(HttpResponseOk(rqctx.context().wait(timeout).await))
    }

    async fn trace_get(
        rqctx: RequestContext<Arc<Control>>,
    ) -> Result<HttpResponseOk<Vec<LiveLine>>, HttpError> {
        Ok(HttpResponseOk(rqctx.context().env.shared.trace.lines()))
    }
}

pub(super) fn serve_control(
    bind: SocketAddr,
    control: Arc<Control>,
) -> Result<HttpServer<Arc<Control>>, String> {
    let api = control_api_mod::api_description::<ControlImpl>().map_err(|e| e.to_string())?;
    quiet_server(api, control, bind, "racksim-control")
        .map_err(|e| e.to_string())?
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

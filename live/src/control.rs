//! The control API of a live rack (dropshot): apply a plan action now,
//! dump the state, read the trace so far, and ask what the rack still
//! lacks — now (`GET /gaps`) or once it has converged or a timeout has
//! passed (`POST /wait`).
//!
//! An action is a scenario file's step without `at`, read by the file's
//! own parser ([`racksim_scenario::file::StepChecker`]): the same names, the same
//! fields, the same refusals (an unknown host or instance, healing a
//! partition never made, powering on a sidecar that is on), each a 400
//! that changes nothing. Every plan action applies; the instance actions
//! are requests to the live Nexus's instance API, answered in the trace.
//!
//! This file holds the API (its types, routes and the reading of an
//! action); [`actions`] applies an action to the live hosts, [`state`]
//! reads the rack for the state dump, the gaps and the wait.

use std::{net::SocketAddr, sync::Arc};

use dropshot::{
    HttpError, HttpResponseOk, HttpResponseUpdatedNoContent, HttpServer, RequestContext, TypedBody,
};
use racksim_nexus::instances::{VirtualNetworkInterfaceHost, VmmInfo};
use racksim_reconciler::dpd::{Ipv4Nat, Ipv6Nat};
use racksim_servers::quiet_server;
use racksim_sim::{check::gaps::Gap, rack::UPSTREAM_NTP_NAME, Action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    hosts::{Env, Hosts},
    nexus::LiveNexus,
    trace::LiveLine,
};
use racksim_scenario::file::StepChecker;

mod actions;
mod state;

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
    /// The IPv4 NAT table.
    pub nat: Vec<Ipv4Nat>,
    /// The IPv6 NAT table (racksim's own state is IPv4; what a client
    /// created through dpd's `/nat/ipv6` API shows here).
    pub nat_ipv6: Vec<Ipv6Nat>,
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
        let timeout = racksim_scenario::file::parse_duration(&req.timeout)
            .map_err(|e| bad(format!("timeout: {e}")))?;
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

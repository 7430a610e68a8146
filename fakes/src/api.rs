//! The fakes' APIs as dropshot API traits, and their servers.
//!
//! Each trait lists the operations of one service with the paths,
//! operation ids, parameters and bodies of its published OpenAPI document
//! (`openapi/reference/`); the OpenAPI documents generated from them are
//! committed under `openapi/` and a test fails when they drift. The
//! implementations are thin: they parse (dropshot does), lock the fake's
//! state machine, call it, and report any change to the server's observer.
//! Every server requires the `api-version` header
//! (`ClientSpecifiesVersionInHeader`, no default), as Oxide's internal
//! services do.

use std::{
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
};

use dropshot::{
    ClientSpecifiesVersionInHeader, ConfigDropshot, ConfigLogging, ConfigLoggingLevel,
    EmptyScanParams, HttpError, HttpResponseDeleted, HttpResponseOk, HttpResponseUpdatedNoContent,
    HttpServer, PaginationParams, Path, Query, RequestContext, ResultsPage, ServerBuilder,
    TypedBody, VersionPolicy, WhichPage,
};
use http::HeaderName;
use racksim_wire::{
    dpd::{self, Ipv4Nat, Ipv6Nat, NatTarget, SwitchIdentifiers},
    mgs::{self, SpIdentifier},
    sled_agent::{
        VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmStateRequest,
        API_VERSION as SLED_AGENT_API_VERSION,
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    dpd::{page_items, DpdState, NatChange},
    http::{ApiError, API_VERSION_HEADER},
    mgs::MgsState,
    sled_agent::{SledAgentChange, SledAgentState},
    upstream::Service,
};

/// Path of `/nat/ipv4/{ipv4}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv4Path {
    pub ipv4: Ipv4Addr,
}

/// Path of `/nat/ipv4/{ipv4}/{low}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv4PortPath {
    pub ipv4: Ipv4Addr,
    pub low: u16,
}

/// Path of `/nat/ipv4/{ipv4}/{low}/{high}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv4RangePath {
    pub ipv4: Ipv4Addr,
    pub low: u16,
    pub high: u16,
}

/// Path of `/nat/ipv6/{ipv6}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv6Path {
    pub ipv6: Ipv6Addr,
}

/// Path of `/nat/ipv6/{ipv6}/{low}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv6PortPath {
    pub ipv6: Ipv6Addr,
    pub low: u16,
}

/// Path of `/nat/ipv6/{ipv6}/{low}/{high}`.
#[derive(Deserialize, JsonSchema)]
pub struct NatIpv6RangePath {
    pub ipv6: Ipv6Addr,
    pub low: u16,
    pub high: u16,
}

/// Page token of the address lists: the last address of the page.
#[derive(Deserialize, Serialize)]
pub struct Ipv4Token {
    pub ip: Ipv4Addr,
}

/// Page token of the address lists: the last address of the page.
#[derive(Deserialize, Serialize)]
pub struct Ipv6Token {
    pub ip: Ipv6Addr,
}

/// Page token of one address' entries: the low port of the last entry.
#[derive(Deserialize, Serialize)]
pub struct NatToken {
    pub port: u16,
}

/// dendrite's NAT API (dpd 13.0.0), the part racksim fakes.
#[dropshot::api_description]
pub trait DpdApi {
    type Context;

    /// Get all of the external addresses in use for IPv4 NAT mappings.
    #[endpoint { method = GET, path = "/nat/ipv4" }]
    async fn nat_ipv4_addresses_list(
        rqctx: RequestContext<Self::Context>,
        query: Query<PaginationParams<EmptyScanParams, Ipv4Token>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv4Addr>>, HttpError>;

    /// Clear all IPv4 NAT mappings.
    #[endpoint { method = DELETE, path = "/nat/ipv4" }]
    async fn nat_ipv4_reset(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Get all of the external->internal NAT mappings for a given IPv4 address.
    #[endpoint { method = GET, path = "/nat/ipv4/{ipv4}" }]
    async fn nat_ipv4_list(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv4Path>,
        query: Query<PaginationParams<EmptyScanParams, NatToken>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv4Nat>>, HttpError>;

    /// Get the external->internal NAT mapping for the given address and starting L3 port.
    #[endpoint { method = GET, path = "/nat/ipv4/{ipv4}/{low}" }]
    async fn nat_ipv4_get(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv4PortPath>,
    ) -> Result<HttpResponseOk<NatTarget>, HttpError>;

    /// Delete a NAT mapping for an IPv4 address and starting L3 port.
    #[endpoint { method = DELETE, path = "/nat/ipv4/{ipv4}/{low}" }]
    async fn nat_ipv4_delete(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv4PortPath>,
    ) -> Result<HttpResponseDeleted, HttpError>;

    /// Add an external->internal NAT mapping for the given address/port range.
    #[endpoint { method = PUT, path = "/nat/ipv4/{ipv4}/{low}/{high}" }]
    async fn nat_ipv4_create(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv4RangePath>,
        target: TypedBody<NatTarget>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Get all of the external addresses in use for IPv6 NAT mappings.
    #[endpoint { method = GET, path = "/nat/ipv6" }]
    async fn nat_ipv6_addresses_list(
        rqctx: RequestContext<Self::Context>,
        query: Query<PaginationParams<EmptyScanParams, Ipv6Token>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv6Addr>>, HttpError>;

    /// Clear all IPv6 NAT mappings.
    #[endpoint { method = DELETE, path = "/nat/ipv6" }]
    async fn nat_ipv6_reset(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Get all of the external->internal NAT mappings for a given IPv6 address.
    #[endpoint { method = GET, path = "/nat/ipv6/{ipv6}" }]
    async fn nat_ipv6_list(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv6Path>,
        query: Query<PaginationParams<EmptyScanParams, NatToken>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv6Nat>>, HttpError>;

    /// Get the external->internal NAT mapping for the given address and starting L3 port.
    #[endpoint { method = GET, path = "/nat/ipv6/{ipv6}/{low}" }]
    async fn nat_ipv6_get(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv6PortPath>,
    ) -> Result<HttpResponseOk<NatTarget>, HttpError>;

    /// Delete a NAT mapping for an IPv6 address and starting L3 port.
    #[endpoint { method = DELETE, path = "/nat/ipv6/{ipv6}/{low}" }]
    async fn nat_ipv6_delete(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv6PortPath>,
    ) -> Result<HttpResponseDeleted, HttpError>;

    /// Add an external->internal NAT mapping for the given address/port range.
    #[endpoint { method = PUT, path = "/nat/ipv6/{ipv6}/{low}/{high}" }]
    async fn nat_ipv6_create(
        rqctx: RequestContext<Self::Context>,
        path: Path<NatIpv6RangePath>,
        target: TypedBody<NatTarget>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Get NAT generation number.
    #[endpoint { method = GET, path = "/rpw/nat/gen", versions = "2.0.0".. }]
    async fn nat_generation(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<i64>, HttpError>;

    /// Get NATv4 generation number (before dpd 2.0.0).
    #[endpoint {
        method = GET,
        path = "/rpw/nat/ipv4/gen",
        versions = .."2.0.0",
        operation_id = "ipv4_nat_generation",
    }]
    async fn ipv4_nat_generation_v1(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<i64>, HttpError> {
        Self::nat_generation(rqctx).await
    }

    /// Trigger NAT Reconciliation.
    #[endpoint { method = POST, path = "/rpw/nat/trigger", versions = "2.0.0".. }]
    async fn nat_trigger_update(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<()>, HttpError>;

    /// Trigger NATv4 Reconciliation (before dpd 2.0.0).
    #[endpoint {
        method = POST,
        path = "/rpw/nat/ipv4/trigger",
        versions = .."2.0.0",
        operation_id = "ipv4_nat_trigger_update",
    }]
    async fn ipv4_nat_trigger_update_v1(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<()>, HttpError> {
        Self::nat_trigger_update(rqctx).await
    }

    /// Get the identifiers of the switch this dpd manages.
    #[endpoint { method = GET, path = "/switch/identifiers", versions = "10.0.0".. }]
    async fn switch_identifiers(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<SwitchIdentifiers>, HttpError>;

    /// Get the identifiers of the switch this dpd manages (before dpd
    /// 10.0.0: no `lotnum`, no `fuse`).
    #[endpoint {
        method = GET,
        path = "/switch/identifiers",
        versions = .."10.0.0",
        operation_id = "switch_identifiers",
    }]
    async fn switch_identifiers_v1(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<crate::dpd::SwitchIdentifiersV1>, HttpError> {
        let identifiers = Self::switch_identifiers(rqctx).await?.0;
        Ok(HttpResponseOk(identifiers.into()))
    }
}

/// The management gateway's `/local/switch-id` (MGS 3.0.0).
#[dropshot::api_description]
pub trait MgsApi {
    type Context;

    /// Get the identifier for the switch this MGS instance is connected to.
    #[endpoint { method = GET, path = "/local/switch-id" }]
    async fn sp_local_switch_id(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<SpIdentifier>, HttpError>;

    /// Get the current power state of a sled via its SP.
    #[endpoint { method = GET, path = "/sp/{type}/{slot}/power-state" }]
    async fn sp_power_state_get(
        rqctx: RequestContext<Self::Context>,
        path: Path<SpPath>,
    ) -> Result<HttpResponseOk<mgs::PowerState>, HttpError>;
}

/// Path of `/sp/{type}/{slot}/...`.
#[derive(Deserialize, JsonSchema)]
pub struct SpPath {
    #[serde(rename = "type")]
    pub typ: mgs::SpType,
    pub slot: u16,
}

/// Path of `/instances/{instance_id}`.
#[derive(Deserialize, JsonSchema)]
pub struct InstancePath {
    pub instance_id: u32,
}

/// sled-agent's V2P API (sled-agent 48.0.0) and racksim's reduced instance
/// API.
#[dropshot::api_description]
pub trait SledAgentApi {
    type Context;

    /// List v2p mappings present on sled
    #[endpoint { method = GET, path = "/v2p" }]
    async fn list_v2p(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<VirtualNetworkInterfaceHost>>, HttpError>;

    /// Create a mapping from a virtual NIC to a physical host
    #[endpoint { method = PUT, path = "/v2p" }]
    async fn set_v2p(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Delete a mapping from a virtual NIC to a physical host
    #[endpoint { method = DELETE, path = "/v2p" }]
    async fn del_v2p(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// List the VMMs on this sled (racksim's reduced instance API).
    #[endpoint { method = GET, path = "/instances" }]
    async fn instances_list(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError>;

    /// The state of an instance's VMM (404 `NO_SUCH_INSTANCE` without one).
    #[endpoint { method = GET, path = "/instances/{instance_id}/state" }]
    async fn instance_get_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError>;

    /// Register a VMM for an instance (idempotent for the same VMM).
    #[endpoint { method = PUT, path = "/instances/{instance_id}" }]
    async fn instance_register(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Set the state of an instance's VMM (`stopped` destroys it).
    #[endpoint { method = PUT, path = "/instances/{instance_id}/state" }]
    async fn instance_put_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
        body: TypedBody<VmmStateRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;
}

/// Something told of every change a server makes to its state.
pub type Observer<C> = Arc<dyn Fn(&C) + Send + Sync>;

/// A fault a server can be made to show, as the simulation's plan actions
/// `dpd-errors` and `dpd-hang` do. The simulation (on simulated time) and
/// [`Shared`] (on tokio time) decide when a fault applies; what the faulted
/// server answers is decided here, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every request is answered with a 500.
    Errors,
    /// Every request is held until the window ends, then answered with a
    /// 503 (a client with a shorter timeout sees a timeout).
    Hang,
}

impl Fault {
    /// The answer of `service` showing this fault (after the hold, for a
    /// hang).
    pub fn error(self, service: &str) -> ApiError {
        match self {
            Fault::Errors => ApiError::new(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                Some("Internal"),
                format!("injected fault: {service} is answering errors"),
            ),
            Fault::Hang => ApiError::unavailable(format!("injected fault: {service} was hung")),
        }
    }
}

/// A fake's state shared between its server and whoever else looks at it
/// (a control API, a test), the observer of its changes, and the fault it
/// shows, if any.
pub struct Shared<S, C> {
    state: Arc<Mutex<S>>,
    observer: Option<Observer<C>>,
    fault: Arc<Mutex<Option<(Fault, tokio::time::Instant)>>>,
    /// The service's background task's timer (dpd: its NAT RPW's, which
    /// `POST /rpw/nat/trigger` makes due).
    trigger: Arc<crate::dpd::NatRpwTimer>,
    /// Whether the service is down: a fault then holds no request (those
    /// it holds end), so that the service's server can close.
    down: Arc<tokio::sync::watch::Sender<bool>>,
}

impl<S, C> Clone for Shared<S, C> {
    fn clone(&self) -> Self {
        Shared {
            state: self.state.clone(),
            observer: self.observer.clone(),
            fault: self.fault.clone(),
            trigger: self.trigger.clone(),
            down: self.down.clone(),
        }
    }
}

impl<S, C> Shared<S, C> {
    pub fn new(state: S) -> Self {
        Shared {
            state: Arc::new(Mutex::new(state)),
            observer: None,
            fault: Arc::default(),
            trigger: Arc::default(),
            down: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// The service goes down: the requests its fault holds end now (with
    /// the fault's error), and so does any that arrives while its server
    /// closes.
    pub fn interrupt(&self) {
        self.down.send_replace(true);
    }

    /// The service is up again: its fault holds requests again.
    pub fn resume(&self) {
        self.down.send_replace(false);
    }

    /// The NAT RPW's timer, which `POST /rpw/nat/trigger` makes due (see
    /// [`crate::dpd::NatRpwTimer`] for dendrite's schedule).
    pub fn trigger(&self) -> Arc<crate::dpd::NatRpwTimer> {
        self.trigger.clone()
    }

    /// Every request meets `fault` for the next `window`.
    pub fn inject(&self, fault: Fault, window: std::time::Duration) {
        let until = tokio::time::Instant::now() + window;
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = Some((fault, until));
    }

    /// What a request to `service` meets before the state machine:
    /// nothing, or the fault injected for now.
    pub async fn meet_fault(&self, service: &str) -> Result<(), HttpError> {
        let fault = *self.fault.lock().unwrap_or_else(|e| e.into_inner());
        match fault {
            Some((fault, until)) if tokio::time::Instant::now() < until => {
                if fault == Fault::Hang {
                    let mut down = self.down.subscribe();
                    // Cancel-safe: a sleep holds nothing but its deadline;
                    // `until_down` only observes a watch channel.
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {}
                        () = until_down(&mut down) => {}
                    }
                }
                Err(fault.error(service).into())
            }
            _ => Ok(()),
        }
    }

    pub fn with_observer(self, observer: Observer<C>) -> Self {
        Shared {
            observer: Some(observer),
            ..self
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state and reports each change it made, in order.
    pub fn apply<T>(&self, f: impl FnOnce(&mut S) -> (T, Vec<C>)) -> T {
        let (out, changes) = f(&mut self.lock());
        if let Some(observer) = &self.observer {
            for change in &changes {
                observer(change);
            }
        }
        out
    }

    /// Runs `f` on the state and reports the change it made, if any.
    pub fn change<T>(
        &self,
        f: impl FnOnce(&mut S) -> Result<(T, Option<C>), ApiError>,
    ) -> Result<T, HttpError> {
        let (out, change) = f(&mut self.lock())?;
        if let (Some(change), Some(observer)) = (change, &self.observer) {
            observer(&change);
        }
        Ok(out)
    }
}

/// Resolves once the service is down (at once if it is).
async fn until_down(down: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = down.wait_for(|d| *d).await;
}

/// The context of a fake dpd server.
pub type DpdContext = Shared<DpdState, NatChange>;
/// The context of a fake sled-agent server.
pub type SledAgentContext = Shared<SledAgentState, SledAgentChange>;

/// [`DpdApi`] served by [`DpdState`].
pub enum DpdImpl {}

/// Bounds of a page token.
pub trait Token: Serialize + serde::de::DeserializeOwned + Send + Sync + 'static {}
impl<K: Serialize + serde::de::DeserializeOwned + Send + Sync + 'static> Token for K {}

fn nat_page<T: JsonSchema + Serialize + Send + Sync + 'static, K: Token>(
    items: Vec<T>,
    token: impl Fn(&T) -> K,
) -> Result<HttpResponseOk<ResultsPage<T>>, HttpError> {
    Ok(HttpResponseOk(ResultsPage::new(
        items,
        &EmptyScanParams {},
        |item: &T, _| token(item),
    )?))
}

fn after<K: Token, T>(
    pag: &PaginationParams<EmptyScanParams, K>,
    key: impl Fn(&K) -> T,
) -> Option<T> {
    match &pag.page {
        WhichPage::First(..) => None,
        WhichPage::Next(k) => Some(key(k)),
    }
}

fn limit<C: dropshot::ServerContext, K: Token>(
    rqctx: &RequestContext<C>,
    pag: &PaginationParams<EmptyScanParams, K>,
) -> Result<usize, HttpError> {
    // dropshot applies its default (100) and maximum; dendrite then caps
    // every page at 64.
    Ok(page_items(Some(rqctx.page_limit(pag)?.get())))
}

impl DpdApi for DpdImpl {
    type Context = DpdContext;

    async fn nat_ipv4_addresses_list(
        rqctx: RequestContext<DpdContext>,
        query: Query<PaginationParams<EmptyScanParams, Ipv4Token>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv4Addr>>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let pag = query.into_inner();
        let n = limit(&rqctx, &pag)?;
        let items = rqctx
            .context()
            .lock()
            .ipv4_addresses_page(after(&pag, |t| t.ip), n);
        nat_page(items, |ip| Ipv4Token { ip: *ip })
    }

    async fn nat_ipv4_reset(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        rqctx.context().change(|d| Ok(((), d.ipv4_reset())))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn nat_ipv4_list(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv4Path>,
        query: Query<PaginationParams<EmptyScanParams, NatToken>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv4Nat>>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let pag = query.into_inner();
        let n = limit(&rqctx, &pag)?;
        let ip = path.into_inner().ipv4;
        let items = rqctx
            .context()
            .lock()
            .ipv4_page(ip, after(&pag, |t| t.port), n);
        nat_page(items, |e| NatToken { port: e.low })
    }

    async fn nat_ipv4_get(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv4PortPath>,
    ) -> Result<HttpResponseOk<NatTarget>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        let entry = rqctx.context().lock().ipv4_get(p.ipv4, p.low);
        let entry = entry.ok_or_else(|| ApiError::from(crate::dpd::NatError::NotFound))?;
        Ok(HttpResponseOk(entry.target))
    }

    async fn nat_ipv4_delete(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv4PortPath>,
    ) -> Result<HttpResponseDeleted, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        rqctx
            .context()
            .change(|d| Ok(((), d.ipv4_delete(p.ipv4, p.low))))?;
        Ok(HttpResponseDeleted())
    }

    async fn nat_ipv4_create(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv4RangePath>,
        target: TypedBody<NatTarget>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        let target = target.into_inner();
        rqctx
            .context()
            .change(|d| Ok(((), d.ipv4_create(p.ipv4, p.low, p.high, target)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn nat_ipv6_addresses_list(
        rqctx: RequestContext<DpdContext>,
        query: Query<PaginationParams<EmptyScanParams, Ipv6Token>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv6Addr>>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let pag = query.into_inner();
        let n = limit(&rqctx, &pag)?;
        let items = rqctx
            .context()
            .lock()
            .ipv6_addresses_page(after(&pag, |t| t.ip), n);
        nat_page(items, |ip| Ipv6Token { ip: *ip })
    }

    async fn nat_ipv6_reset(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        rqctx.context().change(|d| Ok(((), d.ipv6_reset())))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn nat_ipv6_list(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv6Path>,
        query: Query<PaginationParams<EmptyScanParams, NatToken>>,
    ) -> Result<HttpResponseOk<ResultsPage<Ipv6Nat>>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let pag = query.into_inner();
        let n = limit(&rqctx, &pag)?;
        let ip = path.into_inner().ipv6;
        let items = rqctx
            .context()
            .lock()
            .ipv6_page(ip, after(&pag, |t| t.port), n);
        nat_page(items, |e| NatToken { port: e.low })
    }

    async fn nat_ipv6_get(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv6PortPath>,
    ) -> Result<HttpResponseOk<NatTarget>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        let entry = rqctx.context().lock().ipv6_get(p.ipv6, p.low);
        let entry = entry.ok_or_else(|| ApiError::from(crate::dpd::NatError::NotFound))?;
        Ok(HttpResponseOk(entry.target))
    }

    async fn nat_ipv6_delete(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv6PortPath>,
    ) -> Result<HttpResponseDeleted, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        rqctx
            .context()
            .change(|d| Ok(((), d.ipv6_delete(p.ipv6, p.low))))?;
        Ok(HttpResponseDeleted())
    }

    async fn nat_ipv6_create(
        rqctx: RequestContext<DpdContext>,
        path: Path<NatIpv6RangePath>,
        target: TypedBody<NatTarget>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        let p = path.into_inner();
        let target = target.into_inner();
        rqctx
            .context()
            .change(|d| Ok(((), d.ipv6_create(p.ipv6, p.low, p.high, target)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn nat_generation(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<i64>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        Ok(HttpResponseOk(rqctx.context().lock().generation()))
    }

    async fn nat_trigger_update(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<()>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        rqctx.context().trigger.trigger();
        Ok(HttpResponseOk(()))
    }

    async fn switch_identifiers(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<SwitchIdentifiers>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        Ok(HttpResponseOk(rqctx.context().lock().identifiers()))
    }
}

/// [`MgsApi`] served by [`MgsState`].
pub enum MgsImpl {}

impl MgsApi for MgsImpl {
    type Context = MgsState;

    async fn sp_local_switch_id(
        rqctx: RequestContext<MgsState>,
    ) -> Result<HttpResponseOk<SpIdentifier>, HttpError> {
        Ok(HttpResponseOk(rqctx.context().local_switch_id()))
    }

    async fn sp_power_state_get(
        rqctx: RequestContext<MgsState>,
        path: Path<SpPath>,
    ) -> Result<HttpResponseOk<mgs::PowerState>, HttpError> {
        let SpPath { typ, slot } = path.into_inner();
        match typ {
            mgs::SpType::Sled => Ok(HttpResponseOk(rqctx.context().sled_power_state(slot)?)),
            // The fake knows only its rack's sleds (see `crate::mgs`).
            mgs::SpType::Switch | mgs::SpType::Power => Err(crate::http::ApiError::new(
                http::StatusCode::NOT_FOUND,
                Some("SpDoesNotExist"),
                format!("the fake MGS reports power only for sleds, not {typ:?} {slot}"),
            )
            .into()),
        }
    }
}

/// [`SledAgentApi`] served by [`SledAgentState`].
pub enum SledAgentImpl {}

impl SledAgentApi for SledAgentImpl {
    type Context = SledAgentContext;

    async fn list_v2p(
        rqctx: RequestContext<SledAgentContext>,
    ) -> Result<HttpResponseOk<Vec<VirtualNetworkInterfaceHost>>, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        Ok(HttpResponseOk(rqctx.context().lock().v2p_list()))
    }

    async fn set_v2p(
        rqctx: RequestContext<SledAgentContext>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        let m = body.into_inner();
        rqctx.context().change(|a| Ok(((), a.v2p_set(m)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn del_v2p(
        rqctx: RequestContext<SledAgentContext>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        let m = body.into_inner();
        rqctx.context().change(|a| Ok(((), a.v2p_del(&m)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn instances_list(
        rqctx: RequestContext<SledAgentContext>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        Ok(HttpResponseOk(rqctx.context().lock().instances()))
    }

    async fn instance_get_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        let id = path.into_inner().instance_id;
        Ok(HttpResponseOk(rqctx.context().lock().state(id)?))
    }

    async fn instance_register(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        let id = path.into_inner().instance_id;
        let reg = body.into_inner();
        rqctx.context().change(|a| Ok(((), a.register(id, reg)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn instance_put_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
        body: TypedBody<VmmStateRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        rqctx.context().meet_fault("sled-agent").await?;
        let id = path.into_inner().instance_id;
        let want = body.into_inner();
        rqctx
            .context()
            .change(|a| Ok(((), a.set_state(id, want)?)))?;
        Ok(HttpResponseUpdatedNoContent())
    }
}

/// Title and version of each published API, as in its OpenAPI document.
pub const DPD_TITLE: &str = "Oxide Switch Dataplane Controller";
pub const MGS_TITLE: &str = "Oxide Management Gateway Service API";
pub const SLED_AGENT_TITLE: &str = "Oxide Sled Agent API";

fn document(
    api: dropshot::ApiDescription<dropshot::StubContext>,
    title: &str,
    version: &str,
) -> serde_json::Value {
    let version: semver::Version = version.parse().expect("API versions are semver");
    let mut openapi = api.openapi(title, version);
    openapi
        .contact_url("https://oxide.computer")
        .contact_email("api@oxide.computer");
    openapi.json().expect("OpenAPI documents serialize")
}

/// The OpenAPI document of the fake dpd.
pub fn dpd_openapi() -> serde_json::Value {
    let api = dpd_api_mod::stub_api_description().expect("the dpd API is well formed");
    document(api, DPD_TITLE, dpd::API_VERSION)
}

/// The OpenAPI document of the fake MGS.
pub fn mgs_openapi() -> serde_json::Value {
    let api = mgs_api_mod::stub_api_description().expect("the MGS API is well formed");
    document(api, MGS_TITLE, mgs::API_VERSION)
}

/// The OpenAPI document of the fake sled-agent.
pub fn sled_agent_openapi() -> serde_json::Value {
    let api =
        sled_agent_api_mod::stub_api_description().expect("the sled-agent API is well formed");
    document(api, SLED_AGENT_TITLE, SLED_AGENT_API_VERSION)
}

/// Why a server did not start.
#[derive(Debug)]
pub struct ServeError(pub String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServeError {}

/// One string path variable (see [`register_unserved`]).
#[derive(Deserialize, JsonSchema)]
struct UnservedVariable {
    #[allow(dead_code)]
    variable: String,
}

/// Registers, unpublished, every operation of upstream's document that the
/// fake does not serve: each answers the 501 of [`crate::upstream`], so a
/// client generated from upstream's document learns the fake does not serve
/// it instead of taking a 404 for "no such resource".
fn register_unserved<C: dropshot::ServerContext>(
    api: &mut dropshot::ApiDescription<C>,
    service: Service,
) -> Result<(), ServeError> {
    for op in crate::upstream::unserved_operations(service) {
        let error = crate::upstream::unserved_error(service, op);
        let handler = move |_rqctx: RequestContext<C>| {
            let error = error.clone();
            async move { Err::<HttpResponseOk<()>, HttpError>(error.into()) }
        };
        let mut endpoint = dropshot::ApiEndpoint::new(
            op.operation_id.clone(),
            handler,
            op.method.clone(),
            "application/json",
            &op.path,
            dropshot::ApiEndpointVersions::All,
        )
        .visible(false);
        // The handler reads no path variables, but dropshot requires every
        // variable of a path to be a declared parameter.
        endpoint.parameters = op
            .variables()
            .into_iter()
            .map(|name| {
                // A string parameter's schema, taken from a Path extractor's
                // metadata (dropshot does not export the schema type).
                let string = <Path<UnservedVariable> as dropshot::SharedExtractor>::metadata(
                    dropshot::ApiEndpointBodyContentType::Json,
                )
                .parameters
                .pop()
                .expect("one path variable")
                .schema;
                dropshot::ApiEndpointParameter::new_named(
                    &dropshot::ApiEndpointParameterLocation::Path,
                    name,
                    None,
                    true,
                    string,
                    Vec::new(),
                )
            })
            .collect();
        api.register(endpoint).map_err(|e| {
            ServeError(format!(
                "{} API: unserved {} {}: {e}",
                service.name(),
                op.method,
                op.path
            ))
        })?;
    }
    Ok(())
}

fn start<C: dropshot::ServerContext>(
    mut api: dropshot::ApiDescription<C>,
    context: C,
    bind: SocketAddr,
    version: &str,
    service: Service,
) -> Result<HttpServer<C>, ServeError> {
    register_unserved(&mut api, service)?;
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger("racksim-fakes")
    .map_err(|e| ServeError(format!("logger: {e}")))?;
    let version: semver::Version = version.parse().expect("API versions are semver");
    let config = ConfigDropshot {
        bind_address: bind,
        ..Default::default()
    };
    ServerBuilder::new(api, context, log)
        .config(config)
        .version_policy(VersionPolicy::Dynamic(Box::new(
            ClientSpecifiesVersionInHeader::new(
                HeaderName::from_static(API_VERSION_HEADER),
                version,
            ),
        )))
        .start()
        .map_err(|e| ServeError(format!("serving on {bind}: {e}")))
}

/// Serves a fake dpd on `bind` (port 0: any).
pub fn serve_dpd(
    bind: SocketAddr,
    context: DpdContext,
) -> Result<HttpServer<DpdContext>, ServeError> {
    let api = dpd_api_mod::api_description::<DpdImpl>()
        .map_err(|e| ServeError(format!("dpd API: {e}")))?;
    start(api, context, bind, dpd::API_VERSION, Service::Dpd)
}

/// Serves a fake MGS on `bind`.
pub fn serve_mgs(bind: SocketAddr, mgs: MgsState) -> Result<HttpServer<MgsState>, ServeError> {
    let api = mgs_api_mod::api_description::<MgsImpl>()
        .map_err(|e| ServeError(format!("MGS API: {e}")))?;
    start(api, mgs, bind, mgs::API_VERSION, Service::Mgs)
}

/// Serves a fake sled-agent on `bind`.
pub fn serve_sled_agent(
    bind: SocketAddr,
    context: SledAgentContext,
) -> Result<HttpServer<SledAgentContext>, ServeError> {
    let api = sled_agent_api_mod::api_description::<SledAgentImpl>()
        .map_err(|e| ServeError(format!("sled-agent API: {e}")))?;
    start(
        api,
        context,
        bind,
        SLED_AGENT_API_VERSION,
        Service::SledAgent,
    )
}

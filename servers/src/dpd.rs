//! dpd's API as dropshot serves it: the [`DpdApi`] trait (the NAT
//! endpoints of dendrite's published document, with their paths,
//! operation ids, parameters and versions), [`DpdImpl`] over the
//! [`DpdState`] state machine, its OpenAPI document and its server.
//!
//! Each handler meets the server's fault first (see [`racksim_fakes::fault::Fault`]),
//! then locks the state machine, calls it and reports the change it made
//! to the server's observer.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use dropshot::{
    EmptyScanParams, HttpError, HttpResponseDeleted, HttpResponseOk, HttpResponseUpdatedNoContent,
    HttpServer, PaginationParams, Path, Query, RequestContext, ResultsPage, TypedBody, WhichPage,
};
use racksim_wire::dpd::{self, Ipv4Nat, Ipv6Nat, NatTarget, SwitchIdentifiers};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::{
    context::Shared,
    server::{document, start, ServeError},
};
use racksim_fakes::{
    dpd::{page_items, DpdState, Family, NatChange, NatError},
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

/// Page token of the address lists (`/nat/ipv4`, `/nat/ipv6`): the last
/// address of the page.
#[derive(Deserialize, Serialize)]
pub struct AddressToken<A> {
    pub ip: A,
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
        query: Query<PaginationParams<EmptyScanParams, AddressToken<Ipv4Addr>>>,
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
        query: Query<PaginationParams<EmptyScanParams, AddressToken<Ipv6Addr>>>,
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
    ) -> Result<HttpResponseOk<racksim_fakes::dpd::SwitchIdentifiersV1>, HttpError> {
        let identifiers = Self::switch_identifiers(rqctx).await?.0;
        Ok(HttpResponseOk(identifiers.into()))
    }
}

/// The context of a fake dpd server.
pub type DpdContext = Shared<DpdState, NatChange>;

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

// The NAT handlers, written once over the address family: each
// `nat_ipv4_*` / `nat_ipv6_*` endpoint of `DpdImpl` takes its path apart
// and calls one of these, as dendrite serves both families alike.

async fn addresses_list<A: Family + JsonSchema + Serialize + DeserializeOwned>(
    rqctx: RequestContext<DpdContext>,
    query: Query<PaginationParams<EmptyScanParams, AddressToken<A>>>,
) -> Result<HttpResponseOk<ResultsPage<A>>, HttpError> {
    rqctx.context().meet_fault("dpd").await?;
    let pag = query.into_inner();
    let n = limit(&rqctx, &pag)?;
    let items = rqctx
        .context()
        .lock()
        .addresses_page(after(&pag, |t| t.ip), n);
    nat_page(items, |ip| AddressToken { ip: *ip })
}

async fn reset<A: Family>(
    rqctx: RequestContext<DpdContext>,
) -> Result<HttpResponseUpdatedNoContent, HttpError> {
    rqctx
        .context()
        .update("dpd", |d| Ok(d.reset::<A>()))
        .await?;
    Ok(HttpResponseUpdatedNoContent())
}

async fn list<A: Family<Nat: JsonSchema>>(
    rqctx: RequestContext<DpdContext>,
    ip: A,
    query: Query<PaginationParams<EmptyScanParams, NatToken>>,
) -> Result<HttpResponseOk<ResultsPage<A::Nat>>, HttpError> {
    rqctx.context().meet_fault("dpd").await?;
    let pag = query.into_inner();
    let n = limit(&rqctx, &pag)?;
    let items = rqctx.context().lock().page(ip, after(&pag, |t| t.port), n);
    nat_page(items, |e| NatToken { port: A::low(e) })
}

async fn get<A: Family>(
    rqctx: RequestContext<DpdContext>,
    ip: A,
    low: u16,
) -> Result<HttpResponseOk<NatTarget>, HttpError> {
    let get = |d: &DpdState| d.get(ip, low).ok_or_else(|| NatError::NotFound.into());
    let entry = rqctx.context().read("dpd", get).await?;
    Ok(HttpResponseOk(A::target(&entry)))
}

async fn delete<A: Family>(
    rqctx: RequestContext<DpdContext>,
    ip: A,
    low: u16,
) -> Result<HttpResponseDeleted, HttpError> {
    rqctx
        .context()
        .update("dpd", |d| Ok(d.delete(ip, low)))
        .await?;
    Ok(HttpResponseDeleted())
}

async fn create<A: Family>(
    rqctx: RequestContext<DpdContext>,
    ip: A,
    low: u16,
    high: u16,
    target: TypedBody<NatTarget>,
) -> Result<HttpResponseUpdatedNoContent, HttpError> {
    let target = target.into_inner();
    let create = |d: &mut DpdState| Ok(d.create(ip, low, high, target)?);
    rqctx.context().update("dpd", create).await?;
    Ok(HttpResponseUpdatedNoContent())
}

/// The six NAT endpoints of one address family, as methods of `DpdImpl`:
/// dendrite's IPv4 and IPv6 halves differ only in names and types, so each
/// takes its path apart and calls the family-generic handler above. The
/// endpoints' declarations (paths, operation ids, versions) stay written
/// out in [`DpdApi`], where the OpenAPI document comes from.
macro_rules! nat_family_endpoints {
    (
        $addr:ty, $field:ident, $nat:ty, $path:ty, $port_path:ty, $range_path:ty;
        $addresses_list:ident, $reset:ident, $list:ident,
        $get:ident, $delete:ident, $create:ident
    ) => {
        async fn $addresses_list(
            rqctx: RequestContext<DpdContext>,
            query: Query<PaginationParams<EmptyScanParams, AddressToken<$addr>>>,
        ) -> Result<HttpResponseOk<ResultsPage<$addr>>, HttpError> {
            addresses_list(rqctx, query).await
        }

        async fn $reset(
            rqctx: RequestContext<DpdContext>,
        ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
            reset::<$addr>(rqctx).await
        }

        async fn $list(
            rqctx: RequestContext<DpdContext>,
            path: Path<$path>,
            query: Query<PaginationParams<EmptyScanParams, NatToken>>,
        ) -> Result<HttpResponseOk<ResultsPage<$nat>>, HttpError> {
            list(rqctx, path.into_inner().$field, query).await
        }

        async fn $get(
            rqctx: RequestContext<DpdContext>,
            path: Path<$port_path>,
        ) -> Result<HttpResponseOk<NatTarget>, HttpError> {
            let path = path.into_inner();
            get(rqctx, path.$field, path.low).await
        }

        async fn $delete(
            rqctx: RequestContext<DpdContext>,
            path: Path<$port_path>,
        ) -> Result<HttpResponseDeleted, HttpError> {
            let path = path.into_inner();
            delete(rqctx, path.$field, path.low).await
        }

        async fn $create(
            rqctx: RequestContext<DpdContext>,
            path: Path<$range_path>,
            target: TypedBody<NatTarget>,
        ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
            let path = path.into_inner();
            create(rqctx, path.$field, path.low, path.high, target).await
        }
    };
}

impl DpdApi for DpdImpl {
    type Context = DpdContext;

    nat_family_endpoints! {
        Ipv4Addr, ipv4, Ipv4Nat, NatIpv4Path, NatIpv4PortPath, NatIpv4RangePath;
        nat_ipv4_addresses_list, nat_ipv4_reset, nat_ipv4_list,
        nat_ipv4_get, nat_ipv4_delete, nat_ipv4_create
    }

    nat_family_endpoints! {
        Ipv6Addr, ipv6, Ipv6Nat, NatIpv6Path, NatIpv6PortPath, NatIpv6RangePath;
        nat_ipv6_addresses_list, nat_ipv6_reset, nat_ipv6_list,
        nat_ipv6_get, nat_ipv6_delete, nat_ipv6_create
    }

    async fn nat_generation(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<i64>, HttpError> {
        let generation = rqctx.context().read("dpd", |d| Ok(d.generation())).await?;
        Ok(HttpResponseOk(generation))
    }

    async fn nat_trigger_update(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<()>, HttpError> {
        rqctx.context().meet_fault("dpd").await?;
        rqctx.context().trigger().trigger();
        Ok(HttpResponseOk(()))
    }

    async fn switch_identifiers(
        rqctx: RequestContext<DpdContext>,
    ) -> Result<HttpResponseOk<SwitchIdentifiers>, HttpError> {
        let identifiers = rqctx.context().read("dpd", |d| Ok(d.identifiers())).await?;
        Ok(HttpResponseOk(identifiers))
    }
}

/// Title of dpd's published API, as in its OpenAPI document.
pub const DPD_TITLE: &str = "Oxide Switch Dataplane Controller";

/// The OpenAPI document of the fake dpd.
pub fn dpd_openapi() -> serde_json::Value {
    let api = dpd_api_mod::stub_api_description().expect("the dpd API is well formed");
    document(api, DPD_TITLE, dpd::API_VERSION)
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

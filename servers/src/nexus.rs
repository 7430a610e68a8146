//! The part of Nexus's internal API dpd's NAT RPW calls, as a dropshot
//! API over one Nexus's store: live mode's server of it. The simulation
//! serves the same store call with `racksim_nexus::internal_api::handle`.

use std::net::SocketAddr;

use dropshot::{
    ConfigDropshot, ConfigLogging, ConfigLoggingLevel, HttpError, HttpResponseOk, HttpServer, Path,
    Query, RequestContext, ServerBuilder,
};
use racksim_nexus::{
    instances::{InstanceStore, NatEntryView},
    NexusHost, NexusStore,
};
use schemars::JsonSchema;
use serde::Deserialize;

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

/// The part of Nexus's internal API dpd's NAT RPW calls, for dropshot.
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

/// The dropshot implementation over one Nexus's store.
pub struct DropshotImpl<H>(std::marker::PhantomData<H>);

impl<H: NexusHost> NexusInternalApi for DropshotImpl<H> {
    type Context = NexusStore<H>;

    async fn ipv4_nat_changeset(
        rqctx: RequestContext<NexusStore<H>>,
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

/// Starts a dropshot server of the internal API over `store` on `bind`.
pub fn server<H: NexusHost>(
    store: NexusStore<H>,
    bind: SocketAddr,
) -> Result<HttpServer<NexusStore<H>>, String> {
    let api =
        nexus_internal_api_mod::api_description::<DropshotImpl<H>>().map_err(|e| e.to_string())?;
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger("racksim-nexus")
    .map_err(|e| e.to_string())?;
    ServerBuilder::new(api, store, log)
        .config(ConfigDropshot {
            bind_address: bind,
            ..Default::default()
        })
        .start()
        .map_err(|e| format!("Nexus internal API: {e}"))
}

//! What every fake's dropshot server shares: [`start`] serves an API
//! description with the `api-version` policy of Oxide's internal services
//! and registers, unpublished, the 501 of every upstream operation the
//! fake does not serve ([`racksim_fakes::upstream`]); [`document`] generates an
//! API's OpenAPI document as the published ones are written.

use std::net::SocketAddr;

use dropshot::{
    ClientSpecifiesVersionInHeader, ConfigDropshot, ConfigLogging, ConfigLoggingLevel, HttpError,
    HttpResponseOk, HttpServer, Path, RequestContext, ServerBuilder, VersionPolicy,
};
use http::HeaderName;
use schemars::JsonSchema;
use serde::Deserialize;

use racksim_fakes::{http::API_VERSION_HEADER, upstream::Service};

use crate::http_error;

pub(super) fn document(
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
/// fake does not serve: each answers the 501 of [`racksim_fakes::upstream`], so a
/// client generated from upstream's document learns the fake does not serve
/// it instead of taking a 404 for "no such resource".
fn register_unserved<C: dropshot::ServerContext>(
    api: &mut dropshot::ApiDescription<C>,
    service: Service,
) -> Result<(), ServeError> {
    for op in racksim_fakes::upstream::unserved_operations(service) {
        let error = racksim_fakes::upstream::unserved_error(service, op);
        let handler = move |_rqctx: RequestContext<C>| {
            let error = error.clone();
            async move { Err::<HttpResponseOk<()>, HttpError>(http_error(error)) }
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

/// A dropshot server of `api` over `context` on `bind`, not yet started,
/// whose log (named `log_name`) shows only critical messages: racksim's
/// servers report what they do in the trace, not on stderr.
pub fn quiet_server<C: dropshot::ServerContext>(
    api: dropshot::ApiDescription<C>,
    context: C,
    bind: SocketAddr,
    log_name: &str,
) -> std::io::Result<ServerBuilder<C>> {
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger(log_name)?;
    Ok(
        ServerBuilder::new(api, context, log).config(ConfigDropshot {
            bind_address: bind,
            ..Default::default()
        }),
    )
}

pub(super) fn start<C: dropshot::ServerContext>(
    mut api: dropshot::ApiDescription<C>,
    context: C,
    bind: SocketAddr,
    version: &str,
    service: Service,
) -> Result<HttpServer<C>, ServeError> {
    register_unserved(&mut api, service)?;
    let builder = quiet_server(api, context, bind, "racksim-fakes")
        .map_err(|e| ServeError(format!("logger: {e}")))?;
    let version: semver::Version = version.parse().expect("API versions are semver");
    builder
        .version_policy(VersionPolicy::Dynamic(Box::new(
            ClientSpecifiesVersionInHeader::new(
                HeaderName::from_static(API_VERSION_HEADER),
                version,
            ),
        )))
        .start()
        .map_err(|e| ServeError(format!("serving on {bind}: {e}")))
}

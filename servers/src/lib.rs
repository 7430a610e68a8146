//! # racksim-servers: the rack's services on dropshot
//!
//! Live mode (`racksim serve`) serves the fakes of `racksim-fakes` and the
//! Nexus internal API of `racksim-nexus` with dropshot on real sockets, as
//! the real services are served. This crate holds those servers, and
//! nothing else: the state machines they lock are the fakes' own, the same
//! the simulation serves with hyper on simulated sockets. The simulation
//! does not link dropshot at all (issue 40: it builds faster, and
//! dropshot's crates need no optimising).
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
//!
//! One module per service — `dpd`, `mgs`, `sled_agent`, `nexus` — each
//! with its trait, its implementation, its document and its server, over
//! what they share: the servers' context with its observer and injected
//! faults (`context`), and the plumbing that starts a server and writes a
//! document (`server`). Every item is re-exported here: users name
//! `racksim_servers::DpdContext`, not the module it is written in.

mod context;
mod dpd;
mod mgs;
pub mod nexus;
mod server;
mod sled_agent;

pub use context::{Observer, Shared};
pub use dpd::{
    dpd_api_mod, dpd_openapi, serve_dpd, AddressToken, DpdApi, DpdContext, DpdImpl, NatIpv4Path,
    NatIpv4PortPath, NatIpv4RangePath, NatIpv6Path, NatIpv6PortPath, NatIpv6RangePath, NatToken,
    Token, DPD_TITLE,
};
pub use mgs::{
    mgs_api_mod, mgs_openapi, serve_mgs, MgsApi, MgsContext, MgsImpl, SpPath, MGS_TITLE,
};
pub use racksim_fakes::fault::Fault;
pub use server::{quiet_server, ServeError};
pub use sled_agent::{
    serve_sled_agent, sled_agent_api_mod, sled_agent_openapi, SledAgentApi, SledAgentContext,
    SledAgentImpl, VmmPath, SLED_AGENT_TITLE,
};

/// A fake's refusal ([`racksim_fakes::http::ApiError`]) as dropshot
/// answers it: the same status, error code and message, so a client sees
/// the same body from live mode's servers as from the simulation's.
pub fn http_error(e: racksim_fakes::http::ApiError) -> dropshot::HttpError {
    let status_code = dropshot::ErrorStatusCode::from_u16(e.status.as_u16())
        .unwrap_or(dropshot::ErrorStatusCode::INTERNAL_SERVER_ERROR);
    dropshot::HttpError {
        status_code,
        error_code: e.error_code,
        internal_message: e.message.clone(),
        external_message: e.message,
        headers: None,
    }
}

#[cfg(test)]
mod tests;

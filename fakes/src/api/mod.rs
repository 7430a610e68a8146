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
//!
//! One module per service — `dpd`, `mgs`, `sled_agent` — each with its
//! trait, its implementation, its document and its server, over what they
//! share: the servers' context with its observer and injected faults
//! (`context`), and the plumbing that starts a server and writes a document
//! (`server`). Every item is re-exported here: users name
//! `racksim_fakes::api::DpdContext`, not the module it is written in.

mod context;
mod dpd;
mod mgs;
mod server;
mod sled_agent;

pub use context::{Fault, Observer, Shared};
pub use dpd::{
    dpd_api_mod, dpd_openapi, serve_dpd, AddressToken, DpdApi, DpdContext, DpdImpl, NatIpv4Path,
    NatIpv4PortPath, NatIpv4RangePath, NatIpv6Path, NatIpv6PortPath, NatIpv6RangePath, NatToken,
    Token, DPD_TITLE,
};
pub use mgs::{
    mgs_api_mod, mgs_openapi, serve_mgs, MgsApi, MgsContext, MgsImpl, SpPath, MGS_TITLE,
};
pub use server::{quiet_server, ServeError};
pub use sled_agent::{
    serve_sled_agent, sled_agent_api_mod, sled_agent_openapi, SledAgentApi, SledAgentContext,
    SledAgentImpl, VmmPath, SLED_AGENT_TITLE,
};

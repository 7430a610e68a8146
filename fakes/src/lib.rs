//! # racksim-fakes: the fake rack services, one state machine each
//!
//! racksim tests the reconciler crate against fakes of the services it
//! talks to: dendrite's `dpd` (a switch's NAT tables), the management gateway
//! (MGS: which switch a switch zone manages), sled-agent (V2P mappings and
//! VMMs) and internal DNS (where the dendrites are). This crate holds each
//! fake exactly once, as a state machine — plain data, no I/O, no clock —
//! and three ways to serve it (the third in its own crate, so that the
//! simulation does not link dropshot):
//!
//! ```text
//!                     dpd::DpdState   mgs::MgsState   sled_agent::SledAgentState   dns::InternalDns
//!                            \               |                 |                       /
//!                             `--------- handle(&ApiRequest) -> ApiResponse ----------'
//!                              /                    |                                \
//!   racksim-sim: hyper on turmoil sockets   memnet: hyper on duplex streams   racksim-servers: dropshot
//!   (the deterministic simulation)          (the reconciler's unit tests)      on real sockets (live mode)
//! ```
//!
//! * [`dpd`], [`mgs`], [`sled_agent`], [`dns`] — the state machines, each
//!   with typed operations (what dropshot calls, what a simulation step
//!   plants) and a `handle` router for the servers that are not dropshot.
//!   Operations return the change they made, so the server's owner can
//!   record it (the simulation's trace, live mode's log).
//! * [`http`] — the framework-neutral request, response and error, with
//!   dropshot's error body and its `api-version` rule.
//! * [`fault`] — the faults a server can be made to show, and what a
//!   faulted request is answered, for every server alike.
//! * `racksim-servers` (a crate of its own) — the dropshot API traits of
//!   dpd, MGS and sled-agent, their implementations over these state
//!   machines, the OpenAPI documents generated from them (committed in
//!   `openapi/`, checked for drift and against the published documents in
//!   `openapi/reference/`) and servers.
//! * [`memnet`] — an in-memory network of fakes with a request log and
//!   injectable failures, for unit tests that run on paused tokio time.
//!
//! ## Wire types: shared with the clients
//!
//! The fakes speak the wire types of `racksim-wire` (`NatTarget`,
//! `Ipv4Nat`, `SpIdentifier`, `VirtualNetworkInterfaceHost`, …), the crate
//! the reconciler's clients use too. With its `schemars` feature (enabled
//! by `racksim-servers`) it derives the JSON schemas dropshot needs, named and shaped as
//! the published documents have them (`Vni`, dpd's `MacAddr` object,
//! sled-agent's `MacAddr` string). So the conformance test checks the
//! clients' types against the real services' documents too, and the
//! simulation's checks read the fakes' tables in the reconciler's types
//! without conversion.
//!
//! This crate does not depend on the reconciler. The reconciler's unit
//! tests depend on this crate (a dev-dependency): its test adapter
//! (`reconciler/src/testing.rs`) implements its `Connector` on
//! [`memnet::MemNet`]'s streams and hands the fakes' values over as they
//! are, one build of each crate.
//!
//! ## Faithful to the real services
//!
//! Semantics follow dendrite, dropshot and sled-agent as published: NAT
//! entries keyed by `(external IP, low port)` over inclusive ranges, an
//! identical create is a no-op and an overlapping one a 409 with dendrite's
//! `"conflicting mapping"`, deleting an absent entry is a 204, pages of at
//! most 64 entries with a token after every non-empty page, 24-bit VNIs,
//! and a 400 for a request without the `api-version` header. Every refused
//! request leaves the state as it was. Where the fakes simplify, their
//! module docs say so.

pub mod dns;
pub mod dpd;
pub mod fault;
pub mod http;
pub mod memnet;
pub mod mgs;
pub mod sled_agent;
pub mod upstream;

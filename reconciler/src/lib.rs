//! # racksim-reconciler: keeping switch NAT tables right
//!
//! Every zone with external connectivity in an Oxide-style rack — boundary
//! NTP, Nexus, external DNS — needs a NAT entry on every uplinked switch, so
//! that return traffic arriving through *either* switch reaches the sled that
//! hosts the zone. Those entries live in the switch ASIC and are programmed
//! through dendrite (`dpd`). This crate holds the code that puts them there.
//! It is production code: it knows nothing about the simulation that tests it.
//!
//! ## Three ways to keep service NAT
//!
//! * [`legacy`] — the path sled-agent used to take when starting a zone: look
//!   the switches up, wait up to five minutes for *both*, then retry forever on
//!   the addresses found. It is kept faithful to its bugs (zone start blocks;
//!   a switch missed at start never gets the entry; a switch replaced before
//!   the ensure leaves the agent waiting on a dead address; only `internal_ip`
//!   is compared) because its purpose here is to prove that the testbed finds
//!   them.
//! * [`sled_task`] — a periodic task per sled that, on every activation,
//!   discovers the dendrites available *now* and reconciles this sled's
//!   entries on each of them independently. Zone start never waits for it.
//! * [`scrimlet_local`] (`scrimlet-local`) — the scrimlet-reconcilers PR's design: each
//!   scrimlet learns its switch slot from its own MGS, then runs a task that
//!   reconciles its *own* switch zone against the rack-wide config the
//!   bootstore carries (every service zone's entry, with a generation). It
//!   goes inert while the sidecar is away and restores the table as soon as
//!   it returns; each switch is covered because each scrimlet covers its own.
//!
//! ## Not here: the control plane
//!
//! Nexus's side of the rack — instance operations and their sagas, the
//! versioned NAT table dpd pulls, the V2P task, the instance watcher — is
//! control-plane code, not a sled's, and lives in `racksim-nexus`. It uses
//! this crate's [`dpd`], [`mgs`] and [`http`] clients as Nexus uses
//! dendrite's and MGS's.
//!
//! ## Shape
//!
//! * [`http`] — a tiny HTTP/1.1 client on hyper, generic over a [`Connector`]
//!   so the same client runs on tokio sockets in production and on simulated
//!   sockets in tests. Every request has a timeout.
//! * [`dpd`] and [`mgs`] — typed clients for the parts of dendrite's and the
//!   management gateway's APIs this crate needs, with the exact paths and JSON
//!   of their published OpenAPI documents. The JSON types themselves live in
//!   the `racksim-wire` crate, which the fakes share; these modules
//!   re-export them.
//! * [`discovery`] — how a sled finds the switch zones (internal DNS).
//! * [`nat`] — the desired-state model and the pure planner
//!   (`{unchanged, to_remove, to_create}`), plus the executor that removes
//!   first, then creates, continuing past individual failures.
//! * [`task`] — the generic reconciler task: activation reasons, inert state,
//!   a typed status on a `watch` channel, an infallible reconcile step.
//!
//! ## Determinism
//!
//! Time comes only from `tokio::time`, randomness (backoff jitter) only from
//! an RNG the caller seeds, and nothing iterates a hash map: given the same
//! inputs and the same scheduling, the crate behaves the same, which is what
//! lets a simulation replay a failure from its seed.

pub mod discovery;
pub mod dpd;
pub mod http;
pub mod legacy;
pub mod mgs;
pub mod nat;
pub mod scrimlet_local;
pub mod sled_task;
pub mod task;

#[cfg(feature = "mutants")]
mod mutants;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use http::{Connector, TokioConnector};
// The rack's well-known ports and the services VNI, from `racksim-wire`.
pub use racksim_wire::{DPD_PORT, MGS_PORT, SERVICES_VNI};

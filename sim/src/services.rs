//! The fake rack services, served on the simulated network.
//!
//! Each fake's state machine has one home, the `racksim-fakes` crate: dpd,
//! MGS, sled-agent and internal DNS are the same state machines live mode
//! serves with dropshot and the reconciler's unit tests use. This module
//! is what the simulation adds around them: it serves a state machine's
//! `handle(&ApiRequest) -> ApiResponse` router on a turmoil socket with
//! hyper ([`serve`]; dropshot needs real sockets), and records each change
//! the state machine reports as a trace line with host names.
//!
//! * `http` — [`serve`] and the [`Handler`] a server answers with;
//! * [`dns`] — internal DNS: the world's switch zones as records;
//! * [`sled_agent`] — sled-agent, with the simulation's own `GET /timesync`;
//! * [`times`] — how long each service takes to serve a request, drawn
//!   from the seed.
//!
//! dpd and MGS are served by the switch zone host
//! ([`crate::hosts::switch_zone`]), whose dpd handler also injects the
//! plan's dpd faults. Not here: the packets of the data path
//! ([`crate::dataplane`]) and the control plane's database, which is
//! Nexus's (`racksim-nexus`).

pub mod dns;
mod http;
pub mod sled_agent;
pub mod times;

pub use http::{serve, Handler};
pub use times::{ServiceTime, ServiceTimes};

//! Fake rack services with real semantics on the simulated network.
//!
//! The state machines of dpd, MGS, sled-agent and internal DNS are those of
//! the `racksim-fakes` crate — the same ones live mode serves with dropshot
//! and the reconciler's unit tests use. This module serves them on turmoil
//! sockets ([`http::serve`]) and records their changes in the trace; the
//! data path is the simulation's own; the control plane's database is
//! Nexus's (`racksim-nexus`).

pub mod dataplane;
pub mod dns;
pub mod dpd;
pub mod http;
pub mod mgs;
pub mod sled_agent;

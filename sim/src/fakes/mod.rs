//! Fake rack services with real semantics. Each is a state machine plus a
//! thin HTTP handler; [`http::serve`] puts a handler on a simulated port.

pub mod database;
pub mod dataplane;
pub mod dns;
pub mod dpd;
pub mod http;
pub mod mgs;

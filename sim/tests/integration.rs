//! Every test of the simulation, in one binary (issue 40): each file of
//! this directory is a module of it, so the suite links the crate and its
//! dependencies once instead of once per file. The library has no unit-test
//! build (`test = false` in Cargo.toml): a `cfg(test)` build would compile
//! the whole simulation a second time, so the tests of its parts (the
//! checker's gaps, the chrony model, timing, the zone set) are here too,
//! and test those parts through their public interface. Select a module's
//! tests by their path, e.g. `cargo test -p racksim-sim --test integration
//! -- gaps::`.

mod builder;
mod check;
mod chrony;
mod clock;
mod era;
mod gaps;
mod kept_connections;
mod ntp;
mod operations;
mod requests;
mod run_ports;
mod service_times;
mod sled_agent_requests;
mod strategy;
mod strategy_api;
mod strategy_eras;
mod tcp;
mod testbed;
mod times;
mod timing;
mod trace;
mod zones;

//! The integration tests of the simulation, in one binary (issue 40): each file
//! of this directory is a module of it, so the suite links the crate and
//! its dependencies once instead of once per file. Select a module's
//! tests by their path, e.g. `cargo test -p racksim-sim --test integration -- builder::`.

mod builder;
mod clock;
mod era;
mod kept_connections;
mod ntp;
mod requests;
mod service_times;
mod strategy_api;
mod tcp;

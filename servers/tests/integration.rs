//! The dropshot servers' integration tests, in one binary (issue 40): each
//! file of this directory is a module of it, so the suite links the crate
//! and its dependencies once instead of once per file. Select a module's
//! tests by their path, e.g. `cargo test -p racksim-servers --test integration -- conformance::`.

mod conformance;
mod dropshot_live;
mod openapi;
mod reconciler_clients;
mod sled_agent_client;
mod upstream;

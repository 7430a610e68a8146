//! racksim's integration tests, in one binary (issue 40): each file of
//! this directory is a module of it, so the suite links dropshot and the
//! workspace once instead of once per file. `cells.rs` stays a binary of
//! its own: it is a libtest-mimic harness (one test per scenario cell).
//! Select a module's tests by their path, e.g.
//! `cargo test -p racksim --test integration -- fuzz_gate::`.

/// The binary's allocator (see `src/allocator.rs`): the suite's runs are
/// the same runs, at the same cost per event.
#[global_allocator]
static ALLOCATOR: racksim::allocator::Allocator = racksim::allocator::Allocator;

mod common;

mod bad_input;
mod cli;
mod determinism;
mod docs;
mod docs_commands;
mod explore;
mod fuzz_gate;
mod live;
mod merge;
mod mutants;
mod openapi_control;
mod parser_fuzz;
mod regressions;
mod report_html;
mod snapshots;
mod suite;
mod sweeps;
mod testbed_error;

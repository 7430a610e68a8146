//! # racksim: scenarios, the runner and the CLI
//!
//! This package lives in `racksim/`; the scenario files it runs (the
//! catalogue, `regressions/`, `sweeps/`, `known-defects.toml`) are data in
//! `scenarios/` beside it.
//!
//! A scenario is a data file ([`mod@file`], the `racksim-scenario` crate,
//! re-exported here): a rack shape, a timed plan of faults and actions,
//! and what each strategy is expected to do. The [`catalogue`] holds the
//! built-in ones; [`runner`] turns a scenario,
//! strategy and seed into a simulation (`racksim-sim`) and judges the
//! verdict against the expectation. The `racksim` binary is the CLI
//! (`main.rs` parses and dispatches; `cli/`, the binary's own modules, read
//! each command's arguments and print): everything a command does beyond
//! that is here, a module per concept. [`campaign`] runs a range of seeds
//! (a sweep, a fuzz run), summarises it and merges the shards of one;
//! [`fuzz`] draws swarm plans and knows the known defects; [`shrink`]
//! reduces a failing plan to a [`regression`]; [`mutants`] is the kill
//! table; [`matrix`] the catalogue × strategies table; [`report`] and
//! [`html`] what a run prints and draws; [`mod@bench`] what a simulation costs;
//! [`invocation`] how the user started racksim, for replay lines;
//! [`allocator`] the allocator of the binary and its test binaries. Live
//! mode (`racksim serve`) is its own crate, `racksim-live`, re-exported as
//! [`live`]: the CLI only starts it.
//!
//! Data path: scenario file → [`file::Scenario`] → `sim::RunConfig` (plan,
//! jitter drawn from the seed) → simulated world → trace → checks → verdict
//! → [`runner::judge`].

pub mod allocator;
pub mod bench;
pub mod campaign;
pub mod fuzz;
pub mod html;
pub mod invocation;
pub mod matrix;
pub mod mutants;
pub mod output;
pub mod regression;
pub mod report;
pub mod runner;
pub mod shrink;

// The crates a run's data path starts from, under the names racksim's
// modules and users have always called them by: scenario files and the
// catalogue (`racksim-scenario`), and live mode (`racksim-live`).
pub use racksim_live as live;
pub use racksim_scenario::{catalogue, file, input};

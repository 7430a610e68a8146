//! # racksim: scenarios, the runner and the CLI
//!
//! A scenario is a data file ([`mod@file`]): a rack shape, a timed plan of
//! faults and actions, and what each strategy is expected to do. The
//! [`catalogue`] holds the built-in ones; [`runner`] turns a scenario,
//! strategy and seed into a simulation (`racksim-sim`) and judges the
//! verdict against the expectation. The `racksim` binary is the CLI;
//! [`campaign`] holds the summaries of its sweeps and fuzz runs, and merges
//! the shards of one.
//!
//! Data path: scenario file → [`file::Scenario`] → `sim::RunConfig` (plan,
//! jitter drawn from the seed) → simulated world → trace → checks → verdict
//! → [`runner::judge`].

pub mod bench;
pub mod campaign;
pub mod catalogue;
pub mod file;
pub mod fuzz;
pub mod html;
pub mod matrix;
pub mod mutants;
pub mod regression;
pub mod report;
pub mod runner;
pub mod serve;
pub mod shrink;

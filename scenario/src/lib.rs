//! # racksim-scenario: scenario files and the catalogue
//!
//! The first step of a run's data path: scenario file → plan → simulated
//! world → trace → checks → verdict. A scenario is a TOML file (the format
//! is `docs/scenario-files.md`): a rack shape, a timed plan of faults and
//! actions, and what each strategy is expected to do. [`mod@file`] parses
//! one into a [`file::Scenario`], refusing a mistake with its line and
//! column and changing nothing; the scenario's plan is what
//! `racksim-sim` runs. [`catalogue`] holds the built-in scenarios (the
//! files of `scenarios/`, compiled in), and [`input`] is how racksim reads
//! any file a user names, with one set of limits and errors.
//!
//! It is its own crate so that both drivers of a scenario read it the same
//! way without depending on each other: the `racksim` CLI (the simulated
//! runs, fuzz, shrink) and live mode (`racksim-live`, whose control API
//! checks a plan step with this parser's rules).

pub mod catalogue;
pub mod file;
pub mod input;

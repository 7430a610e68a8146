//! `racksim`: run scripted faults against a simulated rack and its real
//! reconcilers. See the README for the commands.
//!
//! This file is the command line and nothing else: [`Cli`] and its
//! [`Command`]s (their doc comments are the help), and `main`, which parses
//! and dispatches. Each command's arguments and handler are in `cli/` —
//! `run.rs` (list, run, compare), `sweep.rs` (matrix, sweep, merge),
//! `fuzz.rs` (fuzz, shrink, mutants), `bench.rs`, `serve.rs` — and a
//! handler reads its arguments, calls the library (`racksim::*`) and prints.

mod cli;

/// mimalloc instead of glibc's malloc (`racksim::allocator` says why, and
/// why by its plain functions).
#[global_allocator]
static ALLOCATOR: racksim::allocator::Allocator = racksim::allocator::Allocator;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::Status;
use racksim_sim::run::TESTBED_ERROR_EXIT;

#[derive(Parser)]
#[command(
    name = "racksim",
    version,
    about = "A deterministic simulated rack for testing network reconcilers under faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in scenarios.
    List,
    /// Run every scenario x strategy over N seeds and print a table
    /// (converged/failed counts; p50 and max of each run's slowest repair,
    /// measured from the end of its fault, and of the time to settle after
    /// the last plan step).
    ///
    /// Exit status: 0 when every run met its scenario's expectation and
    /// every cell with `some_seeds_violate` saw a seed break each invariant
    /// it names (and with `some_seeds_fail`, a seed fail as allowed),
    /// 1 when not (the replay command of each run that missed is printed),
    /// 3 when some run ended in a testbed error, 2 for bad input.
    Matrix(cli::sweep::MatrixArgs),
    /// Run one scenario and strategy over a range of seeds: counts of
    /// converged, failed and invariant-violating runs, percentiles of the
    /// slowest repair (from each fault's end) and of the time to converge
    /// (from the start), and the replay command of every run that broke an
    /// invariant or missed its expectation.
    ///
    /// Exit status: 0 when every run met the expectation and, if it has
    /// `some_seeds_violate`, some seed of the range broke each invariant it
    /// names (with `some_seeds_fail`, some seed failed as allowed); 1 when
    /// not; 3 when some run ended in a testbed error; 2 for bad input.
    ///
    /// A shard (`--shard I/N`) does not fail for `some_seeds_violate`: the
    /// requirement is on the whole range, and one shard may see no
    /// violation. Its JSON says whether it saw one
    /// (`some_seeds_violate.met`); `racksim merge` judges the range.
    Sweep(cli::sweep::SweepArgs),
    /// Run one seed of a scenario under two strategies and compare them:
    /// prints both verdicts; with --report, an HTML timeline of both runs on
    /// one time axis.
    ///
    /// Exit status: 0 when both runs converged, 1 when not, 3 when a run
    /// ended in a testbed error, 2 for bad input.
    Compare(cli::run::CompareArgs),
    /// Measure what simulations cost (build with --release).
    ///
    /// Simulated and wall time, their ratio, driver steps, hosts and peak RSS
    /// for a fixed set of workloads, each in its own child process, as the
    /// median and spread (min..max) over repetitions. With --engine both,
    /// each workload also runs on turmoil's stock tick engine (1 ms tick),
    /// and the two wall times and their ratio print side by side.
    Bench(cli::bench::BenchArgs),
    /// Swarm fuzzing: each seed draws a whole fault plan (which kinds of
    /// fault at all, how many, when, how long, on which hosts; instance
    /// operations included), a chaos phase after which everything heals and
    /// the rack must converge within a liveness window, invariants holding
    /// throughout. Prints every failing seed with its replay commands,
    /// labelled with the known defect (scenarios/known-defects.toml) it
    /// matches, or UNLISTED.
    ///
    /// Exit status: 0 when every failing seed is a listed known defect (or
    /// none failed), 1 when some failure is unlisted, 3 when some run ended
    /// in a testbed error (never a known defect), 2 for bad input (a bad
    /// known-defects file too).
    Fuzz(cli::fuzz::FuzzArgs),
    /// Merge the `--json` of the shards (`--shard I/N`) of one sweep or one
    /// fuzz run into the summary the unsharded run prints: the same
    /// counts, percentiles, failing seeds and replay commands, whatever the
    /// order of the files. Refuses (and prints nothing else) files of
    /// different runs (it lists the options that differ), a mix of sweeps
    /// and fuzz runs, a missing or repeated shard, and a file that is not a
    /// shard's JSON. See docs/campaigns.md.
    ///
    /// Exit status: that of the unsharded run: for a sweep 0 when every run
    /// met the expectation and the whole range met `some_seeds_violate`, for
    /// a fuzz run 0 when no failure is unlisted; 1 when not; 3 when some run
    /// ended in a testbed error; 2 when the files cannot be merged.
    Merge(cli::sweep::MergeArgs),
    /// Reduce a failing plan while it still fails the same way (same
    /// invariant, or not converging with the same item missing), and write
    /// it as a regression scenario.
    ///
    /// Exit status: 0 when a reduced plan was written, 2 for bad input, a
    /// plan that does not fail, or one that ends in a testbed error (a bug
    /// of racksim, not a finding).
    Shrink(cli::fuzz::ShrinkArgs),
    /// The kill table: every mutant (a plausible reconciler bug, compiled in
    /// by racksim's default `mutants` feature) against the catalogue and a bounded fuzz;
    /// prints, per mutant, the first scenario and seed that catches it.
    ///
    /// Exit status: 0 when every mutant was killed, 1 when one survived.
    Mutants(cli::fuzz::MutantsArgs),
    /// One benchmark workload in this process; prints one JSON line (used by
    /// `racksim bench`).
    #[command(hide = true)]
    BenchOne(cli::bench::BenchOneArgs),
    /// Run a scenario: print the seed and options, the trace, the verdict.
    ///
    /// Exit status: 0 when the rack converged, 1 when it did not (or, with
    /// --expect, 0/1 for whether the scenario's expectation held), 3 when a
    /// run ended in a testbed error (racksim itself failed), 2 for bad
    /// input.
    Run(cli::run::RunArgs),
    /// Live mode: the scenario's rack on loopback in real time — fake
    /// switch zones (dpd, MGS) and sled-agents as dropshot servers, a
    /// Nexus, the strategy's reconcilers against them on TCP, a control
    /// API — until Ctrl-C. See docs/live-mode.md.
    Serve(cli::serve::ServeArgs),
}

fn main() -> ExitCode {
    // Before anything prints a replay line (racksim::invocation).
    racksim::invocation::set_from_process();
    let cli = Cli::parse();
    // A `RUST_LOG` the stderr log cannot read is refused before any run,
    // as a bad argument is (each run would otherwise say so on its own).
    if let Err(message) = racksim_sim::logging::stderr_filter() {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::List => cli::run::list(),
        Command::Matrix(args) => cli::sweep::matrix(args),
        Command::Sweep(args) => cli::sweep::sweep(args),
        Command::Compare(args) => cli::run::compare(args),
        Command::Bench(args) => cli::bench::bench(args),
        Command::Fuzz(args) => cli::fuzz::fuzz(args),
        Command::Merge(args) => cli::sweep::merge(args),
        Command::Shrink(args) => cli::fuzz::shrink(args),
        Command::Mutants(args) => cli::fuzz::mutants(args),
        Command::BenchOne(args) => cli::bench::bench_one(args),
        Command::Run(args) => cli::run::run(args),
        Command::Serve(args) => cli::serve::serve(args),
    };
    match result {
        Ok(Status::Passed) => ExitCode::SUCCESS,
        Ok(Status::Failed) => ExitCode::from(1),
        Ok(Status::TestbedError) => ExitCode::from(TESTBED_ERROR_EXIT as u8),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

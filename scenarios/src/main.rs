//! `racksim`: run scripted faults against a simulated rack and its real
//! reconcilers. See the README for the commands.

use std::{path::Path, process::ExitCode, time::Instant};

use clap::{Parser, Subcommand};
use racksim::{
    catalogue,
    file::{self, Outcome, Scenario},
    report, runner,
};
use racksim_sim::{trace::fmt_duration, Strategy};

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
    /// (converged/failed counts, time to converge p50 and max).
    ///
    /// Exit status: 0 when every run met its scenario's expectation, 1 when
    /// one did not (its replay command is printed), 2 for bad input.
    Matrix {
        /// Seeds 1..=N for every cell.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        seeds: u64,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Only these scenarios (catalogue names; repeatable).
        #[arg(long = "scenario")]
        only: Vec<String>,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Run a scenario: print the seed and options, the trace, the verdict.
    ///
    /// Exit status: 0 when the rack converged, 1 when it did not (or, with
    /// --expect, 0/1 for whether the scenario's expectation held), 2 for bad
    /// input.
    Run {
        /// A catalogue name (see `racksim list`) or a path to a scenario file.
        scenario: String,
        /// Seed of the run; a random one is drawn and printed if omitted.
        #[arg(long)]
        seed: Option<u64>,
        /// Strategy to run; every strategy the scenario has expectations for
        /// if omitted.
        #[arg(long, value_parser = parse_strategy)]
        strategy: Option<Strategy>,
        /// Exit 0 when the scenario's expectation holds for every run
        /// (including a strategy that is expected to fail), 1 when not.
        #[arg(long)]
        expect: bool,
    },
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::List => {
            list();
            ExitCode::SUCCESS
        }
        Command::Matrix {
            seeds,
            json,
            only,
            jobs,
        } => match matrix(seeds, json, &only, jobs) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(message) => {
                eprintln!("{message}");
                ExitCode::from(2)
            }
        },
        Command::Run {
            scenario,
            seed,
            strategy,
            expect,
        } => match run(&scenario, seed, strategy, expect) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(message) => {
                eprintln!("{message}");
                ExitCode::from(2)
            }
        },
    }
}

fn list() {
    let scenarios = catalogue::all();
    let width = scenarios.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in scenarios {
        let strategies: Vec<String> = s
            .expectations
            .iter()
            .map(|(st, e)| match e.outcome {
                Outcome::ConvergesWithin(d) => format!("{st}: converges <= {}", fmt_duration(d)),
                Outcome::Fails => format!("{st}: fails"),
            })
            .collect();
        println!(
            "{:<width$}  {}  [{}]",
            s.name,
            s.description,
            strategies.join("; ")
        );
    }
}

fn matrix(seeds: u64, json: bool, only: &[String], jobs: Option<usize>) -> Result<bool, String> {
    let mut scenarios = catalogue::all();
    for name in only {
        if !scenarios.iter().any(|s| &s.name == name) {
            return Err(format!(
                "error: no catalogued scenario {name:?} (known: {})",
                catalogue::names().join(", ")
            ));
        }
    }
    if !only.is_empty() {
        scenarios.retain(|s| only.contains(&s.name));
    }
    let threads = jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let seed_list: Vec<u64> = (1..=seeds).collect();
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left",
        )
        .expect("valid template"),
    );
    let started = Instant::now();
    let cells = racksim::matrix::matrix(&scenarios, &seed_list, threads, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&cells).expect("cells serialize")
        );
    } else {
        print!("{}", racksim::matrix::table(&cells));
    }
    let runs: usize = cells.iter().map(|c| c.runs).sum();
    eprintln!(
        "{runs} runs ({} scenarios, seeds 1..={seeds}) on {threads} threads in {:.1} s",
        scenarios.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(cells.iter().all(|c| c.as_expected == c.runs))
}

fn resolve(arg: &str) -> Result<Scenario, String> {
    if let Some(s) = catalogue::get(arg) {
        return Ok(s);
    }
    let path = Path::new(arg);
    if path.exists() {
        return file::load(path);
    }
    Err(format!(
        "error: no scenario {arg:?}: it is neither a catalogue name ({}) nor an existing file",
        catalogue::names().join(", ")
    ))
}

/// Returns whether every run succeeded (converged, or with `expect`, met its
/// expectation).
fn run(
    arg: &str,
    seed: Option<u64>,
    strategy: Option<Strategy>,
    expect: bool,
) -> Result<bool, String> {
    let scenario = resolve(arg)?;
    let strategies: Vec<Strategy> = match strategy {
        Some(s) if scenario.expectations.contains_key(&s) => vec![s],
        Some(s) => {
            let known: Vec<String> = scenario
                .expectations
                .keys()
                .map(|s| s.to_string())
                .collect();
            return Err(format!(
                "error: scenario {} has no expectation for strategy {s} (it has: {})",
                scenario.name,
                known.join(", ")
            ));
        }
        None => scenario.expectations.keys().copied().collect(),
    };
    let (seed, drawn) = match seed {
        Some(s) => (s, false),
        None => (random_seed(), true),
    };

    let mut all_ok = true;
    for (i, &strategy) in strategies.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let started = Instant::now();
        let judged = runner::run(&scenario, strategy, seed).expect("strategy has an expectation");
        let wall = started.elapsed();
        print!(
            "{}",
            report::render(&scenario, arg, strategy, seed, drawn, &judged)
        );
        all_ok &= if expect {
            judged.judgement.is_ok()
        } else {
            judged.outcome.verdict.converged()
        };

        let sim = judged.outcome.sim_time;
        eprintln!(
            "{} {strategy} seed {seed}: simulated {} in {:.2} s wall ({:.0}x real time)",
            scenario.name,
            fmt_duration(sim),
            wall.as_secs_f64(),
            sim.as_secs_f64() / wall.as_secs_f64().max(1e-9)
        );
    }
    Ok(all_ok)
}

/// A fresh seed for a run without `--seed`. Only the CLI draws one; the
/// simulation itself never touches OS randomness.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish() % 1_000_000
}

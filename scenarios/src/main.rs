//! `racksim`: run scripted faults against a simulated rack and its real
//! reconcilers. See the README for the commands.

use std::{path::Path, process::ExitCode, time::Instant};

use clap::{Parser, Subcommand};
use racksim::{
    campaign::SweepSummary,
    catalogue,
    file::{self, Scenario, Variant},
    html, report, runner,
};
use racksim_sim::{run::TESTBED_ERROR_EXIT, trace::fmt_duration};

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
    Sweep {
        /// A catalogue name or a path to a scenario file.
        scenario: String,
        /// Strategy (or, for instance scenarios, start implementation).
        #[arg(long)]
        strategy: String,
        /// Seeds as A..B (inclusive), e.g. 1..1000.
        #[arg(long, value_parser = parse_seed_range)]
        seeds: (u64, u64),
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only shard I of N (0-based): the seeds A+I, A+I+N, ... — so
        /// a large sweep splits across CI jobs, and `racksim merge` makes
        /// their JSON the whole sweep's summary. A shard does not fail for
        /// `some_seeds_violate` (the requirement is on the whole range, and
        /// one shard may see no violation): its JSON says whether it saw
        /// one (`some_seeds_violate.met`); the merge judges the range.
        #[arg(long, value_parser = parse_shard)]
        shard: Option<(u64, u64)>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Write an HTML timeline of every run that did not converge or
        /// missed its expectation into this directory (created if need be),
        /// as SCENARIO-STRATEGY-seedN.html.
        #[arg(long, value_name = "DIR")]
        report: Option<std::path::PathBuf>,
    },
    /// Run one seed of a scenario under two strategies and compare them:
    /// prints both verdicts; with --report, an HTML timeline of both runs on
    /// one time axis.
    ///
    /// Exit status: 0 when both runs converged, 1 when not, 3 when a run
    /// ended in a testbed error, 2 for bad input.
    Compare {
        /// A catalogue name or a path to a scenario file.
        scenario: String,
        /// Seed of both runs.
        #[arg(long)]
        seed: u64,
        /// The first strategy (or start implementation).
        strategy_a: String,
        /// The second strategy (or start implementation).
        strategy_b: String,
        /// Write the HTML timeline to this file.
        #[arg(long, value_name = "FILE")]
        report: Option<std::path::PathBuf>,
    },
    /// Measure what simulations cost (build with --release).
    ///
    /// Simulated and wall time, their ratio, driver steps, hosts and peak RSS
    /// for a fixed set of workloads, each in its own child process, as the
    /// median and spread (min..max) over repetitions. With --engine both,
    /// each workload also runs on turmoil's stock tick engine (1 ms tick),
    /// and the two wall times and their ratio print side by side.
    Bench {
        /// Print one JSON document instead of the table.
        #[arg(long)]
        json: bool,
        /// Repetitions of each workload (default 5 on the event-driven
        /// engine, 1 on the tick engine; 1 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
        reps: Option<u64>,
        /// Fewer repetitions and a 100-seed sweep instead of 1,000 (the tick
        /// engine: 2 seeds instead of 10, 1-minute racks instead of 2).
        #[arg(long)]
        quick: bool,
        /// Only these workloads (repeatable): madrid-legacy, madrid-sled-task,
        /// race-naive, race-saga, rack-8, rack-16, rack-32, rack-32-2h,
        /// rack-32-8h, madrid-sweep.
        #[arg(long)]
        only: Vec<String>,
        /// The engine(s) to measure: racksim's event-driven one, turmoil's
        /// stock tick engine with a 1 ms tick (workloads too long for it
        /// run reduced, or are skipped, as the output says), or both side
        /// by side.
        #[arg(long, value_enum, default_value = "event-driven")]
        engine: racksim::bench::Engines,
    },
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
    Fuzz {
        /// Seeds as A..B (inclusive).
        #[arg(long, value_parser = parse_seed_range, required_unless_present = "plan")]
        seeds: Option<(u64, u64)>,
        /// Print the plan of this seed as a scenario file and exit.
        #[arg(long, value_name = "SEED", conflicts_with = "seeds")]
        plan: Option<u64>,
        /// Rack shape: madrid, standard or full.
        #[arg(long, default_value = "madrid")]
        rack: String,
        /// Service-NAT strategy: legacy (the blocking zone-start path and
        /// Nexus's task), sled-task (seed 000's proposal), scrimlet-local
        /// (the design after #9727: the scrimlet reconcilers alone) or
        /// scrimlet-local-with-zone-start (what ships at omicron b848b6df:
        /// the scrimlet reconcilers and the zone-start path).
        #[arg(long, default_value = "sled-task")]
        strategy: String,
        /// Instance start implementation: legacy, naive or saga.
        #[arg(long, default_value = "saga")]
        start: String,
        /// Draw each seed's NAT statement window as well (the database's
        /// window between a statement's `nextval` and its row becoming
        /// visible: none, 1ms, 20ms, 200ms, 1s or 3s at most), written
        /// into its plan as `nat_window`.
        #[arg(long)]
        nat_window: bool,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only shard I of N (0-based): the seeds A+I, A+I+N, ...
        /// (`racksim merge` combines the shards' JSON).
        #[arg(long, value_parser = parse_shard)]
        shard: Option<(u64, u64)>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Run against a deliberately broken reconciler (builds with
        /// `--features mutants` only); see `racksim mutants`.
        #[arg(long)]
        mutant: Option<String>,
        /// The known-defects file failing seeds are matched against
        /// (default: the committed scenarios/known-defects.toml), or `none`
        /// to treat every failure as unlisted.
        #[arg(long, value_name = "PATH|none")]
        known_defects: Option<String>,
    },
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
    Merge {
        /// The shards' JSON files (every shard 0/N..N-1/N once).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<std::path::PathBuf>,
        /// Print the merged JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Reduce a failing plan while it still fails the same way (same
    /// invariant, or not converging with the same item missing), and write
    /// it as a regression scenario.
    ///
    /// Exit status: 0 when a reduced plan was written, 2 for bad input, a
    /// plan that does not fail, or one that ends in a testbed error (a bug
    /// of racksim, not a finding).
    Shrink {
        /// A catalogue name or a path to a scenario file (e.g. a fuzz plan).
        scenario: String,
        #[arg(long)]
        seed: u64,
        /// Strategy (or, for instance scenarios, start implementation);
        /// required when the scenario has several.
        #[arg(long)]
        strategy: Option<String>,
        /// Name of the regression (default: the scenario's name).
        #[arg(long)]
        name: Option<String>,
        /// Directory to write NAME.toml into.
        #[arg(long, default_value = "scenarios/regressions")]
        out: std::path::PathBuf,
        /// Shrink a failure of this mutant (builds with `--features mutants`).
        #[arg(long)]
        mutant: Option<String>,
    },
    /// The kill table: every mutant (a plausible reconciler bug, compiled in
    /// with `--features mutants`) against the catalogue and a bounded fuzz;
    /// prints, per mutant, the first scenario and seed that catches it.
    ///
    /// Exit status: 0 when every mutant was killed, 1 when one survived.
    Mutants {
        /// Catalogue seeds 1..=N per scenario and strategy.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1000))]
        seeds: u64,
        /// Fuzz seeds 1..=N per fuzzed strategy.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=100_000))]
        fuzz_seeds: u64,
        /// Only these mutants (repeatable).
        #[arg(long = "mutant")]
        only: Vec<String>,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// One benchmark workload in this process; prints one JSON line (used by
    /// `racksim bench`).
    #[command(hide = true)]
    BenchOne {
        workload: String,
        /// Seeds of the sweep workload.
        #[arg(long, default_value_t = racksim::bench::SWEEP_SEEDS)]
        seeds: u64,
        /// The engine to run it on.
        #[arg(long, value_enum, default_value = "event-driven")]
        engine: racksim::bench::EngineName,
        /// Simulated seconds of a single run instead of the workload's own
        /// (a reduced form).
        #[arg(long)]
        sim_secs: Option<u64>,
    },
    /// Run a scenario: print the seed and options, the trace, the verdict.
    ///
    /// Exit status: 0 when the rack converged, 1 when it did not (or, with
    /// --expect, 0/1 for whether the scenario's expectation held), 3 when a
    /// run ended in a testbed error (racksim itself failed), 2 for bad
    /// input.
    Run {
        /// A catalogue name (see `racksim list`) or a path to a scenario file.
        scenario: String,
        /// Seed of the run; a random one is drawn and printed if omitted.
        #[arg(long)]
        seed: Option<u64>,
        /// Strategy to run; every strategy the scenario has expectations for
        /// if omitted. Service-NAT strategies: legacy, sled-task,
        /// scrimlet-local (the design after #9727) and
        /// scrimlet-local-with-zone-start (today's omicron, #10961: the
        /// scrimlet reconcilers plus the blocking zone-start path); see
        /// `racksim list` for their eras.
        #[arg(long)]
        strategy: Option<String>,
        /// Exit 0 when the scenario's expectation holds for every run
        /// (including a strategy that is expected to fail), 1 when not.
        #[arg(long)]
        expect: bool,
        /// Also write every trace record as a line of JSON to this file
        /// (`at_us`, `host`, `kind`, `text`, `fields`, and `strategy`).
        #[arg(long, value_name = "FILE")]
        trace_json: Option<std::path::PathBuf>,
        /// Also write an HTML timeline of the run(s) to this file (every
        /// strategy run, on one time axis).
        #[arg(long, value_name = "FILE")]
        report: Option<std::path::PathBuf>,
        /// Break the testbed on purpose, to see a testbed error: `stop` (the
        /// server stops with an error) or `panic` (its task panics), e.g.
        /// `stop:switch0:12224@2m`.
        #[arg(long, hide = true, value_name = "KIND:HOST:PORT@TIME", value_parser = parse_sabotage)]
        sabotage: Option<racksim_sim::testbed::Sabotage>,
    },
    /// Live mode: the scenario's rack on loopback in real time — fake
    /// switch zones (dpd, MGS) and sled-agents as dropshot servers, a
    /// Nexus, the strategy's reconcilers against them on TCP, a control
    /// API — until Ctrl-C. See the README's "Live mode".
    Serve {
        /// A catalogue name or a path to a scenario file (its rack and its
        /// declared instances are used).
        #[arg(default_value = racksim::serve::DEFAULT_SCENARIO)]
        scenario: String,
        /// `scrimlet-local` (default; the design after #9727), `sled-task`,
        /// `scrimlet-local-with-zone-start` (what ships at omicron b848b6df:
        /// the scrimlet reconcilers and each zone's start through the
        /// zone-start NAT path) or `legacy` (the zone-start path and
        /// Nexus's inventory-driven tracker).
        #[arg(long)]
        strategy: Option<String>,
        /// How Nexus starts instances: `saga` (default), `naive` or
        /// `legacy`.
        #[arg(long)]
        start: Option<String>,
        /// Where the control API listens.
        #[arg(long, default_value = "127.0.0.1:12280")]
        bind: std::net::SocketAddr,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => {
            list();
            Ok(Status::Passed)
        }
        Command::Matrix {
            seeds,
            json,
            only,
            jobs,
        } => matrix(seeds, json, &only, jobs),
        Command::Sweep {
            scenario,
            strategy,
            seeds,
            jobs,
            shard,
            json,
            report,
        } => sweep(
            &scenario,
            &strategy,
            seeds,
            shard,
            jobs,
            json,
            report.as_deref(),
        ),
        Command::Compare {
            scenario,
            seed,
            strategy_a,
            strategy_b,
            report,
        } => compare(
            &scenario,
            seed,
            [&strategy_a, &strategy_b],
            report.as_deref(),
        ),
        Command::Run {
            scenario,
            seed,
            strategy,
            expect,
            trace_json,
            report,
            sabotage,
        } => run(
            &scenario,
            (seed, strategy),
            expect,
            trace_json.as_deref(),
            report.as_deref(),
            sabotage,
        ),
        Command::Bench {
            json,
            reps,
            quick,
            only,
            engine,
        } => bench(json, reps, quick, only, engine).map(Status::from),
        Command::BenchOne {
            workload,
            seeds,
            engine,
            sim_secs,
        } => bench_one(
            &workload,
            engine,
            racksim::bench::Form {
                seeds,
                sim_time: sim_secs.map(std::time::Duration::from_secs),
            },
        )
        .map(Status::from),
        Command::Serve {
            scenario,
            strategy,
            start,
            bind,
        } => resolve(&scenario)
            .and_then(|s| racksim::serve::command(&s, strategy.as_deref(), start.as_deref(), bind))
            .map(Status::from),
        Command::Fuzz {
            seeds,
            plan,
            rack,
            strategy,
            start,
            jobs,
            shard,
            json,
            mutant,
            known_defects,
            nat_window,
        } => fuzz(
            seeds,
            plan,
            (&rack, &strategy, &start, nat_window),
            jobs,
            shard,
            json,
            (mutant.as_deref(), known_defects.as_deref()),
        ),
        Command::Merge { files, json } => merge(&files, json),
        Command::Shrink {
            scenario,
            seed,
            strategy,
            name,
            out,
            mutant,
        } => shrink(
            &scenario,
            seed,
            strategy.as_deref(),
            name.as_deref(),
            &out,
            mutant.as_deref(),
        )
        .map(Status::from),
        Command::Mutants {
            seeds,
            fuzz_seeds,
            only,
            jobs,
            json,
        } => mutants(seeds, fuzz_seeds, &only, jobs, json).map(Status::from),
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

/// How a command ended, as its exit status: 0 passed, 1 failed (a run did
/// not converge, or with `--expect` an expectation did not hold), 3 some
/// run ended in a testbed error (which outranks 1: racksim itself failed,
/// so nothing else the command found can be trusted), 2 bad input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Passed,
    Failed,
    TestbedError,
}

impl Status {
    /// `passed`, unless some run was a testbed error.
    fn of(passed: bool, testbed_errors: usize) -> Status {
        match (testbed_errors, passed) {
            (1.., _) => Status::TestbedError,
            (0, true) => Status::Passed,
            (0, false) => Status::Failed,
        }
    }
}

impl From<bool> for Status {
    fn from(passed: bool) -> Status {
        Status::of(passed, 0)
    }
}

fn list() {
    let scenarios = catalogue::all();
    let width = scenarios.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in scenarios {
        let strategies: Vec<String> = s
            .expectations
            .iter()
            .map(|(st, e)| format!("{st}: {}", e.summary()))
            .collect();
        println!(
            "{:<width$}  {}  [{}]",
            s.name,
            s.description,
            strategies.join("; ")
        );
    }
    print!("{}", eras());
}

/// Which era of upstream's code each strategy and start implementation
/// stands for, and the control-plane tasks its runs get (`racksim_sim::era`).
fn eras() -> String {
    use racksim_reconciler::instances::StartImpl;
    use racksim_sim::{ControlPlaneEra, Era, InstanceEra, Strategy};
    let mut out = String::from(
        "\neras (the upstream code each strategy stands for; its runs get that era's control plane):\n",
    );
    // One column for every name, strategies and starts alike.
    let width = Strategy::ALL
        .iter()
        .map(|s| s.name().len())
        .chain(StartImpl::ALL.iter().map(|i| i.as_str().len()))
        .max()
        .unwrap_or(0);
    for s in Strategy::ALL {
        let era = Era::of(s);
        out += &format!(
            "  {:<width$}  {era}: {}\n  {:<width$}    control plane: {}\n",
            s.name(),
            era.upstream(),
            "",
            ControlPlaneEra::of(s, StartImpl::Saga)
        );
    }
    out += "instance starts (kind = \"instances\"; service NAT as the file fixes it):\n";
    for i in StartImpl::ALL {
        let era = InstanceEra::of(i);
        let cp = ControlPlaneEra::of(Strategy::Legacy, i);
        out += &format!(
            "  {:<width$}  {era}: {}\n  {:<width$}    control plane: dpd NAT RPW {}, nexus V2P task {}\n",
            i.as_str(),
            era.upstream(),
            "",
            cp.dpd_nat_rpw,
            cp.nexus_v2p
        );
    }
    out
}

fn parse_seed_range(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("invalid seed range {s:?}: expected A..B with A <= B, e.g. 1..1000");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    // Each seed is a run listed up front: a range beyond what any machine
    // runs is a typo, refused before it allocates.
    if b - a >= MAX_SEED_SPAN {
        return Err(format!(
            "seed range {s:?} spans {} seeds; at most {MAX_SEED_SPAN} per command \
             (split it into several ranges)",
            u128::from(b - a) + 1
        ));
    }
    Ok((a, b))
}

/// `KIND:HOST:PORT@TIME`, e.g. `stop:switch0:12224@2m` (`run --sabotage`).
fn parse_sabotage(s: &str) -> Result<racksim_sim::testbed::Sabotage, String> {
    use racksim_sim::testbed::Sabotage;
    let bad = |why: &str| {
        format!("invalid sabotage {s:?}: {why}; expected KIND:HOST:PORT@TIME with KIND stop or panic, e.g. stop:switch0:12224@2m")
    };
    let (what, at) = s.split_once('@').ok_or_else(|| bad("no @TIME"))?;
    let at = racksim::file::parse_duration(at).map_err(|e| bad(&e))?;
    let mut parts = what.splitn(3, ':');
    let (Some(kind), Some(host), Some(port)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("missing KIND, HOST or PORT"));
    };
    let port: u16 = port.parse().map_err(|_| bad("PORT is not a port number"))?;
    let host = host.to_string();
    match kind {
        "stop" => Ok(Sabotage::StopServer { host, port, at }),
        "panic" => Ok(Sabotage::Panic { host, port, at }),
        _ => Err(bad("unknown KIND")),
    }
}

/// Most seeds one `--seeds A..B` may name.
const MAX_SEED_SPAN: u64 = 10_000_000;

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("invalid shard {s:?}: expected I/N with I < N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

fn threads(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
    .max(1)
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left",
        )
        .expect("valid template"),
    );
    bar
}

/// `(done, total)` progress onto `bar`.
fn progress_of(bar: &indicatif::ProgressBar) -> impl Fn(usize, usize) + Sync + '_ {
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }
}

/// Print `value` as pretty JSON, or else `text()`.
fn print_json_or(json: bool, value: &impl serde::Serialize, text: impl FnOnce() -> String) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).expect("results serialize")
        );
    } else {
        print!("{}", text());
    }
}

/// The strategy `name` of `scenario`, which must have an expectation for it.
fn variant_of(scenario: &Scenario, name: &str, what: &str) -> Result<Variant, String> {
    let variant = scenario
        .variant(name)
        .map_err(|e| format!("error: {what}: {e}"))?;
    if !scenario.expectations.contains_key(&variant) {
        return Err(format!(
            "error: scenario {} has no expectation for strategy {variant}",
            scenario.name
        ));
    }
    Ok(variant)
}

/// Returns whether every run met the scenario's expectation.
fn sweep(
    arg: &str,
    strategy: &str,
    (a, b): (u64, u64),
    shard: Option<(u64, u64)>,
    jobs: Option<usize>,
    json: bool,
    report_dir: Option<&Path>,
) -> Result<Status, String> {
    let scenario = resolve(arg)?;
    let variant = variant_of(&scenario, strategy, "--strategy")?;
    if let Some(dir) = report_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("error: --report {}: {e}", dir.display()))?;
    }
    let threads = threads(jobs);
    let (shard_i, shard_n) = shard.unwrap_or((0, 1));
    let jobs: Vec<_> = racksim::fuzz::shard_seeds((a, b), (shard_i, shard_n))
        .into_iter()
        .map(|seed| (&scenario, variant, seed))
        .collect();
    let bar = progress_bar();
    bar.set_length(jobs.len() as u64);
    let started = Instant::now();
    let runs = racksim::matrix::run_all(&jobs, threads, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let summary = SweepSummary::of(&scenario, arg, variant, (a, b), shard, &runs);
    print_json_or(json, &summary, || summary.text(shard.is_some()));
    eprintln!(
        "{} runs on {threads} threads in {:.1} s",
        summary.runs,
        started.elapsed().as_secs_f64()
    );
    if let Some(dir) = report_dir {
        // Runs are deterministic: run the notable seeds again for their
        // traces rather than keep every trace of the sweep.
        let mut written = 0;
        for r in runs
            .iter()
            .filter(|r| r.converged_at.is_none() || r.judgement.is_err())
        {
            let judged =
                runner::run(&scenario, variant, r.seed).expect("strategy has an expectation");
            let page = html::render(&[html::RunInput {
                scenario: &scenario,
                scenario_arg: arg,
                strategy: variant,
                seed: r.seed,
                judged: &judged,
            }]);
            let path = dir.join(html::file_name(&scenario, variant, r.seed));
            html::write(html::create(&path)?, &path, &page)?;
            written += 1;
        }
        eprintln!("wrote {written} reports to {}", dir.display());
    }
    // One shard's seeds need not include a violating one: the merged shards
    // decide `some_seeds_violate` (see --shard).
    Ok(Status::of(
        summary.passed(shard.is_some()),
        summary.testbed_errors,
    ))
}

/// One seed under two strategies; returns whether both converged.
fn compare(
    arg: &str,
    seed: u64,
    strategies: [&str; 2],
    report_path: Option<&Path>,
) -> Result<Status, String> {
    let scenario = resolve(arg)?;
    let variants = [
        variant_of(&scenario, strategies[0], "STRATEGY_A")?,
        variant_of(&scenario, strategies[1], "STRATEGY_B")?,
    ];
    let file = report_path.map(html::create).transpose()?;
    let judged: Vec<runner::Judged> = variants
        .iter()
        .map(|&v| runner::run(&scenario, v, seed).expect("strategy has an expectation"))
        .collect();
    println!("scenario: {}, seed {seed}", scenario.name);
    for (v, j) in variants.iter().zip(&judged) {
        println!(
            "{v}: {}",
            j.outcome
                .verdict
                .lines()
                .first()
                .cloned()
                .unwrap_or_default()
        );
        match &j.judgement {
            Ok(why) => println!("  expectation for {v}: HOLDS ({why})"),
            Err(why) => println!("  expectation for {v}: DOES NOT HOLD ({why})"),
        }
        println!("  replay: {}", runner::replay_command(arg, *v, seed));
    }
    if let (Some(file), Some(path)) = (file, report_path) {
        let inputs: Vec<html::RunInput> = variants
            .iter()
            .zip(&judged)
            .map(|(&strategy, judged)| html::RunInput {
                scenario: &scenario,
                scenario_arg: arg,
                strategy,
                seed,
                judged,
            })
            .collect();
        html::write(file, path, &html::render(&inputs))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(Status::of(
        judged.iter().all(|j| j.outcome.verdict.converged()),
        judged
            .iter()
            .filter(|j| j.outcome.verdict.is_testbed_error())
            .count(),
    ))
}

fn matrix(seeds: u64, json: bool, only: &[String], jobs: Option<usize>) -> Result<Status, String> {
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
    let threads = threads(jobs);
    let seed_list: Vec<u64> = (1..=seeds).collect();
    let bar = progress_bar();
    let started = Instant::now();
    let cells = racksim::matrix::matrix(&scenarios, &seed_list, threads, &progress_of(&bar));
    bar.finish_and_clear();
    print_json_or(json, &cells, || racksim::matrix::table(&cells));
    let runs: usize = cells.iter().map(|c| c.runs).sum();
    eprintln!(
        "{runs} runs ({} scenarios, seeds 1..={seeds}) on {threads} threads in {:.1} s",
        scenarios.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Status::of(
        cells.iter().all(|c| c.met),
        cells.iter().map(|c| c.testbed_errors).sum(),
    ))
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
    (seed, strategy): (Option<u64>, Option<String>),
    expect: bool,
    trace_json: Option<&Path>,
    report_path: Option<&Path>,
    sabotage: Option<racksim_sim::testbed::Sabotage>,
) -> Result<Status, String> {
    let scenario = resolve(arg)?;
    let strategy = strategy
        .map(|s| {
            scenario
                .variant(&s)
                .map_err(|e| format!("error: --strategy: {e}"))
        })
        .transpose()?;
    let strategies: Vec<Variant> = match strategy {
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
    // Opened before anything runs: a bad path is an input error.
    let mut records = trace_json
        .map(|path| {
            std::fs::File::create(path)
                .map(std::io::BufWriter::new)
                .map_err(|e| format!("error: --trace-json {}: {e}", path.display()))
        })
        .transpose()?;
    let report_file = report_path.map(html::create).transpose()?;

    let mut all_ok = true;
    let mut testbed_errors = 0;
    let mut judged_runs = Vec::new();
    for (i, &strategy) in strategies.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let started = Instant::now();
        let judged = runner::run_with(&scenario, strategy, seed, sabotage.clone())
            .expect("strategy has an expectation");
        let wall = started.elapsed();
        print!(
            "{}",
            report::render(&scenario, arg, strategy, seed, drawn, &judged)
        );
        testbed_errors += usize::from(judged.outcome.verdict.is_testbed_error());
        // A sabotage that names no server of this run breaks nothing: the
        // run above is then not the self-test that was asked for.
        if let Some(s) = &sabotage {
            if !judged.outcome.verdict.is_testbed_error() {
                let (host, port) = s.target();
                return Err(format!(
                    "error: --sabotage: nothing broke: no server on {host}:{port} was running at \
                     the sabotage's time (hosts are named as in the trace; e.g. dpd is \
                     switch0:12224, a sled-agent sled1:12345)"
                ));
            }
        }
        all_ok &= if expect {
            judged.judgement.is_ok()
        } else {
            judged.outcome.verdict.converged()
        };

        if let Some(out) = records.as_mut() {
            write_records(out, &strategy.to_string(), &judged.outcome.trace)
                .map_err(|e| format!("error: --trace-json: {e}"))?;
        }

        let sim = judged.outcome.sim_time;
        eprintln!(
            "{} {strategy} seed {seed}: simulated {} in {:.2} s wall ({:.0}x real time)",
            scenario.name,
            fmt_duration(sim),
            wall.as_secs_f64(),
            sim.as_secs_f64() / wall.as_secs_f64().max(1e-9)
        );
        judged_runs.push((strategy, judged));
    }
    if let (Some(file), Some(path)) = (report_file, report_path) {
        let inputs: Vec<html::RunInput> = judged_runs
            .iter()
            .map(|(strategy, judged)| html::RunInput {
                scenario: &scenario,
                scenario_arg: arg,
                strategy: *strategy,
                seed,
                judged,
            })
            .collect();
        html::write(file, path, &html::render(&inputs))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(Status::of(all_ok, testbed_errors))
}

/// Trace records as JSON lines, each with the strategy that produced it.
fn write_records(
    out: &mut impl std::io::Write,
    strategy: &str,
    trace: &[racksim_sim::trace::TraceLine],
) -> std::io::Result<()> {
    for line in trace {
        let mut value = serde_json::to_value(line).expect("trace lines serialize");
        if let Some(obj) = value.as_object_mut() {
            obj.insert("strategy".into(), strategy.into());
        }
        writeln!(out, "{value}")?;
    }
    out.flush()
}

fn bench(
    json: bool,
    reps: Option<u64>,
    quick: bool,
    only: Vec<String>,
    engines: racksim::bench::Engines,
) -> Result<bool, String> {
    use racksim::bench;
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this racksim is a debug build; its figures mislead. \
             Use cargo run --release -p racksim -- bench"
        );
    }
    let default_reps = if quick {
        bench::QUICK_REPS
    } else {
        bench::DEFAULT_REPS
    };
    let opts = bench::Options {
        reps: reps.map(|r| r as usize).unwrap_or(default_reps),
        tick_reps: reps.map(|r| r as usize).unwrap_or(bench::TICK_REPS),
        quick,
        only,
        engines,
    };
    let exe = std::env::current_exe().map_err(|e| format!("error: current exe: {e}"))?;
    let report = bench::run(&exe, &opts)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print!("{}", bench::table(&report));
    }
    Ok(true)
}

fn bench_one(
    workload: &str,
    engine: racksim::bench::EngineName,
    form: racksim::bench::Form,
) -> Result<bool, String> {
    let sample = racksim::bench::measure(workload, engine, form)?;
    println!(
        "{}",
        serde_json::to_string(&sample).expect("sample serializes")
    );
    Ok(true)
}

/// A fresh seed for a run without `--seed`. Only the CLI draws one; the
/// simulation itself never touches OS randomness.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish() % 1_000_000
}

/// A `--mutant` value, refused in a build without mutants.
fn parse_mutant(m: Option<&str>) -> Result<Option<racksim_mutants::Mutant>, String> {
    let Some(m) = m else { return Ok(None) };
    let m = m.parse().map_err(|e| format!("error: --mutant: {e}"))?;
    if !racksim_mutants::COMPILED {
        return Err(
            "error: --mutant: this racksim has no mutants; build it with --features mutants"
                .to_string(),
        );
    }
    Ok(Some(m))
}

fn fuzz(
    seeds: Option<(u64, u64)>,
    plan: Option<u64>,
    (rack, strategy, start, nat_window): (&str, &str, &str, bool),
    jobs: Option<usize>,
    shard: Option<(u64, u64)>,
    json: bool,
    (mutant, known_defects): (Option<&str>, Option<&str>),
) -> Result<Status, String> {
    use racksim::fuzz;
    let strategy = strategy
        .parse()
        .map_err(|e| format!("error: --strategy: {e}"))?;
    let start = start.parse().map_err(|_| {
        format!("error: --start: unknown start implementation {start:?} (expected one of: legacy, naive, saga)")
    })?;
    let mut opts =
        fuzz::Options::new(rack, strategy, start).map_err(|e| format!("error: --rack: {e}"))?;
    opts.draw_nat_window = nat_window;
    let mutant = parse_mutant(mutant)?;
    if let Some(seed) = plan {
        print!("{}", fuzz::plan_text(&opts, seed));
        return Ok(Status::Passed);
    }
    let range = seeds.expect("clap requires --seeds without --plan");
    // Read before anything runs: a bad file is bad input.
    let known = fuzz::known::load_arg(known_defects)?;
    let shard = shard.unwrap_or((0, 1));
    let seed_list = fuzz::shard_seeds(range, shard);
    let threads = threads(jobs);
    let bar = progress_bar();
    bar.set_length(seed_list.len() as u64);
    let started = Instant::now();
    let results = fuzz::fuzz(&opts, &seed_list, mutant, threads, &|done| {
        bar.set_position(done as u64)
    });
    bar.finish_and_clear();
    let summary = fuzz::summarise(&opts, range, shard, mutant, &known, &results);
    print_json_or(json, &summary, || fuzz::text(&summary));
    let wall = started.elapsed().as_secs_f64();
    eprintln!(
        "{} seeds on {threads} threads in {wall:.1} s ({:.0} seeds/s)",
        summary.runs,
        summary.runs as f64 / wall.max(1e-9)
    );
    // Listed failures are recorded defects, not news: only an unlisted one
    // fails the command (and a testbed error, which is never listed, wins).
    Ok(Status::of(summary.unlisted == 0, summary.testbed_errors))
}

fn merge(files: &[std::path::PathBuf], json: bool) -> Result<Status, String> {
    let merged = racksim::campaign::merge_files(files)?;
    if json {
        println!("{}", merged.json());
    } else {
        print!("{}", merged.text());
    }
    eprintln!(
        "merged {} shards of {}: {} runs (the shards' wall-clock times are not in their JSON)",
        files.len(),
        merged.campaign().command,
        merged.runs()
    );
    Ok(Status::of(merged.passed(), merged.testbed_errors()))
}

fn shrink(
    arg: &str,
    seed: u64,
    strategy: Option<&str>,
    name: Option<&str>,
    out: &Path,
    mutant: Option<&str>,
) -> Result<bool, String> {
    let scenario = resolve(arg)?;
    let variant = match strategy {
        Some(s) => variant_of(&scenario, s, "--strategy")?,
        None if scenario.expectations.len() == 1 => *scenario
            .expectations
            .keys()
            .next()
            .expect("one expectation"),
        None => {
            return Err(format!(
                "error: scenario {} has several strategies; name one with --strategy",
                scenario.name
            ))
        }
    };
    let mutant = parse_mutant(mutant)?;
    let name = name.unwrap_or(&scenario.name).to_string();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "error: --name {name:?}: use letters, digits, - and _"
        ));
    }
    let started = Instant::now();
    let shrunk = racksim::shrink::shrink(&scenario, variant, seed, mutant, &|tries, steps| {
        eprint!("\rshrinking: {tries} runs, {steps} steps   ");
    })?;
    eprintln!();
    std::fs::create_dir_all(out).map_err(|e| format!("error: --out {}: {e}", out.display()))?;
    let path = out.join(format!("{name}.toml"));
    // A file's own header comments (a fuzz plan's origin) carry over.
    let source_header: Vec<String> = std::fs::read_to_string(arg)
        .unwrap_or_default()
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_string())
        .collect();
    let text = racksim::shrink::regression_toml(
        &shrunk,
        arg,
        &source_header,
        &name,
        &path.display().to_string(),
    );
    std::fs::write(&path, &text).map_err(|e| format!("error: {}: {e}", path.display()))?;
    println!(
        "{} steps -> {} steps in {} runs ({:.1} s); still fails: {}",
        shrunk.original_steps,
        shrunk.scenario.plan.steps.len(),
        shrunk.runs,
        started.elapsed().as_secs_f64(),
        shrunk.failure
    );
    println!("wrote {}", path.display());
    println!(
        "replay: {}",
        runner::replay_command(&path.display().to_string(), variant, seed)
    );
    Ok(true)
}

fn mutants(
    seeds: u64,
    fuzz_seeds: u64,
    only: &[String],
    jobs: Option<usize>,
    json: bool,
) -> Result<bool, String> {
    use racksim_mutants::Mutant;
    if !racksim_mutants::COMPILED {
        return Err(
            "error: this racksim has no mutants; run cargo run --release -p racksim --features mutants -- mutants"
                .to_string(),
        );
    }
    let selected: Vec<Mutant> = if only.is_empty() {
        Mutant::ALL.to_vec()
    } else {
        only.iter()
            .map(|m| m.parse().map_err(|e| format!("error: --mutant: {e}")))
            .collect::<Result<_, String>>()?
    };
    let threads = threads(jobs);
    let bar = progress_bar();
    let started = Instant::now();
    let table =
        racksim::mutants::kill_table(&selected, seeds, fuzz_seeds, threads, &progress_of(&bar));
    bar.finish_and_clear();
    print_json_or(json, &table, || racksim::mutants::text(&table));
    eprintln!(
        "kill table: catalogue seeds 1..={seeds}, fuzz seeds 1..={fuzz_seeds}, on {threads} threads in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(table.iter().all(|row| row.killed.is_some()))
}

//! One run at a time: `racksim list`, `racksim run` (a scenario under one
//! strategy or each, its trace and verdict) and `racksim compare` (one seed
//! under two strategies).

use std::time::Instant;

use clap::Args;
use racksim::{catalogue, file::Strategy, html, output, report, runner};
use racksim_sim::trace::fmt_duration;

use super::{
    args::{parse_mutant, parse_sabotage},
    Status,
};

#[derive(Args)]
pub struct CompareArgs {
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
}

#[derive(Args)]
pub struct RunArgs {
    /// A catalogue name (see `racksim list`) or a path to a scenario file.
    scenario: String,
    /// Seed of the run; a random one is drawn and printed if omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Strategy to run, as the scenario's `[expect."…"]` keys name it;
    /// every strategy the scenario has expectations for if omitted. A
    /// `kind = "service-nat"` scenario's strategies are legacy,
    /// sled-task, scrimlet-local (the design after #9727) and
    /// scrimlet-local-with-zone-start (today's omicron, #10961: the
    /// scrimlet reconcilers plus the blocking zone-start path); a `kind =
    /// "instances"` scenario's are its instance starts: inline, naive and
    /// saga. Either may carry mechanisms in another era:
    /// `scrimlet-local+nexus-service-nat=inventory-tracker`,
    /// `saga+nat-ensure=matches-removed`. `racksim list` names the eras.
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
    /// Run with a deliberately broken reconciler: a mutant as `racksim
    /// mutants` names it, to replay one of its kills as one run (racksim's
    /// default `mutants` feature).
    #[arg(long)]
    mutant: Option<String>,
}

pub fn list() -> Result<Status, String> {
    print!("{}", catalogue::listing());
    Ok(Status::Passed)
}

/// Every run succeeded: converged, or with `--expect`, met its expectation.
pub fn run(args: RunArgs) -> Result<Status, String> {
    let RunArgs {
        scenario: arg,
        seed,
        strategy,
        expect,
        trace_json,
        report: report_path,
        sabotage,
        mutant,
    } = args;
    let scenario = catalogue::resolve(&arg)?;
    let strategy = strategy
        .map(|s| {
            scenario
                .strategy(&s)
                .map_err(|e| format!("error: --strategy: {e}"))
        })
        .transpose()?;
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
    let mutant = parse_mutant(mutant.as_deref())?;
    let (seed, drawn) = match seed {
        Some(s) => (s, false),
        None => (random_seed(), true),
    };
    // Checked and started before anything runs: a bad path, or one that
    // names the scenario file or the other output, is an argument error
    // that touches nothing. Each file is renamed into place only when whole.
    let outputs: Vec<(&str, &std::path::Path)> = [
        trace_json.as_deref().map(|p| ("--trace-json", p)),
        report_path.as_deref().map(|p| ("--report", p)),
    ]
    .into_iter()
    .flatten()
    .collect();
    output::refuse_overlap(
        &outputs,
        &[("the scenario file", std::path::Path::new(&arg))],
    )?;
    let mut records = trace_json
        .as_deref()
        .map(|path| output::Output::create("--trace-json", path))
        .transpose()?;
    let report_file = report_path.as_deref().map(html::create).transpose()?;

    let mut all_ok = true;
    let mut testbed_errors = 0;
    let mut judged_runs = Vec::new();
    for (i, &strategy) in strategies.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let started = Instant::now();
        let judged = runner::run_with(&scenario, strategy, seed, sabotage.clone(), mutant)
            .expect("strategy has an expectation");
        let wall = started.elapsed();
        print!(
            "{}",
            report::render(&scenario, &arg, strategy, seed, drawn, &judged)
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
            report::write_trace_json(out.writer(), &strategy.to_string(), &judged.outcome.trace)
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
        judged_runs.push((strategy, seed, judged));
    }
    if let Some(out) = records {
        out.commit()?;
    }
    if let Some(out) = report_file {
        let path = out.path().to_path_buf();
        let runs: Vec<_> = judged_runs.iter().map(|(v, s, j)| (*v, *s, j)).collect();
        html::write_runs(out, &scenario, &arg, &runs)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(Status::of(all_ok, testbed_errors))
}

/// A fresh seed for a run without `--seed`. Only the CLI draws one; the
/// simulation itself never touches OS randomness.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish() % 1_000_000
}

/// One seed under two strategies: passed when both converged.
pub fn compare(args: CompareArgs) -> Result<Status, String> {
    let (arg, seed) = (&args.scenario, args.seed);
    let scenario = catalogue::resolve(arg)?;
    let variants = [
        scenario.expected_strategy(&args.strategy_a, "STRATEGY_A")?,
        scenario.expected_strategy(&args.strategy_b, "STRATEGY_B")?,
    ];
    if let Some(path) = args.report.as_deref() {
        output::refuse_overlap(
            &[("--report", path)],
            &[("the scenario file", std::path::Path::new(arg))],
        )?;
    }
    let file = args.report.as_deref().map(html::create).transpose()?;
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
    if let Some(file) = file {
        let path = file.path().to_path_buf();
        let runs: Vec<_> = variants
            .iter()
            .zip(&judged)
            .map(|(&v, j)| (v, seed, j))
            .collect();
        html::write_runs(file, &scenario, arg, &runs)?;
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

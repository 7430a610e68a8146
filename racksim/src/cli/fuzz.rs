//! Finding bugs: `racksim fuzz` (swarm plans over a seed range, each
//! failure matched against the known defects), `racksim shrink` (a failing
//! plan reduced to a regression file) and `racksim mutants` (the kill
//! table: would the suite notice a broken reconciler?).

use std::time::Instant;

use clap::Args;
use racksim::{campaign, catalogue, fuzz, runner, shrink};
use racksim_mutants::{Mutant, COMPILED};
use racksim_nexus::instances::{ParseStartImplError, StartImpl};

use super::{
    args::{parse_mutant, parse_seed_range, CampaignArgs},
    print_json_or, progress_bar, progress_of, threads, Status,
};

#[derive(Args)]
pub struct FuzzArgs {
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
    /// Nexus's task), sled-task (the zone-start NAT issue's proposal), scrimlet-local
    /// (the design after #9727: the scrimlet reconcilers alone) or
    /// scrimlet-local-with-zone-start (what ships at omicron b848b6df:
    /// the scrimlet reconcilers and the zone-start path).
    #[arg(long, default_value = "sled-task")]
    strategy: String,
    /// Instance start implementation: inline, naive or saga, with any
    /// mechanisms in another era (`saga+nat-ensure=matches-removed`:
    /// fuzzing upstream's code before a fix; `racksim list` names them).
    #[arg(long, default_value = "saga")]
    start: String,
    #[command(flatten)]
    campaign: CampaignArgs,
    /// Run against a deliberately broken reconciler (racksim's default
    /// `mutants` feature); see `racksim mutants`.
    #[arg(long)]
    mutant: Option<String>,
    /// The known-defects file failing seeds are matched against
    /// (default: the committed scenarios/known-defects.toml), or `none`
    /// to treat every failure as unlisted.
    #[arg(long, value_name = "PATH|none")]
    known_defects: Option<String>,
}

#[derive(Args)]
pub struct ShrinkArgs {
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
    /// Directory to write NAME.toml into (created if need be).
    #[arg(long, default_value = "scenarios/regressions")]
    out: std::path::PathBuf,
    /// Replace an existing NAME.toml (never the scenario being shrunk).
    #[arg(long)]
    force: bool,
    /// Shrink a failure of this mutant (racksim's default `mutants` feature).
    #[arg(long)]
    mutant: Option<String>,
}

#[derive(Args)]
pub struct MutantsArgs {
    /// Catalogue seeds 1..=N per scenario and strategy.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
    /// Fuzz seeds 1..=N per fuzzed strategy.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    fuzz_seeds: u64,
    /// Only these mutants (repeatable).
    #[arg(long = "mutant")]
    only: Vec<String>,
    /// Worker threads, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = super::args::parse_jobs)]
    jobs: Option<usize>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Passed when no failure is unlisted.
pub fn fuzz(args: FuzzArgs) -> Result<Status, String> {
    let FuzzArgs {
        seeds,
        plan,
        rack,
        strategy,
        start,
        campaign: CampaignArgs { jobs, shard, json },
        mutant,
        known_defects,
    } = args;
    let strategy = strategy.parse().map_err(|e| {
        // A start (`saga`, `saga+nat-ensure=...`) is a strategy in run's
        // and a scenario's words; the fuzzer takes it on its own flag.
        let preset = strategy.split('+').next().unwrap_or_default();
        if preset.parse::<StartImpl>().is_ok() {
            format!(
                "error: --strategy: {preset:?} is an instance start: the fuzzer takes it as --start {strategy} (--strategy is the service-NAT strategy beside it)"
            )
        } else {
            format!("error: --strategy: {e}")
        }
    })?;
    // `saga` or `saga+MECHANISM=ERA...`: a start and its era choices.
    let (start, eras) =
        racksim_sim::EraChoices::split(&start).map_err(|e| format!("error: --start: {e}"))?;
    let start = start
        .parse()
        .map_err(|e: ParseStartImplError| format!("error: --start: {e}"))?;
    let mut opts =
        fuzz::Options::new(&rack, strategy, start).map_err(|e| format!("error: --rack: {e}"))?;
    if !eras.is_empty() {
        opts = opts
            .with_eras(eras)
            .map_err(|e| format!("error: --start: {e}"))?;
    }
    let mutant = parse_mutant(mutant.as_deref())?;
    if let Some(seed) = plan {
        print!("{}", fuzz::plan_text(&opts, seed));
        return Ok(Status::Passed);
    }
    let range = seeds.expect("clap requires --seeds without --plan");
    // Read before anything runs: a bad file is bad input.
    let known = fuzz::known::load_arg(known_defects.as_deref())?;
    let shard = shard.unwrap_or((0, 1));
    let seed_list = campaign::shard_seeds(range, shard);
    let threads = threads(jobs);
    let bar = progress_bar();
    bar.set_length(seed_list.len() as u64);
    let started = Instant::now();
    let results = fuzz::fuzz(&opts, &seed_list, mutant, threads, &|done| {
        bar.set_position(done as u64)
    });
    bar.finish_and_clear();
    let summary = campaign::fuzz::summarise(&opts, range, shard, mutant, &known, &results);
    print_json_or(json, &summary, || campaign::fuzz::text(&summary));
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

/// Passed when a reduced plan was written.
pub fn shrink(args: ShrinkArgs) -> Result<Status, String> {
    let ShrinkArgs {
        scenario: arg,
        seed,
        strategy,
        name,
        out,
        force,
        mutant,
    } = args;
    let scenario = catalogue::resolve(&arg)?;
    let strategy = match strategy {
        Some(s) => scenario.expected_strategy(&s, "--strategy")?,
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
    let mutant = parse_mutant(mutant.as_deref())?;
    let name = name.unwrap_or_else(|| scenario.name.clone());
    shrink::check_name(&name)?;
    // Before the shrink runs: its result never lands on its source, nor on
    // any existing file unasked.
    let path = shrink::regression_path(&out, &name);
    shrink::check_target(&path, &arg, force)?;
    let started = Instant::now();
    let shrunk = shrink::shrink(&scenario, strategy, seed, mutant, &|tries, steps| {
        eprint!("\rshrinking: {tries} runs, {steps} steps   ");
    })?;
    eprintln!();
    shrink::write_regression(&shrunk, &arg, &name, &path)?;
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
        runner::replay_command(&path.display().to_string(), strategy, seed)
    );
    Ok(Status::Passed)
}

/// Passed when every mutant was killed.
pub fn mutants(args: MutantsArgs) -> Result<Status, String> {
    let MutantsArgs {
        seeds,
        fuzz_seeds,
        only,
        jobs,
        json,
    } = args;
    if !COMPILED {
        return Err(
            "error: this racksim has no mutants; build racksim with its default `mutants` feature (not --no-default-features)"
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
    Ok(Status::from(table.iter().all(|row| row.killed.is_some())))
}

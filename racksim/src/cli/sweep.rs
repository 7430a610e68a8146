//! Many seeds of one scenario, or of every one: `racksim matrix` (the
//! catalogue), `racksim sweep` (one scenario and strategy over a seed
//! range, optionally one shard of it) and `racksim merge` (the shards of a
//! sweep or a fuzz run back into one summary).

use std::time::Instant;

use clap::Args;
use racksim::{
    campaign::{self, sweep::Sweep},
    catalogue,
};

use super::{
    args::{parse_seed_range, CampaignArgs},
    print_json_or, progress_bar, progress_of, threads, Status,
};

#[derive(Args)]
pub struct MatrixArgs {
    /// Seeds 1..=N for every cell.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    seeds: u64,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the table as Markdown (for docs/catalogue.md).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Only these scenarios (catalogue names; repeatable).
    #[arg(long = "scenario")]
    only: Vec<String>,
    /// Worker threads, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = super::args::parse_jobs)]
    jobs: Option<usize>,
}

#[derive(Args)]
pub struct SweepArgs {
    /// A catalogue name or a path to a scenario file.
    scenario: String,
    /// Strategy (or, for instance scenarios, start implementation).
    #[arg(long)]
    strategy: String,
    /// Seeds as A..B (inclusive), e.g. 1..1000.
    #[arg(long, value_parser = parse_seed_range)]
    seeds: (u64, u64),
    #[command(flatten)]
    campaign: CampaignArgs,
    /// Write an HTML timeline of every run that did not converge or
    /// missed its expectation into this directory (created after the run
    /// if need be; its parent must exist),
    /// as SCENARIO-STRATEGY-seedN.html.
    #[arg(long, value_name = "DIR")]
    report: Option<std::path::PathBuf>,
}

#[derive(Args)]
pub struct MergeArgs {
    /// The shards' JSON files (every shard 0/N..N-1/N once).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<std::path::PathBuf>,
    /// Print the merged JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn matrix(args: MatrixArgs) -> Result<Status, String> {
    let MatrixArgs {
        seeds,
        json,
        markdown,
        only,
        jobs,
    } = args;
    let scenarios = catalogue::select(&only)?;
    let threads = threads(jobs);
    let seed_list: Vec<u64> = (1..=seeds).collect();
    let bar = progress_bar();
    let started = Instant::now();
    let cells = racksim::matrix::matrix(&scenarios, &seed_list, threads, &progress_of(&bar));
    bar.finish_and_clear();
    print_json_or(json, &cells, || {
        if markdown {
            racksim::matrix::markdown(&cells)
        } else {
            racksim::matrix::table(&cells)
        }
    });
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

/// Passed when every run met the scenario's expectation (and, unsharded,
/// the seeds together met `some_seeds_violate`).
pub fn sweep(args: SweepArgs) -> Result<Status, String> {
    let scenario = catalogue::resolve(&args.scenario)?;
    let sweep = Sweep {
        scenario: &scenario,
        arg: &args.scenario,
        strategy: scenario.expected_strategy(&args.strategy, "--strategy")?,
        seeds: args.seeds,
        shard: args.campaign.shard,
    };
    if let Some(dir) = &args.report {
        check_report_dir(dir)?;
    }
    let threads = threads(args.campaign.jobs);
    let bar = progress_bar();
    let started = Instant::now();
    let (summary, runs) = sweep.run(threads, &progress_of(&bar));
    bar.finish_and_clear();
    let sharded = args.campaign.shard.is_some();
    print_json_or(args.campaign.json, &summary, || summary.text(sharded));
    eprintln!(
        "{} runs on {threads} threads in {:.1} s",
        summary.runs,
        started.elapsed().as_secs_f64()
    );
    if let Some(dir) = &args.report {
        // Created only now that there are results to put in it.
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("error: --report {}: {e}", dir.display()))?;
        let written = sweep.write_reports(dir, &runs)?;
        eprintln!("wrote {written} reports to {}", dir.display());
    }
    // One shard's seeds need not include a violating one: the merged shards
    // decide `some_seeds_violate` (see --shard).
    Ok(Status::of(summary.passed(sharded), summary.testbed_errors))
}

/// `sweep --report DIR`, checked before anything runs and without creating
/// anything: DIR is a directory, or does not exist and its parent does (it
/// is created after the run, as outputs' directories are not: see
/// `racksim::output`).
fn check_report_dir(dir: &std::path::Path) -> Result<(), String> {
    let err = |what: String| format!("error: --report {}: {what}", dir.display());
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(err(
                "is a file, not a directory; name a directory for the reports".into(),
            ))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e.to_string())),
        Err(_) => {}
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(err(format!("{} is not a directory", parent.display()))),
        Err(e) => Err(err(format!(
            "directory {}: {e} (create it first, or write elsewhere)",
            parent.display()
        ))),
    }
}

pub fn merge(args: MergeArgs) -> Result<Status, String> {
    let MergeArgs { files, json } = args;
    let merged = campaign::merge_files(&files)?;
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

//! `racksim bench` (what simulations cost, each workload in a child
//! process) and the hidden `racksim bench-one` (one workload in this
//! process: the child).

use clap::Args;
use racksim::bench;

use super::Status;

#[derive(Args)]
pub struct BenchArgs {
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
    /// rack-32-8h, soak-1000h, madrid-sweep, fuzz-madrid, fuzz-standard,
    /// fuzz-full.
    #[arg(long)]
    only: Vec<String>,
    /// The engine(s) to measure: racksim's event-driven one, turmoil's
    /// stock tick engine with a 1 ms tick (workloads too long for it
    /// run reduced, or are skipped, as the output says), or both side
    /// by side.
    #[arg(long, value_enum, default_value = "event-driven")]
    engine: racksim::bench::Engines,
}

#[derive(Args)]
pub struct BenchOneArgs {
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
}

pub fn bench(args: BenchArgs) -> Result<Status, String> {
    let BenchArgs {
        json,
        reps,
        quick,
        only,
        engine,
    } = args;
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this racksim is a debug build; its figures mislead. \
             Use cargo run --release -p racksim -- bench"
        );
    }
    let opts = bench::Options::new(reps, quick, only, engine);
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
    Ok(Status::Passed)
}

pub fn bench_one(args: BenchOneArgs) -> Result<Status, String> {
    let BenchOneArgs {
        workload,
        seeds,
        engine,
        sim_secs,
    } = args;
    let form = bench::Form {
        seeds,
        sim_time: sim_secs.map(std::time::Duration::from_secs),
    };
    let sample = bench::measure(&workload, engine, form)?;
    println!(
        "{}",
        serde_json::to_string(&sample).expect("sample serializes")
    );
    Ok(Status::Passed)
}

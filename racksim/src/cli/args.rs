//! Values of arguments that clap's types do not parse: seed ranges, shards,
//! sabotages and mutants. Each error says what was expected, with an
//! example. And the options every seed campaign shares ([`CampaignArgs`]).

use racksim_mutants::{Mutant, COMPILED};
use racksim_sim::testbed::Sabotage;

/// The options `racksim sweep` and `racksim fuzz` share: how many threads,
/// which shard of the seeds, and the output's form.
#[derive(clap::Args)]
pub struct CampaignArgs {
    /// Worker threads, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// Run only shard I of N (0-based): the seeds A+I, A+I+N, ... — so a
    /// large campaign splits across CI jobs, and `racksim merge` makes
    /// the shards' JSON the whole run's summary.
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Most worker threads `--jobs` may ask for: far more than any machine
/// racksim runs on has cores, few enough that a typo does not start
/// 100,000 threads.
pub const MAX_JOBS: usize = 256;

/// `--jobs N`: 1 to [`MAX_JOBS`].
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| {
        format!("--jobs must be a whole number from 1 to {MAX_JOBS}, e.g. --jobs 2")
    })?;
    if n == 0 {
        return Err("--jobs must be at least 1 (or leave it out for one per core)".into());
    }
    if n > MAX_JOBS {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        return Err(format!(
            "--jobs {n} is more than {MAX_JOBS}, the most worker threads racksim starts \
             (this machine has {cores} cores; leave --jobs out for one per core)"
        ));
    }
    Ok(n)
}

/// Most seeds one `--seeds A..B` may name.
const MAX_SEED_SPAN: u64 = 10_000_000;

/// `--seeds A..B`, inclusive.
pub fn parse_seed_range(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("invalid seed range {s:?}: expected A..B with A <= B, e.g. 1..1000");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let seed = |n: &str| -> Result<u64, String> {
        // A number too big for a seed is not a malformed range: say so.
        match n.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
                "invalid seed range {s:?}: {n} does not fit in a seed (a u64: at most {})",
                u64::MAX
            )),
            Err(_) => Err(bad()),
        }
    };
    let (a, b) = (seed(a)?, seed(b)?);
    if a > b {
        return Err(format!(
            "invalid seed range {s:?}: {a} is above {b}; expected A..B with A <= B, e.g. {b}..{a}"
        ));
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

/// `--shard I/N`.
pub fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("invalid shard {s:?}: expected I/N with I < N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// `KIND:HOST:PORT@TIME`, e.g. `stop:switch0:12224@2m` (`run --sabotage`).
pub fn parse_sabotage(s: &str) -> Result<Sabotage, String> {
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

/// A `--mutant` value: a name as the kill table prints it (an unknown one
/// is refused with the list of names), refused in a build without mutants.
pub fn parse_mutant(m: Option<&str>) -> Result<Option<Mutant>, String> {
    let Some(m) = m else { return Ok(None) };
    let m = m.parse().map_err(|e| format!("error: --mutant: {e}"))?;
    if !COMPILED {
        return Err(NO_MUTANTS.to_string());
    }
    Ok(Some(m))
}

/// What a build without mutants says to `--mutant`.
const NO_MUTANTS: &str =
    "error: --mutant: this racksim has no mutants; it was built with --no-default-features; build it with its default features";

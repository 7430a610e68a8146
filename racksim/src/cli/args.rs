//! Values of arguments that clap's types do not parse: seed ranges, shards,
//! sabotages and mutants. Each error says what was expected, with an
//! example. And the options every seed campaign shares ([`CampaignArgs`]).

use racksim_mutants::{Mutant, COMPILED};
use racksim_sim::testbed::Sabotage;

/// The options `racksim sweep` and `racksim fuzz` share: how many threads,
/// which shard of the seeds, and the output's form.
#[derive(clap::Args)]
pub struct CampaignArgs {
    /// Worker threads (default: the number of cores).
    #[arg(long)]
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

/// Most seeds one `--seeds A..B` may name.
const MAX_SEED_SPAN: u64 = 10_000_000;

/// `--seeds A..B`, inclusive.
pub fn parse_seed_range(s: &str) -> Result<(u64, u64), String> {
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
    "error: --mutant: this racksim has no mutants; build it with --features mutants";

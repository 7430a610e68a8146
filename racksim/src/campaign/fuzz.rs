//! A fuzz run's summary (`racksim fuzz`): every failing seed matched
//! against the known defects, counted, and listed with its replay
//! commands. The counts of shards of one range add up to the counts of the
//! whole range ([`super::merge()`]).

use std::collections::BTreeMap;

use racksim_mutants::Mutant;
use serde::{Deserialize, Serialize};

use super::Campaign;
use crate::fuzz::{known, Failure, Options, SeedResult};
use crate::invocation;

/// A fuzz run's results, for text and `--json`. The counts of shards of
/// one range add up to the counts of the whole range (`racksim merge`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FuzzSummary {
    /// Which run this is (what `racksim merge` checks its shards share).
    pub campaign: Campaign,
    pub rack: String,
    pub strategy: String,
    pub start: String,
    pub mutant: Option<String>,
    pub seeds: (u64, u64),
    pub shard: (u64, u64),
    /// The known-defects file failures were matched against (`none`).
    pub known_defects: String,
    pub runs: usize,
    pub passed: usize,
    /// `listed + unlisted + testbed_errors`.
    pub failed: usize,
    /// Failing runs a known defect explains.
    pub listed: usize,
    /// Failing runs no known defect explains (testbed errors aside): what
    /// makes `racksim fuzz` exit 1.
    pub unlisted: usize,
    /// Runs that ended in a testbed error (among `failed`, counted apart:
    /// failures of racksim itself, never findings about the code).
    pub testbed_errors: usize,
    /// Failing runs by kind of failure.
    pub failures_by_kind: BTreeMap<String, usize>,
    /// Listed runs per known defect that applies to these options (zero
    /// when this sample did not show it; a run showing two defects counts
    /// for both).
    pub by_defect: BTreeMap<String, usize>,
    /// Every failing seed, with how it failed and its replay commands.
    pub failures: Vec<FailingSeed>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingSeed {
    pub seed: u64,
    pub failure: String,
    /// `listed`, `unlisted` or `testbed-error`.
    pub status: String,
    /// The known defects that explain it (when listed).
    pub defects: Vec<String>,
    /// What no known defect explains (when unlisted): the gaps, or the
    /// violation.
    pub unexplained: Vec<String>,
    /// Re-runs this seed of the fuzzer.
    pub replay: String,
    /// Writes the plan as a scenario file and runs it.
    pub plan: String,
}

impl FailingSeed {
    /// The seed's label in text: its defect ids, `UNLISTED` or `TESTBED
    /// ERROR`.
    pub fn label(&self) -> String {
        match self.status.as_str() {
            "listed" => self.defects.join(" + "),
            "unlisted" => "UNLISTED".into(),
            _ => "TESTBED ERROR".into(),
        }
    }
}

/// Summarise `results` of a sweep over `range` (shard `shard`), each
/// failure matched against `known`.
pub fn summarise(
    opts: &Options,
    range: (u64, u64),
    shard: (u64, u64),
    mutant: Option<Mutant>,
    known: &known::KnownDefects,
    results: &[SeedResult],
) -> FuzzSummary {
    let program = invocation::program();
    let mutant_flag = mutant.map(|m| format!(" --mutant {m}")).unwrap_or_default();
    let known_flag = if known.origin == known::KNOWN_DEFECTS {
        String::new()
    } else {
        format!(" --known-defects {}", known.origin)
    };
    let mut by_defect: BTreeMap<String, usize> =
        known.applicable(opts).map(|d| (d.id.clone(), 0)).collect();
    let failures: Vec<FailingSeed> = results
        .iter()
        .filter_map(|r| {
            let failure = r.failure.as_ref()?;
            let listing = known.classify(opts, r)?;
            let seed = r.seed;
            let file = format!("fuzz-{seed}.toml");
            let (status, defects, unexplained) = match listing {
                known::Listing::Listed(ids) => ("listed", ids, Vec::new()),
                known::Listing::Unlisted(what) => ("unlisted", Vec::new(), what),
                known::Listing::TestbedError => ("testbed-error", Vec::new(), Vec::new()),
            };
            for id in &defects {
                *by_defect.entry(id.clone()).or_insert(0) += 1;
            }
            Some(FailingSeed {
                seed,
                failure: failure.to_string(),
                status: status.to_string(),
                defects,
                unexplained,
                replay: format!(
                    "{program} fuzz --seeds {seed}..{seed} {}{mutant_flag}{known_flag}",
                    opts.flags()
                ),
                plan: format!(
                    "{program} fuzz --plan {seed} {} > {file} && {program} run {file} --seed {seed} --strategy {}",
                    opts.flags(),
                    opts.file_strategy()
                ),
            })
        })
        .collect();
    let mut failures_by_kind = BTreeMap::new();
    for r in results {
        if let Some(f) = &r.failure {
            let kind = match f {
                Failure::NotConverged(_) => "not converged".to_string(),
                other => other.to_string(),
            };
            *failures_by_kind.entry(kind).or_insert(0) += 1;
        }
    }
    let count = |status| failures.iter().filter(|f| f.status == status).count();
    FuzzSummary {
        campaign: Campaign::fuzz(
            opts,
            range,
            mutant.map(|m| m.to_string()),
            known.name(),
            &format!("{}{mutant_flag}{known_flag}", opts.flags()),
        ),
        rack: opts.rack.clone(),
        strategy: opts.strategy.to_string(),
        start: opts.start_arg(),
        mutant: mutant.map(|m| m.to_string()),
        seeds: range,
        shard,
        known_defects: known.name().to_string(),
        runs: results.len(),
        passed: results.iter().filter(|r| r.failure.is_none()).count(),
        failed: failures.len(),
        listed: count("listed"),
        unlisted: count("unlisted"),
        testbed_errors: count("testbed-error"),
        failures_by_kind,
        by_defect,
        failures,
    }
}

/// The summary as text: counts, the counts per known defect, then the
/// failing seeds in three groups — unlisted, testbed errors, listed — each
/// labelled and with its replay commands.
pub fn text(s: &FuzzSummary) -> String {
    let mut out = format!(
        "fuzz: rack {}, strategy {}, start {}{}, seeds {}..{}{}\n",
        s.rack,
        s.strategy,
        s.start,
        s.mutant
            .as_ref()
            .map(|m| format!(", mutant {m}"))
            .unwrap_or_default(),
        s.seeds.0,
        s.seeds.1,
        if s.shard.1 > 1 {
            format!(", shard {}/{}", s.shard.0, s.shard.1)
        } else {
            String::new()
        }
    );
    out += &match s.known_defects.as_str() {
        "none" => "known defects: none (every failure is unlisted)\n".to_string(),
        path => format!("known defects: {path}\n"),
    };
    out += &format!(
        "runs: {}\npassed: {}\nfailed: {}\n",
        s.runs, s.passed, s.failed
    );
    out += &format!(
        "  listed (known defects): {}\n  unlisted: {}\n",
        s.listed, s.unlisted
    );
    out += &match s.testbed_errors {
        0 => "testbed errors: none\n".to_string(),
        n => format!("testbed errors: {n} (failures of racksim itself, not findings)\n"),
    };
    out += "by kind:\n";
    for (kind, n) in &s.failures_by_kind {
        out += &format!("  {kind}: {n}\n");
    }
    if !s.by_defect.is_empty() {
        out += "by known defect:\n";
        for (id, n) in &s.by_defect {
            out += &format!("  {id}: {n}\n");
        }
    }
    for (status, title) in [
        (
            "unlisted",
            "UNLISTED failures (no known defect explains them)",
        ),
        ("testbed-error", "testbed errors"),
        ("listed", "listed failures (known defects)"),
    ] {
        let group: Vec<&FailingSeed> = s.failures.iter().filter(|f| f.status == status).collect();
        if group.is_empty() {
            continue;
        }
        out += &format!("{title}: {}\n", group.len());
        for f in group {
            out += &format!("seed {}: [{}] {}\n", f.seed, f.label(), f.failure);
            for u in &f.unexplained {
                out += &format!("  unexplained: {u}\n");
            }
            out += &format!("  replay: {}\n  plan:   {}\n", f.replay, f.plan);
        }
    }
    out
}

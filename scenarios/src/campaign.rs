//! Campaigns: a sweep (`racksim sweep`) or a fuzz run (`racksim fuzz`) over
//! a range of seeds, and `racksim merge`, which combines the `--json` of a
//! campaign's shards (`--shard I/N`, run on as many machines) into the
//! summary the unsharded run prints.
//!
//! Every summary carries a [`Campaign`]: its kind and every option that
//! decides its results, by flag, and the command that runs it whole. The
//! shards of one campaign have the same campaign and shard count; [`merge`]
//! refuses anything else and says what differed. Counts add up across
//! shards; percentiles do not, so a sweep's JSON also lists each seed's
//! times ([`SeedTimes`]) and the merge computes them over the whole range.
//! Seeds are ordered by number, whatever the order of the files.

use std::{collections::BTreeMap, fmt::Write, path::Path, time::Duration};

use racksim_sim::{run::TESTBED_ERROR_EXIT, trace::fmt_duration};
use serde::{Deserialize, Serialize};

use crate::{
    file::{Scenario, Variant},
    fuzz,
    matrix::{self, RunSummary, SomeSeeds},
    runner,
};

/// What a campaign is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sweep,
    Fuzz,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Sweep => "a sweep",
            Kind::Fuzz => "a fuzz campaign",
        }
    }
}

/// Which run a summary belongs to: what every shard of one campaign shares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Campaign {
    pub kind: Kind,
    /// The command that runs the whole campaign on one machine.
    pub command: String,
    /// Every option that decides the results, by its flag (`SCENARIO` for
    /// a sweep's scenario argument); a flag without a value (`--nat-window`)
    /// has the empty string, one not given is absent. Options that do not
    /// change results (`--jobs`, `--json`, `--report`, `--shard`) are not
    /// here.
    pub options: BTreeMap<String, String>,
}

impl Campaign {
    /// A sweep of `arg` (as given on the command line) under `strategy`.
    pub fn sweep(arg: &str, strategy: Variant, (a, b): (u64, u64)) -> Campaign {
        let options = [
            ("SCENARIO", arg.to_string()),
            ("--strategy", strategy.to_string()),
            ("--seeds", format!("{a}..{b}")),
        ];
        Campaign {
            kind: Kind::Sweep,
            command: format!("racksim sweep {arg} --strategy {strategy} --seeds {a}..{b}"),
            options: options
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    /// A fuzz run of `opts` over `range`, with `mutant` and the
    /// known-defects file named `known_defects`; `flags` are the options
    /// as the command line gives them (after `--seeds A..B`).
    pub(crate) fn fuzz(
        opts: &fuzz::Options,
        (a, b): (u64, u64),
        mutant: Option<String>,
        known_defects: &str,
        flags: &str,
    ) -> Campaign {
        let mut options: BTreeMap<String, String> = [
            ("--seeds", format!("{a}..{b}")),
            ("--rack", opts.rack.clone()),
            ("--strategy", opts.strategy.to_string()),
            ("--start", opts.start.to_string()),
            ("--known-defects", known_defects.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if opts.draw_nat_window {
            options.insert("--nat-window".into(), String::new());
        }
        if let Some(m) = mutant {
            options.insert("--mutant".into(), m);
        }
        Campaign {
            kind: Kind::Fuzz,
            command: format!("racksim fuzz --seeds {a}..{b} {flags}"),
            options,
        }
    }
}

/// One seed's times in a sweep, in milliseconds (what the percentiles of
/// merged shards are computed from).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedTimes {
    pub seed: u64,
    /// Time to converge, from the start; `None` when it did not converge.
    pub ttc_ms: Option<u64>,
    /// The run's slowest repair, from its fault's end; `None` when the run
    /// had no fault or one was never repaired.
    pub repair_ms: Option<u64>,
}

/// Summary of a sweep, for text and `--json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Which run this is (what `racksim merge` checks its shards share).
    pub campaign: Campaign,
    pub scenario: String,
    pub strategy: String,
    pub seeds: (u64, u64),
    /// `(I, N)`: this sweep ran shard I of N of the seed range.
    pub shard: (u64, u64),
    pub runs: usize,
    pub converged: usize,
    pub violated: BTreeMap<String, usize>,
    pub as_expected: usize,
    /// Runs that ended in a testbed error (racksim failed, not the strategy).
    pub testbed_errors: usize,
    pub ttc_p50_ms: Option<u64>,
    pub ttc_p99_ms: Option<u64>,
    pub ttc_max_ms: Option<u64>,
    /// Each run's slowest repair, measured from its fault's end (the
    /// system's repair time; `ttc` counts from the start of the run).
    pub repair_p50_ms: Option<u64>,
    pub repair_p99_ms: Option<u64>,
    pub repair_max_ms: Option<u64>,
    /// The expectation's `some_seeds_violate`, judged over the seeds this
    /// sweep ran (with `--shard`, this shard's seeds only).
    pub some_seeds_violate: Option<SomeSeeds>,
    /// Seeds that broke an invariant or missed the expectation, with replay.
    pub notable: Vec<(u64, String, String)>,
    /// Every seed's times, in seed order.
    pub per_seed: Vec<SeedTimes>,
}

/// The value at percentile `p` of sorted `values` (nearest rank below).
fn percentile(values: &[u64], p: usize) -> Option<u64> {
    (!values.is_empty()).then(|| values[((values.len() - 1) * p) / 100])
}

/// The `some_seeds_violate` description of a sweep's seeds.
fn seeds_desc((a, b): (u64, u64), shard: Option<(u64, u64)>) -> String {
    match shard {
        None => format!("seeds {a}..={b}"),
        Some((i, n)) => format!("seeds {a}..={b} of shard {i}/{n}"),
    }
}

impl SweepSummary {
    /// Summarise `runs` of `scenario` (`arg` as given on the command line)
    /// under `variant`, over `range` (with `shard`, that shard of it).
    pub fn of(
        scenario: &Scenario,
        arg: &str,
        variant: Variant,
        range: (u64, u64),
        shard: Option<(u64, u64)>,
        runs: &[RunSummary],
    ) -> SweepSummary {
        let mut violated = BTreeMap::new();
        for r in runs {
            if let Some(inv) = r.violated {
                *violated.entry(inv.to_string()).or_insert(0) += 1;
            }
        }
        let notable = runs
            .iter()
            .filter_map(|r| {
                let why = match (&r.judgement, r.violated) {
                    (Err(why), _) => why.clone(),
                    (Ok(()), Some(inv)) => format!("broke {inv}"),
                    (Ok(()), None) => return None,
                };
                Some((r.seed, why, runner::replay_command(arg, variant, r.seed)))
            })
            .collect();
        let ms = |d: Duration| d.as_millis() as u64;
        let per_seed = runs
            .iter()
            .map(|r| SeedTimes {
                seed: r.seed,
                ttc_ms: r.converged_at.map(ms),
                repair_ms: r.slowest_repair.map(ms),
            })
            .collect();
        let mut s = SweepSummary {
            campaign: Campaign::sweep(arg, variant, range),
            scenario: scenario.name.clone(),
            strategy: variant.to_string(),
            seeds: range,
            shard: shard.unwrap_or((0, 1)),
            runs: runs.len(),
            converged: 0,
            violated,
            as_expected: runs.iter().filter(|r| r.judgement.is_ok()).count(),
            testbed_errors: runs.iter().filter(|r| r.testbed_error).count(),
            ttc_p50_ms: None,
            ttc_p99_ms: None,
            ttc_max_ms: None,
            repair_p50_ms: None,
            repair_p99_ms: None,
            repair_max_ms: None,
            some_seeds_violate: matrix::some_seeds(
                &scenario.expectations[&variant],
                runs,
                seeds_desc(range, shard),
            ),
            notable,
            per_seed,
        };
        s.set_figures();
        s
    }

    /// `converged` and the percentiles, from `per_seed`.
    fn set_figures(&mut self) {
        let sorted = |f: fn(&SeedTimes) -> Option<u64>| {
            let mut v: Vec<u64> = self.per_seed.iter().filter_map(f).collect();
            v.sort_unstable();
            v
        };
        let ttc = sorted(|t| t.ttc_ms);
        let repair = sorted(|t| t.repair_ms);
        self.converged = ttc.len();
        self.ttc_p50_ms = percentile(&ttc, 50);
        self.ttc_p99_ms = percentile(&ttc, 99);
        self.ttc_max_ms = ttc.last().copied();
        self.repair_p50_ms = percentile(&repair, 50);
        self.repair_p99_ms = percentile(&repair, 99);
        self.repair_max_ms = repair.last().copied();
    }

    /// Why the seeds together missed `some_seeds_violate`, if they did.
    pub fn some_seeds_failure(&self) -> Option<String> {
        self.some_seeds_violate
            .as_ref()
            .and_then(SomeSeeds::failure)
    }

    /// Whether the sweep passed: every run met the expectation and, unless
    /// `sharded` (run with `--shard`: one shard is not judged on it), the
    /// seeds together met `some_seeds_violate`.
    pub fn passed(&self, sharded: bool) -> bool {
        self.as_expected == self.runs && (sharded || self.some_seeds_failure().is_none())
    }

    /// The summary as `racksim sweep` prints it (`sharded`: run with
    /// `--shard`).
    pub fn text(&self, sharded: bool) -> String {
        let mut out = String::new();
        let ms = |v: Option<u64>| {
            v.map(|ms| fmt_duration(Duration::from_millis(ms)))
                .unwrap_or_else(|| "-".into())
        };
        let (a, b) = self.seeds;
        let shard = if sharded {
            format!(", shard {}/{}", self.shard.0, self.shard.1)
        } else {
            String::new()
        };
        let runs = self.runs;
        let _ = writeln!(
            out,
            "sweep: {} --strategy {}, seeds {a}..{b}{shard}",
            self.scenario, self.strategy
        );
        let _ = writeln!(out, "runs: {runs}");
        let _ = writeln!(out, "converged: {}", self.converged);
        if self.violated.is_empty() {
            out += "invariant violations: none\n";
        }
        for (inv, n) in &self.violated {
            let _ = writeln!(
                out,
                "invariant violations: {inv}: {n} of {runs} ({:.1}%)",
                100.0 * *n as f64 / runs as f64
            );
        }
        let _ = writeln!(out, "expectation held: {} of {runs}", self.as_expected);
        match self.testbed_errors {
            0 => out += "testbed errors: none\n",
            n => {
                let _ = writeln!(
                    out,
                    "testbed errors: {n} of {runs} (failures of racksim itself, not of the strategy; exit status {TESTBED_ERROR_EXIT})"
                );
            }
        }
        let _ = writeln!(
            out,
            "slowest repair: p50 {}, p99 {}, max {} (each fault from its end)",
            ms(self.repair_p50_ms),
            ms(self.repair_p99_ms),
            ms(self.repair_max_ms)
        );
        let _ = writeln!(
            out,
            "time to converge: p50 {}, p99 {}, max {} (from the start; at least the last plan step)",
            ms(self.ttc_p50_ms),
            ms(self.ttc_p99_ms),
            ms(self.ttc_max_ms)
        );
        for (seed, why, replay) in self.notable.iter().take(20) {
            let _ = writeln!(out, "seed {seed}: {why}\n  replay: {replay}");
        }
        if self.notable.len() > 20 {
            let _ = writeln!(
                out,
                "... and {} more (--json lists them all)",
                self.notable.len() - 20
            );
        }
        if let Some(why) = self.some_seeds_failure() {
            if sharded {
                let _ = writeln!(
                    out,
                    "note: {why} (a shard is not judged on this; merge the shards' JSON)"
                );
            } else {
                let _ = writeln!(
                    out,
                    "unexpected: {} / {}: {why}",
                    self.scenario, self.strategy
                );
            }
        }
        out
    }
}

/// A sweep's or a fuzz run's summary: one shard's, the whole range's, or
/// the merge of a campaign's shards (whose `shard` is `(0, 1)`: all of it).
#[derive(Clone, Debug, PartialEq)]
pub enum Summary {
    Sweep(SweepSummary),
    Fuzz(fuzz::Summary),
}

impl Summary {
    pub fn campaign(&self) -> &Campaign {
        match self {
            Summary::Sweep(s) => &s.campaign,
            Summary::Fuzz(s) => &s.campaign,
        }
    }

    /// `(I, N)`: shard I of N.
    pub fn shard(&self) -> (u64, u64) {
        match self {
            Summary::Sweep(s) => s.shard,
            Summary::Fuzz(s) => s.shard,
        }
    }

    pub fn seeds(&self) -> (u64, u64) {
        match self {
            Summary::Sweep(s) => s.seeds,
            Summary::Fuzz(s) => s.seeds,
        }
    }

    pub fn runs(&self) -> usize {
        match self {
            Summary::Sweep(s) => s.runs,
            Summary::Fuzz(s) => s.runs,
        }
    }

    pub fn testbed_errors(&self) -> usize {
        match self {
            Summary::Sweep(s) => s.testbed_errors,
            Summary::Fuzz(s) => s.testbed_errors,
        }
    }

    /// Whether the whole range passed, as the unsharded command judges it
    /// (testbed errors aside: see [`Summary::testbed_errors`]).
    pub fn passed(&self) -> bool {
        match self {
            Summary::Sweep(s) => s.passed(false),
            // Listed failures are recorded defects: only an unlisted one
            // fails a fuzz run.
            Summary::Fuzz(s) => s.unlisted == 0,
        }
    }

    /// The text the unsharded command prints.
    pub fn text(&self) -> String {
        match self {
            Summary::Sweep(s) => s.text(false),
            Summary::Fuzz(s) => fuzz::text(s),
        }
    }

    /// The JSON the command prints with `--json`.
    pub fn json(&self) -> String {
        match self {
            Summary::Sweep(s) => serde_json::to_string_pretty(s),
            Summary::Fuzz(s) => serde_json::to_string_pretty(s),
        }
        .expect("summaries serialize")
    }
}

/// Parse `text`, the `--json` of a sweep or a fuzz run; `name` says which
/// file it is in errors.
pub fn parse(name: &str, text: &str) -> Result<Summary, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("error: {name}: not JSON: {e}"))?;
    let not_ours = |why: &str| {
        format!("error: {name}: not the --json output of `racksim sweep` or `racksim fuzz`: {why}")
    };
    let Some(object) = value.as_object() else {
        return Err(not_ours("it is not a JSON object"));
    };
    let Some(campaign) = object.get("campaign") else {
        return Err(not_ours(
            "it has no `campaign` field (if an older racksim wrote it, run that shard again \
             with this one)",
        ));
    };
    let kind: Kind = serde_json::from_value(campaign.get("kind").cloned().unwrap_or_default())
        .map_err(|_| {
            not_ours(&format!(
                "its `campaign.kind` is {}, not \"sweep\" or \"fuzz\"",
                campaign.get("kind").unwrap_or(&serde_json::Value::Null)
            ))
        })?;
    // Parsed again from the text, so that an error has its line and column.
    match kind {
        Kind::Sweep => serde_json::from_str(text)
            .map(Summary::Sweep)
            .map_err(|e| format!("error: {name}: not the --json of a racksim sweep: {e}")),
        Kind::Fuzz => serde_json::from_str(text)
            .map(Summary::Fuzz)
            .map_err(|e| format!("error: {name}: not the --json of a racksim fuzz run: {e}")),
    }
}

/// Read and parse the summary in `path`.
pub fn read(path: &Path) -> Result<Summary, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("error: cannot read {}: {e}", path.display()))?;
    parse(&path.display().to_string(), &text)
}

/// Read the files and [`merge`] them.
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<Summary, String> {
    let files = paths
        .iter()
        .map(|p| Ok((p.as_ref().display().to_string(), read(p.as_ref())?)))
        .collect::<Result<Vec<_>, String>>()?;
    merge(files)
}

/// A value of an option as a mismatch lists it.
fn shown(v: Option<&String>) -> String {
    match v.map(String::as_str) {
        None => "not given".into(),
        Some("") => "given".into(),
        Some(v) => v.to_string(),
    }
}

/// Merge `files` (each a name and its summary), the shards 0/N..N-1/N of
/// one campaign, into the summary of the whole range, exactly as the
/// unsharded command would have summarised it (with `shard` `(0, 1)`).
/// Refuses shards of different campaigns (listing every option that
/// differs, and in which files), a mix of sweeps and fuzz runs, a missing
/// or duplicated shard, and a shard whose seeds are not its share of the
/// range. The result does not depend on the order of `files`.
pub fn merge(mut files: Vec<(String, Summary)>) -> Result<Summary, String> {
    if files.is_empty() {
        return Err("error: merge: no files to merge".into());
    }
    files.sort_by(|(na, a), (nb, b)| (a.shard(), na).cmp(&(b.shard(), nb)));
    let label = |(name, s): &(String, Summary)| {
        let (i, n) = s.shard();
        format!("{name} (shard {i}/{n} of {})", s.campaign().command)
    };

    // One kind.
    let kinds: Vec<Kind> = files.iter().map(|(_, s)| s.campaign().kind).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        let mut out = String::from(
            "error: the files mix sweeps and fuzz campaigns; merge the shards of one campaign at a time:",
        );
        for f in &files {
            let _ = write!(out, "\n  {} is {}", label(f), f.1.campaign().kind.noun());
        }
        return Err(out);
    }

    // One campaign: the same options and shard count.
    let identity: Vec<BTreeMap<String, String>> = files
        .iter()
        .map(|(_, s)| {
            let mut id = s.campaign().options.clone();
            id.insert("N of --shard I/N".into(), s.shard().1.to_string());
            if let Summary::Sweep(s) = s {
                id.insert("scenario name".into(), s.scenario.clone());
            }
            id
        })
        .collect();
    let keys: std::collections::BTreeSet<String> =
        identity.iter().flat_map(|id| id.keys().cloned()).collect();
    let mut differ = String::new();
    for key in &keys {
        let mut values: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for ((name, _), id) in files.iter().zip(&identity) {
            values
                .entry(shown(id.get(key)))
                .or_default()
                .push(name.as_str());
        }
        if values.len() > 1 {
            let each: Vec<String> = values
                .iter()
                .map(|(v, names)| format!("{v} in {}", names.join(", ")))
                .collect();
            let _ = write!(differ, "\n  {key}: {}", each.join("; "));
        }
    }
    if !differ.is_empty() {
        let mut out = String::from("error: the files are shards of different runs:");
        for f in &files {
            let _ = write!(out, "\n  {}", label(f));
        }
        let _ = write!(out, "\nthey differ in:{differ}");
        return Err(out);
    }

    // Every shard once, each with its share of the seeds.
    let n = files[0].1.shard().1;
    let range = files[0].1.seeds();
    let command = files[0].1.campaign().command.clone();
    let mut problems = Vec::new();
    let mut by_index: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (name, s) in &files {
        let (i, n) = s.shard();
        if n == 0 || i >= n {
            problems.push(format!(
                "{name}: shard {i}/{n} is not a shard (I must be below N)"
            ));
            continue;
        }
        if s.seeds() != range {
            problems.push(format!(
                "{name}: its seeds are {}..{}, its options say {}..{}",
                s.seeds().0,
                s.seeds().1,
                range.0,
                range.1
            ));
            continue;
        }
        by_index.entry(i).or_default().push(name);
        let expected = fuzz::shard_seeds(range, (i, n));
        let this = format!("{name}: shard {i}/{n} of seeds {}..{}", range.0, range.1);
        if s.runs() != expected.len() {
            problems.push(format!(
                "{this} runs {} seeds, but the file has {} runs (is it cut short or edited?)",
                expected.len(),
                s.runs()
            ));
        } else if let Summary::Sweep(s) = s {
            let listed: Vec<u64> = s.per_seed.iter().map(|t| t.seed).collect();
            if listed.len() != expected.len() {
                problems.push(format!(
                    "{this} runs {} seeds, but its per_seed lists {} (is it cut short or edited?)",
                    expected.len(),
                    listed.len()
                ));
            } else if let Some((got, want)) =
                listed.iter().zip(&expected).find(|(got, want)| got != want)
            {
                problems.push(format!(
                    "{this} lists other seeds: seed {got} in its per_seed where seed {want} \
                     belongs (is it edited?)"
                ));
            }
        }
    }
    for (i, names) in &by_index {
        if names.len() > 1 {
            problems.push(format!(
                "shard {i}/{n} is given {} times: {}",
                names.len(),
                names.join(", ")
            ));
        }
    }
    let missing: Vec<String> = (0..n)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = by_index
            .iter()
            .map(|(i, names)| format!("{i}/{n} {}", names.join(", ")))
            .collect();
        let (what, verb) = match missing.len() {
            1 => ("shard", "is"),
            _ => ("shards", "are"),
        };
        problems.push(format!(
            "{what} {} {verb} missing (given: {})",
            missing.join(", "),
            given.join("; ")
        ));
    }
    if !problems.is_empty() {
        return Err(format!(
            "error: cannot merge the shards of {command}:\n  {}",
            problems.join("\n  ")
        ));
    }

    let summaries: Vec<Summary> = files.into_iter().map(|(_, s)| s).collect();
    match &summaries[0] {
        Summary::Sweep(_) => merge_sweeps(
            summaries
                .into_iter()
                .filter_map(|s| match s {
                    Summary::Sweep(s) => Some(s),
                    Summary::Fuzz(_) => None,
                })
                .collect(),
        )
        .map(Summary::Sweep),
        Summary::Fuzz(_) => Ok(Summary::Fuzz(merge_fuzz(
            summaries
                .into_iter()
                .filter_map(|s| match s {
                    Summary::Fuzz(s) => Some(s),
                    Summary::Sweep(_) => None,
                })
                .collect(),
        ))),
    }
}

/// Add `from`'s counts into `into`.
fn add_counts(into: &mut BTreeMap<String, usize>, from: &BTreeMap<String, usize>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_insert(0) += n;
    }
}

/// Shards of one sweep (checked to be), in shard order.
fn merge_sweeps(shards: Vec<SweepSummary>) -> Result<SweepSummary, String> {
    let mut shards = shards.into_iter();
    let mut m = shards.next().expect("at least one shard");
    let command = m.campaign.command.clone();
    let desc = seeds_desc(m.seeds, None);
    if let Some(s) = m.some_seeds_violate.as_mut() {
        s.seeds = desc.clone();
    }
    for s in shards {
        m.runs += s.runs;
        m.as_expected += s.as_expected;
        m.testbed_errors += s.testbed_errors;
        add_counts(&mut m.violated, &s.violated);
        m.notable.extend(s.notable);
        m.per_seed.extend(s.per_seed);
        match (m.some_seeds_violate.as_mut(), s.some_seeds_violate) {
            (None, None) => {}
            (Some(into), Some(from))
                if into.fail == from.fail
                    && into.violate.len() == from.violate.len()
                    && into
                        .violate
                        .iter()
                        .zip(&from.violate)
                        .all(|(a, b)| a.invariant == b.invariant) =>
            {
                into.failing += from.failing;
                for (a, b) in into.violate.iter_mut().zip(&from.violate) {
                    a.violating += b.violating;
                }
            }
            _ => {
                return Err(format!(
                    "error: cannot merge the shards of {command}: they disagree on the \
                     expectation's some_seeds_violate / some_seeds_fail (was the scenario \
                     file changed between shards?)"
                ))
            }
        }
    }
    m.shard = (0, 1);
    m.notable.sort_by_key(|(seed, _, _)| *seed);
    m.per_seed.sort_by_key(|t| t.seed);
    if let Some(s) = m.some_seeds_violate.as_mut() {
        s.met = s.failure().is_none();
    }
    m.set_figures();
    Ok(m)
}

/// Shards of one fuzz run (checked to be), in shard order.
fn merge_fuzz(shards: Vec<fuzz::Summary>) -> fuzz::Summary {
    let mut shards = shards.into_iter();
    let mut m = shards.next().expect("at least one shard");
    for s in shards {
        m.runs += s.runs;
        m.passed += s.passed;
        m.failed += s.failed;
        m.listed += s.listed;
        m.unlisted += s.unlisted;
        m.testbed_errors += s.testbed_errors;
        add_counts(&mut m.failures_by_kind, &s.failures_by_kind);
        add_counts(&mut m.by_defect, &s.by_defect);
        m.failures.extend(s.failures);
    }
    m.shard = (0, 1);
    m.failures.sort_by_key(|f| f.seed);
    m
}

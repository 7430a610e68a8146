//! Campaigns: a sweep (`racksim sweep`) or a fuzz run (`racksim fuzz`) over
//! a range of seeds, their summaries, and `racksim merge`, which combines
//! the `--json` of a campaign's shards (`--shard I/N`, run on as many
//! machines) into the summary the unsharded run prints.
//!
//! Why a module of its own: a campaign is what the commands that run many
//! seeds share — a seed range split into shards ([`shard_seeds`]), a
//! summary that is text for people and JSON for machines, and the identity
//! ([`Campaign`]) that lets shards run apart be put back together. What one
//! seed does is elsewhere ([`crate::runner`] for a scenario's run,
//! [`crate::fuzz`] for a drawn plan); this module runs the range and
//! counts. [`sweep`] summarises a sweep, [`fuzz`] a fuzz run, [`mod@merge`]
//! joins shards of either.
//!
//! Every summary carries a [`Campaign`]: its kind and every option that
//! decides its results, by flag, and the command that runs it whole. The
//! shards of one campaign have the same campaign and shard count; [`merge()`]
//! refuses anything else and says what differed. Counts add up across
//! shards; percentiles do not, so a sweep's JSON also lists each seed's
//! times ([`SeedTimes`]) and the merge computes them over the whole range.
//! Seeds are ordered by number, whatever the order of the files.

pub mod fuzz;
pub mod merge;
pub mod sweep;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};

use crate::{file::Strategy, fuzz::Options};

pub use fuzz::{FailingSeed, FuzzSummary};
pub use merge::{merge, merge_files};
pub use sweep::{SeedTimes, SweepSummary};

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
    /// a sweep's scenario argument); a flag without a value has the empty
    /// string, one not given is absent. Options that do not
    /// change results (`--jobs`, `--json`, `--report`, `--shard`) are not
    /// here.
    pub options: BTreeMap<String, String>,
}

impl Campaign {
    /// A sweep of `arg` (as given on the command line) under `strategy`.
    pub fn sweep(arg: &str, strategy: Strategy, (a, b): (u64, u64)) -> Campaign {
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
        opts: &Options,
        (a, b): (u64, u64),
        mutant: Option<String>,
        known_defects: &str,
        flags: &str,
    ) -> Campaign {
        let mut options: BTreeMap<String, String> = [
            ("--seeds", format!("{a}..{b}")),
            ("--rack", opts.rack.clone()),
            ("--strategy", opts.strategy.to_string()),
            ("--start", opts.start_arg()),
            ("--known-defects", known_defects.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
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

/// The seeds `a..=b` of shard `i` of `n`: `a+i`, `a+i+n`, ...
pub fn shard_seeds((a, b): (u64, u64), (i, n): (u64, u64)) -> Vec<u64> {
    (a.saturating_add(i)..=b).step_by(n as usize).collect()
}

/// A sweep's or a fuzz run's summary: one shard's, the whole range's, or
/// the merge of a campaign's shards (whose `shard` is `(0, 1)`: all of it).
#[derive(Clone, Debug, PartialEq)]
pub enum Summary {
    Sweep(SweepSummary),
    Fuzz(FuzzSummary),
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
    // serde's messages quote the file's strings: their control characters
    // are escaped, never echoed.
    parse_json(name, text).map_err(|e| crate::input::escape_controls(&e).into_owned())
}

fn parse_json(name: &str, text: &str) -> Result<Summary, String> {
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
    let text = crate::input::read_text(path, "shard")?;
    parse(&path.display().to_string(), &text)
}

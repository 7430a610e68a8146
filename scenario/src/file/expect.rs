//! `[expect.STRATEGY]` tables: what each strategy must do in a scenario.
//!
//! Every field a file writes is judged, and every judgement can fail: a
//! field that would not be judged for its outcome or strategy, or that no
//! run could fail, is refused here with a located error and a hint. What
//! each outcome accepts and which fields it takes (docs/scenario-files.md,
//! "Expectations", says the same):
//!
//! | field | converges | fails | violates | any |
//! |---|---|---|---|---|
//! | `within` | required | refused | refused | refused |
//! | `deadline` | optional, >= `within` | required | required | required |
//! | `verdict_mentions`, `verdict_mentions_any` | refused | the verdict | the violation's lines | a run that does not converge |
//! | `settle`, `converged_by`, `repair_within` | judged, below `within` (`settle`, `converged_by`) | refused | refused | refused |
//! | `zone_start_at_most`, `zone_start_at_least` | judged under `legacy` and `scrimlet-local-with-zone-start` only (their zone start blocks) | same | same | same |
//! | `invariant` | refused | refused | required | refused |
//! | `some_seeds_violate`, `some_seeds_fail` | refused | refused | refused | at least one of them (or a zone-start bound) |
//! | `operations = "succeed"` or `"some-fail"`, `operations_within`, `failed_operations_mention` (with `"some-fail"`) | judged (instances scenarios only) | same | same | same |

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::{check::INVARIANTS, ServiceNat};
use toml::Spanned;

use super::{
    error::{Locator, ScenarioError},
    parse_strategy,
    raw::{InvariantNames, RawScenario},
    Kind, Strategy,
};

/// What a strategy must do in a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub outcome: Outcome,
    /// The run's deadline (for `converges`: `within` plus the stability window).
    pub deadline: Duration,
    /// Texts the verdict must contain, every one of them (to prove *why* a
    /// run failed): judged for `fails`, for `violates` (against the
    /// violation's lines) and for a run of `any` that does not converge.
    pub verdict_mentions: Vec<String>,
    /// Alternatives: when not empty, at least one of these texts must be in
    /// the verdict too (judged where `verdict_mentions` is).
    pub verdict_mentions_any: Vec<String>,
    /// Converged no later than this after the last plan step.
    pub settle: Option<Duration>,
    /// Every zone start took at most this long (`legacy` and
    /// `scrimlet-local-with-zone-start` only: the other strategies' zone
    /// starts do no NAT work).
    pub zone_start_at_most: Option<Duration>,
    /// Some zone start took at least this long (the blocking bug; only
    /// under `legacy` and `scrimlet-local-with-zone-start`, whose zone start
    /// blocks).
    pub zone_start_at_least: Option<Duration>,
    /// A sweep over seeds must find each of these invariants violated in
    /// some run (a race that only some timings expose), and a run may break
    /// no other. `any` only; a file writes one name or a list.
    pub some_seeds_violate: Vec<&'static str>,
    /// A sweep over seeds must find some run that does not converge, for a
    /// reason `verdict_mentions`/`verdict_mentions_any` allow. `any` only.
    pub some_seeds_fail: bool,
    /// The rack first converged (and stayed so for the stability window) no
    /// later than this from the start of the run — even while a fault
    /// still lasts (scrimlet-local on madrid needs no DNS).
    pub converged_by: Option<Duration>,
    /// Every fault was repaired within this of its end (or of the change).
    pub repair_within: Option<Duration>,
    /// Every instance API request of the plan answered success
    /// (`operations = "succeed"`): convergence alone can hide a stop or
    /// delete that told its caller it failed.
    pub operations_succeed: bool,
    /// Every instance API request answered (success or failure) within
    /// this of being made.
    pub operations_within: Option<Duration>,
    /// Some instance API request answered failure (`operations =
    /// "some-fail"`): the bug a scenario reproduces is an operation that
    /// told its caller it failed.
    pub operations_some_fail: bool,
    /// Each text is in some failed operation's answer (with `operations =
    /// "some-fail"`), to prove *why* it failed.
    pub failed_operations_mention: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Converges no later than this.
    ConvergesWithin(Duration),
    /// Does not converge by the deadline: the scenario reproduces a bug.
    Fails,
    /// Each run converges, or breaks an invariant `some_seeds_violate`
    /// names (no other), or does not converge for a reason the verdict
    /// texts allow (a run that does not converge when the file lists no
    /// reason misses the expectation); no host may fail. What the seeds
    /// together must show is `some_seeds_violate` / `some_seeds_fail`.
    Any,
    /// The run must end on this safety invariant breaking.
    Violates(&'static str),
}

impl Expectation {
    /// One line, for listings and tables: `converges <= 10m`, `fails`, ...
    pub fn summary(&self) -> String {
        match self.outcome {
            Outcome::ConvergesWithin(d) => {
                let fmt = racksim_sim::trace::fmt_duration;
                let mut s = format!("converges <= {}", fmt(d));
                if let Some(r) = self.repair_within {
                    s += &format!(", repairs <= {}", fmt(r));
                }
                if self.operations_succeed {
                    s += ", operations succeed";
                }
                if self.operations_some_fail {
                    s += ", some operation fails";
                }
                s
            }
            Outcome::Fails => "fails".to_string(),
            Outcome::Violates(inv) => format!("violates {inv}"),
            Outcome::Any => {
                let mut parts = Vec::new();
                if !self.some_seeds_violate.is_empty() {
                    parts.push(format!(
                        "some seeds violate {}",
                        self.some_seeds_violate.join(" and ")
                    ));
                }
                if self.some_seeds_fail {
                    parts.push(format!("some seeds fail ({})", self.reasons()));
                }
                if parts.is_empty() {
                    parts.push("converges or breaks nothing".to_string());
                }
                if !self.some_seeds_fail && self.has_reasons() {
                    parts.push(format!("may fail ({})", self.reasons()));
                }
                parts.join(", ")
            }
        }
    }

    /// The verdict texts, as a file would write them: `"a"` and `"b"`,
    /// `one of "c", "d"`.
    pub fn reasons(&self) -> String {
        let quoted = |v: &[String]| {
            v.iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.verdict_mentions.is_empty() {
            parts.push(quoted(&self.verdict_mentions));
        }
        if !self.verdict_mentions_any.is_empty() {
            parts.push(format!("one of {}", quoted(&self.verdict_mentions_any)));
        }
        parts.join(" and ")
    }

    /// Whether the file lists what the verdict of a failed run must say.
    pub fn has_reasons(&self) -> bool {
        !self.verdict_mentions.is_empty() || !self.verdict_mentions_any.is_empty()
    }

    /// `Err(why)` unless `text` holds every `verdict_mentions` text and,
    /// when there are alternatives, one of `verdict_mentions_any`.
    pub fn check_mentions(&self, text: &str) -> Result<(), String> {
        let missing: Vec<&String> = self
            .verdict_mentions
            .iter()
            .filter(|m| !text.contains(m.as_str()))
            .collect();
        if !missing.is_empty() {
            return Err(format!("the verdict does not mention {missing:?}"));
        }
        if !self.verdict_mentions_any.is_empty()
            && !self
                .verdict_mentions_any
                .iter()
                .any(|m| text.contains(m.as_str()))
        {
            return Err(format!(
                "the verdict mentions none of {:?}",
                self.verdict_mentions_any
            ));
        }
        Ok(())
    }
}

/// The outcomes a file may name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OutcomeName {
    Converges,
    Fails,
    Violates,
    Any,
}

impl OutcomeName {
    fn name(self) -> &'static str {
        match self {
            OutcomeName::Converges => "converges",
            OutcomeName::Fails => "fails",
            OutcomeName::Violates => "violates",
            OutcomeName::Any => "any",
        }
    }
}

fn invariants_hint() -> Option<String> {
    Some(format!("invariants: {}", INVARIANTS.join(", ")))
}

/// A known invariant's name, or a located error listing them.
fn known_invariant(
    table: &str,
    name: &Spanned<String>,
    loc: &Locator,
) -> Result<&'static str, ScenarioError> {
    INVARIANTS
        .iter()
        .copied()
        .find(|i| *i == name.get_ref())
        .ok_or_else(|| {
            loc.error(
                Some(name.span()),
                format!("{table}: unknown invariant {:?}", name.get_ref()),
                invariants_hint(),
            )
        })
}

/// The names of a `some_seeds_violate` value, each known, none twice, at
/// least one. An error about one name of a list points at that name.
fn invariant_list(
    table: &str,
    names: &Spanned<InvariantNames>,
    loc: &Locator,
) -> Result<Vec<&'static str>, ScenarioError> {
    let list: Vec<String> = match names.get_ref() {
        InvariantNames::One(n) => vec![n.clone()],
        InvariantNames::Many(v) => v.clone(),
    };
    let span = names.span();
    // Where `"name"` is written inside the value (else the value itself).
    let at = |name: &str| {
        let quoted = toml::Value::String(name.to_string()).to_string();
        let start = loc
            .text
            .get(span.clone())
            .and_then(|t| t.find(&quoted))
            .map_or(span.start, |i| span.start + i);
        start..start + quoted.len()
    };
    if list.is_empty() {
        return Err(loc.error(
            Some(span),
            format!("{table}: `some_seeds_violate` lists no invariant"),
            invariants_hint(),
        ));
    }
    let mut known: Vec<&'static str> = Vec::new();
    for name in &list {
        let inv = known_invariant(table, &Spanned::new(at(name), name.clone()), loc)?;
        if known.contains(&inv) {
            return Err(loc.error(
                Some(at(name)),
                format!("{table}: `some_seeds_violate` names {inv} twice"),
                Some("name each invariant once".into()),
            ));
        }
        known.push(inv);
    }
    Ok(known)
}

/// The texts of a `verdict_mentions`-like field: none may be empty (an empty
/// text is in every verdict).
fn texts(
    table: &str,
    field: &str,
    value: &Option<Spanned<Vec<Spanned<String>>>>,
    loc: &Locator,
) -> Result<Vec<String>, ScenarioError> {
    let Some(list) = value else {
        return Ok(Vec::new());
    };
    for t in list.get_ref() {
        if t.get_ref().trim().is_empty() {
            return Err(loc.error(
                Some(t.span()),
                format!("{table}: `{field}` lists an empty text, which every verdict contains"),
                Some(
                    "write the words the verdict must contain, e.g. \"lacks the NAT entry\"".into(),
                ),
            ));
        }
    }
    Ok(list.get_ref().iter().map(|t| t.get_ref().clone()).collect())
}

/// The expectations of a scenario, by strategy. `service_nat` is the
/// service-NAT strategy of an instances scenario (a service-nat scenario's
/// strategy is its table's).
pub(super) fn expectations(
    raw: &RawScenario,
    kind: Kind,
    service_nat: ServiceNat,
    stability: Duration,
    loc: &Locator,
) -> Result<BTreeMap<Strategy, Expectation>, ScenarioError> {
    let mut expectations = BTreeMap::new();
    for (key, exp) in &raw.expect {
        let strategy: Strategy = parse_strategy(kind, service_nat, key.get_ref())
            .map_err(|e| loc.error(Some(key.span()), e, None))?;
        let table = Table {
            strategy,
            outcome: outcome_name(exp, loc)?,
            exp,
            kind,
            service_nat,
            loc,
        };
        expectations.insert(strategy, table.expectation(stability)?);
    }
    if expectations.is_empty() {
        return Err(loc.error(
            None,
            "the scenario has no expectations".into(),
            Some("add an [expect.STRATEGY] table, e.g. [expect.sled-task]".into()),
        ));
    }

    Ok(expectations)
}

mod table;
use table::{outcome_name, Table};

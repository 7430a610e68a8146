//! `[expect.STRATEGY]` tables: what each strategy must do in a scenario.

use std::{collections::BTreeMap, time::Duration};

use serde::Deserialize;
use toml::Spanned;

use super::{
    error::{Locator, ScenarioError},
    parse_variant,
    raw::{DurationValue, RawScenario},
    Kind, Variant,
};

/// What a strategy must do in a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub outcome: Outcome,
    /// The run's deadline (for `converges`: `within` plus the stability window).
    pub deadline: Duration,
    /// Text the verdict must contain (for `fails`, to prove *why* it failed).
    pub verdict_mentions: Vec<String>,
    /// Converged no later than this after the last plan step.
    pub settle: Option<Duration>,
    /// Every zone start took at most this long.
    pub zone_start_at_most: Option<Duration>,
    /// Some zone start took at least this long (the blocking bug).
    pub zone_start_at_least: Option<Duration>,
    /// A sweep over seeds must find this invariant violated in some runs
    /// (a race that only some timings expose).
    pub some_seeds_violate: Option<String>,
    /// The rack first converged (and stayed so for the stability window) no
    /// later than this from the start of the run — even while a fault
    /// still lasts (scrimlet-local on madrid needs no DNS).
    pub converged_by: Option<Duration>,
    /// Every fault was repaired within this of its end (or of the change).
    pub repair_within: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Converges no later than this.
    ConvergesWithin(Duration),
    /// Does not converge by the deadline: the scenario reproduces a bug.
    Fails,
    /// A run may converge or not, but no host may fail, no invariant other
    /// than `some_seeds_violate` may break, and a run that does not
    /// converge must be missing what `verdict_mentions` says; see
    /// `some_seeds_violate` for what a sweep must find.
    Any,
    /// The run must end on this safety invariant breaking.
    Violates(&'static str),
}

impl Expectation {
    /// One line, for listings and tables: `converges <= 10m`, `fails`, ...
    pub fn summary(&self) -> String {
        match (self.outcome, &self.some_seeds_violate) {
            (Outcome::ConvergesWithin(d), _) => {
                format!("converges <= {}", racksim_sim::trace::fmt_duration(d))
            }
            (Outcome::Fails, _) => "fails".to_string(),
            (Outcome::Violates(inv), _) => format!("violates {inv}"),
            (Outcome::Any, Some(inv)) => format!("some seeds violate {inv}"),
            (Outcome::Any, None) => format!("converges or lacks {:?}", self.verdict_mentions),
        }
    }
}

/// The safety invariants the simulation checks (sim::check).
pub const INVARIANTS: [&str; 3] = ["no-state-after-delete", "one-vmm", "nat-follows-vmm"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub outcome: Spanned<String>,
    #[serde(default)]
    pub within: Option<DurationValue>,
    #[serde(default)]
    pub deadline: Option<DurationValue>,
    #[serde(default)]
    pub verdict_mentions: Vec<String>,
    #[serde(default)]
    pub settle: Option<Spanned<DurationValue>>,
    #[serde(default)]
    pub zone_start_at_most: Option<DurationValue>,
    #[serde(default)]
    pub zone_start_at_least: Option<DurationValue>,
    #[serde(default)]
    pub some_seeds_violate: Option<String>,
    #[serde(default)]
    pub invariant: Option<Spanned<String>>,
    #[serde(default)]
    pub converged_by: Option<Spanned<DurationValue>>,
    #[serde(default)]
    pub repair_within: Option<Spanned<DurationValue>>,
}

/// The expectations of a scenario, by strategy.
pub(super) fn expectations(
    raw: &RawScenario,
    kind: Kind,
    stability: Duration,
    loc: &Locator,
) -> Result<BTreeMap<Variant, Expectation>, ScenarioError> {
    let err = |span, message, hint| loc.error(span, message, hint);
    let mut expectations = BTreeMap::new();
    for (key, exp) in &raw.expect {
        let strategy: Variant =
            parse_variant(kind, key.get_ref()).map_err(|e| err(Some(key.span()), e, None))?;
        let timing_bound = exp
            .converged_by
            .as_ref()
            .map(|d| ("converged_by", d.span()))
            .or(exp
                .repair_within
                .as_ref()
                .map(|d| ("repair_within", d.span())));
        if let Some((field, span)) = timing_bound {
            if exp.outcome.get_ref() != "converges" {
                return Err(err(
                    Some(span),
                    format!("expect.{strategy}: `{field}` only applies to outcome \"converges\""),
                    None,
                ));
            }
        }
        let expectation = match exp.outcome.get_ref().as_str() {
            "converges" => {
                let Some(within) = exp.within else {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!("expect.{strategy}: outcome \"converges\" needs `within`"),
                        Some("add e.g. within = \"10m\"".into()),
                    ));
                };
                Expectation {
                    outcome: Outcome::ConvergesWithin(within.0),
                    deadline: exp.deadline.map(|d| d.0).unwrap_or(within.0 + stability),
                    verdict_mentions: exp.verdict_mentions.clone(),
                    settle: exp.settle.as_ref().map(|d| d.get_ref().0),
                    zone_start_at_most: exp.zone_start_at_most.map(|d| d.0),
                    zone_start_at_least: exp.zone_start_at_least.map(|d| d.0),
                    some_seeds_violate: exp.some_seeds_violate.clone(),
                    converged_by: exp.converged_by.as_ref().map(|d| d.get_ref().0),
                    repair_within: exp.repair_within.as_ref().map(|d| d.get_ref().0),
                }
            }
            "violates" => {
                let Some(inv) = &exp.invariant else {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!("expect.{strategy}: outcome \"violates\" needs an `invariant`"),
                        Some(format!("invariants: {}", INVARIANTS.join(", "))),
                    ));
                };
                let Some(name) = INVARIANTS.iter().find(|i| **i == inv.get_ref()) else {
                    return Err(err(
                        Some(inv.span()),
                        format!("unknown invariant {:?}", inv.get_ref()),
                        Some(format!("invariants: {}", INVARIANTS.join(", "))),
                    ));
                };
                let Some(deadline) = exp.deadline else {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!("expect.{strategy}: outcome \"violates\" needs a `deadline`"),
                        None,
                    ));
                };
                Expectation {
                    outcome: Outcome::Violates(name),
                    deadline: deadline.0,
                    verdict_mentions: exp.verdict_mentions.clone(),
                    settle: None,
                    zone_start_at_most: None,
                    zone_start_at_least: None,
                    some_seeds_violate: None,
                    converged_by: None,
                    repair_within: None,
                }
            }
            "any" => {
                // No vacuous cells: a single run of "any" asserts nothing but
                // that no host failed, so it must come with what a sweep of
                // seeds has to find.
                if exp.some_seeds_violate.is_none() && exp.verdict_mentions.is_empty() {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!(
                            "expect.{strategy}: outcome \"any\" needs `some_seeds_violate` \
                             or `verdict_mentions`"
                        ),
                        Some(
                            "every scenario × strategy must assert something that could fail: \
                             name the invariant a sweep must find broken, or what a run that \
                             does not converge must be missing"
                                .into(),
                        ),
                    ));
                }
                let Some(deadline) = exp.deadline else {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!("expect.{strategy}: outcome \"any\" needs a `deadline`"),
                        Some("add e.g. deadline = \"10m\": how long each run lasts".into()),
                    ));
                };
                Expectation {
                    outcome: Outcome::Any,
                    deadline: deadline.0,
                    verdict_mentions: exp.verdict_mentions.clone(),
                    settle: None,
                    zone_start_at_most: None,
                    zone_start_at_least: None,
                    some_seeds_violate: exp.some_seeds_violate.clone(),
                    converged_by: None,
                    repair_within: None,
                }
            }
            "fails" => {
                let Some(deadline) = exp.deadline else {
                    return Err(err(
                        Some(exp.outcome.span()),
                        format!("expect.{strategy}: outcome \"fails\" needs a `deadline`"),
                        Some(
                            "add e.g. deadline = \"2h\": how long it must stay unconverged".into(),
                        ),
                    ));
                };
                if let Some(settle) = &exp.settle {
                    return Err(err(
                        Some(settle.span()),
                        format!(
                            "expect.{strategy}: `settle` only applies to outcome \"converges\""
                        ),
                        None,
                    ));
                }
                Expectation {
                    outcome: Outcome::Fails,
                    deadline: deadline.0,
                    verdict_mentions: exp.verdict_mentions.clone(),
                    settle: None,
                    zone_start_at_most: exp.zone_start_at_most.map(|d| d.0),
                    zone_start_at_least: exp.zone_start_at_least.map(|d| d.0),
                    some_seeds_violate: exp.some_seeds_violate.clone(),
                    converged_by: None,
                    repair_within: None,
                }
            }
            other => {
                return Err(err(
                    Some(exp.outcome.span()),
                    format!("unknown outcome {other:?}"),
                    Some("expected \"converges\", \"fails\", \"violates\" or \"any\"".into()),
                ))
            }
        };
        expectations.insert(strategy, expectation);
    }
    if expectations.is_empty() {
        return Err(err(
            None,
            "the scenario has no expectations".into(),
            Some("add an [expect.STRATEGY] table, e.g. [expect.sled-task]".into()),
        ));
    }

    Ok(expectations)
}

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

use racksim_sim::{check::INVARIANTS, Strategy};
use toml::Spanned;

use super::{
    error::{Locator, ScenarioError},
    parse_variant,
    raw::{InvariantNames, RawExpect, RawScenario},
    Kind, Variant,
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
    service_nat: Strategy,
    stability: Duration,
    loc: &Locator,
) -> Result<BTreeMap<Variant, Expectation>, ScenarioError> {
    let mut expectations = BTreeMap::new();
    for (key, exp) in &raw.expect {
        let strategy: Variant = parse_variant(kind, service_nat, key.get_ref())
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

/// The outcome a table names.
fn outcome_name(exp: &RawExpect, loc: &Locator) -> Result<OutcomeName, ScenarioError> {
    let err = |span, message, hint| loc.error(span, message, hint);
    Ok(match exp.outcome.get_ref().as_str() {
        "converges" => OutcomeName::Converges,
        "fails" => OutcomeName::Fails,
        "violates" => OutcomeName::Violates,
        "any" => OutcomeName::Any,
        other => {
            return Err(err(
                Some(exp.outcome.span()),
                format!("unknown outcome {other:?}"),
                Some("expected \"converges\", \"fails\", \"violates\" or \"any\"".into()),
            ))
        }
    })
}

/// One `[expect."…"]` table, read check by check. The checks run in the
/// order they are written here, so a table with two mistakes is told of
/// the same one every time.
struct Table<'a> {
    strategy: Variant,
    outcome: OutcomeName,
    exp: &'a RawExpect,
    kind: Kind,
    service_nat: Strategy,
    loc: &'a Locator<'a>,
}

impl Table<'_> {
    fn err(
        &self,
        span: Option<std::ops::Range<usize>>,
        message: String,
        hint: Option<String>,
    ) -> ScenarioError {
        self.loc.error(span, message, hint)
    }

    /// The table's outcome lacks `field`.
    fn needs(&self, field: &str, hint: &str) -> ScenarioError {
        self.err(
            Some(self.exp.outcome.span()),
            format!(
                "expect.{}: outcome \"{}\" needs `{field}`",
                self.strategy,
                self.outcome.name()
            ),
            Some(hint.to_string()),
        )
    }

    /// `field` (at `span`) belongs to outcome `only_on`, not the table's.
    fn only(
        &self,
        field: &str,
        span: std::ops::Range<usize>,
        only_on: &str,
        hint: &str,
    ) -> ScenarioError {
        self.err(
            Some(span),
            format!(
                "expect.{}: `{field}` only applies to outcome \"{only_on}\", not \"{}\"",
                self.strategy,
                self.outcome.name()
            ),
            Some(hint.to_string()),
        )
    }

    /// The expectation the table says, or the first thing wrong with it.
    fn expectation(&self, stability: Duration) -> Result<Expectation, ScenarioError> {
        self.only_when_converging()?;
        let (verdict_mentions, verdict_mentions_any) = self.verdict_texts()?;
        self.zone_start_bounds()?;
        self.no_zero_bounds()?;
        let (invariant, some_seeds_violate) = self.invariants()?;
        let (operations_succeed, operations_some_fail, failed_operations_mention) =
            self.operations()?;
        let exp = self.exp;
        let some_seeds_fail = exp.some_seeds_fail.as_ref().is_some_and(|f| *f.get_ref());
        let deadline = exp.deadline.as_ref().map(|d| d.get_ref().0);
        let base = Expectation {
            outcome: Outcome::Any,
            deadline: Duration::ZERO,
            verdict_mentions,
            verdict_mentions_any,
            settle: exp.settle.as_ref().map(|d| d.get_ref().0),
            zone_start_at_most: exp.zone_start_at_most.as_ref().map(|d| d.get_ref().0),
            zone_start_at_least: exp.zone_start_at_least.as_ref().map(|d| d.get_ref().0),
            some_seeds_violate,
            some_seeds_fail,
            converged_by: exp.converged_by.as_ref().map(|d| d.get_ref().0),
            repair_within: exp.repair_within.as_ref().map(|d| d.get_ref().0),
            operations_succeed,
            operations_within: exp.operations_within.as_ref().map(|d| d.get_ref().0),
            operations_some_fail,
            failed_operations_mention,
        };
        match self.outcome {
            OutcomeName::Converges => self.converges(base, deadline, stability),
            OutcomeName::Violates => self.violates(base, invariant, deadline),
            OutcomeName::Any => self.any(base, some_seeds_fail, deadline),
            OutcomeName::Fails => self.fails(base, deadline),
        }
    }

    /// `within` bounds convergence, and the timing bounds measure a
    /// converged run: neither belongs to another outcome.
    fn only_when_converging(&self) -> Result<(), ScenarioError> {
        let (exp, outcome) = (self.exp, self.outcome);
        // `within` bounds convergence; other outcomes run to `deadline`.
        if let (Some(w), false) = (&exp.within, outcome == OutcomeName::Converges) {
            return Err(self.only(
                "within",
                w.span(),
                "converges",
                "this outcome does not converge in time; the run lasts until `deadline`",
            ));
        }
        // Timing bounds need a converged run to measure.
        for (field, value) in [
            ("settle", &exp.settle),
            ("converged_by", &exp.converged_by),
            ("repair_within", &exp.repair_within),
        ] {
            if let (Some(v), false) = (value, outcome == OutcomeName::Converges) {
                return Err(self.only(
                    field,
                    v.span(),
                    "converges",
                    "a run that need not converge gives no time to bound",
                ));
            }
        }
        Ok(())
    }

    /// `verdict_mentions` and `verdict_mentions_any`.
    fn verdict_texts(&self) -> Result<(Vec<String>, Vec<String>), ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let (outcome, loc) = (self.outcome, self.loc);
        let table = format!("expect.{strategy}");
        // The verdict texts: a converged verdict has no gaps to mention.
        let verdict_mentions = texts(&table, "verdict_mentions", &exp.verdict_mentions, loc)?;
        let verdict_mentions_any = texts(
            &table,
            "verdict_mentions_any",
            &exp.verdict_mentions_any,
            loc,
        )?;
        if let Some(any) = &exp.verdict_mentions_any {
            if any.get_ref().is_empty() {
                return Err(self.err(
                    Some(any.span()),
                    format!(
                        "expect.{strategy}: `verdict_mentions_any` lists no text, so no \
                         verdict could mention one of them"
                    ),
                    Some("list the alternatives, one of which must appear, or leave it out".into()),
                ));
            }
        }
        if outcome == OutcomeName::Converges {
            for (field, value) in [
                ("verdict_mentions", &exp.verdict_mentions),
                ("verdict_mentions_any", &exp.verdict_mentions_any),
            ] {
                if let Some(v) = value {
                    return Err(self.err(
                        Some(v.span()),
                        format!(
                            "expect.{strategy}: `{field}` is never judged for outcome \
                             \"converges\": a converged verdict has no gaps to mention"
                        ),
                        Some(
                            "leave it out; to say why a run may fail, use outcome \"fails\" \
                             (every run) or \"any\" (some runs)"
                                .into(),
                        ),
                    ));
                }
            }
        }
        Ok((verdict_mentions, verdict_mentions_any))
    }

    /// Bounds on zone start time, only where zone starts take time.
    fn zone_start_bounds(&self) -> Result<(), ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let (kind, service_nat) = (self.kind, self.service_nat);
        // Zone start time measures the legacy path's blocking NAT setup
        // (under `legacy`, and under `scrimlet-local-with-zone-start`, which
        // keeps it); the other strategies' zone starts do no NAT work and
        // take 0s in every run, so a bound on them could never fail (or
        // never hold).
        let (nat, _) = strategy.parts(service_nat);
        for (field, value) in [
            ("zone_start_at_most", &exp.zone_start_at_most),
            ("zone_start_at_least", &exp.zone_start_at_least),
        ] {
            if let (Some(v), true) = (value, !nat.blocks_zone_start()) {
                let under = match kind {
                    Kind::ServiceNat => format!("under {nat}"),
                    Kind::Instances => format!("under service_nat = \"{nat}\""),
                };
                return Err(self.err(
                    Some(v.span()),
                    format!(
                        "expect.{strategy}: `{field}` cannot fail {under}: its zone starts do \
                         no NAT work, so every one takes 0s"
                    ),
                    Some(
                        "zone start time means something only under legacy and \
                         scrimlet-local-with-zone-start, whose zone start waits for the \
                         switches; assert what this strategy does instead: \
                         `converged_by` (first converged within this of the start) or \
                         `repair_within` / `settle` (how soon it repairs)"
                            .into(),
                    ),
                ));
            }
        }
        if let Some(least) = &exp.zone_start_at_least {
            if least.get_ref().0.is_zero() {
                return Err(self.err(
                    Some(least.span()),
                    format!("expect.{strategy}: `zone_start_at_least = \"0s\"` always holds"),
                    Some("give the time the blocking start must take, e.g. \"5m\"".into()),
                ));
            }
        }
        Ok(())
    }

    fn no_zero_bounds(&self) -> Result<(), ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        // A bound of zero: no run can converge, settle, repair or finish in
        // no time at all, and a run that ends at once judges nothing. Such a
        // value is a slip (a missing unit, a placeholder), never a meaning.
        for (field, value, example) in [
            ("within", &exp.within, "\"10m\""),
            ("deadline", &exp.deadline, "\"10m\""),
            ("settle", &exp.settle, "\"1m\""),
            ("converged_by", &exp.converged_by, "\"5m\""),
            ("repair_within", &exp.repair_within, "\"2m\""),
            ("operations_within", &exp.operations_within, "\"5m\""),
        ] {
            if let Some(v) = value.as_ref().filter(|v| v.get_ref().0.is_zero()) {
                return Err(self.err(
                    Some(v.span()),
                    format!("expect.{strategy}: `{field}` is zero, so no run could meet it"),
                    Some(format!("give it a length, e.g. {field} = {example}")),
                ));
            }
        }
        Ok(())
    }

    /// `invariant` and `some_seeds_violate`, by name, each on its outcome.
    fn invariants(&self) -> Result<(Option<&'static str>, Vec<&'static str>), ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let (outcome, loc) = (self.outcome, self.loc);
        let table = format!("expect.{strategy}");
        // Names of invariants, and the fields that take them.
        let invariant = exp
            .invariant
            .as_ref()
            .map(|i| known_invariant(&table, i, loc))
            .transpose()?;
        let some_seeds_violate = match &exp.some_seeds_violate {
            None => Vec::new(),
            Some(names) => invariant_list(&table, names, loc)?,
        };
        if let (Some(i), false) = (&exp.invariant, outcome == OutcomeName::Violates) {
            return Err(self.only(
                "invariant",
                i.span(),
                "violates",
                if outcome == OutcomeName::Any {
                    "for a race that breaks it in some seeds, write some_seeds_violate = \"...\""
                } else {
                    "a broken invariant fails this outcome; to require one, use outcome \"violates\""
                },
            ));
        }
        if outcome != OutcomeName::Any {
            let sweep_hint = "every run of this outcome is judged alone, and one that breaks an \
                              invariant (or fails to converge) misses it; a requirement on the \
                              seeds together belongs to outcome \"any\"";
            if let Some(s) = &exp.some_seeds_violate {
                return Err(self.only("some_seeds_violate", s.span(), "any", sweep_hint));
            }
            if let Some(s) = &exp.some_seeds_fail {
                return Err(self.only("some_seeds_fail", s.span(), "any", sweep_hint));
            }
        }
        Ok((invariant, some_seeds_violate))
    }

    /// `operations` and `failed_operations_mention`, only in an instances
    /// scenario.
    fn operations(&self) -> Result<(bool, bool, Vec<String>), ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let kind = self.kind;
        let (operations_succeed, operations_some_fail) = match &exp.operations {
            None => (false, false),
            Some(v) if v.get_ref() == "succeed" => (true, false),
            Some(v) if v.get_ref() == "some-fail" => (false, true),
            Some(v) => {
                return Err(self.err(
                    Some(v.span()),
                    format!(
                        "expect.{strategy}: unknown `operations` requirement {:?}",
                        v.get_ref()
                    ),
                    Some(
                        "write operations = \"succeed\" (every instance API request answers \
                         success) or \"some-fail\" (some request answers failure), or leave \
                         it out"
                            .into(),
                    ),
                ))
            }
        };
        let failed_operations_mention = match &exp.failed_operations_mention {
            None => Vec::new(),
            Some(m) if !operations_some_fail => {
                return Err(self.err(
                    Some(m.span()),
                    format!(
                        "expect.{strategy}: `failed_operations_mention` is judged only with \
                         operations = \"some-fail\""
                    ),
                    Some("add operations = \"some-fail\", or leave it out".into()),
                ))
            }
            Some(m) if m.get_ref().is_empty() || m.get_ref().iter().any(String::is_empty) => {
                return Err(self.err(
                    Some(m.span()),
                    format!(
                        "expect.{strategy}: `failed_operations_mention` needs texts, none empty"
                    ),
                    None,
                ))
            }
            Some(m) => m.get_ref().clone(),
        };
        // Only an instances scenario's plan makes instance API requests.
        for (field, span) in [
            ("operations", exp.operations.as_ref().map(|v| v.span())),
            (
                "operations_within",
                exp.operations_within.as_ref().map(|v| v.span()),
            ),
        ] {
            if let (Some(span), Kind::ServiceNat) = (span, kind) {
                return Err(self.err(
                    Some(span),
                    format!(
                        "expect.{strategy}: `{field}` cannot fail in a service-nat scenario: \
                         its plan makes no instance API request"
                    ),
                    Some("use it in an instances scenario (kind = \"instances\")".into()),
                ));
            }
        }
        Ok((
            operations_succeed,
            operations_some_fail,
            failed_operations_mention,
        ))
    }

    fn converges(
        &self,
        base: Expectation,
        deadline: Option<Duration>,
        stability: Duration,
    ) -> Result<Expectation, ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let Some(within) = exp.within.as_ref().map(|w| w.get_ref().0) else {
            return Err(self.needs("within", "add e.g. within = \"10m\""));
        };
        if let (Some(d), Some(dl)) = (&exp.deadline, deadline) {
            if dl < within {
                return Err(self.err(
                    Some(d.span()),
                    format!(
                        "expect.{strategy}: the deadline ends the run before `within`, \
                         so `within` means less than it says"
                    ),
                    Some(
                        "leave `deadline` out (it defaults to `within` plus the \
                         stability window) or make it at least `within`"
                            .into(),
                    ),
                ));
            }
        }
        // A run that converged within `within` has settled and first
        // converged within it too: a bound at or beyond it is vacuous.
        for (field, value) in [("settle", &exp.settle), ("converged_by", &exp.converged_by)] {
            if let Some(v) = value.as_ref().filter(|v| v.get_ref().0 >= within) {
                return Err(self.err(
                    Some(v.span()),
                    format!(
                        "expect.{strategy}: `{field}` is not below `within`, so no run \
                         that converges in time can miss it"
                    ),
                    Some(format!(
                        "make it less than within = \"{}\", or leave it out",
                        super::write::duration(within)
                    )),
                ));
            }
        }
        Ok(Expectation {
            outcome: Outcome::ConvergesWithin(within),
            deadline: deadline.unwrap_or(within + stability),
            ..base
        })
    }

    fn violates(
        &self,
        base: Expectation,
        invariant: Option<&'static str>,
        deadline: Option<Duration>,
    ) -> Result<Expectation, ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        let Some(inv) = invariant else {
            return Err(self.err(
                Some(exp.outcome.span()),
                format!("expect.{strategy}: outcome \"violates\" needs an `invariant`"),
                invariants_hint(),
            ));
        };
        let Some(deadline) = deadline else {
            return Err(self.needs(
                "deadline",
                "add e.g. deadline = \"10m\": how long the run may take to break it",
            ));
        };
        Ok(Expectation {
            outcome: Outcome::Violates(inv),
            deadline,
            ..base
        })
    }

    fn any(
        &self,
        base: Expectation,
        some_seeds_fail: bool,
        deadline: Option<Duration>,
    ) -> Result<Expectation, ScenarioError> {
        let (strategy, exp) = (self.strategy, self.exp);
        // No vacuous cells: every run of "any" may converge, so it
        // must come with what a sweep of seeds has to find (or a
        // per-run bound that can fail).
        let zone_bound = exp.zone_start_at_most.is_some() || exp.zone_start_at_least.is_some();
        if base.some_seeds_violate.is_empty() && !some_seeds_fail && !zone_bound {
            return Err(self.err(
                Some(exp.outcome.span()),
                format!(
                    "expect.{strategy}: outcome \"any\" needs `some_seeds_violate` \
                     or `some_seeds_fail`"
                ),
                Some(
                    "every scenario × strategy must assert something that could fail, \
                     and every run of \"any\" may converge: name the invariant some \
                     seed must break (some_seeds_violate = \"...\"), or require some \
                     seed to fail to converge (some_seeds_fail = true, with \
                     verdict_mentions saying why)"
                        .into(),
                ),
            ));
        }
        if let (Some(f), false) = (&exp.some_seeds_fail, base.has_reasons()) {
            if *f.get_ref() {
                return Err(self.err(
                    Some(f.span()),
                    format!(
                        "expect.{strategy}: `some_seeds_fail` needs `verdict_mentions` \
                         or `verdict_mentions_any`: the reason a run may fail"
                    ),
                    Some(
                        "add e.g. verdict_mentions = [\"still runs a vmm for it\"]: a \
                         run that does not converge counts only if its verdict says so"
                            .into(),
                    ),
                ));
            }
        }
        let Some(deadline) = deadline else {
            return Err(self.needs(
                "deadline",
                "add e.g. deadline = \"10m\": how long each run lasts",
            ));
        };
        Ok(Expectation { deadline, ..base })
    }

    fn fails(
        &self,
        base: Expectation,
        deadline: Option<Duration>,
    ) -> Result<Expectation, ScenarioError> {
        let Some(deadline) = deadline else {
            return Err(self.needs(
                "deadline",
                "add e.g. deadline = \"2h\": how long it must stay unconverged",
            ));
        };
        Ok(Expectation {
            outcome: Outcome::Fails,
            deadline,
            ..base
        })
    }
}

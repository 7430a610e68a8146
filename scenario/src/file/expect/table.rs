//! One `[expect."…"]` table, read check by check into an [`Expectation`].

use std::time::Duration;

use racksim_sim::ServiceNat;

use super::{
    invariant_list, invariants_hint, known_invariant, texts, Expectation, Outcome, OutcomeName,
};
use crate::file::{
    error::{Locator, ScenarioError},
    raw::RawExpect,
    Kind, Strategy,
};

/// The outcome a table names.
pub(super) fn outcome_name(exp: &RawExpect, loc: &Locator) -> Result<OutcomeName, ScenarioError> {
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
pub(super) struct Table<'a> {
    pub(super) strategy: Strategy,
    pub(super) outcome: OutcomeName,
    pub(super) exp: &'a RawExpect,
    pub(super) kind: Kind,
    pub(super) service_nat: ServiceNat,
    pub(super) loc: &'a Locator<'a>,
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
    pub(super) fn expectation(&self, stability: Duration) -> Result<Expectation, ScenarioError> {
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
                        crate::file::write::duration(within)
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

//! Scenario files: the TOML format, parsing and validation.
//!
//! A file is parsed and validated completely before anything runs. Every
//! error points at the file, line and column of the offending value, shows
//! the line, and where it helps, a hint. The format:
//!
//! ```toml
//! name = "madrid-one-switch"
//! description = "one line for `racksim list`"
//! rack = "madrid"                 # a rack shape from sim::rack
//! ntp_return_switch = "switch1"   # where upstream NTP replies come back in
//! stability = "1m"                # optional; how long converged must hold
//!
//! [[step]]                         # timed plan steps, any order
//! at = "0s"                        # or a window drawn from the seed: "5m..8m"
//! action = "hide-switch"           # hide-switch | reveal-switch
//! switch = "switch1"
//!
//! [expect.sled-task]               # one table per strategy
//! outcome = "converges"
//! within = "10m"
//!
//! [expect.legacy]
//! outcome = "fails"
//! deadline = "2h"
//! verdict_mentions = ["switch1"]   # text the failed verdict must contain
//! ```

use std::{collections::BTreeMap, fmt, ops::Range, path::Path, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{rack::RackSpec, run::DEFAULT_STABILITY, Action, At, Plan, Step, Strategy};
use serde::{de, Deserialize, Deserializer};
use toml::Spanned;

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Where it came from: a path, or `catalogue:NAME`.
    pub origin: String,
    pub rack_name: String,
    pub rack: RackSpec,
    pub ntp_return_switch: SwitchSlot,
    pub stability: Duration,
    pub plan: Plan,
    pub expectations: BTreeMap<Strategy, Expectation>,
}

/// What a strategy must do in a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub outcome: Outcome,
    /// The run's deadline (for `converges`: `within` plus the stability window).
    pub deadline: Duration,
    /// Text the verdict must contain (for `fails`, to prove *why* it failed).
    pub verdict_mentions: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Converges no later than this.
    ConvergesWithin(Duration),
    /// Does not converge by the deadline: the scenario reproduces a bug.
    Fails,
}

/// A scenario file error, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub source_line: String,
    pub hint: Option<String>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "error: {}:{}:{}: {}",
            self.origin, self.line, self.column, self.message
        )?;
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        writeln!(f, "{pad} |")?;
        writeln!(f, "{num} | {}", self.source_line)?;
        write!(f, "{pad} | {}^", " ".repeat(self.column.saturating_sub(1)))?;
        if let Some(h) = &self.hint {
            write!(f, "\n{pad} = hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Parse and validate a scenario from its text. `origin` names it in errors.
pub fn parse(origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let err = |span: Option<Range<usize>>, message: String, hint: Option<String>| {
        locate(
            origin,
            text,
            span.map(|s| s.start).unwrap_or(0),
            message,
            hint,
        )
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let hint = hint_for(&message);
        err(e.span(), message, hint)
    })?;

    let rack = match raw.rack.get_ref().as_str() {
        "madrid" => RackSpec::madrid(),
        other => {
            return Err(err(
                Some(raw.rack.span()),
                format!("unknown rack {other:?}"),
                Some("known racks: madrid".into()),
            ))
        }
    };
    let switch = |s: &Spanned<String>| -> Result<SwitchSlot, ScenarioError> {
        let slot = match s.get_ref().as_str() {
            "switch0" => Some(SwitchSlot::Switch0),
            "switch1" => Some(SwitchSlot::Switch1),
            _ => None,
        };
        slot.filter(|slot| rack.switch(*slot).is_some())
            .ok_or_else(|| {
                let known: Vec<String> = rack.switches.iter().map(|s| s.name()).collect();
                err(
                    Some(s.span()),
                    format!("unknown switch {:?} in rack {}", s.get_ref(), rack.name),
                    Some(format!("switches of this rack: {}", known.join(", "))),
                )
            })
    };
    let ntp_return_switch = switch(&raw.ntp_return_switch)?;
    if !rack.switch(ntp_return_switch).is_some_and(|s| s.uplinked) {
        return Err(err(
            Some(raw.ntp_return_switch.span()),
            format!("{ntp_return_switch} has no uplink, so no traffic can return through it"),
            None,
        ));
    }

    let mut expectations = BTreeMap::new();
    let mut latest_deadline = Duration::ZERO;
    for (key, exp) in &raw.expect {
        let strategy: Strategy = key
            .get_ref()
            .parse()
            .map_err(|e: String| err(Some(key.span()), e, None))?;
        let stability = raw.stability.map(|d| d.0).unwrap_or(DEFAULT_STABILITY);
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
                Expectation {
                    outcome: Outcome::Fails,
                    deadline: deadline.0,
                    verdict_mentions: exp.verdict_mentions.clone(),
                }
            }
            other => {
                return Err(err(
                    Some(exp.outcome.span()),
                    format!("unknown outcome {other:?}"),
                    Some("expected \"converges\" or \"fails\"".into()),
                ))
            }
        };
        latest_deadline = latest_deadline.max(expectation.deadline);
        expectations.insert(strategy, expectation);
    }
    if expectations.is_empty() {
        return Err(err(
            None,
            "the scenario has no expectations".into(),
            Some("add an [expect.STRATEGY] table, e.g. [expect.sled-task]".into()),
        ));
    }

    let mut steps = Vec::new();
    let mut hidden = std::collections::BTreeSet::new();
    let mut sorted: Vec<&RawStep> = raw.steps.iter().collect();
    sorted.sort_by_key(|s| s.at.get_ref().0.latest());
    for s in sorted {
        let at = s.at.get_ref().0;
        if at.latest() >= latest_deadline {
            return Err(err(
                Some(s.at.span()),
                format!(
                    "step at {at} is not before the deadline ({})",
                    racksim_sim::trace::fmt_duration(latest_deadline)
                ),
                Some("move the step earlier or extend the expectation's deadline".into()),
            ));
        }
        let need_switch = || -> Result<SwitchSlot, ScenarioError> {
            match &s.switch {
                Some(sw) => switch(sw),
                None => Err(err(
                    Some(s.action.span()),
                    format!("action {:?} needs a `switch`", s.action.get_ref()),
                    Some("add e.g. switch = \"switch1\"".into()),
                )),
            }
        };
        let action = match s.action.get_ref().as_str() {
            "hide-switch" => {
                let sw = need_switch()?;
                hidden.insert(sw);
                Action::HideSwitch(sw)
            }
            "reveal-switch" => {
                let sw = need_switch()?;
                if !hidden.remove(&sw) {
                    return Err(err(
                        Some(s.action.span()),
                        format!("reveal-switch {sw}: {sw} is not hidden at that point of the plan"),
                        Some("add a hide-switch step before it".into()),
                    ));
                }
                Action::RevealSwitch(sw)
            }
            other => {
                return Err(err(
                    Some(s.action.span()),
                    format!("unknown action {other:?}"),
                    Some("known actions: hide-switch, reveal-switch".into()),
                ))
            }
        };
        steps.push(Step { at, action });
    }

    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        origin: origin.to_string(),
        rack_name: raw.rack.into_inner(),
        rack,
        ntp_return_switch,
        stability: raw.stability.map(|d| d.0).unwrap_or(DEFAULT_STABILITY),
        plan: Plan { steps },
        expectations,
    })
}

/// Read and parse a scenario file.
pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("error: cannot read {}: {e}", path.display()))?;
    parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
}

fn hint_for(message: &str) -> Option<String> {
    if message.contains("unknown field") {
        Some(
            "check the spelling; the format is documented in scenarios/src/file.rs and the README"
                .into(),
        )
    } else if message.contains("missing field") {
        Some(
            "every scenario needs name, description, rack, ntp_return_switch and [expect.*]".into(),
        )
    } else {
        None
    }
}

fn locate(
    origin: &str,
    text: &str,
    offset: usize,
    message: String,
    hint: Option<String>,
) -> ScenarioError {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = text[line_start..offset].chars().count() + 1;
    let source_line = text[line_start..].lines().next().unwrap_or("").to_string();
    ScenarioError {
        origin: origin.to_string(),
        line,
        column,
        message,
        source_line,
        hint,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    description: String,
    rack: Spanned<String>,
    ntp_return_switch: Spanned<String>,
    #[serde(default)]
    stability: Option<DurationValue>,
    #[serde(default, rename = "step")]
    steps: Vec<RawStep>,
    #[serde(default)]
    expect: BTreeMap<Spanned<String>, RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at: Spanned<AtValue>,
    action: Spanned<String>,
    #[serde(default)]
    switch: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    outcome: Spanned<String>,
    #[serde(default)]
    within: Option<DurationValue>,
    #[serde(default)]
    deadline: Option<DurationValue>,
    #[serde(default)]
    verdict_mentions: Vec<String>,
}

/// A duration written as `250ms`, `30s`, `5m`, `2h`, or a sum like `1h30m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationValue(pub Duration);

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s)
            .map(DurationValue)
            .map_err(de::Error::custom)
    }
}

/// A step time: a duration, or a window `A..B` drawn from the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AtValue(At);

impl<'de> Deserialize<'de> for AtValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.split_once("..") {
            None => parse_duration(&s)
                .map(|d| AtValue(At::Fixed(d)))
                .map_err(de::Error::custom),
            Some((a, b)) => {
                let a = parse_duration(a).map_err(de::Error::custom)?;
                let b = parse_duration(b).map_err(de::Error::custom)?;
                if a > b {
                    return Err(de::Error::custom(format!(
                        "empty window {s:?}: its start is after its end"
                    )));
                }
                Ok(AtValue(At::Window(a, b)))
            }
        }
    }
}

/// Parse `250ms`, `30s`, `1.5s`, `5m`, `2h`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad =
        || format!("invalid duration {s:?}: expected e.g. \"250ms\", \"30s\", \"5m\", \"1h30m\"");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms = match unit {
            "ms" => value,
            "s" => value * 1e3,
            "m" => value * 60e3,
            "h" => value * 3600e3,
            _ => return Err(bad()),
        };
        total += Duration::from_millis(ms.round() as u64);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"name = "t"
description = "d"
rack = "madrid"
ntp_return_switch = "switch1"

[[step]]
at = "0s"
action = "hide-switch"
switch = "switch1"

[[step]]
at = "5m..8m"
action = "reveal-switch"
switch = "switch1"

[expect.sled-task]
outcome = "converges"
within = "10m"

[expect.legacy]
outcome = "fails"
deadline = "2h"
"#;

    fn error_of(text: &str) -> ScenarioError {
        parse("t.toml", text).expect_err("the file must be rejected")
    }

    #[test]
    fn a_good_file_parses() {
        let s = parse("t.toml", GOOD).unwrap();
        assert_eq!(s.plan.steps.len(), 2);
        assert_eq!(
            s.plan.steps[1].at,
            At::Window(Duration::from_secs(300), Duration::from_secs(480))
        );
        assert_eq!(
            s.expectations[&Strategy::SledTask].outcome,
            Outcome::ConvergesWithin(Duration::from_secs(600))
        );
        assert_eq!(
            s.expectations[&Strategy::Legacy].deadline,
            Duration::from_secs(7200)
        );
        // `converges` runs until `within` plus the stability window.
        assert_eq!(
            s.expectations[&Strategy::SledTask].deadline,
            Duration::from_secs(660)
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        for bad in ["", "5", "m", "5 minutes", "-1s", "1d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn unknown_field_points_at_it() {
        let e = error_of(&GOOD.replace("within = \"10m\"", "within = \"10m\"\nwithn = \"1m\""));
        assert_eq!((e.line, e.column), (19, 1), "{e}");
        assert!(e.message.contains("unknown field `withn`"), "{e}");
    }

    #[test]
    fn bad_duration_points_at_the_value() {
        let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"soon\""));
        assert_eq!((e.line, e.column), (7, 6), "{e}");
        assert!(e.message.contains("invalid duration \"soon\""), "{e}");
    }

    #[test]
    fn unknown_switch_is_named_with_the_known_ones() {
        let e = error_of(&GOOD.replace(
            "action = \"hide-switch\"\nswitch = \"switch1\"",
            "action = \"hide-switch\"\nswitch = \"switch7\"",
        ));
        assert_eq!((e.line, e.column), (9, 10), "{e}");
        assert!(e.message.contains("unknown switch \"switch7\""), "{e}");
        assert_eq!(
            e.hint.as_deref(),
            Some("switches of this rack: switch0, switch1")
        );
    }

    #[test]
    fn step_after_deadline_is_rejected() {
        let e = error_of(&GOOD.replace("5m..8m", "5m..3h"));
        assert_eq!(e.line, 12, "{e}");
        assert!(e.message.contains("not before the deadline"), "{e}");
    }

    #[test]
    fn reveal_without_hide_is_rejected() {
        let e = error_of(&GOOD.replace("action = \"hide-switch\"", "action = \"reveal-switch\""));
        assert!(e.message.contains("is not hidden"), "{e}");
    }

    #[test]
    fn unknown_strategy_and_rack() {
        let e = error_of(&GOOD.replace("[expect.legacy]", "[expect.legacyy]"));
        assert!(e.message.contains("unknown strategy \"legacyy\""), "{e}");
        assert_eq!(e.line, 20, "{e}");
        let e = error_of(&GOOD.replace("rack = \"madrid\"", "rack = \"lisbon\""));
        assert_eq!((e.line, e.column), (3, 8), "{e}");
    }

    #[test]
    fn error_display_shows_line_and_caret() {
        let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"soon\""));
        let shown = e.to_string();
        assert!(shown.starts_with("error: t.toml:7:6: "), "{shown}");
        assert!(shown.contains("7 | at = \"soon\"\n  |      ^"), "{shown}");
    }
}

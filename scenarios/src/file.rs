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
use racksim_reconciler::instances::StartImpl;
use racksim_sim::{
    rack::{RackSpec, ZoneKind},
    run::DEFAULT_STABILITY,
    Action, At, InstanceSpec, Plan, Step, Strategy,
};
use serde::{de, Deserialize, Deserializer};
use toml::Spanned;

/// What a scenario compares: service-NAT strategies (`kind =
/// "service-nat"`, the default) or instance start implementations (`kind =
/// "instances"`). It is what `--strategy` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    Nat(Strategy),
    Start(StartImpl),
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Nat(s) => write!(f, "{s}"),
            Variant::Start(s) => write!(f, "{s}"),
        }
    }
}

/// What a scenario is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ServiceNat,
    Instances,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub kind: Kind,
    /// The service-NAT strategy of an instances scenario (fixed).
    pub service_nat: Strategy,
    /// Instances the plan refers to.
    pub instances: Vec<InstanceSpec>,
    pub name: String,
    pub description: String,
    /// Where it came from: a path, or `catalogue:NAME`.
    pub origin: String,
    pub rack_name: String,
    pub rack: RackSpec,
    pub ntp_return_switch: SwitchSlot,
    pub stability: Duration,
    pub plan: Plan,
    pub expectations: BTreeMap<Variant, Expectation>,
}

impl Scenario {
    /// Parse a `--strategy` value for this scenario's kind.
    pub fn variant(&self, name: &str) -> Result<Variant, String> {
        parse_variant(self.kind, name)
    }
}

fn parse_variant(kind: Kind, name: &str) -> Result<Variant, String> {
    match kind {
        Kind::ServiceNat => name.parse::<Strategy>().map(Variant::Nat),
        Kind::Instances => name.parse::<StartImpl>().map(Variant::Start).map_err(|_| {
            format!("unknown start implementation {name:?} (expected one of: legacy, naive, saga)")
        }),
    }
}

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Converges no later than this.
    ConvergesWithin(Duration),
    /// Does not converge by the deadline: the scenario reproduces a bug.
    Fails,
    /// No requirement on a single run (the run must not crash a host); see
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
            (Outcome::Any, None) => "any".to_string(),
        }
    }
}

/// The safety invariants the simulation checks (sim::check).
pub const INVARIANTS: [&str; 3] = ["no-state-after-delete", "one-vmm", "nat-follows-vmm"];

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

    let Some(rack) = RackSpec::by_name(raw.rack.get_ref()) else {
        return Err(err(
            Some(raw.rack.span()),
            format!("unknown rack {:?}", raw.rack.get_ref()),
            Some(format!("known racks: {}", RackSpec::NAMES.join(", "))),
        ));
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
    let kind = match raw.kind.as_ref().map(|k| k.get_ref().as_str()) {
        None | Some("service-nat") => Kind::ServiceNat,
        Some("instances") => Kind::Instances,
        Some(other) => {
            return Err(err(
                raw.kind.as_ref().map(|k| k.span()),
                format!("unknown kind {other:?}"),
                Some("expected \"service-nat\" (the default) or \"instances\"".into()),
            ))
        }
    };
    let service_nat = match &raw.service_nat {
        None => Strategy::SledTask,
        Some(s) => s
            .get_ref()
            .parse::<Strategy>()
            .map_err(|e| err(Some(s.span()), e, None))?,
    };
    if kind == Kind::ServiceNat {
        if let Some(s) = &raw.service_nat {
            return Err(err(
                Some(s.span()),
                "`service_nat` only applies to kind = \"instances\"".into(),
                Some(
                    "a service-nat scenario compares the strategies in its [expect.*] tables"
                        .into(),
                ),
            ));
        }
    }
    let mut instances: Vec<InstanceSpec> = Vec::new();
    for i in &raw.instances {
        if instances.iter().any(|x| x.name == *i.name.get_ref()) {
            return Err(err(
                Some(i.name.span()),
                format!("instance {:?} is declared twice", i.name.get_ref()),
                None,
            ));
        }
        instances.push(InstanceSpec {
            name: i.name.get_ref().clone(),
        });
    }
    if kind == Kind::ServiceNat {
        if let Some(i) = raw.instances.first() {
            return Err(err(
                Some(i.name.span()),
                "instances are declared only in kind = \"instances\" scenarios".into(),
                None,
            ));
        }
    }
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
        let strategy: Variant =
            parse_variant(kind, key.get_ref()).map_err(|e| err(Some(key.span()), e, None))?;
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
                    settle: exp.settle.as_ref().map(|d| d.get_ref().0),
                    zone_start_at_most: exp.zone_start_at_most.map(|d| d.0),
                    zone_start_at_least: exp.zone_start_at_least.map(|d| d.0),
                    some_seeds_violate: exp.some_seeds_violate.clone(),
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
                }
            }
            "any" => {
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
    let mut sorted: Vec<&RawStep> = raw.steps.iter().collect();
    sorted.sort_by_key(|s| s.at.get_ref().0.latest());
    let mut state = PlanState::new(&rack);
    // The last step so far (in the order above) that changed each piece of
    // state an order is checked on, so the next such step can be required
    // to come after it in every draw of the windows.
    let mut last: BTreeMap<String, &RawStep> = BTreeMap::new();
    for (i, s) in sorted.iter().enumerate() {
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
        let resource = ordered_resource(s);
        // The step before it on the same state must be over before this one
        // can start. Steps are sorted by their latest time, and `Plan::resolve`
        // keeps plan order on a tie, so starting exactly when it ends is fine.
        if let Some(prev) = resource.as_ref().and_then(|r| last.get(r)) {
            if earliest(at) < prev.at.get_ref().0.latest() {
                let (message, hint) = overlap(s, prev);
                return Err(err(Some(s.at.span()), message, Some(hint)));
            }
        }
        let before = state.clone();
        let action =
            step_action(s, &rack, &instances, &mut state).map_err(|(span, msg, hint)| {
                // A step the state does not allow yet, with a step later in the
                // list that would allow it but can draw a time before it: the
                // windows overlap.
                let enabler = resource.as_ref().and_then(|r| {
                    sorted[i + 1..].iter().find(|later| {
                        ordered_resource(later).as_ref() == Some(r)
                            && earliest(later.at.get_ref().0) <= at.latest()
                            && {
                                let mut st = before.clone();
                                step_action(later, &rack, &instances, &mut st).is_ok()
                                    && step_action(s, &rack, &instances, &mut st).is_ok()
                            }
                    })
                });
                match enabler {
                    Some(later) => {
                        let (message, hint) = overlap(s, later);
                        err(Some(s.at.span()), message, Some(hint))
                    }
                    None => err(Some(span), msg, hint),
                }
            })?;
        if let Some(r) = resource {
            last.insert(r, s);
        }
        steps.push(Step { at, action });
    }

    Ok(Scenario {
        kind,
        service_nat,
        instances,
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

/// The earliest time a step can happen.
fn earliest(at: At) -> Duration {
    match at {
        At::Fixed(d) | At::Window(d, _) => d,
    }
}

/// The piece of plan state a step changes whose order matters: the steps
/// on one piece must happen in the same order in every draw of their
/// windows. `None` for steps whose order is not checked.
fn ordered_resource(s: &RawStep) -> Option<String> {
    let switch = || {
        s.switch
            .as_ref()
            .map(|v| v.get_ref().clone())
            .unwrap_or_default()
    };
    let group = |g: &Option<Spanned<HostGroup>>| {
        g.as_ref()
            .map(|g| g.get_ref().names().join(","))
            .unwrap_or_default()
    };
    match s.action.get_ref().as_str() {
        "hide-switch" | "reveal-switch" => Some(format!("dns {}", switch())),
        "sidecar-power-off" | "sidecar-power-on" => Some(format!("sidecar {}", switch())),
        "partition" | "heal" => Some(format!(
            "partition {} / {} / {}",
            group(&s.a),
            group(&s.b),
            s.oneway.as_ref().is_some_and(|o| *o.get_ref())
        )),
        "control-plane-down" | "control-plane-crash" | "control-plane-up" => {
            Some("control plane".into())
        }
        "power-off" | "cold-boot" => Some("rack power".into()),
        _ => None,
    }
}

/// The error for `this` step, which can draw a time before `other` (on the
/// same state) although it must come after it.
fn overlap(this: &RawStep, other: &RawStep) -> (String, String) {
    let (name, at) = (this.action.get_ref(), this.at.get_ref().0);
    let (other_name, other_at) = (other.action.get_ref(), other.at.get_ref().0);
    let message = format!("{name} at {at} can happen before {other_name} at {other_at}");
    let hint = match (at, other_at) {
        (At::Window(..), At::Window(..)) => format!(
            "{name}'s window {at} can start before {other_name}'s {other_at} ends; \
             make the windows not overlap"
        ),
        (At::Fixed(_), At::Fixed(_)) => format!(
            "both are at {at} and {name} is listed first, so it runs first; \
             list the {other_name} step before it"
        ),
        _ => format!(
            "{name} must come after {other_name} in every draw; \
             start it at {} or later",
            racksim_sim::trace::fmt_duration(other_at.latest())
        ),
    };
    (message, hint)
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
    #[serde(default)]
    kind: Option<Spanned<String>>,
    #[serde(default)]
    service_nat: Option<Spanned<String>>,
    #[serde(default, rename = "instance")]
    instances: Vec<RawInstance>,
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
struct RawInstance {
    name: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at: Spanned<AtValue>,
    action: Spanned<String>,
    #[serde(default)]
    switch: Option<Spanned<String>>,
    #[serde(default)]
    host: Option<Spanned<String>>,
    #[serde(default)]
    a: Option<Spanned<HostGroup>>,
    #[serde(default)]
    b: Option<Spanned<HostGroup>>,
    #[serde(default)]
    oneway: Option<Spanned<bool>>,
    #[serde(default)]
    latency: Option<Spanned<DurationValue>>,
    #[serde(default, rename = "for")]
    window: Option<Spanned<DurationValue>>,
    #[serde(default)]
    zone: Option<Spanned<String>>,
    #[serde(default)]
    instance: Option<Spanned<String>>,
    #[serde(default)]
    sled: Option<Spanned<String>>,
}

/// One host or a list of hosts.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum HostGroup {
    One(String),
    Many(Vec<String>),
}

impl HostGroup {
    fn names(&self) -> Vec<String> {
        match self {
            HostGroup::One(h) => vec![h.clone()],
            HostGroup::Many(v) => v.clone(),
        }
    }
}

type StepError = (Range<usize>, String, Option<String>);

/// What the plan has done so far, to reject steps that make no sense
/// (healing a partition never made, powering on a sidecar that is on).
#[derive(Clone)]
struct PlanState {
    hosts: Vec<String>,
    switches: Vec<SwitchSlot>,
    hidden: std::collections::BTreeSet<SwitchSlot>,
    partitions: Vec<(Vec<String>, Vec<String>, bool)>,
    sidecars_off: std::collections::BTreeSet<SwitchSlot>,
    control_plane_down: bool,
    powered_off: bool,
    next_sled: usize,
}

impl PlanState {
    fn new(rack: &RackSpec) -> Self {
        PlanState {
            hosts: rack.host_names(),
            switches: rack.switches.iter().map(|s| s.slot).collect(),
            hidden: Default::default(),
            partitions: Vec::new(),
            sidecars_off: Default::default(),
            control_plane_down: false,
            powered_off: false,
            next_sled: rack.sleds.len(),
        }
    }
}

/// The fields each action takes (besides `at` and `action`).
const ACTION_FIELDS: &[(&str, &[&str])] = &[
    ("hide-switch", &["switch"]),
    ("reveal-switch", &["switch"]),
    ("crash", &["host"]),
    ("restart", &["host"]),
    ("dpd-restart", &["switch"]),
    ("partition", &["a", "b", "oneway"]),
    ("heal", &["a", "b", "oneway"]),
    ("latency", &["a", "b", "latency"]),
    ("dpd-errors", &["switch", "for"]),
    ("dpd-hang", &["switch", "for"]),
    ("sidecar-power-off", &["switch"]),
    ("sidecar-power-on", &["switch"]),
    ("replace-scrimlet", &["switch"]),
    ("control-plane-down", &[]),
    ("control-plane-up", &[]),
    ("control-plane-crash", &[]),
    ("power-off", &[]),
    ("cold-boot", &[]),
    ("stale-entry", &["switch", "zone"]),
    ("instance-create", &["instance", "sled"]),
    ("instance-start", &["instance", "sled"]),
    ("instance-stop", &["instance"]),
    ("instance-delete", &["instance"]),
];

fn step_action(
    s: &RawStep,
    rack: &RackSpec,
    instances: &[InstanceSpec],
    st: &mut PlanState,
) -> Result<Action, StepError> {
    let name = s.action.get_ref().as_str();
    let aspan = s.action.span();
    let Some((_, allowed)) = ACTION_FIELDS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = ACTION_FIELDS.iter().map(|(n, _)| *n).collect();
        return Err((
            aspan,
            format!("unknown action {name:?}"),
            Some(format!("known actions: {}", known.join(", "))),
        ));
    };
    let present: [(&str, Option<Range<usize>>); 7] = [
        ("switch", s.switch.as_ref().map(|v| v.span())),
        ("host", s.host.as_ref().map(|v| v.span())),
        ("a", s.a.as_ref().map(|v| v.span())),
        ("b", s.b.as_ref().map(|v| v.span())),
        ("oneway", s.oneway.as_ref().map(|v| v.span())),
        ("latency", s.latency.as_ref().map(|v| v.span())),
        ("for", s.window.as_ref().map(|v| v.span())),
    ];
    let zone_present = [
        ("zone", s.zone.as_ref().map(|v| v.span())),
        ("instance", s.instance.as_ref().map(|v| v.span())),
        ("sled", s.sled.as_ref().map(|v| v.span())),
    ];
    for (field, span) in present.iter().chain(zone_present.iter()) {
        if let Some(span) = span {
            if !allowed.contains(field) {
                return Err((
                    span.clone(),
                    format!("action {name:?} does not take `{field}`"),
                    Some(if allowed.is_empty() {
                        format!("{name} takes no parameters")
                    } else {
                        format!("{name} takes: {}", allowed.join(", "))
                    }),
                ));
            }
        }
    }
    let missing = |field: &str| -> StepError {
        (
            aspan.clone(),
            format!("action {name:?} needs `{field}`"),
            Some(format!("{name} takes: {}", allowed.join(", "))),
        )
    };
    let switch = || -> Result<SwitchSlot, StepError> {
        let sw = s.switch.as_ref().ok_or_else(|| missing("switch"))?;
        let slot: Option<SwitchSlot> = sw.get_ref().parse().ok();
        slot.filter(|slot| st.switches.contains(slot))
            .ok_or_else(|| {
                let known: Vec<String> = st.switches.iter().map(|s| s.to_string()).collect();
                (
                    sw.span(),
                    format!("unknown switch {:?} in rack {}", sw.get_ref(), rack.name),
                    Some(format!("switches of this rack: {}", known.join(", "))),
                )
            })
    };
    let host_ok = |h: &str, span: Range<usize>, st: &PlanState| -> Result<(), StepError> {
        let replacement = h
            .strip_prefix("sled")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n < st.next_sled);
        if st.hosts.iter().any(|k| k == h) || replacement {
            Ok(())
        } else {
            Err((
                span,
                format!("unknown host {h:?} in rack {}", rack.name),
                Some(format!("hosts of this rack: {}", st.hosts.join(", "))),
            ))
        }
    };
    let group = |g: &Option<Spanned<HostGroup>>,
                 field: &str,
                 st: &PlanState|
     -> Result<Vec<String>, StepError> {
        let g = g.as_ref().ok_or_else(|| missing(field))?;
        let names = g.get_ref().names();
        if names.is_empty() {
            return Err((g.span(), format!("`{field}` names no host"), None));
        }
        for h in &names {
            host_ok(h, g.span(), st)?;
        }
        Ok(names)
    };
    let window = || -> Result<Duration, StepError> {
        Ok(s.window.as_ref().ok_or_else(|| missing("for"))?.get_ref().0)
    };
    let action = match name {
        "hide-switch" => {
            let sw = switch()?;
            st.hidden.insert(sw);
            Action::HideSwitch(sw)
        }
        "reveal-switch" => {
            let sw = switch()?;
            if !st.hidden.remove(&sw) {
                return Err((
                    aspan,
                    format!("reveal-switch {sw}: {sw} is not hidden at that point of the plan"),
                    Some("add a hide-switch step before it".into()),
                ));
            }
            Action::RevealSwitch(sw)
        }
        "crash" | "restart" => {
            let h = s.host.as_ref().ok_or_else(|| missing("host"))?;
            host_ok(h.get_ref(), h.span(), st)?;
            if name == "crash" {
                Action::Crash(h.get_ref().clone())
            } else {
                Action::Restart(h.get_ref().clone())
            }
        }
        "dpd-restart" => Action::DpdRestart(switch()?),
        "partition" | "heal" => {
            let (a, b) = (group(&s.a, "a", st)?, group(&s.b, "b", st)?);
            let oneway = s.oneway.as_ref().map(|o| *o.get_ref()).unwrap_or(false);
            let key = (a.clone(), b.clone(), oneway);
            if name == "partition" {
                st.partitions.push(key);
                Action::Partition { a, b, oneway }
            } else {
                let Some(pos) = st.partitions.iter().position(|p| *p == key) else {
                    return Err((aspan, "heal of a partition that was never made".into(), Some("a heal must name the same a, b and oneway as an earlier partition step".into())));
                };
                st.partitions.remove(pos);
                Action::Heal { a, b, oneway }
            }
        }
        "latency" => {
            let (a, b) = (group(&s.a, "a", st)?, group(&s.b, "b", st)?);
            let latency = s
                .latency
                .as_ref()
                .ok_or_else(|| missing("latency"))?
                .get_ref()
                .0;
            Action::Latency { a, b, latency }
        }
        "dpd-errors" => Action::DpdErrors {
            switch: switch()?,
            window: window()?,
        },
        "dpd-hang" => Action::DpdHang {
            switch: switch()?,
            window: window()?,
        },
        "sidecar-power-off" => {
            let sw = switch()?;
            if !st.sidecars_off.insert(sw) {
                return Err((
                    aspan,
                    format!("sidecar {sw} is already off at that point of the plan"),
                    None,
                ));
            }
            Action::SidecarPowerOff(sw)
        }
        "sidecar-power-on" => {
            let sw = switch()?;
            if !st.sidecars_off.remove(&sw) {
                return Err((
                    aspan,
                    format!("sidecar {sw} is not off at that point of the plan"),
                    Some("add a sidecar-power-off step before it".into()),
                ));
            }
            Action::SidecarPowerOn(sw)
        }
        "replace-scrimlet" => {
            let sw = switch()?;
            st.next_sled += 1;
            Action::ReplaceScrimlet(sw)
        }
        "control-plane-down" | "control-plane-crash" => {
            st.control_plane_down = true;
            if name == "control-plane-crash" {
                Action::ControlPlaneCrash
            } else {
                Action::ControlPlaneDown
            }
        }
        "control-plane-up" => {
            if !std::mem::replace(&mut st.control_plane_down, false) {
                return Err((
                    aspan,
                    "control-plane-up, but the plan never took it down".into(),
                    Some("add a control-plane-down step before it".into()),
                ));
            }
            Action::ControlPlaneUp
        }
        "power-off" => {
            st.powered_off = true;
            Action::PowerOff
        }
        "cold-boot" => {
            if !std::mem::replace(&mut st.powered_off, false) {
                return Err((
                    aspan,
                    "cold-boot, but the rack was never powered off".into(),
                    Some("add a power-off step before it".into()),
                ));
            }
            Action::ColdBoot
        }
        "stale-entry" => {
            let sw = switch()?;
            let z = s.zone.as_ref().ok_or_else(|| missing("zone"))?;
            let kinds = [
                ZoneKind::BoundaryNtp,
                ZoneKind::Nexus,
                ZoneKind::ExternalDns,
            ];
            let Some(kind) = kinds.into_iter().find(|k| k.name() == z.get_ref()) else {
                return Err((
                    z.span(),
                    format!("unknown zone {:?}", z.get_ref()),
                    Some("zones: boundary-ntp, nexus, external-dns".into()),
                ));
            };
            Action::StaleEntry {
                switch: sw,
                zone: kind,
            }
        }
        "instance-create" | "instance-start" | "instance-stop" | "instance-delete" => {
            let i = s.instance.as_ref().ok_or_else(|| missing("instance"))?;
            if !instances.iter().any(|x| x.name == *i.get_ref()) {
                let known: Vec<&str> = instances.iter().map(|x| x.name.as_str()).collect();
                return Err((
                    i.span(),
                    format!("unknown instance {:?}", i.get_ref()),
                    Some(if known.is_empty() {
                        "declare it with [[instance]] name = \"...\" (kind = \"instances\")".into()
                    } else {
                        format!("declared instances: {}", known.join(", "))
                    }),
                ));
            }
            let instance = i.get_ref().clone();
            let sled = || -> Result<String, StepError> {
                let sl = s.sled.as_ref().ok_or_else(|| missing("sled"))?;
                let known = rack.sleds.iter().any(|x| x.name == *sl.get_ref());
                if !known {
                    let names: Vec<&str> = rack.sleds.iter().map(|x| x.name.as_str()).collect();
                    return Err((
                        sl.span(),
                        format!("unknown sled {:?} in rack {}", sl.get_ref(), rack.name),
                        Some(format!("sleds of this rack: {}", names.join(", "))),
                    ));
                }
                Ok(sl.get_ref().clone())
            };
            match name {
                "instance-create" => Action::InstanceCreate {
                    instance,
                    sled: sled()?,
                },
                "instance-start" => Action::InstanceStart {
                    instance,
                    sled: sled()?,
                },
                "instance-stop" => Action::InstanceStop { instance },
                _ => Action::InstanceDelete { instance },
            }
        }
        _ => unreachable!("every action in ACTION_FIELDS is handled"),
    };
    Ok(action)
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
    #[serde(default)]
    settle: Option<Spanned<DurationValue>>,
    #[serde(default)]
    zone_start_at_most: Option<DurationValue>,
    #[serde(default)]
    zone_start_at_least: Option<DurationValue>,
    #[serde(default)]
    some_seeds_violate: Option<String>,
    #[serde(default)]
    invariant: Option<Spanned<String>>,
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
    let bad = || {
        format!(
            "invalid duration {s:?}: expected e.g. \"50us\", \"250ms\", \"30s\", \"5m\", \"1h30m\""
        )
    };
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
        let us = match unit {
            "us" | "µs" => value,
            "ms" => value * 1e3,
            "s" => value * 1e6,
            "m" => value * 60e6,
            "h" => value * 3600e6,
            _ => return Err(bad()),
        };
        total += Duration::from_micros(us.round() as u64);
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
            s.expectations[&Variant::Nat(Strategy::SledTask)].outcome,
            Outcome::ConvergesWithin(Duration::from_secs(600))
        );
        assert_eq!(
            s.expectations[&Variant::Nat(Strategy::Legacy)].deadline,
            Duration::from_secs(7200)
        );
        // `converges` runs until `within` plus the stability window.
        assert_eq!(
            s.expectations[&Variant::Nat(Strategy::SledTask)].deadline,
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
    fn unknown_host_is_named_with_the_known_ones() {
        let e = error_of(&format!(
            "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"crash\"\nhost = \"sled9\"\n"
        ));
        assert_eq!((e.line, e.column), (27, 8), "{e}");
        assert!(e.message.contains("unknown host \"sled9\""), "{e}");
        assert!(
            e.hint
                .as_deref()
                .unwrap_or("")
                .contains("sled0, sled1, sled2, switch0, switch1, upstream-ntp"),
            "{e}"
        );
    }

    #[test]
    fn healing_a_partition_never_made_is_rejected() {
        let e = error_of(&format!(
            "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"heal\"\na = \"sled0\"\nb = \"switch1\"\n"
        ));
        assert_eq!((e.line, e.column), (26, 10), "{e}");
        assert!(
            e.message
                .contains("heal of a partition that was never made"),
            "{e}"
        );
        // The same heal after its partition is fine.
        let ok = format!(
            "{GOOD}\n[[step]]\nat = \"30s\"\naction = \"partition\"\na = \"sled0\"\nb = \"switch1\"\n\n[[step]]\nat = \"1m\"\naction = \"heal\"\na = \"sled0\"\nb = \"switch1\"\n"
        );
        assert_eq!(parse("t.toml", &ok).unwrap().plan.steps.len(), 4);
    }

    #[test]
    fn a_field_the_action_does_not_take_is_rejected() {
        let e = error_of(&format!(
            "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"power-off\"\nswitch = \"switch0\"\n"
        ));
        assert_eq!((e.line, e.column), (27, 10), "{e}");
        assert!(
            e.message
                .contains("action \"power-off\" does not take `switch`"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_field_and_an_unknown_action_are_rejected() {
        let e = error_of(&format!(
            "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"dpd-hang\"\nswitch = \"switch0\"\n"
        ));
        assert!(e.message.contains("action \"dpd-hang\" needs `for`"), "{e}");
        let e = error_of(&format!(
            "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"explode\"\n"
        ));
        assert_eq!((e.line, e.column), (26, 10), "{e}");
        assert!(e.message.contains("unknown action \"explode\""), "{e}");
    }

    #[test]
    fn impossible_orders_are_rejected() {
        for (step, message) in [
            ("action = \"cold-boot\"", "never powered off"),
            ("action = \"control-plane-up\"", "never took it down"),
            (
                "action = \"sidecar-power-on\"\nswitch = \"switch0\"",
                "is not off",
            ),
        ] {
            let e = error_of(&format!("{GOOD}\n[[step]]\nat = \"1m\"\n{step}\n"));
            assert!(e.message.contains(message), "{step}: {e}");
        }
    }

    /// GOOD with these steps appended: `(at, the step's other lines)`.
    fn with_steps(steps: &[(&str, &str)]) -> String {
        let mut text = GOOD.to_string();
        for (at, rest) in steps {
            text += &format!("\n[[step]]\nat = \"{at}\"\n{rest}\n");
        }
        text
    }

    /// The error for a step that must come after another but whose window
    /// can draw a time before it.
    fn overlap_error(steps: &[(&str, &str)]) -> ScenarioError {
        let e = error_of(&with_steps(steps));
        assert!(e.message.contains("can happen before"), "{e}");
        e
    }

    #[test]
    fn a_cold_boot_whose_window_can_precede_the_power_off_is_rejected() {
        // Inside the power-off's window: sorted first, so it looks like a
        // cold boot with no power-off at all, but a power-off exists.
        let e = overlap_error(&[
            ("10m..14m", "action = \"power-off\""),
            ("12m..13m", "action = \"cold-boot\""),
        ]);
        assert_eq!((e.line, e.column), (29, 6), "{e}");
        assert_eq!(
            e.message,
            "cold-boot at 12m..13m can happen before power-off at 10m..14m"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "cold-boot's window 12m..13m can start before power-off's 10m..14m ends; \
                 make the windows not overlap"
            )
        );
        assert!(
            e.to_string()
                .starts_with("error: t.toml:29:6: cold-boot at 12m..13m"),
            "{e}"
        );
        // Ending after the power-off's window, but able to start inside it.
        let e = overlap_error(&[
            ("10m..14m", "action = \"power-off\""),
            ("12m..15m", "action = \"cold-boot\""),
        ]);
        assert_eq!((e.line, e.column), (29, 6), "{e}");
        // A fixed time inside the window.
        let e = overlap_error(&[
            ("10m..14m", "action = \"power-off\""),
            ("13m", "action = \"cold-boot\""),
        ]);
        assert_eq!(
            e.hint.as_deref(),
            Some("cold-boot must come after power-off in every draw; start it at 14m or later")
        );
        // Windows that touch are fine: a tie keeps plan order.
        let ok = with_steps(&[
            ("10m..12m", "action = \"power-off\""),
            ("12m..13m", "action = \"cold-boot\""),
        ]);
        assert!(parse("t.toml", &ok).is_ok());
    }

    #[test]
    fn same_time_steps_run_in_file_order() {
        let e = overlap_error(&[
            ("10m", "action = \"cold-boot\""),
            ("10m", "action = \"power-off\""),
        ]);
        assert_eq!(e.line, 25, "{e}");
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "both are at 10m and cold-boot is listed first, so it runs first; \
                 list the power-off step before it"
            )
        );
        let ok = with_steps(&[
            ("10m", "action = \"power-off\""),
            ("10m", "action = \"cold-boot\""),
        ]);
        assert!(parse("t.toml", &ok).is_ok());
    }

    #[test]
    fn a_reveal_whose_window_can_precede_the_hide_is_rejected() {
        let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"4m..6m\""));
        assert_eq!((e.line, e.column), (12, 6), "{e}");
        assert_eq!(
            e.message,
            "reveal-switch at 5m..8m can happen before hide-switch at 4m..6m"
        );
    }

    #[test]
    fn a_heal_whose_window_can_precede_the_partition_is_rejected() {
        let partition = "action = \"partition\"\na = \"sled0\"\nb = \"switch1\"";
        let heal = "action = \"heal\"\na = \"sled0\"\nb = \"switch1\"";
        for (p, h, first) in [("1m..3m", "2m..4m", "heal"), ("1m..5m", "2m..4m", "heal")] {
            let e = overlap_error(&[(p, partition), (h, heal)]);
            assert!(e.message.starts_with(first), "{e}");
            assert_eq!(e.line, 31, "{e}");
        }
        // A partition with other groups does not make the heal possible.
        let e = error_of(&with_steps(&[
            (
                "1m",
                "action = \"partition\"\na = \"sled1\"\nb = \"switch1\"",
            ),
            ("2m", heal),
        ]));
        assert!(e.message.contains("never made"), "{e}");
        let ok = with_steps(&[("1m..2m", partition), ("2m..4m", heal)]);
        assert!(parse("t.toml", &ok).is_ok());
    }

    #[test]
    fn sidecar_steps_whose_windows_overlap_are_rejected() {
        let off = "action = \"sidecar-power-off\"\nswitch = \"switch0\"";
        let on = "action = \"sidecar-power-on\"\nswitch = \"switch0\"";
        // The power-on can come before the power-off.
        let e = overlap_error(&[("10m..14m", off), ("12m..13m", on)]);
        assert_eq!(
            e.message,
            "sidecar-power-on at 12m..13m can happen before sidecar-power-off at 10m..14m"
        );
        // A second power-off can come before the power-on that precedes it.
        let e = overlap_error(&[("10m", off), ("12m..14m", on), ("13m..15m", off)]);
        assert_eq!(
            e.message,
            "sidecar-power-off at 13m..15m can happen before sidecar-power-on at 12m..14m"
        );
        let ok = with_steps(&[("10m", off), ("12m..14m", on), ("14m..15m", off)]);
        assert!(parse("t.toml", &ok).is_ok());
    }

    #[test]
    fn a_control_plane_up_that_can_precede_its_down_is_rejected() {
        let e = overlap_error(&[
            ("12m..14m", "action = \"control-plane-down\""),
            ("13m", "action = \"control-plane-up\""),
        ]);
        assert_eq!(
            e.message,
            "control-plane-up at 13m can happen before control-plane-down at 12m..14m"
        );
        let e = overlap_error(&[
            ("3m..3m150ms", "action = \"control-plane-crash\""),
            ("3m100ms", "action = \"control-plane-up\""),
        ]);
        assert!(e.message.starts_with("control-plane-up at 3m0.1s"), "{e}");
    }

    const INSTANCES: &str = r#"name = "i"
description = "d"
kind = "instances"
rack = "madrid"
ntp_return_switch = "switch0"

[[instance]]
name = "web1"

[[step]]
at = "1m"
action = "instance-create"
instance = "web1"
sled = "sled2"

[expect.saga]
outcome = "converges"
within = "5m"
"#;

    #[test]
    fn instance_scenarios_parse_with_start_implementations() {
        let s = parse("i.toml", INSTANCES).unwrap();
        assert_eq!(s.kind, Kind::Instances);
        assert_eq!(s.variant("saga").unwrap(), Variant::Start(StartImpl::Saga));
        assert!(
            s.variant("sled-task").is_err(),
            "NAT strategies are not start implementations"
        );
        assert_eq!(
            s.plan.steps[0].action,
            Action::InstanceCreate {
                instance: "web1".into(),
                sled: "sled2".into()
            }
        );
    }

    #[test]
    fn unknown_instances_and_sleds_are_rejected() {
        let e = error_of(&INSTANCES.replace("instance = \"web1\"", "instance = \"web2\""));
        assert_eq!((e.line, e.column), (13, 12), "{e}");
        assert_eq!(e.hint.as_deref(), Some("declared instances: web1"));
        let e = error_of(&INSTANCES.replace("sled = \"sled2\"", "sled = \"sled9\""));
        assert_eq!((e.line, e.column), (14, 8), "{e}");
        assert!(e.message.contains("unknown sled \"sled9\""), "{e}");
        // Instances belong to instance scenarios only.
        let e = error_of(&INSTANCES.replace("kind = \"instances\"\n", ""));
        assert!(e.message.contains("only in kind = \"instances\""), "{e}");
    }

    #[test]
    fn violates_needs_a_known_invariant() {
        let e = error_of(&INSTANCES.replace(
            "outcome = \"converges\"\nwithin = \"5m\"",
            "outcome = \"violates\"\ndeadline = \"5m\"",
        ));
        assert!(e.message.contains("needs an `invariant`"), "{e}");
        let e = error_of(&INSTANCES.replace(
            "outcome = \"converges\"\nwithin = \"5m\"",
            "outcome = \"violates\"\ninvariant = \"two-vmms\"\ndeadline = \"5m\"",
        ));
        assert!(e.message.contains("unknown invariant \"two-vmms\""), "{e}");
    }

    #[test]
    fn error_display_shows_line_and_caret() {
        let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"soon\""));
        let shown = e.to_string();
        assert!(shown.starts_with("error: t.toml:7:6: "), "{shown}");
        assert!(shown.contains("7 | at = \"soon\"\n  |      ^"), "{shown}");
    }
}

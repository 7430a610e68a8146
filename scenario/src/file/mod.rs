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
//! [service_times]                  # optional; how long each fake serves a
//! run = "90s"                      # request: fixed, or a uniform range
//! register = "20ms..300ms"         # "A..B" drawn per request from the seed;
//!                                  # register | run | stop | unregister
//!                                  # (sled-agent), dpd_nat, mgs; one left
//!                                  # out keeps upstream's default
//!                                  # (racksim_sim::services::ServiceTimes)
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
//! verdict_mentions = ["switch1"]   # every text must be in the verdict
//! verdict_mentions_any = ["a", "b"] # and one of these (optional)
//! ```
//!
//! What each outcome accepts and which fields it takes is in `expect`'s
//! table; a field that would not be judged is refused.
//!
//! The data path inside this module: `raw` is the file's TOML shape (with
//! spans); `expect` turns `[expect.*]` tables into [`Expectation`]s;
//! `steps` turns each `[[step]]` into a plan [`Action`](racksim_sim::Action)
//! against what the plan has done so far; `order` checks that steps on one
//! piece of state happen in the same order in every draw of their windows;
//! `error` locates every rejection at its line and column.

mod error;
mod expect;
mod live_step;
mod order;
mod rack;
mod raw;
mod steps;
#[cfg(test)]
mod tests;
pub mod write;

use std::{collections::BTreeMap, fmt, path::Path, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;

use racksim_nexus::instances::StartImpl;
use racksim_sim::{
    rack::RackSpec, run::DEFAULT_STABILITY, services::ServiceTimes, Era, EraChoices, InstanceSpec,
    Plan, ServiceNat,
};
use toml::Spanned;

pub use error::located;
pub use error::ScenarioError;
pub use expect::{Expectation, Outcome};
pub use live_step::StepChecker;
pub use raw::{parse_duration, DurationValue};

use error::{hint_for, Locator};
use raw::RawScenario;

/// What a scenario compares: a preset — a service-NAT strategy (`kind =
/// "service-nat"`, the default) or an instance start implementation (`kind =
/// "instances"`) — with any mechanisms set to another era
/// ([`EraChoices`]): `saga`, `saga+nat-ensure=matches-removed`. It is what
/// `--strategy` names and what an `[expect."…"]` key says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Strategy {
    pub preset: Preset,
    /// Mechanisms in another era than the preset's (none by default).
    pub eras: EraChoices,
}

/// The part of a [`Strategy`] that stands for a whole era.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Preset {
    Nat(ServiceNat),
    Start(StartImpl),
}

impl Strategy {
    /// The strategy `s`, its era as it is.
    pub fn nat(s: ServiceNat) -> Strategy {
        Strategy {
            preset: Preset::Nat(s),
            eras: EraChoices::default(),
        }
    }

    /// The start implementation `i`, its era as it is.
    pub fn start(i: StartImpl) -> Strategy {
        Strategy {
            preset: Preset::Start(i),
            eras: EraChoices::default(),
        }
    }

    /// The service-NAT strategy and the start implementation a run of this
    /// strategy has, in a scenario whose instances run beside `service_nat`.
    pub fn parts(self, service_nat: ServiceNat) -> (ServiceNat, StartImpl) {
        match self.preset {
            Preset::Nat(s) => (s, StartImpl::Saga),
            Preset::Start(i) => (service_nat, i),
        }
    }

    /// The control plane a run of this strategy gets: the preset's era,
    /// then the choices.
    pub fn control_plane(self, service_nat: ServiceNat) -> Era {
        let (strategy, start) = self.parts(service_nat);
        self.eras.apply(Era::of(strategy.era(), start))
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.preset {
            Preset::Nat(s) => write!(f, "{s}")?,
            Preset::Start(s) => write!(f, "{s}")?,
        }
        write!(f, "{}", self.eras)
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
    pub service_nat: ServiceNat,
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
    /// The external-IP pool instances take their addresses from at create
    /// (`ip_pool = "203.0.113.20-203.0.113.21"`); `None` (the default):
    /// instance N has `203.0.113.(10+N)` from the start.
    pub ip_pool: Option<racksim_nexus::IpPool>,
    /// How long each fake takes to serve a request: upstream's
    /// ([`ServiceTimes::default`]) with the file's `[service_times]` in
    /// their place.
    pub service_times: ServiceTimes,
    pub plan: Plan,
    pub expectations: BTreeMap<Strategy, Expectation>,
}

impl Scenario {
    /// Parse a `--strategy` value for this scenario's kind.
    pub fn strategy(&self, name: &str) -> Result<Strategy, String> {
        parse_strategy(self.kind, self.service_nat, name)
    }

    /// The strategy `name`, which must be one this scenario has an
    /// expectation for; `what` names the argument in errors.
    pub fn expected_strategy(&self, name: &str, what: &str) -> Result<Strategy, String> {
        let strategy = self
            .strategy(name)
            .map_err(|e| format!("error: {what}: {e}"))?;
        if !self.expectations.contains_key(&strategy) {
            return Err(format!(
                "error: scenario {} has no expectation for strategy {strategy}",
                self.name
            ));
        }
        Ok(strategy)
    }
}

/// The expectation whose run ends first: every step must come before it.
/// Each expectation's run lasts until its own deadline, so a step after
/// the shortest one would silently not happen in that run, and its
/// expectation would be judged on a plan cut short (issue 39: a `legacy`
/// deadline of 5m before the 6m17s reveal "held" for the wrong reason).
fn first_deadline(
    raw: &RawScenario,
    kind: Kind,
    service_nat: ServiceNat,
    expectations: &BTreeMap<Strategy, expect::Expectation>,
    loc: &Locator,
) -> Option<order::Deadline> {
    raw.expect
        .iter()
        .filter_map(|(key, exp)| {
            let strategy = parse_strategy(kind, service_nat, key.get_ref()).ok()?;
            let at = expectations.get(&strategy)?.deadline;
            // Where the deadline comes from: written, or `within` plus the
            // stability window.
            let (span, how) = match (&exp.deadline, &exp.within) {
                (Some(d), _) => (d.span(), "its `deadline`"),
                (None, Some(w)) => (w.span(), "its `within` plus the stability window"),
                (None, None) => (key.span(), "its deadline"),
            };
            let line = loc.error(Some(span), String::new(), None).line;
            Some(order::Deadline {
                at,
                what: format!("expect.{strategy}'s deadline ({how}, line {line})"),
            })
        })
        .min_by_key(|d| d.at)
}

fn parse_strategy(kind: Kind, service_nat: ServiceNat, name: &str) -> Result<Strategy, String> {
    let (preset, eras) = EraChoices::split(name)?;
    // One word, two kinds of preset: say which kind a name is when it is
    // the other kind's, since the names are all a user sees.
    let preset = match kind {
        Kind::ServiceNat => Preset::Nat(preset.parse::<ServiceNat>().map_err(|e| {
            match preset.parse::<StartImpl>() {
                Ok(_) => format!(
                    "{preset:?} is an instance start, a strategy of kind = \"instances\" scenarios; this scenario is kind = \"service-nat\", whose strategies are {}",
                    strategy_names()
                ),
                Err(_) => e,
            }
        })?),
        Kind::Instances => Preset::Start(preset.parse::<StartImpl>().map_err(|e| {
            match preset.parse::<ServiceNat>() {
                Ok(_) => format!(
                    "{preset:?} is a service-NAT strategy, of kind = \"service-nat\" scenarios; this scenario is kind = \"instances\", whose strategies are its instance starts: {}",
                    StartImpl::ALL.map(|i| i.as_str()).join(", ")
                ),
                Err(_) => e.to_string(),
            }
        })?),
    };
    let strategy = Strategy { preset, eras };
    if !eras.is_empty() {
        let (strategy, start) = strategy.parts(service_nat);
        eras.check(
            Era::of(strategy.era(), start),
            start,
            kind == Kind::Instances,
        )
        .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(strategy)
}

/// The service-NAT strategies, as a user types them.
fn strategy_names() -> String {
    ServiceNat::ALL.map(|s| s.name()).join(", ")
}

/// Parse and validate a scenario from its text. `origin` names it in errors.
pub fn parse(origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let loc = Locator { origin, text };
    let err = |span, message, hint| loc.error(span, message, hint);
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        // toml says nothing for some bytes (a control character in a
        // comment); found by the parser fuzz test (tests/parser_fuzz.rs).
        let message = if message.is_empty() {
            "invalid TOML: unexpected character (a control character, or a byte that starts no TOML item)".to_string()
        } else {
            message
        };
        let hint = hint_for(&message);
        err(e.span(), message, hint)
    })?;

    let rack = rack::rack(&raw.rack, &loc)?;
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
        None => ServiceNat::SLED_TASK,
        Some(s) => s
            .get_ref()
            .parse::<ServiceNat>()
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

    let stability = raw.stability.map(|d| d.0).unwrap_or(DEFAULT_STABILITY);
    // The free NAT statement window was replaced by the database's stall
    // (issue 38): a file that still sets it is told what to write instead.
    if let Some(w) = &raw.nat_window {
        return Err(err(
            Some(w.span()),
            "`nat_window` was removed: a NAT statement's version is now held invisible only by a database stall".into(),
            Some("add a plan step `action = \"db-stall\"`, `for = \"9s\"` where the window should be (a CockroachDB node's leases move after about 9 s)".into()),
        ));
    }
    let ip_pool = match &raw.ip_pool {
        None => None,
        Some(p) => Some(ip_pool(p, kind, &rack, &loc)?),
    };
    let service_times = raw
        .service_times
        .as_ref()
        .map_or_else(ServiceTimes::default, |t| t.apply(ServiceTimes::default()));
    let expectations = expect::expectations(&raw, kind, service_nat, stability, &loc)?;
    let first_deadline = first_deadline(&raw, kind, service_nat, &expectations, &loc);
    let plan = order::plan(&raw.steps, &rack, &instances, first_deadline.as_ref(), &loc)?;

    Ok(Scenario {
        kind,
        service_nat,
        instances,
        name: raw.name,
        description: raw.description,
        origin: origin.to_string(),
        rack_name: rack.name.clone(),
        rack,
        ntp_return_switch,
        stability,
        ip_pool,
        service_times,
        plan,
        expectations,
    })
}

/// `ip_pool = "FIRST-LAST"` (or one address): only in an instances
/// scenario, a well-formed IPv4 range, clear of the rack's service-zone
/// addresses (upstream keeps services in a pool of their own, so an
/// instance's address never meets a service zone's row).
fn ip_pool(
    value: &Spanned<String>,
    kind: Kind,
    rack: &RackSpec,
    loc: &Locator,
) -> Result<racksim_nexus::IpPool, ScenarioError> {
    let at = || Some(value.span());
    if kind != Kind::Instances {
        return Err(loc.error(
            at(),
            "`ip_pool` only applies to kind = \"instances\"".into(),
            Some("it is the pool instances take their external IPs from".into()),
        ));
    }
    let pool = racksim_nexus::IpPool::parse(value.get_ref()).map_err(|e| {
        loc.error(
            at(),
            format!("invalid ip_pool {:?}: {e}", value.get_ref()),
            Some("write FIRST-LAST, both included, e.g. \"203.0.113.20-203.0.113.21\"".into()),
        )
    })?;
    if let Some(zone) = rack.zones.iter().find(|z| pool.contains(z.external_ip)) {
        return Err(loc.error(
            at(),
            format!(
                "ip_pool {pool} holds {}, the external IP of {}",
                zone.external_ip, zone.kind
            ),
            Some("service zones have addresses of their own; choose a range clear of them".into()),
        ));
    }
    Ok(pool)
}

/// Read and parse a scenario file.
pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = crate::input::read_text(path, "scenario file")?;
    parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
}

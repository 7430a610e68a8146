//! The file's TOML shape, with the spans errors point at.
//!
//! An `Option` field that a file leaves out is `None` (serde's derive
//! reads a missing `Option` so), so only the lists and tables carry
//! `#[serde(default)]`.

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::{
    services::{ServiceTime, ServiceTimes},
    At,
};
use serde::{de, Deserialize, Deserializer};
use toml::Spanned;

use super::rack::RawRack;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub name: String,
    pub description: String,
    pub kind: Option<Spanned<String>>,
    pub service_nat: Option<Spanned<String>>,
    #[serde(default, rename = "instance")]
    pub instances: Vec<RawInstance>,
    pub rack: Spanned<RawRack>,
    pub ntp_return_switch: Spanned<String>,
    pub stability: Option<DurationValue>,
    /// Removed (refused with an error naming `db-stall`).
    pub nat_window: Option<Spanned<String>>,
    pub ip_pool: Option<Spanned<String>>,
    pub service_times: Option<RawServiceTimes>,
    #[serde(default, rename = "step")]
    pub steps: Vec<RawStep>,
    #[serde(default)]
    pub expect: BTreeMap<Spanned<String>, RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInstance {
    pub name: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub at: Spanned<AtValue>,
    pub action: Spanned<String>,
    pub switch: Option<Spanned<String>>,
    pub host: Option<Spanned<String>>,
    pub a: Option<Spanned<HostGroup>>,
    pub b: Option<Spanned<HostGroup>>,
    pub oneway: Option<Spanned<bool>>,
    pub latency: Option<Spanned<DurationValue>>,
    #[serde(default, rename = "for")]
    pub window: Option<Spanned<DurationValue>>,
    pub zone: Option<Spanned<String>>,
    pub instance: Option<Spanned<String>>,
    pub sled: Option<Spanned<String>>,
    pub change: Option<Spanned<String>>,
    pub external_ip: Option<Spanned<String>>,
}

/// An `[expect.STRATEGY]` table as written ([`super::expect`] validates it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub outcome: Spanned<String>,
    pub within: Option<Spanned<DurationValue>>,
    pub deadline: Option<Spanned<DurationValue>>,
    pub verdict_mentions: Option<Spanned<Vec<Spanned<String>>>>,
    pub verdict_mentions_any: Option<Spanned<Vec<Spanned<String>>>>,
    pub settle: Option<Spanned<DurationValue>>,
    pub zone_start_at_most: Option<Spanned<DurationValue>>,
    pub zone_start_at_least: Option<Spanned<DurationValue>>,
    pub some_seeds_violate: Option<Spanned<InvariantNames>>,
    pub some_seeds_fail: Option<Spanned<bool>>,
    pub invariant: Option<Spanned<String>>,
    pub converged_by: Option<Spanned<DurationValue>>,
    pub repair_within: Option<Spanned<DurationValue>>,
    pub operations: Option<Spanned<String>>,
    pub operations_within: Option<Spanned<DurationValue>>,
    pub failed_operations_mention: Option<Spanned<Vec<String>>>,
}

/// `some_seeds_violate`: one invariant's name or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum InvariantNames {
    One(String),
    Many(Vec<String>),
}

/// One host or a list of hosts.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum HostGroup {
    One(String),
    Many(Vec<String>),
}

impl HostGroup {
    pub fn names(&self) -> Vec<String> {
        match self {
            HostGroup::One(h) => vec![h.clone()],
            HostGroup::Many(v) => v.clone(),
        }
    }
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

/// `[service_times]`: each service's time, fixed (`"90s"`) or a uniform
/// range (`"2s..10s"`); a service left out keeps upstream's default
/// (`racksim_sim::services::ServiceTimes`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServiceTimes {
    pub register: Option<ServiceTimeValue>,
    pub run: Option<ServiceTimeValue>,
    pub stop: Option<ServiceTimeValue>,
    pub unregister: Option<ServiceTimeValue>,
    pub dpd_nat: Option<ServiceTimeValue>,
    pub mgs: Option<ServiceTimeValue>,
}

impl RawServiceTimes {
    /// The defaults with this table's values in their place.
    pub fn apply(&self, mut times: ServiceTimes) -> ServiceTimes {
        for (name, value) in [
            ("register", &self.register),
            ("run", &self.run),
            ("stop", &self.stop),
            ("unregister", &self.unregister),
            ("dpd_nat", &self.dpd_nat),
            ("mgs", &self.mgs),
        ] {
            if let (Some(v), Some(slot)) = (value, times.get_mut(name)) {
                *slot = v.0;
            }
        }
        times
    }
}

/// One service's time as written: `"90s"` or `"2s..10s"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ServiceTimeValue(pub ServiceTime);

impl<'de> Deserialize<'de> for ServiceTimeValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ServiceTime::parse(&s, parse_duration)
            .map(ServiceTimeValue)
            .map_err(|e| {
                de::Error::custom(format!(
                    "{e} (a service time is a duration, \"90s\", or a uniform range, \"2s..10s\")"
                ))
            })
    }
}

/// A step time: a duration, or a window `A..B` drawn from the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AtValue(pub At);

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

/// The longest duration a file or a live request may give: 10,000
/// simulated hours (about 14 months; the 1,000-hour soak takes half a
/// minute). A longer one is a slip, and one near `u64::MAX` microseconds
/// used to saturate silently (issue 39).
pub const MAX_DURATION: Duration = Duration::from_secs(10_000 * 3600);

fn too_long(s: &str) -> String {
    format!("duration {s:?} is longer than the longest racksim simulates, 10000h")
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
        // Each part and the sum checked against the bound before adding,
        // so nothing saturates or overflows on the way.
        let part = us.round();
        if part.is_nan() || part > MAX_DURATION.as_micros() as f64 {
            return Err(too_long(s));
        }
        total = total
            .checked_add(Duration::from_micros(part as u64))
            .filter(|t| *t <= MAX_DURATION)
            .ok_or_else(|| too_long(s))?;
    }
    Ok(total)
}

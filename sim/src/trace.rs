//! The trace: one canonical line per meaningful event.
//!
//! A line is `HH:MM:SS.uuuuuu  host  what happened`, stamped with simulated
//! time and host *names*; each line is also a record with a [`Kind`] and
//! structured fields. Nothing in a line depends on wall-clock time, request
//! ids or registration order, so the same seed gives byte-identical traces
//! and a reviewer's diff shows only behaviour that changed.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::Serialize;

/// What a trace line is about: lets machines (`racksim run --trace-json`,
/// the HTML report) read a run without parsing its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A plan step (fault or action) applied. Fields: `step`.
    Plan,
    /// A host's software started (switch zone, sled-agent).
    Boot,
    /// A zone starting or started. Fields: `zone`, and `took_us` once started.
    Zone,
    /// A dpd NAT table changed. Fields: `switch`, `op` (`add`, `remove`,
    /// `reset`), `external_ip`, `first_port`, `last_port`, `target`, `vni`.
    Nat,
    /// A switch began or stopped dropping inbound traffic. Fields:
    /// `switch`, `dropping` (`true`/`false`).
    Dataplane,
    /// A sled's NTP zone made its first clock update. Fields: `zone`
    /// (`boundary-ntp`, `internal-ntp`); `via` (boundary NTP: the switch
    /// its last sample came through).
    Ntp,
    /// The control plane came up or went down. Fields: `state` (`up`, `down`).
    ControlPlane,
    /// A reconciler's activation, status or progress. Fields: `task`, and
    /// what the reconciler reports (`reason`, `outcome`, `switch`, ...).
    Reconciler,
    /// The control plane's view of an instance: database state changes,
    /// API results. Fields: `instance`, and `state` for state changes.
    Instance,
    /// A start saga's progress. Fields: `saga`.
    Saga,
    /// A VMM on a sled. Fields: `sled`, `instance`, `vmm`, `op`
    /// (`registered`, `running`, `destroyed`).
    Vmm,
    /// A V2P mapping on a sled. Fields: `sled`, `op` (`add`, `remove`),
    /// `virtual_ip`, `target`, `vni`.
    V2p,
    /// The run's verdict.
    Verdict,
    /// The testbed itself failed (a fake's server stopped, a socket could
    /// not be bound); the run ends with a testbed error.
    TestbedError,
}

/// One event: a line for people, a record for machines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceLine {
    /// Simulated time since the start of the run.
    #[serde(rename = "at_us", serialize_with = "micros")]
    pub at: Duration,
    pub host: String,
    pub kind: Kind,
    pub text: String,
    /// Structured details (see [`Kind`]); ordered, so JSON is stable.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<&'static str, String>,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

impl TraceLine {
    pub fn new(at: Duration, host: &str, kind: Kind, text: impl Into<String>) -> Self {
        TraceLine {
            at,
            host: host.to_string(),
            kind,
            text: text.into(),
            fields: BTreeMap::new(),
        }
    }

    /// Add a structured field.
    pub fn field(mut self, key: &'static str, value: impl ToString) -> Self {
        self.fields.insert(key, value.to_string());
        self
    }

    /// The record as one line of JSON (`racksim run --trace-json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("trace lines serialize")
    }
}

impl fmt::Display for TraceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {:<12}  {}", fmt_time(self.at), self.host, self.text)
    }
}

/// `HH:MM:SS.uuuuuu` since the start of the run.
pub fn fmt_time(d: Duration) -> String {
    let us = d.as_micros();
    let (h, rem) = (us / 3_600_000_000, us % 3_600_000_000);
    let (m, rem) = (rem / 60_000_000, rem % 60_000_000);
    let (s, us) = (rem / 1_000_000, rem % 1_000_000);
    format!("{h:02}:{m:02}:{s:02}.{us:06}")
}

/// A compact duration for humans and scenario files: `1h2m3.5s`, `300ms`, `0s`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        return "0s".to_string();
    }
    if us < 1000 {
        return format!("{us}us");
    }
    let ms = d.as_millis();
    if ms < 1000 {
        let frac = us % 1000;
        if frac == 0 {
            return format!("{ms}ms");
        }
        let f = format!("{frac:03}");
        return format!("{ms}.{}ms", f.trim_end_matches('0'));
    }
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, frac) = (rem / 1000, rem % 1000);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if s > 0 || frac > 0 {
        if frac > 0 {
            let f = format!("{frac:03}");
            out += &format!("{s}.{}s", f.trim_end_matches('0'));
        } else {
            out += &format!("{s}s");
        }
    }
    out
}

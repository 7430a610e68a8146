//! A [`Scenario`] written back as a scenario file: what `racksim fuzz`
//! prints for a drawn plan and what `racksim shrink` writes into
//! `scenarios/regressions/`. Parsing the text gives the same scenario again
//! (same plan, instances and expectations), and writing that gives the same
//! bytes: every duration is written exactly, to the microsecond.

#[cfg(test)]
mod tests;

use std::{fmt::Write as _, time::Duration};

use racksim_sim::{
    plan::ConfigChange,
    rack::RackSpec,
    run::DEFAULT_STABILITY,
    services::{times::fmt_with, ServiceTimes},
    Action, At,
};

use super::{Expectation, Kind, Outcome, Scenario};

/// The scenario as a file. `header` lines become `#` comments at the top
/// (where it came from, how to replay it).
pub fn scenario_toml(s: &Scenario, header: &[String]) -> String {
    let mut out = String::new();
    for line in header {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
    let _ = writeln!(out, "name = {}", quote(&s.name));
    let _ = writeln!(out, "description = {}", quote(&s.description));
    if s.kind == Kind::Instances {
        out.push_str("kind = \"instances\"\n");
        let _ = writeln!(out, "service_nat = {}", quote(s.service_nat.name()));
    }
    // A preset by name when it is one; a declared rack as a [rack] table
    // (after the root keys, as TOML requires).
    let preset = RackSpec::by_name(&s.rack_name).is_some_and(|r| r == s.rack);
    if preset {
        let _ = writeln!(out, "rack = {}", quote(&s.rack_name));
    }
    let _ = writeln!(
        out,
        "ntp_return_switch = {}",
        quote(&s.ntp_return_switch.to_string())
    );
    if s.stability != DEFAULT_STABILITY {
        let _ = writeln!(out, "stability = {}", quote(&duration(s.stability)));
    }
    if let Some(pool) = s.ip_pool {
        let _ = writeln!(out, "ip_pool = {}", quote(&pool.to_string()));
    }
    if !preset {
        rack_table(&mut out, &s.rack);
    }
    service_times_table(&mut out, &s.service_times);
    for i in &s.instances {
        let _ = write!(out, "\n[[instance]]\nname = {}\n", quote(&i.name));
    }
    for step in &s.plan.steps {
        out.push_str("\n[[step]]\n");
        let at = match step.at {
            At::Fixed(d) => duration(d),
            At::Window(a, b) => format!("{}..{}", duration(a), duration(b)),
        };
        let _ = writeln!(out, "at = {}", quote(&at));
        let _ = writeln!(out, "action = {}", quote(step.action.kind()));
        for (field, value) in action_fields(&step.action) {
            let _ = writeln!(out, "{field} = {value}");
        }
    }
    for (strategy, exp) in &s.expectations {
        // A strategy with era choices has `+` and `=`, which a bare TOML key
        // may not.
        let key = strategy.to_string();
        let key = if key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            key
        } else {
            quote(&key)
        };
        let _ = write!(out, "\n[expect.{key}]\n");
        expectation(&mut out, exp, s.stability);
    }
    out
}

fn expectation(out: &mut String, e: &Expectation, stability: Duration) {
    let deadline = |out: &mut String| {
        let _ = writeln!(out, "deadline = {}", quote(&duration(e.deadline)));
    };
    match e.outcome {
        Outcome::ConvergesWithin(within) => {
            out.push_str("outcome = \"converges\"\n");
            let _ = writeln!(out, "within = {}", quote(&duration(within)));
            // The parser's default deadline is `within` plus the stability
            // window; anything else is written out.
            if e.deadline != within + stability {
                deadline(out);
            }
        }
        Outcome::Fails => {
            out.push_str("outcome = \"fails\"\n");
            deadline(out);
        }
        Outcome::Any => {
            out.push_str("outcome = \"any\"\n");
            deadline(out);
        }
        Outcome::Violates(inv) => {
            out.push_str("outcome = \"violates\"\n");
            let _ = writeln!(out, "invariant = {}", quote(inv));
            deadline(out);
        }
    }
    for (key, texts) in [
        ("verdict_mentions", &e.verdict_mentions),
        ("verdict_mentions_any", &e.verdict_mentions_any),
    ] {
        if !texts.is_empty() {
            let items: Vec<String> = texts.iter().map(|m| quote(m)).collect();
            let _ = writeln!(out, "{key} = [{}]", items.join(", "));
        }
    }
    for (key, value) in [
        ("settle", e.settle),
        ("zone_start_at_most", e.zone_start_at_most),
        ("zone_start_at_least", e.zone_start_at_least),
        ("converged_by", e.converged_by),
        ("repair_within", e.repair_within),
        ("operations_within", e.operations_within),
    ] {
        if let Some(d) = value {
            let _ = writeln!(out, "{key} = {}", quote(&duration(d)));
        }
    }
    match e.some_seeds_violate.as_slice() {
        [] => {}
        [one] => {
            let _ = writeln!(out, "some_seeds_violate = {}", quote(one));
        }
        many => {
            let items: Vec<String> = many.iter().map(|m| quote(m)).collect();
            let _ = writeln!(out, "some_seeds_violate = [{}]", items.join(", "));
        }
    }
    if e.some_seeds_fail {
        out.push_str("some_seeds_fail = true\n");
    }
    if e.operations_succeed {
        out.push_str("operations = \"succeed\"\n");
    }
    if e.operations_some_fail {
        out.push_str("operations = \"some-fail\"\n");
    }
    if !e.failed_operations_mention.is_empty() {
        let items: Vec<String> = e
            .failed_operations_mention
            .iter()
            .map(|m| quote(m))
            .collect();
        let _ = writeln!(out, "failed_operations_mention = [{}]", items.join(", "));
    }
}

/// The fields of an action besides `at` and `action`, as TOML values, in
/// the order docs/scenario-files.md's action table lists them.
fn action_fields(a: &Action) -> Vec<(&'static str, String)> {
    let s = |v: &dyn ToString| quote(&v.to_string());
    let group = |hosts: &[String]| match hosts {
        [one] => quote(one),
        many => format!(
            "[{}]",
            many.iter().map(|h| quote(h)).collect::<Vec<_>>().join(", ")
        ),
    };
    match a {
        Action::HideSwitch(sw)
        | Action::RevealSwitch(sw)
        | Action::DpdRestart(sw)
        | Action::SidecarPowerOff(sw)
        | Action::SidecarPowerOn(sw)
        | Action::ScrimletReboot(sw)
        | Action::ScrimletBack(sw)
        | Action::ReplaceScrimlet(sw) => vec![("switch", s(sw))],
        Action::Crash(h) | Action::Restart(h) => vec![("host", quote(h))],
        Action::Partition { a, b, oneway } | Action::Heal { a, b, oneway } => {
            let mut v = vec![("a", group(a)), ("b", group(b))];
            if *oneway {
                v.push(("oneway", "true".to_string()));
            }
            v
        }
        Action::Latency { a, b, latency } => vec![
            ("a", group(a)),
            ("b", group(b)),
            ("latency", quote(&duration(*latency))),
        ],
        Action::DpdErrors { switch, window }
        | Action::DpdHang { switch, window }
        | Action::MgsErrors { switch, window }
        | Action::MgsHang { switch, window } => {
            vec![("switch", s(switch)), ("for", quote(&duration(*window)))]
        }
        Action::DbStall { window } | Action::DbErrors { window } => {
            vec![("for", quote(&duration(*window)))]
        }
        Action::ControlPlaneDown
        | Action::ControlPlaneUp
        | Action::ControlPlaneCrash
        | Action::PowerOff
        | Action::ColdBoot => vec![],
        Action::StaleEntry { switch, zone } | Action::LostEntry { switch, zone } => {
            vec![("switch", s(switch)), ("zone", s(zone))]
        }
        Action::InstanceCreate { instance, sled } | Action::InstanceStart { instance, sled } => {
            vec![("instance", quote(instance)), ("sled", quote(sled))]
        }
        Action::InstanceStop { instance } | Action::InstanceDelete { instance } => {
            vec![("instance", quote(instance))]
        }
        Action::ConfigChange(c) => {
            let mut v = vec![("change", quote(c.kind()))];
            match c {
                ConfigChange::AddZone {
                    kind,
                    sled,
                    external_ip,
                } => {
                    v.push(("zone", s(kind)));
                    v.push(("sled", quote(sled)));
                    if let Some(ip) = external_ip {
                        v.push(("external_ip", s(ip)));
                    }
                }
                ConfigChange::MoveZone { zone, sled } => {
                    v.push(("zone", s(zone)));
                    v.push(("sled", quote(sled)));
                }
                ConfigChange::RemoveZone { zone } => v.push(("zone", s(zone))),
            }
            v
        }
    }
}

/// A declared rack as the `[rack]` table that parses back to it.
fn rack_table(out: &mut String, rack: &RackSpec) {
    let names: Vec<String> = rack.sleds.iter().map(|s| quote(&s.name)).collect();
    let sled = |i: usize| quote(&rack.sleds[i].name);
    let _ = write!(
        out,
        "\n[rack]\nname = {}\nsleds = [{}]\n",
        quote(&rack.name),
        names.join(", ")
    );
    let scrimlets: Vec<String> = rack
        .switches
        .iter()
        .map(|sw| format!("{} = {}", sw.slot, sled(sw.scrimlet)))
        .collect();
    let _ = writeln!(out, "scrimlets = {{ {} }}", scrimlets.join(", "));
    let uplinked: Vec<String> = rack
        .uplinked_switches()
        .iter()
        .map(|s| quote(s.as_str()))
        .collect();
    let _ = writeln!(out, "uplinked = [{}]", uplinked.join(", "));
    let dns: Vec<String> = rack.internal_dns.iter().map(|&i| sled(i)).collect();
    let _ = writeln!(out, "internal_dns = [{}]", dns.join(", "));
    for z in &rack.zones {
        let _ = write!(
            out,
            "\n[[rack.zone]]\nkind = {}\nsled = {}\nexternal_ip = {}\nfirst_port = {}\nlast_port = {}\n",
            quote(z.kind.as_str()),
            sled(z.sled),
            quote(&z.external_ip.to_string()),
            z.first_port,
            z.last_port
        );
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A duration as the parser reads it, exactly: `1h2m3s4ms5us`, `0s`.
pub fn duration(d: Duration) -> String {
    let mut us = d.as_micros();
    if us == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("h", 3_600_000_000u128),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
        ("us", 1),
    ] {
        if us >= size {
            let _ = write!(out, "{}{unit}", us / size);
            us %= size;
        }
    }
    out
}

/// `[service_times]` with each service whose time is not upstream's
/// default; nothing when all are.
fn service_times_table(out: &mut String, times: &ServiceTimes) {
    let defaults = ServiceTimes::default().named();
    let changed: Vec<_> = times
        .named()
        .into_iter()
        .zip(defaults)
        .filter(|(t, d)| t != d)
        .map(|(t, _)| t)
        .collect();
    if changed.is_empty() {
        return;
    }
    out.push_str("\n[service_times]\n");
    for (name, time) in changed {
        let _ = writeln!(out, "{name} = {}", quote(&fmt_with(&time, duration)));
    }
}

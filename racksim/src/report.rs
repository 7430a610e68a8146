//! What `racksim run` prints for one run: the seed and every option drawn
//! from it first, then the trace, the verdict, and the judgement. Nothing in
//! it depends on wall-clock time, so the same seed prints the same bytes; the
//! snapshots in `snapshots/` are exactly this text.

use std::fmt::Write;

use racksim_sim::{
    run::{MAX_LATENCY, MIN_LATENCY},
    trace::{fmt_duration, fmt_time},
    InstanceEra,
};

use crate::{
    file::{Kind, Scenario, Strategy},
    runner::{self, Judged},
};

/// Trace records as JSON lines (`racksim run --trace-json`), each with the
/// strategy that produced it.
pub fn write_trace_json(
    out: &mut impl std::io::Write,
    strategy: &str,
    trace: &[racksim_sim::trace::TraceLine],
) -> std::io::Result<()> {
    for line in trace {
        let mut value = serde_json::to_value(line).expect("trace lines serialize");
        if let Some(obj) = value.as_object_mut() {
            obj.insert("strategy".into(), strategy.into());
        }
        writeln!(out, "{value}")?;
    }
    out.flush()
}

/// Render one judged run. `scenario_arg` is how the user named the scenario
/// (for the replay command); `drawn` says whether the seed was drawn at random.
pub fn render(
    scenario: &Scenario,
    scenario_arg: &str,
    strategy: Strategy,
    seed: u64,
    drawn: bool,
    judged: &Judged,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let exp = &judged.expectation;
    let _ = writeln!(w, "scenario: {} ({})", scenario.name, scenario.origin);
    let _ = writeln!(w, "  {}", scenario.description);
    let _ = writeln!(
        w,
        "seed: {seed}{}",
        if drawn {
            " (drawn at random; pass --seed to replay)"
        } else {
            ""
        }
    );
    match scenario.kind {
        Kind::ServiceNat => {
            let _ = writeln!(w, "strategy: {strategy}");
        }
        Kind::Instances => {
            let _ = writeln!(
                w,
                "strategy: {strategy} (instance start); service NAT: {}",
                scenario.service_nat
            );
            let names: Vec<&str> = scenario.instances.iter().map(|i| i.name.as_str()).collect();
            let _ = writeln!(w, "instances: {}", names.join(", "));
        }
    }
    // The era the run stands for, and the control plane it configured: the
    // configuration `runner::run` ran, so the header cannot disagree with it.
    if let Some(cfg) = runner::config(scenario, strategy, seed) {
        let era = cfg.strategy.era();
        match scenario.kind {
            Kind::ServiceNat => {
                let _ = writeln!(w, "era: {era} ({})", era.upstream());
            }
            Kind::Instances => {
                let instances = InstanceEra::of(cfg.start);
                let _ = writeln!(
                    w,
                    "era: {instances} ({}); service NAT: {era}",
                    instances.upstream()
                );
            }
        }
        let _ = writeln!(w, "control plane: {}", cfg.era);
    }
    // Only with --mutant: a run of the real reconciler prints what it
    // always did.
    if let Some(m) = judged.mutant {
        let _ = writeln!(
            w,
            "mutant: {m} (a deliberate reconciler bug, from the kill table of `racksim mutants`)"
        );
    }
    let _ = writeln!(
        w,
        "rack: {} ({} sleds; uplinked switches: {}); NTP replies return via {}",
        scenario.rack_name,
        scenario.rack.sleds.len(),
        scenario
            .rack
            .uplinked_switches()
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        scenario.ntp_return_switch
    );
    let _ = writeln!(
        w,
        "run: deadline {}, stability window {}, event-driven time, message latency {}..{}",
        fmt_duration(exp.deadline),
        fmt_duration(scenario.stability),
        fmt_duration(MIN_LATENCY),
        fmt_duration(MAX_LATENCY)
    );
    // Likewise: a run without a pool prints what it always did.
    if let Some(pool) = scenario.ip_pool {
        let _ = writeln!(
            w,
            "database: instances take their external IPs from pool {pool} ({} address{}) at create, the lowest free first; a delete gives them back",
            pool.len(),
            if pool.len() == 1 { "" } else { "es" }
        );
    }
    // Only when the file sets them: upstream's defaults print nothing.
    if scenario.service_times != racksim_sim::services::ServiceTimes::default() {
        let times: Vec<String> = scenario
            .service_times
            .named()
            .iter()
            .map(|(name, t)| {
                format!(
                    "{name} {}",
                    racksim_sim::services::times::fmt_with(t, fmt_duration)
                )
            })
            .collect();
        let _ = writeln!(
            w,
            "service times (the file's [service_times], drawn per request from the seed): {}",
            times.join(", ")
        );
    }
    let _ = writeln!(w, "plan (times drawn from the seed):");
    for step in &judged.outcome.steps {
        match step.drawn_from {
            Some(window) => {
                let _ = writeln!(
                    w,
                    "  {}  {}   (drawn from {window})",
                    fmt_time(step.at),
                    step.action
                );
            }
            None => {
                let _ = writeln!(w, "  {}  {}", fmt_time(step.at), step.action);
            }
        }
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "trace:");
    for line in &judged.outcome.trace {
        let _ = writeln!(w, "{line}");
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "timing:");
    for line in judged.outcome.timing.lines() {
        let _ = writeln!(w, "  {line}");
    }
    // What the instance API told its callers, where it was not success:
    // convergence can hide an operation that reported failure.
    let unsuccessful: Vec<_> = judged
        .outcome
        .operations()
        .into_iter()
        .filter(|o| !o.succeeded())
        .collect();
    if !unsuccessful.is_empty() {
        let _ = writeln!(w);
        let _ = writeln!(w, "operations that did not answer success to their caller:");
        for op in &unsuccessful {
            let _ = writeln!(w, "  {op}");
        }
    }
    let _ = writeln!(w);
    match &judged.judgement {
        Ok(why) => {
            let _ = writeln!(w, "expectation for {strategy}: HOLDS ({why})");
        }
        Err(why) => {
            let _ = writeln!(w, "expectation for {strategy}: DOES NOT HOLD ({why})");
        }
    }
    if !judged.outcome.verdict.converged() || judged.judgement.is_err() {
        let _ = writeln!(
            w,
            "replay: {}",
            judged.replay_command(scenario_arg, strategy, seed)
        );
    }
    out
}

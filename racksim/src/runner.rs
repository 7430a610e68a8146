//! Runs a scenario under a strategy and seed, and judges the result against
//! the scenario's expectation.

use racksim_mutants::Mutant;
use racksim_sim::{run::RunConfig, testbed::Sabotage, trace::fmt_duration, RunOutcome, Verdict};

use crate::file::{Expectation, Outcome, Scenario, Strategy};
use crate::invocation;

/// The outcome of a run, judged.
#[derive(Clone, Debug)]
pub struct Judged {
    pub outcome: RunOutcome,
    pub expectation: Expectation,
    /// `Ok` when the expectation holds, else why not.
    pub judgement: Result<String, String>,
    /// The mutant the run was made with (`racksim run --mutant`), if any.
    pub mutant: Option<Mutant>,
}

impl Judged {
    /// The command that replays this run exactly ([`replay_command`], and
    /// its mutant).
    pub fn replay_command(&self, scenario_arg: &str, strategy: Strategy, seed: u64) -> String {
        let mut command = replay_command(scenario_arg, strategy, seed);
        if let Some(m) = self.mutant {
            command += &format!(" --mutant {m}");
        }
        command
    }
}

/// The run configuration of a scenario for one strategy and seed.
pub fn config(scenario: &Scenario, strategy: Strategy, seed: u64) -> Option<RunConfig> {
    let exp = scenario.expectations.get(&strategy)?;
    let (service_nat, start) = strategy.parts(scenario.service_nat);
    Some(RunConfig {
        rack: scenario.rack.clone(),
        strategy: service_nat,
        start,
        // The era the preset stands for, with the strategy's choices of
        // another era for some mechanisms.
        era: strategy.control_plane(scenario.service_nat),
        instances: scenario.instances.clone(),
        seed,
        plan: scenario.plan.clone(),
        deadline: exp.deadline,
        stability: scenario.stability,
        ntp_return_switch: scenario.ntp_return_switch,
        mutant: None,
        sabotage: None,
        recheck_every_event: false,
        ip_pool: scenario.ip_pool,
        service_times: scenario.service_times,
        engine: racksim_sim::Engine::EventDriven,
        ephemeral_ports: racksim_sim::EPHEMERAL_PORTS,
    })
}

/// Run and judge. `None` when the scenario has no expectation for `strategy`.
pub fn run(scenario: &Scenario, strategy: Strategy, seed: u64) -> Option<Judged> {
    run_with(scenario, strategy, seed, None, None)
}

/// [`run`], with the testbed broken on purpose (`racksim run --sabotage`,
/// tests of testbed errors) or a mutant of the reconciler (`racksim run
/// --mutant`, a kill of the kill table replayed; the simulation refuses one
/// in a build without mutants).
pub fn run_with(
    scenario: &Scenario,
    strategy: Strategy,
    seed: u64,
    sabotage: Option<Sabotage>,
    mutant: Option<Mutant>,
) -> Option<Judged> {
    let mut cfg = config(scenario, strategy, seed)?;
    cfg.sabotage = sabotage;
    cfg.mutant = mutant;
    let expectation = scenario.expectations[&strategy].clone();
    let outcome = racksim_sim::run(&cfg);
    let judgement = judge(&expectation, &outcome);
    Some(Judged {
        outcome,
        expectation,
        judgement,
        mutant,
    })
}

/// Does the run meet the expectation? `Ok` says how; `Err` says why not.
pub fn judge(exp: &Expectation, outcome: &RunOutcome) -> Result<String, String> {
    // No expectation accepts a failure of the testbed: it says nothing
    // about the strategy, whatever the scenario expected of it.
    if let Verdict::TestbedError { host, error, .. } = &outcome.verdict {
        return Err(format!(
            "the testbed failed on {host} ({error}): the run says nothing about the strategy"
        ));
    }
    let mut held = vec![judge_verdict(exp, &outcome.verdict)?];
    if let (Some(settle), Verdict::Converged { at }) = (exp.settle, &outcome.verdict) {
        let last = outcome.steps.last().map(|s| s.at).unwrap_or_default();
        let took = at.saturating_sub(last);
        if took > settle {
            return Err(format!(
                "expected to converge within {} of the last plan step, but took {}",
                fmt_duration(settle),
                fmt_duration(took)
            ));
        }
        held.push(format!(
            "settled {} after the last step",
            fmt_duration(took)
        ));
    }
    if let Some(by) = exp.converged_by {
        match outcome.timing.first_converged {
            Some(at) if at <= by => {
                held.push(format!("first converged {} into the run", fmt_duration(at)))
            }
            Some(at) => {
                return Err(format!(
                    "expected to converge first within {} of the start, but took {}",
                    fmt_duration(by),
                    fmt_duration(at)
                ))
            }
            None => return Err("expected to converge early, but never did".into()),
        }
    }
    if let Some(within) = exp.repair_within {
        // A bound with nothing to bound would hold for any strategy.
        let Some(r) = outcome.timing.slowest_repair() else {
            return Err(format!(
                "expected every fault repaired within {}, but the run measured no repair \
                 (no plan step ends a fault or makes a change before the run ended)",
                fmt_duration(within)
            ));
        };
        {
            match r.took() {
                Some(took) if took <= within => held.push(format!(
                    "slowest repair {} ({})",
                    fmt_duration(took),
                    r.step
                )),
                Some(took) => {
                    return Err(format!(
                        "expected every fault repaired within {}, but {} took {}",
                        fmt_duration(within),
                        r.step,
                        fmt_duration(took)
                    ))
                }
                None => {
                    return Err(format!(
                        "expected every fault repaired within {}, but {} never was",
                        fmt_duration(within),
                        r.step
                    ))
                }
            }
        }
    }
    if exp.operations_succeed || exp.operations_some_fail || exp.operations_within.is_some() {
        held.extend(judge_operations(exp, outcome)?);
    }
    // Zone-start bounds are parsed only where zone starts do work (legacy
    // service NAT); a run in which no zone started cannot show either.
    let slowest = outcome
        .zone_starts
        .iter()
        .max_by_key(|(_, _, took)| *took)
        .cloned();
    if let Some(most) = exp.zone_start_at_most {
        match &slowest {
            Some((sled, zone, took)) if *took > most => {
                return Err(format!(
                    "expected every zone to start within {}, but {zone} on {sled} took {}",
                    fmt_duration(most),
                    fmt_duration(*took)
                ))
            }
            Some((_, _, took)) => held.push(format!("slowest zone start {}", fmt_duration(*took))),
            None => {
                return Err(format!(
                    "expected every zone to start within {}, but no zone started",
                    fmt_duration(most)
                ))
            }
        }
    }
    if let Some(least) = exp.zone_start_at_least {
        match &slowest {
            Some((sled, zone, took)) if *took >= least => held.push(format!(
                "{zone} on {sled} took {} to start",
                fmt_duration(*took)
            )),
            _ => {
                return Err(format!(
                    "expected some zone start to block for at least {}, but the slowest took {}",
                    fmt_duration(least),
                    slowest
                        .as_ref()
                        .map(|z| fmt_duration(z.2))
                        .unwrap_or_else(|| "-".into())
                ))
            }
        }
    }
    Ok(held.join("; "))
}

/// `operations = "succeed"` and `operations_within`: what the instance
/// API's callers heard. A run that made no request cannot show either.
fn judge_operations(exp: &Expectation, outcome: &RunOutcome) -> Result<Vec<String>, String> {
    let ops = outcome.operations();
    if ops.is_empty() {
        return Err(
            "expected instance API operations to judge, but the plan made no request".into(),
        );
    }
    let mut held = Vec::new();
    if exp.operations_succeed {
        if let Some(op) = ops.iter().find(|o| !o.succeeded()) {
            return Err(format!("expected every operation to succeed, but {op}"));
        }
        held.push(format!("all {} operations succeeded", ops.len()));
    }
    if exp.operations_some_fail {
        let failed: Vec<String> = ops
            .iter()
            .filter(|o| !o.succeeded())
            .map(ToString::to_string)
            .collect();
        if failed.is_empty() {
            return Err(format!(
                "expected some operation to answer failure, but all {} succeeded",
                ops.len()
            ));
        }
        for text in &exp.failed_operations_mention {
            if !failed.iter().any(|f| f.contains(text.as_str())) {
                return Err(format!(
                    "expected a failed operation to mention {text:?}, but none does: {}",
                    failed.join("; ")
                ));
            }
        }
        held.push(format!(
            "{} of {} operations answered failure ({})",
            failed.len(),
            ops.len(),
            failed.join("; ")
        ));
    }
    if let Some(within) = exp.operations_within {
        let late = ops.iter().find(|o| o.took().is_none_or(|t| t > within));
        if let Some(op) = late {
            return Err(format!(
                "expected every operation answered within {}, but {op}",
                fmt_duration(within)
            ));
        }
        let slowest = ops
            .iter()
            .filter_map(|o| o.took())
            .max()
            .unwrap_or_default();
        held.push(format!(
            "every operation answered within {} (slowest {})",
            fmt_duration(within),
            fmt_duration(slowest)
        ));
    }
    Ok(held)
}

/// Did the run end without converging, for a reason the expectation
/// allows (its verdict mentions what `verdict_mentions` and
/// `verdict_mentions_any` say)? What `some_seeds_fail` counts.
pub fn failed_as_allowed(exp: &Expectation, verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::NotConverged { .. })
        && exp.has_reasons()
        && exp.check_mentions(&verdict.lines().join("\n")).is_ok()
}

/// The verdict against the expectation's outcome and verdict texts.
fn judge_verdict(exp: &Expectation, verdict: &Verdict) -> Result<String, String> {
    let text = verdict.lines().join("\n");
    match (exp.outcome, verdict) {
        (_, Verdict::TestbedError { .. }) => Err("the testbed failed".to_string()),
        (Outcome::ConvergesWithin(within), Verdict::Converged { at }) if *at <= within => {
            Ok(format!(
                "expected to converge within {}: converged in {}",
                fmt_duration(within),
                fmt_duration(*at)
            ))
        }
        (Outcome::ConvergesWithin(within), Verdict::Converged { at }) => Err(format!(
            "expected to converge within {}, but took {}",
            fmt_duration(within),
            fmt_duration(*at)
        )),
        (Outcome::ConvergesWithin(within), _) => Err(format!(
            "expected to converge within {}, but did not",
            fmt_duration(within)
        )),
        (Outcome::Fails, Verdict::NotConverged { .. }) => match exp.check_mentions(&text) {
            Ok(()) => Ok(format!(
                "expected to fail (the scenario reproduces the bug): did not converge in {}",
                fmt_duration(exp.deadline)
            )),
            Err(why) => Err(format!("failed as expected, but {why}")),
        },
        (Outcome::Fails, Verdict::Converged { at }) => Err(format!(
            "expected to fail (the scenario reproduces the bug), but converged in {}",
            fmt_duration(*at)
        )),
        (Outcome::Fails, Verdict::InvariantViolated { invariant, .. }) => Err(format!(
            "expected to fail by not converging, but {invariant} broke"
        )),
        (Outcome::Violates(want), Verdict::InvariantViolated { invariant, .. })
            if *invariant == want =>
        {
            match exp.check_mentions(&text) {
                Ok(()) => Ok(format!("expected to break {want}: it did")),
                Err(why) => Err(format!("broke {want} as expected, but {why}")),
            }
        }
        (Outcome::Violates(want), Verdict::InvariantViolated { invariant, .. }) => Err(format!(
            "expected to break {want}, but broke {invariant} first"
        )),
        (Outcome::Violates(want), _) => Err(format!("expected to break {want}, but it did not")),
        // Only the invariant the file names may break: any other is a
        // defect the scenario does not expect.
        (Outcome::Any, Verdict::InvariantViolated { invariant, .. }) => {
            let allowed = &exp.some_seeds_violate;
            if allowed.contains(invariant) {
                Ok(format!(
                    "broke {invariant}, which some_seeds_violate allows; the sweep judges \
                     whether some seeds must"
                ))
            } else if allowed.is_empty() {
                Err(format!(
                    "broke {invariant}, but the expectation allows no invariant to break"
                ))
            } else {
                Err(format!(
                    "broke {invariant}, but the expectation allows only {} to break",
                    allowed.join(" and ")
                ))
            }
        }
        (Outcome::Any, Verdict::NotConverged { .. }) if !exp.has_reasons() => Err(
            "did not converge, and the expectation names no reason a run may fail \
             (verdict_mentions)"
                .to_string(),
        ),
        (Outcome::Any, Verdict::NotConverged { .. }) => match exp.check_mentions(&text) {
            Ok(()) => Ok(format!(
                "did not converge, for a reason the scenario allows ({})",
                exp.reasons()
            )),
            Err(why) => Err(format!("did not converge, and {why}")),
        },
        (Outcome::Any, Verdict::Converged { .. }) => Ok("converged".to_string()),
    }
}

/// The command that replays a run exactly, as the user started racksim
/// ([`invocation::program`]), so that it pastes into their shell.
pub fn replay_command(scenario_arg: &str, strategy: Strategy, seed: u64) -> String {
    replay_command_of(invocation::program(), scenario_arg, strategy, seed)
}

/// [`replay_command`] for a given program: a file that outlives the shell
/// it was made in (a regression file's `# Replay:` comment) names
/// [`invocation::INSTALLED`].
pub fn replay_command_of(
    program: &str,
    scenario_arg: &str,
    strategy: Strategy,
    seed: u64,
) -> String {
    format!(
        "{program} run {} --seed {seed} --strategy {}",
        invocation::word(scenario_arg),
        invocation::word(&strategy.to_string())
    )
}

#[cfg(test)]
mod tests;

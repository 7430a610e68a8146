//! Shrinking a failing plan: delta debugging over the plan's steps.
//!
//! Starting from a plan that fails under a strategy and seed, try smaller
//! plans — without a step (or a fault with the step that undoes it),
//! without every step naming one host, with a fault's window shortened,
//! with a step moved earlier — and keep each one that still fails *the same
//! way* ([`Failure::matches`]: the same invariant, or not converging with
//! the same item missing), until none of them does. Every candidate is a
//! valid scenario (it goes through the parser), candidates are tried in a
//! fixed order, and each run is a function of the plan and seed: the same
//! input shrinks to the same plan every time.

#[cfg(test)]
mod tests;

use std::time::Duration;

use racksim_mutants::Mutant;
use racksim_sim::{Action, At, Plan, Step, Verdict};

use crate::{
    file::{self, write, Expectation, Outcome, Scenario, Strategy},
    fuzz::{failure, Failure},
    runner,
};

/// Runs the shrinker spends at most (each one simulation).
pub const MAX_RUNS: usize = 2_000;

/// A reduced plan that still fails.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The scenario with the reduced plan.
    pub scenario: Scenario,
    pub strategy: Strategy,
    pub seed: u64,
    pub mutant: Option<Mutant>,
    pub failure: Failure,
    pub original_steps: usize,
    /// Simulations run while shrinking.
    pub runs: usize,
}

struct Runner<'a> {
    base: &'a Scenario,
    strategy: Strategy,
    seed: u64,
    mutant: Option<Mutant>,
    runs: usize,
}

impl Runner<'_> {
    /// The scenario with `plan`, if the parser accepts it and it leaves no
    /// fault open that the original plan closed (a power-off without its
    /// cold boot fails for reasons of its own). Instances no step names any
    /// more are dropped with their steps.
    fn candidate(&self, plan: &Plan) -> Option<Scenario> {
        let open = open_faults(plan);
        let was_open = open_faults(&self.base.plan);
        if open.iter().any(|f| !was_open.contains(f)) {
            return None;
        }
        // An instance whose every create was dropped stays `creating`: a
        // gap of the plan, not of the code.
        let created = |name: &str| {
            plan.steps.iter().any(
                |st| matches!(&st.action, Action::InstanceCreate { instance, .. } if instance == name),
            )
        };
        let orphan = plan.steps.iter().any(|st| match &st.action {
            Action::InstanceStart { instance, .. }
            | Action::InstanceStop { instance }
            | Action::InstanceDelete { instance } => !created(instance),
            _ => false,
        });
        if orphan {
            return None;
        }
        let mut s = self.base.clone();
        s.plan = plan.clone();
        s.instances.retain(|i| {
            plan.steps.iter().any(|st| match &st.action {
                Action::InstanceCreate { instance, .. }
                | Action::InstanceStart { instance, .. }
                | Action::InstanceStop { instance }
                | Action::InstanceDelete { instance } => *instance == i.name,
                _ => false,
            })
        });
        let text = write::scenario_toml(&s, &[]);
        let parsed = file::parse(&self.base.origin, &text).ok()?;
        (parsed.plan == *plan).then_some(parsed)
    }

    fn outcome(&mut self, s: &Scenario) -> racksim_sim::RunOutcome {
        self.runs += 1;
        let mut cfg = runner::config(s, self.strategy, self.seed).expect("has the expectation");
        cfg.mutant = self.mutant;
        racksim_sim::run(&cfg)
    }

    fn fails_as(&mut self, plan: &Plan, want: &Failure) -> bool {
        if self.runs >= MAX_RUNS {
            return false;
        }
        let Some(s) = self.candidate(plan) else {
            return false;
        };
        let exp = &self.base.expectations[&self.strategy];
        let outcome = self.outcome(&s);
        want.matches(exp, &outcome)
    }
}

/// Shrink `scenario`'s plan under `strategy` and `seed` (and `mutant`).
/// `progress(runs, steps)` after every accepted reduction. `Err` when the
/// plan does not fail to begin with.
pub fn shrink(
    scenario: &Scenario,
    strategy: Strategy,
    seed: u64,
    mutant: Option<Mutant>,
    progress: &dyn Fn(usize, usize),
) -> Result<Shrunk, String> {
    let exp: &Expectation = scenario
        .expectations
        .get(&strategy)
        .ok_or_else(|| format!("error: {} has no expectation for {strategy}", scenario.name))?;
    let mut r = Runner {
        base: scenario,
        strategy,
        seed,
        mutant,
        runs: 0,
    };
    let first = r.outcome(scenario);
    if let Verdict::TestbedError { host, error, .. } = &first.verdict {
        return Err(format!(
            "error: {} --strategy {strategy} --seed {seed} ended in a testbed error on {host} \
             ({error}): that is a bug of racksim itself, not a finding to keep as a regression",
            scenario.name
        ));
    }
    let Some(want) = failure(exp, &first) else {
        return Err(format!(
            "error: {} --strategy {strategy} --seed {seed} does not fail (it meets its expectation or converged): nothing to shrink",
            scenario.name
        ));
    };
    let mut plan = scenario.plan.clone();
    // Windows become the times this seed drew, so every later candidate is
    // a plan of fixed times.
    let fixed = fix_windows(&plan, &first.steps);
    if fixed != plan && r.fails_as(&fixed, &want) {
        plan = fixed;
    }
    loop {
        progress(r.runs, plan.steps.len());
        let Some(next) = candidates(&plan).into_iter().find(|c| r.fails_as(c, &want)) else {
            break;
        };
        plan = next;
        if r.runs >= MAX_RUNS {
            break;
        }
    }
    let reduced = r.candidate(&plan).unwrap_or_else(|| {
        let mut s = scenario.clone();
        s.plan = plan;
        s
    });
    Ok(Shrunk {
        scenario: reduced,
        strategy,
        seed,
        mutant,
        failure: want,
        original_steps: scenario.plan.steps.len(),
        runs: r.runs,
    })
}

/// `plan` with each window replaced by the time drawn for it
/// (`resolved` is `Plan::resolve`'s output: time order, ties in plan order).
fn fix_windows(plan: &Plan, resolved: &[racksim_sim::plan::ResolvedStep]) -> Plan {
    let mut used = vec![false; resolved.len()];
    let steps =
        plan.steps
            .iter()
            .map(|s| match s.at {
                At::Fixed(_) => s.clone(),
                At::Window(..) => {
                    let found = resolved.iter().enumerate().find(|(i, r)| {
                        !used[*i] && r.drawn_from == Some(s.at) && r.action == s.action
                    });
                    match found {
                        Some((i, r)) => {
                            used[i] = true;
                            Step {
                                at: At::Fixed(r.at),
                                action: s.action.clone(),
                            }
                        }
                        None => s.clone(),
                    }
                }
            })
            .collect();
    let mut p = Plan { steps };
    p.steps.sort_by_key(|s| s.at.latest());
    p
}

/// Does `later` undo `earlier`?
fn undoes(earlier: &Action, later: &Action) -> bool {
    use Action::*;
    match (earlier, later) {
        (HideSwitch(a), RevealSwitch(b)) => a == b,
        (Crash(a), Restart(b)) => a == b,
        (SidecarPowerOff(a), SidecarPowerOn(b)) => a == b,
        (ScrimletReboot(a), ScrimletBack(b)) => a == b,
        (ControlPlaneDown | ControlPlaneCrash, ControlPlaneUp) => true,
        (PowerOff, ColdBoot) => true,
        (
            Partition { a, b, oneway },
            Heal {
                a: a2,
                b: b2,
                oneway: o2,
            },
        ) => a == a2 && b == b2 && oneway == o2,
        (Latency { a, b, .. }, Latency { a: a2, b: b2, .. }) => a == a2 && b == b2,
        _ => false,
    }
}

/// Faults the plan starts and never undoes.
fn open_faults(plan: &Plan) -> Vec<Action> {
    let mut open: Vec<Action> = Vec::new();
    for s in &plan.steps {
        match open.iter().position(|f| undoes(f, &s.action)) {
            Some(i) => {
                open.remove(i);
            }
            None if is_fault(&s.action) => open.push(s.action.clone()),
            None => {}
        }
    }
    open
}

/// A step some later step undoes.
fn is_fault(a: &Action) -> bool {
    matches!(
        a,
        Action::HideSwitch(_)
            | Action::Crash(_)
            | Action::SidecarPowerOff(_)
            | Action::ScrimletReboot(_)
            | Action::ControlPlaneDown
            | Action::ControlPlaneCrash
            | Action::PowerOff
            | Action::Partition { .. }
            | Action::Latency { .. }
    )
}

/// Hosts (and switches) a step names.
fn names(a: &Action) -> Vec<String> {
    use Action::*;
    match a {
        HideSwitch(s) | RevealSwitch(s) | DpdRestart(s) | SidecarPowerOff(s)
        | SidecarPowerOn(s) | ScrimletReboot(s) | ScrimletBack(s) | ReplaceScrimlet(s) => {
            vec![s.to_string()]
        }
        DpdErrors { switch, .. }
        | DpdHang { switch, .. }
        | MgsErrors { switch, .. }
        | MgsHang { switch, .. }
        | StaleEntry { switch, .. }
        | LostEntry { switch, .. } => {
            vec![switch.to_string()]
        }
        Crash(h) | Restart(h) => vec![h.clone()],
        Partition { a, b, .. } | Heal { a, b, .. } | Latency { a, b, .. } => {
            a.iter().chain(b).cloned().collect()
        }
        InstanceCreate { sled, .. } | InstanceStart { sled, .. } => vec![sled.clone()],
        _ => vec![],
    }
}

fn without(plan: &Plan, drop: &[usize]) -> Plan {
    Plan {
        steps: plan
            .steps
            .iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, s)| s.clone())
            .collect(),
    }
}

fn with_time(plan: &Plan, i: usize, t: Duration) -> Plan {
    let mut p = plan.clone();
    p.steps[i].at = At::Fixed(t);
    p.steps.sort_by_key(|s| s.at.latest());
    p
}

/// Smaller plans to try, biggest reductions first, in a fixed order.
fn candidates(plan: &Plan) -> Vec<Plan> {
    let n = plan.steps.len();
    let mut out = Vec::new();
    // Halves, then quarters... of the steps (delta debugging's chunks).
    let mut chunk = n / 2;
    while chunk >= 2 {
        for start in (0..n).step_by(chunk) {
            let drop: Vec<usize> = (start..(start + chunk).min(n)).collect();
            out.push(without(plan, &drop));
        }
        chunk /= 2;
    }
    // One host's steps at a time.
    let mut hosts: Vec<String> = plan.steps.iter().flat_map(|s| names(&s.action)).collect();
    hosts.sort();
    hosts.dedup();
    for h in &hosts {
        let drop: Vec<usize> = (0..n)
            .filter(|&i| names(&plan.steps[i].action).contains(h))
            .collect();
        if drop.len() < n {
            out.push(without(plan, &drop));
        }
    }
    // A fault with the step that undoes it; then single steps.
    for i in 0..n {
        if let Some(j) = (i + 1..n).find(|&j| undoes(&plan.steps[i].action, &plan.steps[j].action))
        {
            out.push(without(plan, &[i, j]));
        }
    }
    for i in 0..n {
        out.push(without(plan, &[i]));
    }
    // Shorter windows of dpd and MGS faults.
    for i in 0..n {
        if let Some(window) = plan.steps[i].action.window() {
            if window > Duration::from_secs(1) {
                let mut p = plan.clone();
                let half = Duration::from_millis((window.as_millis() / 2) as u64);
                if let Some(w) = p.steps[i].action.window_mut() {
                    *w = half;
                }
                out.push(p);
            }
        }
    }
    // Undo steps earlier (a shorter fault), then any step earlier.
    for i in 0..n {
        if let Some(j) = (i + 1..n).find(|&j| undoes(&plan.steps[i].action, &plan.steps[j].action))
        {
            let (a, b) = (plan.steps[i].at.latest(), plan.steps[j].at.latest());
            if b > a + Duration::from_secs(1) {
                out.push(with_time(plan, j, halfway(a, b)));
            }
        }
    }
    for i in 0..n {
        let t = plan.steps[i].at.latest();
        let before = if i == 0 {
            Duration::ZERO
        } else {
            plan.steps[i - 1].at.latest()
        };
        if t > before + Duration::from_secs(1) {
            out.push(with_time(plan, i, halfway(before, t)));
        }
    }
    out
}

/// Halfway between, to the millisecond.
fn halfway(a: Duration, b: Duration) -> Duration {
    Duration::from_millis(((a.as_millis() + b.as_millis()) / 2) as u64)
}

/// The regression file for `shrunk`: the reduced plan, where it came from
/// and how to replay it.
///
/// With a mutant, the expectation stays the scenario's own (the real
/// reconciler meets it; the file then guards against that bug). Without
/// one, the failure is a defect of the code under test: the expectation
/// records it (the run must fail this way) until it is fixed, when it
/// becomes `converges` again.
///
/// `source_header` is the comment block at the top of the source file (a
/// fuzz plan says which seed and options drew it), kept under the new one.
pub fn regression_toml(
    shrunk: &Shrunk,
    source_arg: &str,
    source_header: &[String],
    name: &str,
    path: &str,
) -> String {
    let mut s = shrunk.scenario.clone();
    s.name = name.to_string();
    s.description = format!("shrunk regression: {}", shrunk.failure);
    let exp = s
        .expectations
        .get(&shrunk.strategy)
        .cloned()
        .expect("has the expectation");
    // Only what the recorded outcome takes (the parser refuses the rest):
    // the timing bounds of `converges`, the sweep-level requirements of
    // `any` and the operations' requirements do not carry over.
    let bare = Expectation {
        verdict_mentions: Vec::new(),
        verdict_mentions_any: Vec::new(),
        settle: None,
        some_seeds_violate: Vec::new(),
        some_seeds_fail: false,
        converged_by: None,
        repair_within: None,
        operations_succeed: false,
        operations_within: None,
        operations_some_fail: false,
        failed_operations_mention: Vec::new(),
        ..exp.clone()
    };
    let recorded = match (&shrunk.mutant, &shrunk.failure) {
        (Some(_), _) | (None, Failure::TooSlow | Failure::TestbedError) => exp,
        (None, Failure::Invariant(inv)) => Expectation {
            outcome: Outcome::Violates(inv),
            zone_start_at_most: None,
            zone_start_at_least: None,
            ..bare
        },
        (None, Failure::NotConverged(gap)) => Expectation {
            outcome: Outcome::Fails,
            verdict_mentions: vec![gap.clone()],
            ..bare
        },
    };
    s.expectations = [(shrunk.strategy, recorded)].into_iter().collect();
    let mutant = shrunk
        .mutant
        .map(|m| format!(" --mutant {m}"))
        .unwrap_or_default();
    let mut header = vec![
        format!(
            "Regression: shrunk by `racksim shrink {source_arg} --seed {} --strategy {}{mutant}`",
            shrunk.seed, shrunk.strategy
        ),
        format!(
            "from {} ({} steps -> {} steps). It failed: {}.",
            shrunk.scenario.origin,
            shrunk.original_steps,
            shrunk.scenario.plan.steps.len(),
            shrunk.failure
        ),
    ];
    match shrunk.mutant {
        Some(m) => header.push(format!(
            "Found with mutant {m}; the real reconciler meets the expectation below."
        )),
        None => header.push(
            "The expectation records the defect; make it `converges` when it is fixed.".into(),
        ),
    }
    header.push(format!(
        "Replay: {}",
        runner::replay_command_of(
            crate::invocation::INSTALLED,
            path,
            shrunk.strategy,
            shrunk.seed
        )
    ));
    if !source_header.is_empty() {
        header.push(String::new());
        header.push(format!("The header of {source_arg}:"));
        header.extend(source_header.iter().map(|l| format!("  {l}")));
    }
    write::scenario_toml(&s, &header)
}

/// A regression's name (`racksim shrink --name`): letters, digits, `-`
/// and `_`, so that it is a file name anywhere.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "error: --name {name:?}: use letters, digits, - and _"
        ));
    }
    Ok(())
}

/// Where `racksim shrink` writes: `out/NAME.toml`.
pub fn regression_path(out: &std::path::Path, name: &str) -> std::path::PathBuf {
    out.join(format!("{name}.toml"))
}

/// Refuses, before the shrink runs, to write the result over its own
/// source (even with `--force`: the result would destroy the failure it
/// was shrunk from) or, without `force`, over any existing file.
pub fn check_target(path: &std::path::Path, source_arg: &str, force: bool) -> Result<(), String> {
    crate::output::refuse_overlap(
        &[("--out", path)],
        &[(
            "the scenario being shrunk",
            std::path::Path::new(source_arg),
        )],
    )
    .map_err(|e| format!("{e} (choose another --out directory or --name)"))?;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(format!(
            "error: --out: {} is a directory; choose another --name",
            path.display()
        )),
        Ok(_) if !force => Err(format!(
            "error: {} exists; shrink does not replace it unless asked: write elsewhere with \
             --out DIR (or another --name), or pass --force to replace it",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// Write `shrunk` as the regression file `path` (from [`regression_path`],
/// its directory created if need be, whole or not at all), with the header
/// comments of the file `source_arg` names carried over (a fuzz plan's
/// origin).
pub fn write_regression(
    shrunk: &Shrunk,
    source_arg: &str,
    name: &str,
    path: &std::path::Path,
) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("error: --out {}: {e}", dir.display()))?;
    }
    let source_header: Vec<String> =
        crate::input::read_text(std::path::Path::new(source_arg), "scenario file")
            .unwrap_or_default()
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim().to_string())
            .collect();
    let text = regression_toml(
        shrunk,
        source_arg,
        &source_header,
        name,
        &path.display().to_string(),
    );
    crate::output::write("--out", path, text.as_bytes())
}

pub use crate::regression::{regression, regressions, replay_of, Regression, REGRESSIONS_DIR};

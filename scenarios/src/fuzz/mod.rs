//! Swarm fuzzing: each seed draws a whole fault plan.
//!
//! Swarm testing (Groce et al.): rather than every seed mixing a little of
//! every fault, each seed first decides *which kinds* of fault are enabled
//! at all, then how many of each, when, for how long and on which hosts.
//! Plans that leave most of the vocabulary out reach states a uniform mix
//! almost never does (a dpd that hangs while nothing else is wrong; five
//! partitions and nothing else).
//!
//! A plan has a chaos phase, at the end of which every fault has been
//! undone (partitions healed, switches revealed, hosts restarted, sidecars
//! and the control plane back, the rack booted), then a liveness window in
//! which the rack must converge; the safety invariants hold throughout.
//! The plan is a scenario file ([`plan_text`]): what runs is what that file
//! says, parsed, so `racksim run` on the printed file replays the run
//! exactly.

pub mod known;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, time::Duration};

use racksim_mutants::Mutant;
use racksim_reconciler::{discovery::SwitchSlot, instances::StartImpl};
use racksim_sim::{
    rack::RackSpec, Action, At, InstanceSpec, Plan, RunOutcome, Step, Strategy, Verdict,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::{
    campaign::Campaign,
    file::{self, write, Expectation, Outcome, Scenario, Variant},
    matrix, runner,
};

/// How long the rack has to converge once the chaos is over.
pub const LIVENESS: Duration = Duration::from_secs(15 * 60);

/// When after the chaos a refused instance create is retried (long enough
/// for a cold-booted rack's control plane to be up again).
pub const CREATE_RETRY: Duration = Duration::from_secs(120);

/// Shortest control-plane outage drawn: short enough that an operator's
/// start can come while the stop still drains in-flight work (which once
/// lost the start; regression `control-plane-restart-while-draining`).
pub const CP_MIN_DOWN: Duration = Duration::from_secs(5);

/// What a fuzz run draws plans for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// A rack shape by name (`madrid`, `standard`).
    pub rack: String,
    /// The service-NAT strategy under test.
    pub strategy: Strategy,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Draw each seed's NAT statement window too (`--nat-window`,
    /// [`NAT_WINDOWS`]); off, every plan has none, as before.
    pub draw_nat_window: bool,
}

/// The widest NAT statement windows a seed may draw with `--nat-window`
/// (each statement's own is then uniform below it): none; a cross-node RPC
/// (a millisecond); a loaded node (tens of milliseconds); a GC pause or a
/// descheduled gateway (hundreds of milliseconds to seconds).
pub const NAT_WINDOWS: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_millis(1),
    Duration::from_millis(20),
    Duration::from_millis(200),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

impl Options {
    pub fn new(rack: &str, strategy: Strategy, start: StartImpl) -> Result<Self, String> {
        RackSpec::by_name(rack).ok_or_else(|| {
            format!(
                "unknown rack {rack:?} (expected one of: {})",
                RackSpec::NAMES.join(", ")
            )
        })?;
        Ok(Options {
            rack: rack.to_string(),
            strategy,
            start,
            draw_nat_window: false,
        })
    }

    /// The options as `racksim fuzz` flags.
    pub fn flags(&self) -> String {
        let window = if self.draw_nat_window {
            " --nat-window"
        } else {
            ""
        };
        format!(
            "--rack {} --strategy {} --start {}{window}",
            self.rack, self.strategy, self.start
        )
    }

    /// The `--strategy` a fuzz scenario file is run with.
    pub fn variant(&self) -> Variant {
        Variant::Start(self.start)
    }
}

/// The kinds of fault and action a seed may enable.
const KINDS: [&str; 13] = [
    "hide-switch",
    "crash",
    "dpd-restart",
    "partition",
    "latency",
    "dpd-errors",
    "dpd-hang",
    "sidecar-power-cycle",
    "replace-scrimlet",
    "control-plane",
    "power-cycle",
    "stale-entry",
    "instances",
];

/// The plan of `seed` as a scenario file.
pub fn plan_text(opts: &Options, seed: u64) -> String {
    let scenario = draw(opts, seed);
    let header = vec![
        format!(
            "Swarm plan drawn by `racksim fuzz --plan {seed} {}`.",
            opts.flags()
        ),
        format!(
            "Replay: racksim run THIS_FILE --seed {seed} --strategy {}",
            opts.variant()
        ),
    ];
    write::scenario_toml(&scenario, &header)
}

/// The plan of `seed`, parsed back from its text: exactly what the printed
/// file says.
pub fn scenario(opts: &Options, seed: u64) -> Scenario {
    let origin = format!("fuzz:{seed}");
    file::parse(&origin, &plan_text(opts, seed))
        .unwrap_or_else(|e| panic!("BUG: the fuzzer drew an invalid plan for seed {seed}:\n{e}"))
}

/// Intervals each piece of state is busy, so that faults on the same
/// state never overlap (the parser requires their order to be the same in
/// every draw; overlapping hides of one switch make no sense).
#[derive(Default)]
struct Busy(BTreeMap<String, Vec<(Duration, Duration)>>);

impl Busy {
    /// Claim `[from, to]` on `resource` (and nothing may overlap a rack
    /// power cycle, which stops every host). False if taken.
    fn claim(&mut self, resource: &str, from: Duration, to: Duration) -> bool {
        let margin = Duration::from_millis(1);
        let clash = |r: &str| {
            self.0.get(r).is_some_and(|v| {
                v.iter()
                    .any(|&(a, b)| from <= b + margin && a <= to + margin)
            })
        };
        if clash(resource)
            || clash("rack power")
            || (resource == "rack power" && self.any_overlap(from, to))
        {
            return false;
        }
        self.0
            .entry(resource.to_string())
            .or_default()
            .push((from, to));
        true
    }

    fn any_overlap(&self, from: Duration, to: Duration) -> bool {
        self.0
            .values()
            .flatten()
            .any(|&(a, b)| from <= b && a <= to)
    }
}

/// Draw the plan of `seed` (not yet through the parser; see [`scenario`]).
fn draw(opts: &Options, seed: u64) -> Scenario {
    // A stream of its own, apart from the run's (which the seed also drives).
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x6675_7a7a_706c_616e);
    let rack = RackSpec::by_name(&opts.rack).expect("checked by Options::new");
    let chaos = Duration::from_secs(60 * [10, 20, 30][rng.random_range(0..3)]);
    // Swarm: each kind is in or out for the whole plan (at least one in).
    let mut enabled: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.5))
        .collect();
    if enabled.is_empty() {
        enabled.push(KINDS[rng.random_range(0..KINDS.len())]);
    }
    let mut steps: Vec<(At, Action)> = Vec::new();
    let mut busy = Busy::default();
    let switches: Vec<SwitchSlot> = rack.switches.iter().map(|s| s.slot).collect();
    let hosts = rack.host_names();
    let sleds: Vec<String> = rack.sleds.iter().map(|s| s.name.clone()).collect();
    let ms = |d: Duration| d.as_millis() as u64;
    // Power cycles first: nothing else may overlap them.
    let order: Vec<&str> = {
        let mut o = enabled.clone();
        o.sort_by_key(|k| *k != "power-cycle");
        o
    };
    let mut instances: Vec<InstanceSpec> = Vec::new();
    let mut replaced: Vec<usize> = Vec::new();
    for kind in order {
        let count = rng.random_range(1..=3);
        for _ in 0..count {
            // One fault in five is there from the start: the rack's boot,
            // when zones start and the legacy path looks for its switches,
            // is where the madrid incident happened.
            let from = if rng.random_bool(0.2) {
                Duration::ZERO
            } else {
                Duration::from_millis(rng.random_range(0..ms(chaos) - 1000))
            };
            let to = (from + draw_duration(&mut rng)).min(chaos);
            let switch = switches[rng.random_range(0..switches.len())];
            let host = hosts[rng.random_range(0..hosts.len())].clone();
            let fixed = At::Fixed;
            match kind {
                "hide-switch" if busy.claim(&format!("dns {switch}"), from, to) => {
                    steps.push((fixed(from), Action::HideSwitch(switch)));
                    steps.push((fixed(to), Action::RevealSwitch(switch)));
                }
                "crash" if busy.claim(&format!("host {host}"), from, to) => {
                    steps.push((fixed(from), Action::Crash(host.clone())));
                    steps.push((fixed(to), Action::Restart(host)));
                }
                "dpd-restart" if busy.claim(&format!("dpd {switch} {}", ms(from)), from, from) => {
                    steps.push((fixed(from), Action::DpdRestart(switch)));
                }
                "partition" => {
                    let others: Vec<&String> = hosts.iter().filter(|h| **h != host).collect();
                    let mut b: Vec<String> = others
                        .iter()
                        .filter(|_| rng.random_bool(0.3))
                        .map(|h| h.to_string())
                        .collect();
                    if b.is_empty() {
                        b.push(others[rng.random_range(0..others.len())].clone());
                    }
                    let oneway = rng.random_bool(0.3);
                    let a = vec![host];
                    let key = format!("partition {} / {} / {oneway}", a.join(","), b.join(","));
                    if busy.claim(&key, from, to) {
                        steps.push((
                            fixed(from),
                            Action::Partition {
                                a: a.clone(),
                                b: b.clone(),
                                oneway,
                            },
                        ));
                        steps.push((fixed(to), Action::Heal { a, b, oneway }));
                    }
                }
                "latency" => {
                    let other = hosts[rng.random_range(0..hosts.len())].clone();
                    let key = format!("latency {host} {other}");
                    if other != host && busy.claim(&key, from, to) {
                        let ms = [5, 50, 250, 1000, 3000][rng.random_range(0..5)];
                        let (a, b) = (vec![host], vec![other]);
                        steps.push((
                            fixed(from),
                            Action::Latency {
                                a: a.clone(),
                                b: b.clone(),
                                latency: Duration::from_millis(ms),
                            },
                        ));
                        // Back to the top of the in-rack range.
                        steps.push((
                            fixed(to),
                            Action::Latency {
                                a,
                                b,
                                latency: racksim_sim::run::MAX_LATENCY,
                            },
                        ));
                    }
                }
                "dpd-errors" | "dpd-hang"
                    if busy.claim(&format!("dpd fault {switch}"), from, to) =>
                {
                    let window = to - from;
                    steps.push((
                        fixed(from),
                        if kind == "dpd-errors" {
                            Action::DpdErrors { switch, window }
                        } else {
                            Action::DpdHang { switch, window }
                        },
                    ));
                }
                "sidecar-power-cycle" if busy.claim(&format!("sidecar {switch}"), from, to) => {
                    steps.push((fixed(from), Action::SidecarPowerOff(switch)));
                    steps.push((fixed(to), Action::SidecarPowerOn(switch)));
                }
                // Only where the scrimlet hosts no zones: replacing a
                // scrimlet that runs Nexus or internal DNS loses them for
                // good, which no reconciler could repair.
                "replace-scrimlet"
                    if scrimlet_is_bare(&rack, switch)
                        && busy.claim(&format!("sidecar {switch}"), from, chaos)
                        && busy.claim(&format!("replaced {switch}"), Duration::ZERO, chaos) =>
                {
                    steps.push((fixed(from), Action::ReplaceScrimlet(switch)));
                    replaced.push(rack.switch(switch).expect("a rack switch").scrimlet);
                }
                // Down for at least CP_MIN_DOWN.
                "control-plane"
                    if to >= from + CP_MIN_DOWN && busy.claim("control plane", from, to) =>
                {
                    let down = if rng.random_bool(0.5) {
                        Action::ControlPlaneCrash
                    } else {
                        Action::ControlPlaneDown
                    };
                    steps.push((fixed(from), down));
                    steps.push((fixed(to), Action::ControlPlaneUp));
                }
                "power-cycle" if busy.claim("rack power", from, to) => {
                    steps.push((fixed(from), Action::PowerOff));
                    steps.push((fixed(to), Action::ColdBoot));
                }
                "stale-entry" => {
                    // Drift behind dpd's back: a stale entry planted, or
                    // an entry deleted.
                    let zone = rack.zones[rng.random_range(0..rack.zones.len())].kind;
                    let action = if rng.random_bool(0.5) {
                        Action::StaleEntry { switch, zone }
                    } else {
                        Action::LostEntry { switch, zone }
                    };
                    if busy.claim(&format!("stale {switch} {}", ms(from)), from, from) {
                        steps.push((fixed(from), action));
                    }
                }
                "instances" => {
                    // Not on a scrimlet the plan replaces: the API finds no
                    // such sled afterwards (drawn after replace-scrimlet, in
                    // KINDS order).
                    let placeable: Vec<String> = sleds
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !replaced.contains(i))
                        .map(|(_, s)| s.clone())
                        .collect();
                    let name = format!("web{}", instances.len() + 1);
                    instance_ops(&mut rng, &name, &placeable, chaos, &mut steps);
                    instances.push(InstanceSpec { name });
                }
                _ => {}
            }
        }
    }
    // A client whose create was refused (the control plane down, the rack
    // off) tries again once everything has healed; for an instance that
    // exists by then the retry is refused and changes nothing. Without it a
    // declared instance no request ever reached would stay `creating`, a
    // gap no reconciler could close.
    for i in &instances {
        let first_create = steps.iter().find_map(|(_, a)| match a {
            Action::InstanceCreate { instance, sled } if *instance == i.name => Some(sled.clone()),
            _ => None,
        });
        if let Some(sled) = first_create {
            steps.push((
                At::Fixed(chaos + CREATE_RETRY),
                Action::InstanceCreate {
                    instance: i.name.clone(),
                    sled,
                },
            ));
        }
    }
    // File order: by latest time, then as drawn (the parser checks order
    // by latest time, and steps at one instant run in file order).
    steps.sort_by_key(|(at, _)| at.latest());
    let plan = Plan {
        steps: steps
            .into_iter()
            .map(|(at, action)| Step { at, action })
            .collect(),
    };
    let within = chaos + LIVENESS;
    let ntp_return_switch = {
        let up = rack.uplinked_switches();
        up[rng.random_range(0..up.len())]
    };
    // The scenario's frame through the parser (so a field the format gains
    // gets its default), then the drawn parts.
    let name = format!("fuzz-{}-{}-{}-{seed}", opts.rack, opts.strategy, opts.start);
    let description = format!(
        "swarm plan of seed {seed}: {} over {} of chaos, then {} to converge",
        enabled.join(", "),
        racksim_sim::trace::fmt_duration(chaos),
        racksim_sim::trace::fmt_duration(LIVENESS)
    );
    let frame = format!(
        "name = {name:?}\ndescription = {description:?}\nkind = \"instances\"\n\
         service_nat = \"{}\"\nrack = \"{}\"\nntp_return_switch = \"{ntp_return_switch}\"\n\
         [expect.{}]\noutcome = \"converges\"\nwithin = \"{}\"\n",
        opts.strategy,
        opts.rack,
        opts.variant(),
        write::duration(within),
    );
    let mut scenario = file::parse(&format!("fuzz:{seed}"), &frame)
        .unwrap_or_else(|e| panic!("BUG: the fuzzer's scenario frame is invalid:\n{e}"));
    scenario.instances = instances;
    scenario.plan = plan;
    if opts.draw_nat_window {
        // A generator of its own: the rest of the plan is the seed's
        // plan without the window.
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x6e61_745f_7365_7121);
        scenario.nat_window = NAT_WINDOWS[rng.random_range(0..NAT_WINDOWS.len())];
    }
    scenario
}

/// A fault's duration: a scale first (seconds, tens of seconds, minutes,
/// many minutes), then uniformly within it, to the millisecond.
fn draw_duration(rng: &mut SmallRng) -> Duration {
    let (lo, hi) = [(1, 10), (10, 60), (60, 300), (300, 900)][rng.random_range(0..4)];
    Duration::from_millis(rng.random_range(lo * 1000..=hi * 1000))
}

fn scrimlet_is_bare(rack: &RackSpec, slot: SwitchSlot) -> bool {
    rack.switch(slot).is_some_and(|sw| {
        rack.zones.iter().all(|z| z.sled != sw.scrimlet)
            && !rack.internal_dns.contains(&sw.scrimlet)
    })
}

/// An instance's life during the chaos: created on a sled, then a few of
/// stop, start, move (stop, start elsewhere), concurrent starts on two
/// sleds, a start racing a delete, stop and delete, or a delete of what may
/// be running.
fn instance_ops(
    rng: &mut SmallRng,
    name: &str,
    sleds: &[String],
    chaos: Duration,
    steps: &mut Vec<(At, Action)>,
) {
    let instance = name.to_string();
    let sled = |rng: &mut SmallRng| sleds[rng.random_range(0..sleds.len())].clone();
    let mut t = Duration::from_millis(
        rng.random_range(60_000..=(chaos.as_millis() as u64 / 2).max(60_000)),
    );
    let fixed = At::Fixed;
    // Operations run their course (a start saga takes ~150 ms; with faults
    // seconds), so the next one comes after a gap, sometimes a short one.
    let gap = |rng: &mut SmallRng| {
        let (lo, hi) = [(100, 2_000), (2_000, 30_000), (30_000, 180_000)][rng.random_range(0..3)];
        Duration::from_millis(rng.random_range(lo..=hi))
    };
    // A 50 ms window both operations of a race are drawn from.
    let race = |t: Duration| At::Window(t, t + Duration::from_millis(50));
    steps.push((
        fixed(t),
        Action::InstanceCreate {
            instance: instance.clone(),
            sled: sled(rng),
        },
    ));
    for _ in 0..rng.random_range(1..=5) {
        t += gap(rng);
        if t + Duration::from_secs(1) >= chaos {
            return;
        }
        let stop = Action::InstanceStop {
            instance: instance.clone(),
        };
        let start = |rng: &mut SmallRng| Action::InstanceStart {
            instance: instance.clone(),
            sled: sled(rng),
        };
        match rng.random_range(0..7) {
            0 => steps.push((fixed(t), stop)),
            // A client deleting an instance that may be running: the API
            // must refuse it (delete is only allowed once stopped).
            6 => steps.push((
                fixed(t),
                Action::InstanceDelete {
                    instance: instance.clone(),
                },
            )),
            1 => steps.push((fixed(t), start(rng))),
            2 => {
                // Move: stop, then start on another sled.
                steps.push((fixed(t), stop));
                t += gap(rng);
                steps.push((fixed(t.min(chaos)), start(rng)));
            }
            3 => {
                // Concurrent starts to (possibly) different sleds.
                steps.push((fixed(t), stop));
                t += gap(rng);
                let t = t.min(chaos - Duration::from_millis(50));
                steps.push((race(t), start(rng)));
                steps.push((race(t), start(rng)));
            }
            4 => {
                // A start racing a delete (seed 002's race).
                steps.push((fixed(t), stop));
                t += gap(rng);
                let t = t.min(chaos - Duration::from_millis(50));
                steps.push((race(t), start(rng)));
                steps.push((
                    race(t),
                    Action::InstanceDelete {
                        instance: instance.clone(),
                    },
                ));
                return;
            }
            _ => {
                steps.push((fixed(t), stop));
                t += gap(rng);
                steps.push((
                    fixed(t.min(chaos)),
                    Action::InstanceDelete {
                        instance: instance.clone(),
                    },
                ));
                return;
            }
        }
    }
}

/// How a run failed, as the shrinker keeps it: the same invariant, or not
/// converging with the same thing missing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Failure {
    /// A safety invariant broke.
    Invariant(&'static str),
    /// Not converged by the deadline; the first gap of the verdict.
    NotConverged(String),
    /// Converged, but later than the expectation allows.
    TooSlow,
    /// The testbed itself failed (never a finding about the code under
    /// test; counted apart).
    TestbedError,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Invariant(inv) => write!(f, "invariant {inv} violated"),
            Failure::NotConverged(gap) => write!(f, "not converged: {gap}"),
            Failure::TooSlow => f.write_str("converged too late"),
            Failure::TestbedError => f.write_str("testbed error"),
        }
    }
}

impl Failure {
    /// Does a run's outcome fail in this way? `NotConverged` matches when
    /// the same item is still among the gaps.
    pub fn matches(&self, exp: &Expectation, outcome: &RunOutcome) -> bool {
        match (self, &outcome.verdict) {
            (Failure::NotConverged(gap), Verdict::NotConverged { gaps, .. }) => gaps.contains(gap),
            _ => failure(exp, outcome).as_ref() == Some(self),
        }
    }
}

/// How a run missed a `converges` expectation, if it did.
pub fn failure(exp: &Expectation, outcome: &RunOutcome) -> Option<Failure> {
    match &outcome.verdict {
        Verdict::InvariantViolated { invariant, .. } => Some(Failure::Invariant(invariant)),
        Verdict::NotConverged { gaps, .. } => Some(Failure::NotConverged(
            gaps.first().cloned().unwrap_or_default(),
        )),
        Verdict::TestbedError { .. } => Some(Failure::TestbedError),
        Verdict::Converged { at } => match exp.outcome {
            Outcome::ConvergesWithin(within) if *at > within => Some(Failure::TooSlow),
            _ => None,
        },
    }
}

/// One seed's run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeedResult {
    pub seed: u64,
    /// `None` when the rack converged in time with no invariant broken.
    pub failure: Option<Failure>,
    /// Simulated time at the end of the run, in milliseconds.
    pub sim_ms: u64,
    /// Every gap of a not-converged verdict (what known defects are matched
    /// against: all of them, not only the first).
    pub gaps: Vec<String>,
    /// An invariant violation's message.
    pub message: Option<String>,
}

/// Run seed `seed`'s plan (with `mutant`, in test builds).
pub fn run_seed(opts: &Options, seed: u64, mutant: Option<Mutant>) -> SeedResult {
    let scenario = scenario(opts, seed);
    let variant = opts.variant();
    let mut cfg = runner::config(&scenario, variant, seed).expect("the plan has its expectation");
    cfg.mutant = mutant;
    let outcome = racksim_sim::run(&cfg);
    result_of(seed, &scenario.expectations[&variant], &outcome)
}

/// A run's outcome as a seed's result (for a fuzz seed, or a regression
/// file's run checked against a known defect's signature).
pub fn result_of(seed: u64, exp: &Expectation, outcome: &RunOutcome) -> SeedResult {
    let (gaps, message) = match &outcome.verdict {
        Verdict::NotConverged { gaps, .. } => (gaps.clone(), None),
        Verdict::InvariantViolated { message, .. } => (Vec::new(), Some(message.clone())),
        _ => (Vec::new(), None),
    };
    SeedResult {
        seed,
        failure: failure(exp, outcome),
        sim_ms: outcome.sim_time.as_millis() as u64,
        gaps,
        message,
    }
}

/// The seeds `a..=b` of shard `i` of `n`: `a+i`, `a+i+n`, ...
pub fn shard_seeds((a, b): (u64, u64), (i, n): (u64, u64)) -> Vec<u64> {
    (a.saturating_add(i)..=b).step_by(n as usize).collect()
}

/// A fuzz sweep's results, for text and `--json`. The counts of shards of
/// one range add up to the counts of the whole range (`racksim merge`,
/// [`crate::campaign`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Which run this is (what `racksim merge` checks its shards share).
    pub campaign: Campaign,
    pub rack: String,
    pub strategy: String,
    pub start: String,
    pub mutant: Option<String>,
    pub seeds: (u64, u64),
    pub shard: (u64, u64),
    /// The known-defects file failures were matched against (`none`).
    pub known_defects: String,
    pub runs: usize,
    pub passed: usize,
    /// `listed + unlisted + testbed_errors`.
    pub failed: usize,
    /// Failing runs a known defect explains.
    pub listed: usize,
    /// Failing runs no known defect explains (testbed errors aside): what
    /// makes `racksim fuzz` exit 1.
    pub unlisted: usize,
    /// Runs that ended in a testbed error (among `failed`, counted apart:
    /// failures of racksim itself, never findings about the code).
    pub testbed_errors: usize,
    /// Failing runs by kind of failure.
    pub failures_by_kind: BTreeMap<String, usize>,
    /// Listed runs per known defect that applies to these options (zero
    /// when this sample did not show it; a run showing two defects counts
    /// for both).
    pub by_defect: BTreeMap<String, usize>,
    /// Every failing seed, with how it failed and its replay commands.
    pub failures: Vec<FailingSeed>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingSeed {
    pub seed: u64,
    pub failure: String,
    /// `listed`, `unlisted` or `testbed-error`.
    pub status: String,
    /// The known defects that explain it (when listed).
    pub defects: Vec<String>,
    /// What no known defect explains (when unlisted): the gaps, or the
    /// violation.
    pub unexplained: Vec<String>,
    /// Re-runs this seed of the fuzzer.
    pub replay: String,
    /// Writes the plan as a scenario file and runs it.
    pub plan: String,
}

impl FailingSeed {
    /// The seed's label in text: its defect ids, `UNLISTED` or `TESTBED
    /// ERROR`.
    pub fn label(&self) -> String {
        match self.status.as_str() {
            "listed" => self.defects.join(" + "),
            "unlisted" => "UNLISTED".into(),
            _ => "TESTBED ERROR".into(),
        }
    }
}

/// Fuzz `seeds` on `threads` threads; results in seed order whatever the
/// thread count.
pub fn fuzz(
    opts: &Options,
    seeds: &[u64],
    mutant: Option<Mutant>,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Vec<SeedResult> {
    matrix::parallel(seeds.len(), threads, progress, &|i| {
        run_seed(opts, seeds[i], mutant)
    })
}

/// Summarise `results` of a sweep over `range` (shard `shard`), each
/// failure matched against `known`.
pub fn summarise(
    opts: &Options,
    range: (u64, u64),
    shard: (u64, u64),
    mutant: Option<Mutant>,
    known: &known::KnownDefects,
    results: &[SeedResult],
) -> Summary {
    let mutant_flag = mutant.map(|m| format!(" --mutant {m}")).unwrap_or_default();
    let known_flag = if known.origin == known::KNOWN_DEFECTS {
        String::new()
    } else {
        format!(" --known-defects {}", known.origin)
    };
    let mut by_defect: BTreeMap<String, usize> =
        known.applicable(opts).map(|d| (d.id.clone(), 0)).collect();
    let failures: Vec<FailingSeed> = results
        .iter()
        .filter_map(|r| {
            let failure = r.failure.as_ref()?;
            let listing = known.classify(opts, r)?;
            let seed = r.seed;
            let file = format!("fuzz-{seed}.toml");
            let (status, defects, unexplained) = match listing {
                known::Listing::Listed(ids) => ("listed", ids, Vec::new()),
                known::Listing::Unlisted(what) => ("unlisted", Vec::new(), what),
                known::Listing::TestbedError => ("testbed-error", Vec::new(), Vec::new()),
            };
            for id in &defects {
                *by_defect.entry(id.clone()).or_insert(0) += 1;
            }
            Some(FailingSeed {
                seed,
                failure: failure.to_string(),
                status: status.to_string(),
                defects,
                unexplained,
                replay: format!(
                    "racksim fuzz --seeds {seed}..{seed} {}{mutant_flag}{known_flag}",
                    opts.flags()
                ),
                plan: format!(
                    "racksim fuzz --plan {seed} {} > {file} && racksim run {file} --seed {seed} --strategy {}",
                    opts.flags(),
                    opts.variant()
                ),
            })
        })
        .collect();
    let mut failures_by_kind = BTreeMap::new();
    for r in results {
        if let Some(f) = &r.failure {
            let kind = match f {
                Failure::NotConverged(_) => "not converged".to_string(),
                other => other.to_string(),
            };
            *failures_by_kind.entry(kind).or_insert(0) += 1;
        }
    }
    let count = |status| failures.iter().filter(|f| f.status == status).count();
    Summary {
        campaign: Campaign::fuzz(
            opts,
            range,
            mutant.map(|m| m.to_string()),
            known.name(),
            &format!("{}{mutant_flag}{known_flag}", opts.flags()),
        ),
        rack: opts.rack.clone(),
        strategy: opts.strategy.to_string(),
        start: opts.start.to_string(),
        mutant: mutant.map(|m| m.to_string()),
        seeds: range,
        shard,
        known_defects: known.name().to_string(),
        runs: results.len(),
        passed: results.iter().filter(|r| r.failure.is_none()).count(),
        failed: failures.len(),
        listed: count("listed"),
        unlisted: count("unlisted"),
        testbed_errors: count("testbed-error"),
        failures_by_kind,
        by_defect,
        failures,
    }
}

/// The summary as text: counts, the counts per known defect, then the
/// failing seeds in three groups — unlisted, testbed errors, listed — each
/// labelled and with its replay commands.
pub fn text(s: &Summary) -> String {
    let mut out = format!(
        "fuzz: rack {}, strategy {}, start {}{}, seeds {}..{}{}\n",
        s.rack,
        s.strategy,
        s.start,
        s.mutant
            .as_ref()
            .map(|m| format!(", mutant {m}"))
            .unwrap_or_default(),
        s.seeds.0,
        s.seeds.1,
        if s.shard.1 > 1 {
            format!(", shard {}/{}", s.shard.0, s.shard.1)
        } else {
            String::new()
        }
    );
    out += &match s.known_defects.as_str() {
        "none" => "known defects: none (every failure is unlisted)\n".to_string(),
        path => format!("known defects: {path}\n"),
    };
    out += &format!(
        "runs: {}\npassed: {}\nfailed: {}\n",
        s.runs, s.passed, s.failed
    );
    out += &format!(
        "  listed (known defects): {}\n  unlisted: {}\n",
        s.listed, s.unlisted
    );
    out += &match s.testbed_errors {
        0 => "testbed errors: none\n".to_string(),
        n => format!("testbed errors: {n} (failures of racksim itself, not findings)\n"),
    };
    out += "by kind:\n";
    for (kind, n) in &s.failures_by_kind {
        out += &format!("  {kind}: {n}\n");
    }
    if !s.by_defect.is_empty() {
        out += "by known defect:\n";
        for (id, n) in &s.by_defect {
            out += &format!("  {id}: {n}\n");
        }
    }
    for (status, title) in [
        (
            "unlisted",
            "UNLISTED failures (no known defect explains them)",
        ),
        ("testbed-error", "testbed errors"),
        ("listed", "listed failures (known defects)"),
    ] {
        let group: Vec<&FailingSeed> = s.failures.iter().filter(|f| f.status == status).collect();
        if group.is_empty() {
            continue;
        }
        out += &format!("{title}: {}\n", group.len());
        for f in group {
            out += &format!("seed {}: [{}] {}\n", f.seed, f.label(), f.failure);
            for u in &f.unexplained {
                out += &format!("  unexplained: {u}\n");
            }
            out += &format!("  replay: {}\n  plan:   {}\n", f.replay, f.plan);
        }
    }
    out
}

//! The driver: builds the turmoil world for a rack, applies the plan at its
//! times, steps the simulation, checks convergence after every step, and
//! ends with a verdict.

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, SystemTime},
};

use racksim_reconciler::discovery::SwitchSlot;

use crate::{
    check::convergence_gaps,
    hosts,
    plan::{Action, Plan, ResolvedStep, Strategy},
    rack::{RackSpec, UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME},
    trace::{fmt_duration, fmt_time, TraceLine},
    world::{RunParams, World},
};

/// Simulated time per turmoil step. Every host runs once per step, so a
/// network round trip costs one or two ticks; 100 ms keeps the second-scale
/// timing of the code under test visible while letting hours of simulated
/// time run in seconds.
pub const TICK: Duration = Duration::from_millis(100);
/// How long the rack must stay converged before a run ends as converged.
pub const DEFAULT_STABILITY: Duration = Duration::from_secs(60);
/// Bounds of turmoil's per-message latency (drawn from the seed).
pub const MIN_LATENCY: Duration = Duration::from_millis(1);
pub const MAX_LATENCY: Duration = Duration::from_millis(50);

/// Everything a run depends on besides the code.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub rack: RackSpec,
    pub strategy: Strategy,
    pub seed: u64,
    pub plan: Plan,
    /// The run ends unconverged at this simulated time.
    pub deadline: Duration,
    pub stability: Duration,
    pub ntp_return_switch: SwitchSlot,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Converged at `at` (after the last plan step) and stayed so for the
    /// stability window.
    Converged { at: Duration },
    /// Still not converged at the deadline; what was missing then.
    NotConverged {
        deadline: Duration,
        gaps: Vec<String>,
    },
    /// A simulated host's software failed: a bug in the testbed or the code
    /// under test.
    HostFailed { at: Duration, error: String },
}

impl Verdict {
    pub fn converged(&self) -> bool {
        matches!(self, Verdict::Converged { .. })
    }

    /// Lines of the verdict, for the end of the trace and the CLI.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Verdict::Converged { at } => {
                vec![format!(
                    "CONVERGED at {} (time to converge {})",
                    fmt_time(*at),
                    fmt_duration(*at)
                )]
            }
            Verdict::NotConverged { deadline, gaps } => {
                let mut v = vec![format!(
                    "NOT CONVERGED by the deadline {}",
                    fmt_time(*deadline)
                )];
                v.extend(gaps.iter().map(|g| format!("  - {g}")));
                v
            }
            Verdict::HostFailed { at, error } => {
                vec![format!("HOST FAILED at {}: {error}", fmt_time(*at))]
            }
        }
    }
}

/// Result of a run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The plan with its drawn times.
    pub steps: Vec<ResolvedStep>,
    pub trace: Vec<TraceLine>,
    pub verdict: Verdict,
    /// Simulated time at the end of the run.
    pub sim_time: Duration,
}

/// The fixed epoch of every run: wall-clock time never enters a simulation.
fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600) // 2026-01-01
}

/// Run one simulation to its verdict.
pub fn run(cfg: &RunConfig) -> RunOutcome {
    let steps = cfg.plan.resolve(cfg.seed);
    let world = World::new(RunParams {
        rack: Arc::new(cfg.rack.clone()),
        strategy: cfg.strategy,
        seed: cfg.seed,
        ntp_return_switch: cfg.ntp_return_switch,
    });
    let mut sim = turmoil::Builder::new()
        .rng_seed(cfg.seed)
        .epoch(epoch())
        .tick_duration(TICK)
        .ip_version(turmoil::IpVersion::V6)
        .min_message_latency(MIN_LATENCY)
        .max_message_latency(MAX_LATENCY)
        // The driver enforces the deadline; turmoil's own limit is a backstop.
        .simulation_duration(cfg.deadline + Duration::from_secs(3600))
        .build();

    for sw in &cfg.rack.switches {
        let (w, slot) = (world.clone(), sw.slot);
        sim.host(IpAddr::V6(sw.zone_address), move || {
            hosts::switch_zone::run(w.clone(), slot)
        });
    }
    for (i, sled) in cfg.rack.sleds.iter().enumerate() {
        let w = world.clone();
        sim.host(IpAddr::V6(sled.address), move || {
            hosts::sled::run(w.clone(), i)
        });
    }
    {
        let w = world.clone();
        sim.host(IpAddr::V6(UPSTREAM_NTP_ADDR), move || {
            hosts::upstream::run(w.clone())
        });
    }
    let _ = UPSTREAM_NTP_NAME;

    let last_step = steps.last().map(|s| s.at).unwrap_or_default();
    let mut pending = steps.iter().peekable();
    let mut converged_since: Option<Duration> = None;
    let mut gaps_cache: Option<(u64, Vec<String>)> = None;
    let verdict = loop {
        let now = sim.elapsed();
        while let Some(step) = pending.next_if(|s| s.at <= now) {
            apply(&world, &step.action);
            world.trace_at(now, "plan", step.action.to_string());
        }
        let version = world.lock().version;
        let gaps = match &gaps_cache {
            Some((v, g)) if *v == version => g.clone(),
            _ => {
                let g = convergence_gaps(&world);
                gaps_cache = Some((version, g.clone()));
                g
            }
        };
        if gaps.is_empty() && now >= last_step && pending.peek().is_none() {
            let since = *converged_since.get_or_insert(now);
            if now - since >= cfg.stability {
                break Verdict::Converged { at: since };
            }
        } else {
            converged_since = None;
        }
        if now >= cfg.deadline {
            break Verdict::NotConverged {
                deadline: cfg.deadline,
                gaps,
            };
        }
        if let Err(e) = sim.step() {
            break Verdict::HostFailed {
                at: sim.elapsed(),
                error: e.to_string(),
            };
        }
    };
    let sim_time = sim.elapsed();
    drop(sim);
    for line in verdict.lines() {
        world.trace_at(sim_time, "verdict", line);
    }
    RunOutcome {
        steps,
        trace: world.take_trace(),
        verdict,
        sim_time,
    }
}

fn apply(world: &World, action: &Action) {
    let mut st = world.lock();
    match action {
        Action::HideSwitch(s) => {
            st.hidden.insert(*s);
        }
        Action::RevealSwitch(s) => {
            st.hidden.remove(s);
        }
    }
    st.version += 1;
}

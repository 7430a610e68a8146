//! The driver: one run from its config to its verdict.
//!
//! [`run`] is the whole data path of a run in one loop:
//!
//! ```text
//! RunConfig ──▶ Plan::resolve(seed) ──▶ timed steps
//!     │                                   │ apply (at each step's instant)
//!     ▼                                   ▼
//! turmoil Sim + hosts' software ◀──▶ World (shared state) ──▶ trace lines
//!                                         │ after every step
//!                                         ▼
//!               check::observe ─▶ invariant_violation / convergence_gaps
//!                                         │
//!                                         ▼
//!                       Verdict + timing, in a RunOutcome
//! ```
//!
//! It builds the turmoil simulation for the rack, applies the plan's steps
//! at their times, steps the simulation, checks safety and convergence
//! whenever the world changed, and ends with a verdict. One module per
//! concept:
//!
//! * `config` — [`RunConfig`], what a run depends on besides the code;
//! * `engine` — [`Engine`], how simulated time advances;
//! * `driver` — the simulation's hosts by name: add, crash, restart,
//!   replace, and stepping them;
//! * `apply` — what each plan step does to the simulation;
//! * `verdict` — [`Verdict`] and [`RunOutcome`], how the run ended;
//! * [`operations`] — the instance API's requests and what each caller
//!   heard.

mod apply;
mod config;
mod driver;
mod engine;
pub mod operations;
mod verdict;

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use rand::{rngs::SmallRng, Rng, SeedableRng};

use self::driver::{step_hosts, Driver};
pub use self::{
    config::{RunConfig, DEFAULT_STABILITY, EPHEMERAL_PORTS},
    engine::Engine,
    verdict::{RunOutcome, Verdict, TESTBED_ERROR_EXIT},
};
use crate::{
    check::{invariant_violation, next_time_based_check, observe, Judgement},
    rack::{UPSTREAM_NTP_ADDR, UPSTREAM_NTP_NAME},
    trace::{fmt_time, Kind, TraceLine},
    world::{HostKind, RunParams, World},
};

/// Bounds of the in-rack latency of each message, drawn from the seed per
/// message (turmoil's exponential curve between the bounds). A rack's
/// underlay is one switch hop: tens of microseconds to a millisecond.
/// Simplification: one range for every link; the `latency` plan action sets
/// a link's latency outright.
pub const MIN_LATENCY: Duration = Duration::from_micros(50);
pub const MAX_LATENCY: Duration = Duration::from_millis(1);

/// The fixed epoch of every run: wall-clock time never enters a simulation.
fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600) // 2026-01-01
}

/// Run one simulation to its verdict.
///
/// Panics if `cfg.mutant` names a mutant and this build has none: callers
/// check `racksim_mutants::COMPILED` first.
pub fn run(cfg: &RunConfig) -> RunOutcome {
    // Every host of this run executes on this thread, so the selection is
    // this run's alone.
    let _mutant = racksim_mutants::select(cfg.mutant).unwrap_or_else(|e| panic!("{e}"));
    let steps = cfg.plan.resolve(cfg.seed);
    let world = World::new(RunParams {
        rack: Arc::new(cfg.rack.clone()),
        strategy: cfg.strategy,
        start: cfg.start,
        era: cfg.era,
        instances: cfg.instances.clone(),
        seed: cfg.seed,
        ntp_return_switch: cfg.ntp_return_switch,
        sabotage: cfg.sabotage.clone(),
        ip_pool: cfg.ip_pool,
        service_times: cfg.service_times,
    });
    crate::testbed::install_panic_hook();
    crate::testbed::clear_panic();
    // The reconciler's log events become trace lines, for this run only.
    let _logging = crate::logging::install(&world);
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(cfg.seed)
        .epoch(epoch())
        .ip_version(turmoil::IpVersion::V6)
        .min_message_latency(MIN_LATENCY)
        .max_message_latency(MAX_LATENCY)
        // TCP as Linux's: the handshake crosses the network both ways, and
        // a segment lost to a cut or a down peer is retransmitted on the
        // RTO backoff (vendor/turmoil/PATCH.md, docs/fidelity.md).
        .linux_tcp(true)
        .ephemeral_ports(cfg.ephemeral_ports.clone())
        // The driver enforces the deadline; turmoil's own limit is a backstop.
        .simulation_duration(cfg.deadline + Duration::from_secs(3600));
    match cfg.engine {
        // Event-driven: time jumps from one timer or delivery to the next;
        // see docs/decisions/0001-time-model.md.
        Engine::EventDriven => builder.event_driven(true),
        // turmoil as published (see `Engine` for what differs); hosts
        // ready in a tick run in a seeded order, not registration order.
        Engine::Tick(tick) => builder
            .event_driven(false)
            .tick_duration(tick)
            .enable_random_order(),
    };
    let tick_mode = matches!(cfg.engine, Engine::Tick(_));
    let sim = builder.build();
    let mut driver = Driver::new(sim, world.clone());
    for sw in &cfg.rack.switches {
        driver.add_host(sw.name(), sw.zone_address, HostKind::SwitchZone(sw.slot));
    }
    for (i, sled) in cfg.rack.sleds.iter().enumerate() {
        driver.add_host(sled.name.clone(), sled.address, HostKind::Sled(i));
    }
    driver.add_host(
        UPSTREAM_NTP_NAME.to_string(),
        UPSTREAM_NTP_ADDR,
        HostKind::UpstreamNtp,
    );

    let last_step = steps.last().map(|s| s.at).unwrap_or_default();
    let mut pending = steps.iter().peekable();
    let mut converged_since: Option<Duration> = None;
    // The judgement at the last change of the world. The first pass makes
    // one (no version is `u64::MAX`), so every later pass has one.
    let mut judged: Option<Judgement> = None;
    let mut checked_version = u64::MAX;
    let mut next_timed_check = Duration::ZERO;
    let mut events = 0u64;
    let mut uncounted_changes = Vec::new();
    let mut timeline = crate::timing::Timeline::default();
    // The instant whose work the last step ran: the world as observed now
    // is as that instant left it (a step runs everything due at one
    // instant, then moves time to the next one, where nothing has run
    // yet). Changes are stamped with it, not with `now`, which is however
    // far away the next event happens to be.
    let mut drained = Duration::ZERO;
    let mut plan_order = SmallRng::seed_from_u64(world.derive_seed("plan-order", 0));
    let verdict = loop {
        let now = driver.sim.elapsed();
        // Nothing after a failure of the testbed is evidence: stop there.
        if let Some(f) = world.lock().testbed_error.clone() {
            break Verdict::TestbedError {
                at: f.at,
                host: f.host,
                error: f.error,
            };
        }
        // The gaps change only when the world does; safety is checked then
        // too, and at the instant a time-based invariant's grace runs out
        // (nothing else it reads moves in between). One snapshot of the
        // world serves both.
        let version = world.lock().version;
        let changed = version != checked_version;
        if let Some(last) = judged
            .as_ref()
            .filter(|_| cfg.recheck_every_event && !changed)
        {
            // The checks are a function of the snapshot and the instant:
            // a snapshot the checks read as the judged one is judged as it
            // was, gaps and invariants alike (before the next timed check,
            // the instant moves no verdict). Only one that differs is
            // judged afresh: most events change nothing, and judging a
            // hundred instances after every event was most of a recheck.
            let snapshot = observe(&world);
            let fresh =
                (!snapshot.same_as(&last.snapshot)).then(|| Judgement::new(&world, snapshot));
            if let Some(fresh) = fresh.as_ref().filter(|f| f.gaps != last.gaps) {
                uncounted_changes.push(format!(
                    "{} (version {version}): judged gaps {:?}, actual {:?}",
                    fmt_time(drained),
                    last.words(&world),
                    fresh.words(&world)
                ));
            }
            if let Some(fresh) = fresh.as_ref().filter(|_| now < next_timed_check) {
                if let Some(v) = invariant_violation(&world, &fresh.snapshot, now) {
                    uncounted_changes.push(format!(
                        "{} (version {version}): {} broken between checks: {}",
                        fmt_time(now),
                        v.invariant,
                        v.message
                    ));
                }
            }
        }
        if changed || now >= next_timed_check {
            let snapshot = observe(&world);
            next_timed_check = next_time_based_check(&snapshot, now).unwrap_or(Duration::MAX);
            let violation = invariant_violation(&world, &snapshot, now);
            if changed {
                checked_version = version;
                let judgement = Judgement::new(&world, snapshot);
                timeline.sample(drained, judgement.gaps.is_empty());
                judged = Some(judgement);
            }
            if let Some(v) = violation {
                let event = {
                    let st = world.lock();
                    let found = v.cause.as_ref().and_then(|(host, text)| {
                        st.trace
                            .iter()
                            .rev()
                            .find(|l| &l.host == host && l.text.contains(text.as_str()))
                    });
                    found.or(st.trace.last()).map(|l| l.to_string())
                };
                break Verdict::InvariantViolated {
                    // A state that broke an invariant broke it when it was
                    // made; a time-based one breaks when its time is up.
                    at: if changed { drained } else { now },
                    invariant: v.invariant,
                    message: v.message,
                    event,
                };
            }
        }
        let judgement = judged.as_ref().expect("the first pass judges the world");
        if judgement.gaps.is_empty() && drained >= last_step && pending.peek().is_none() {
            let since = *converged_since.get_or_insert(drained);
            if now - since >= cfg.stability {
                break Verdict::Converged { at: since };
            }
        } else {
            converged_since = None;
        }
        if now >= cfg.deadline {
            break Verdict::NotConverged {
                deadline: cfg.deadline,
                gaps: judgement.words(&world),
            };
        }
        // Stop at the next instant the driver must act on: a plan step, the
        // end of the stability window, a grace running out (the timed
        // check), the deadline.
        let mut limit = cfg.deadline.min(next_timed_check);
        if let Some(since) = converged_since {
            limit = limit.min(since + cfg.stability);
        }
        // The plan's steps due now act at this instant, together and in
        // plan order. Whether they act before or after the hosts' work due
        // at the same instant is drawn from the seed, as turmoil draws the
        // order of hosts ready at one instant: the simulator picks no
        // winner. (Hosts' work "at an instant" is everything runnable then
        // without time passing; a message sent then arrives later.) Steps
        // at 0s are the exception: they are the rack's condition as it
        // boots (madrid's hidden switch, a stale entry already in the
        // ASIC), so they act before any host's software starts. On the
        // tick engine a step cannot run "what is due now" without moving
        // time a tick, so steps always act between ticks, before the next.
        if pending.peek().is_some_and(|s| s.at <= now) {
            if now > Duration::ZERO && !tick_mode && plan_order.random_bool(0.5) {
                // The hosts first: run what is due now, time stays put.
                if let Err(e) = step_hosts(&mut driver, &world, now) {
                    break e;
                }
            }
            while let Some(step) = pending.next_if(|s| s.at <= now) {
                world.record(
                    TraceLine::new(now, "plan", Kind::Plan, step.action.to_string())
                        .field("step", step.action.kind()),
                );
                driver.apply(now, &step.action);
            }
        }
        if let Some(step) = pending.peek() {
            limit = limit.min(step.at);
        }
        // (On the tick engine `step_until` is one tick whatever `limit`:
        // the loop comes round every tick and acts at the first one at or
        // after each of these instants.)
        events += 1;
        drained = now;
        if let Err(e) = step_hosts(&mut driver, &world, limit) {
            break e;
        }
    };
    // A broken invariant ends the run where it broke: a change is judged
    // once the step that made it has moved the clock on to the next event,
    // where no host has run yet, so the clock's instant is not the run's.
    let sim_time = match &verdict {
        Verdict::InvariantViolated { at, .. } => *at,
        _ => driver.sim.elapsed(),
    };
    drop(driver);
    for line in verdict.lines() {
        world.trace_at(sim_time, "verdict", Kind::Verdict, line);
    }
    let zone_starts = world.lock().sleds.zone_starts.clone();
    let timing = timeline.timing(&steps, cfg.stability, sim_time);
    RunOutcome {
        steps,
        trace: world.take_trace(),
        verdict,
        sim_time,
        events,
        zone_starts,
        timing,
        uncounted_changes,
    }
}

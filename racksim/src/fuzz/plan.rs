//! Drawing a seed's swarm plan: which kinds of fault are in at all, then
//! how many of each, when, for how long and on which hosts, written as a
//! scenario file and parsed back, so that what runs is what the printed
//! file says.

#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{rack::RackSpec, Action, At, InstanceSpec, Plan, Step};
use rand::{rngs::SmallRng, Rng, SeedableRng};

use super::{Options, CP_MIN_DOWN, CREATE_RETRY, LIVENESS};
use crate::file::{self, write, Scenario};

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

/// Kinds added after the first campaigns, each drawn from a generator of
/// its own ([`LATER_STREAM`]) after every kind of [`KINDS`]: a seed that
/// does not enable one draws exactly the plan it drew before the kind
/// existed, so recorded failing seeds and the seeds tests rely on keep
/// their plans unless the new kind is in them.
const LATER_KINDS: [&str; 3] = ["reboot-scrimlet", "mgs-fault", "db-fault"];

/// How long a `db-stall` or `db-errors` the fuzzer draws lasts: what a
/// CockroachDB node's death costs the ranges it led. Its liveness record
/// expires 9 s after its last heartbeat and is heartbeated every 4.5 s, so
/// the cluster waits 4.5 to 9 s for it (6.75 s on average), then a Raft
/// election and the lease acquisition (CockroachDB's docs, "How leases are
/// transferred from a dead node": "lease transfers take about 10
/// seconds"). Drawn uniformly in this range, to the millisecond.
pub const DB_FAULT_LENGTH: (Duration, Duration) =
    (Duration::from_millis(4500), Duration::from_secs(10));

/// The seed of [`LATER_KINDS`]' generator is `seed ^ LATER_STREAM`.
const LATER_STREAM: u64 = 0x7265_626f_6f74_2121;

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
            opts.file_strategy()
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

    /// Claim `[from, to]` on every one of `resources`, or on none of them
    /// (a fault that takes several pieces of state must not leave some
    /// claimed when another is taken). False if any is taken.
    fn claim_all(&mut self, resources: &[String], from: Duration, to: Duration) -> bool {
        let mut trial = Busy(self.0.clone());
        if resources.iter().all(|r| trial.claim(r, from, to)) {
            *self = trial;
            true
        } else {
            false
        }
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
    draw_with(opts, seed, true)
}

/// [`draw`], with or without [`LATER_KINDS`] (without: the plan as drawn
/// before they existed, which the tests compare against).
fn draw_with(opts: &Options, seed: u64, later_kinds: bool) -> Scenario {
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
    let mut d = Drawing {
        rack: &rack,
        chaos,
        hosts: rack.host_names(),
        sleds: rack.sleds.iter().map(|s| s.name.clone()).collect(),
        steps: Vec::new(),
        busy: Busy::default(),
        instances: Vec::new(),
        replaced: Vec::new(),
    };
    let switches: Vec<SwitchSlot> = rack.switches.iter().map(|s| s.slot).collect();
    let ms = |d: Duration| d.as_millis() as u64;
    // Power cycles first: nothing else may overlap them.
    let order: Vec<&str> = {
        let mut o = enabled.clone();
        o.sort_by_key(|k| *k != "power-cycle");
        o
    };
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
            let host = d.hosts[rng.random_range(0..d.hosts.len())].clone();
            d.fault(&mut rng, kind, from, to, switch, host);
        }
    }
    if later_kinds {
        draw_later_kinds(
            &mut SmallRng::seed_from_u64(seed ^ LATER_STREAM),
            &rack,
            chaos,
            &mut enabled,
            &mut d.busy,
            &mut d.steps,
        );
    }
    let Drawing {
        mut steps,
        instances,
        ..
    } = d;
    retry_refused_creates(&instances, chaos, &mut steps);
    // File order: by latest time, then as drawn (the parser checks order
    // by latest time, and steps at one instant run in file order).
    steps.sort_by_key(|(at, _)| at.latest());
    let plan = Plan {
        steps: steps
            .into_iter()
            .map(|(at, action)| Step { at, action })
            .collect(),
    };
    let ntp_return_switch = {
        let up = rack.uplinked_switches();
        up[rng.random_range(0..up.len())]
    };
    let mut scenario = frame(opts, seed, &enabled, chaos, ntp_return_switch);
    scenario.instances = instances;
    scenario.plan = plan;
    scenario
}

/// The plan as it is drawn, fault by fault.
struct Drawing<'a> {
    rack: &'a RackSpec,
    chaos: Duration,
    hosts: Vec<String>,
    sleds: Vec<String>,
    steps: Vec<(At, Action)>,
    /// What each drawn fault holds, so that no two overlap on one thing.
    busy: Busy,
    instances: Vec<InstanceSpec>,
    /// The scrimlets (sled indices) the plan replaces.
    replaced: Vec<usize>,
}

impl Drawing<'_> {
    /// A fault of `kind` from `from` to `to`, on `switch` or `host` where
    /// it needs one, unless what it would hold is already held then (it is
    /// then left out: the draws made for it stay made, so the stream is
    /// the same whatever was left out).
    fn fault(
        &mut self,
        rng: &mut SmallRng,
        kind: &str,
        from: Duration,
        to: Duration,
        switch: SwitchSlot,
        host: String,
    ) {
        let (rack, chaos) = (self.rack, self.chaos);
        let Drawing {
            sleds,
            steps,
            busy,
            instances,
            replaced,
            ..
        } = self;
        let ms = |d: Duration| d.as_millis() as u64;
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
            "partition" => self.partition(rng, from, to, host),
            "latency" => self.latency(rng, from, to, host),
            "dpd-errors" | "dpd-hang" if busy.claim(&format!("dpd fault {switch}"), from, to) => {
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
                if scrimlet_is_bare(rack, switch)
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
                instance_ops(rng, &name, &placeable, chaos, steps);
                instances.push(InstanceSpec { name });
            }
            _ => {}
        }
    }
    /// A partition of `host` from some other hosts (one way or both), healed
    /// at `to`.
    fn partition(&mut self, rng: &mut SmallRng, from: Duration, to: Duration, host: String) {
        let (hosts, busy, steps) = (&self.hosts, &mut self.busy, &mut self.steps);
        let fixed = At::Fixed;
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

    /// Latency between `host` and another, back to the top of the in-rack
    /// range at `to`.
    fn latency(&mut self, rng: &mut SmallRng, from: Duration, to: Duration, host: String) {
        let (hosts, busy, steps) = (&self.hosts, &mut self.busy, &mut self.steps);
        let fixed = At::Fixed;
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
}

/// A client whose create was refused (the control plane down, the rack
/// off) tries again once everything has healed; for an instance that
/// exists by then the retry is refused and changes nothing. Without it a
/// declared instance no request ever reached would stay `creating`, a gap
/// no reconciler could close.
fn retry_refused_creates(
    instances: &[InstanceSpec],
    chaos: Duration,
    steps: &mut Vec<(At, Action)>,
) {
    for i in instances {
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
}

/// The scenario around a drawn plan: its frame through the parser (so a
/// field the format gains gets its default), expecting convergence within
/// the chaos and [`LIVENESS`].
fn frame(
    opts: &Options,
    seed: u64,
    enabled: &[&str],
    chaos: Duration,
    ntp_return_switch: SwitchSlot,
) -> Scenario {
    let within = chaos + LIVENESS;
    let name = format!(
        "fuzz-{}-{}-{}-{seed}",
        opts.rack,
        opts.strategy,
        opts.start_arg()
    );
    let description = format!(
        "swarm plan of seed {seed}: {} over {} of chaos, then {} to converge",
        enabled.join(", "),
        racksim_sim::trace::fmt_duration(chaos),
        racksim_sim::trace::fmt_duration(LIVENESS)
    );
    let frame = format!(
        "name = {name:?}\ndescription = {description:?}\nkind = \"instances\"\n\
         service_nat = \"{}\"\nrack = \"{}\"\nntp_return_switch = \"{ntp_return_switch}\"\n\
         [expect.\"{}\"]\noutcome = \"converges\"\nwithin = \"{}\"\n",
        opts.strategy,
        opts.rack,
        opts.file_strategy(),
        write::duration(within),
    );
    file::parse(&format!("fuzz:{seed}"), &frame)
        .unwrap_or_else(|e| panic!("BUG: the fuzzer's scenario frame is invalid:\n{e}"))
}

/// The faults of [`LATER_KINDS`], from their own generator `rng`, claimed
/// after every fault of [`KINDS`] (so they give way to those, never the
/// other way round).
fn draw_later_kinds(
    rng: &mut SmallRng,
    rack: &RackSpec,
    chaos: Duration,
    enabled: &mut Vec<&str>,
    busy: &mut Busy,
    steps: &mut Vec<(At, Action)>,
) {
    let ms = |d: Duration| d.as_millis() as u64;
    for kind in LATER_KINDS {
        if !rng.random_bool(0.5) {
            continue;
        }
        enabled.push(kind);
        for _ in 0..rng.random_range(1..=3) {
            // As for KINDS: one in five from the first instant (a scrimlet
            // that boots late), then a duration on the same scales.
            let from = if rng.random_bool(0.2) {
                Duration::ZERO
            } else {
                Duration::from_millis(rng.random_range(0..ms(chaos) - 1000))
            };
            let to = (from + draw_duration(rng)).min(chaos);
            let switch = rack.switches[rng.random_range(0..rack.switches.len())].slot;
            match kind {
                // A reboot takes the scrimlet's sled (its sled-agent, its
                // zones and reconcilers, what `crash` of it takes), the
                // switch zone that sled hosts (what `crash` of the switch
                // zone takes) and with it the switch's state the sidecar's
                // power and a replacement also change: no other fault on
                // any of them may overlap it, or one's undo would bring back
                // what the other still holds down (a `scrimlet-back` while
                // the sidecar is off would start its switch zone).
                "reboot-scrimlet" => {
                    let sw = rack.switch(switch).expect("a rack switch");
                    let claims = [
                        format!("host {}", rack.sleds[sw.scrimlet].name),
                        format!("host {}", sw.name()),
                        format!("sidecar {switch}"),
                    ];
                    if busy.claim_all(&claims, from, to) {
                        steps.push((At::Fixed(from), Action::ScrimletReboot(switch)));
                        steps.push((At::Fixed(to), Action::ScrimletBack(switch)));
                    }
                }
                // A switch's MGS answers 500s, or hangs, for a window:
                // what the switch lookup, scrimlet-local's own-switch
                // lookup and Nexus's inventory meet.
                "mgs-fault" if busy.claim(&format!("mgs fault {switch}"), from, to) => {
                    let window = to - from;
                    let action = if rng.random_bool(0.5) {
                        Action::MgsErrors { switch, window }
                    } else {
                        Action::MgsHang { switch, window }
                    };
                    steps.push((At::Fixed(from), action));
                }
                "mgs-fault" => {}
                // The database stalls (a node's leases move) or answers
                // retryable errors, for what a node's death lasts
                // ([`DB_FAULT_LENGTH`]): from anywhere in the chaos, as
                // the other faults.
                "db-fault" => {
                    let (lo, hi) = DB_FAULT_LENGTH;
                    let window = Duration::from_millis(rng.random_range(ms(lo)..=ms(hi)));
                    let to = (from + window).min(chaos);
                    let stall = rng.random_bool(0.5);
                    if to > from && busy.claim("database", from, to) {
                        let window = to - from;
                        let action = if stall {
                            Action::DbStall { window }
                        } else {
                            Action::DbErrors { window }
                        };
                        steps.push((At::Fixed(from), action));
                    }
                }
                _ => unreachable!("every later kind is drawn above"),
            }
        }
    }
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
                // A start racing a delete (the instance-start networking issue's race).
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

//! From a run's structured trace to lanes of spans and marks: what the
//! timeline shows, before any pixel is placed (that is [`super::svg`]).
//! This module walks the trace once and hands each record to the lane it
//! belongs to: the switches' NAT tables to [`super::nat`], each sled's rows
//! to [`super::sled`]; the plan lane, the rack lane and the verdict are
//! built here. What a lane is made of is [`super::timeline`].
//!
//! Everything here reads the trace's `kind` and `fields`, never its text
//! (the text only goes into tooltips), so reconciler wording can change
//! without changing the picture.

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::{
    plan::ResolvedStep,
    trace::{fmt_duration, fmt_time, Kind, TraceLine},
    Action, Verdict,
};

use super::{
    nat::NatLanes,
    sled::SledRows,
    timeline::{field, Block, Item, Lane, Layout, Row},
    RunInput,
};

/// `sled12` sorts after `sled2`.
fn host_order(name: &str) -> (String, u64) {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &name[..name.len() - digits.len()];
    (prefix.to_string(), digits.parse().unwrap_or(0))
}

/// Build the lanes of one run.
pub fn build(input: &RunInput<'_>) -> Block {
    let outcome = &input.judged.outcome;
    let rack = &input.scenario.rack;
    let end = outcome.sim_time.max(Duration::from_millis(1));
    let trace = &outcome.trace;

    // Hosts: the rack's switches and sleds, then any the run added.
    let mut switches: Vec<String> = rack.switches.iter().map(|s| s.name()).collect();
    let mut sleds: Vec<String> = rack.sleds.iter().map(|s| s.name.clone()).collect();
    for line in trace {
        let h = &line.host;
        if h.starts_with("switch") && !switches.contains(h) {
            switches.push(h.clone());
        } else if h.starts_with("sled") && !sleds.contains(h) {
            sleds.push(h.clone());
        }
    }
    switches.sort_by_key(|h| host_order(h));
    sleds.sort_by_key(|h| host_order(h));

    let plan = plan_lane(outcome.steps.as_slice(), trace, end);
    let mut rack_lane = Lane {
        name: "rack".into(),
        rows: vec![
            Row::new("control plane", Layout::Overlay).note("never up"),
            Row::new("NTP", Layout::Pack).note("never synchronised"),
        ],
    };
    let mut instances = Row::new("instances", Layout::Overlay);
    let mut sagas = Row::new("sagas", Layout::Overlay);
    let mut other = Row::new("other", Layout::Overlay);

    let mut nat = NatLanes::new(input, &switches, end);
    let mut sled_state: BTreeMap<String, SledRows> = sleds
        .iter()
        .map(|s| (s.clone(), SledRows::default()))
        .collect();

    // The plan steps, in trace order, to know what each plan record did.
    let mut steps = outcome.steps.iter();
    let mut cp_up: Option<&TraceLine> = None;
    for line in trace {
        match line.kind {
            Kind::Plan => {
                if field(line, "step").is_none() {
                    continue;
                }
                let Some(step) = steps.next() else { continue };
                nat.apply_step(step, line);
                for (name, rows) in sled_state.iter_mut() {
                    if wipes_sled(&step.action, name) {
                        rows.wipe(line.at, "the sled went down");
                    }
                }
            }
            Kind::Nat => nat.record(line),
            Kind::Boot if switches.contains(&line.host) => {
                nat.boot(line);
            }
            Kind::Boot | Kind::Zone | Kind::Vmm | Kind::V2p | Kind::Reconciler => {
                let host = field(line, "sled").unwrap_or(&line.host);
                match sled_state.get_mut(host) {
                    Some(rows) => rows.record(line, end),
                    // A reconciler off the sleds (dpd's NAT RPW in a switch
                    // zone) is still drawn as one.
                    None if line.kind == Kind::Reconciler => {
                        other.items.push(Item::mark(line, "reconciler", "info"))
                    }
                    None => other.items.push(Item::mark(line, "other", "info")),
                }
            }
            Kind::Dataplane => match field(line, "switch") {
                Some(_) => nat.record(line),
                None => match sled_state.get_mut(&line.host) {
                    Some(rows) => rows.record(line, end),
                    None => other.items.push(Item::mark(line, "dataplane", "warn")),
                },
            },
            Kind::Ntp => {
                let label = match field(line, "via") {
                    Some(via) => format!("{}: boundary NTP synchronised via {via}", line.host),
                    None => format!("{}: internal NTP synchronised", line.host),
                };
                rack_lane.rows[1]
                    .items
                    .push(Item::mark(line, "ntp", "ntp").label(label));
            }
            Kind::ControlPlane => match field(line, "state") {
                Some("up") => {
                    cp_up.get_or_insert(line);
                }
                _ => {
                    if let Some(up) = cp_up.take() {
                        rack_lane.rows[0]
                            .items
                            .push(cp_span(up, Some(line), line.at));
                    } else {
                        rack_lane.rows[0]
                            .items
                            .push(Item::mark(line, "control-plane", "bad"));
                    }
                }
            },
            Kind::Instance => {
                let class = match field(line, "outcome") {
                    Some("failed") => "bad",
                    _ => "info",
                };
                instances.items.push(Item::mark(line, "instance", class));
            }
            // A stuck saga (an undo failed; nothing will resume it) is
            // marked as bad and labelled; its gap is in the verdict too.
            Kind::Saga if field(line, "state") == Some("stuck") => sagas.items.push(
                Item::mark(line, "saga", "bad")
                    .label(format!("saga {} STUCK", field(line, "saga").unwrap_or("?"))),
            ),
            Kind::Saga => sagas.items.push(Item::mark(line, "saga", "info")),
            Kind::Verdict => {}
            Kind::TestbedError => other.items.push(Item::mark(line, "testbed-error", "bad")),
            #[allow(unreachable_patterns)]
            _ => other.items.push(Item::mark(line, "other", "info")),
        }
    }
    if let Some(up) = cp_up {
        rack_lane.rows[0].items.push(cp_span(up, None, end));
    }
    for row in [instances, sagas, other] {
        if !row.items.is_empty() {
            rack_lane.rows.push(row);
        }
    }

    let gaps: &[String] = match &outcome.verdict {
        Verdict::NotConverged { gaps, .. } => gaps,
        _ => &[],
    };
    nat.missing(gaps);
    for (name, rows) in sled_state.iter_mut() {
        rows.missing_v2p(name, gaps, end);
    }

    let mut lanes = vec![plan, rack_lane];
    lanes.extend(nat.finish());
    for name in &sleds {
        let rows = sled_state.remove(name).unwrap_or_default();
        lanes.push(Lane {
            name: name.clone(),
            rows: rows.finish(end),
        });
    }
    Block {
        lanes,
        verdict: verdict_items(&outcome.verdict, end, trace),
        end,
    }
}

fn cp_span(up: &TraceLine, down: Option<&TraceLine>, to: Duration) -> Item {
    let mut title = up.to_string();
    match down {
        Some(d) => title += &format!("\n{d}"),
        None => title += "\n(up at the end of the run)",
    }
    Item::span(up.at, to, "control-plane", "cp-up")
        .label("control plane up")
        .title(title)
}

fn verdict_items(verdict: &Verdict, end: Duration, trace: &[TraceLine]) -> Vec<Item> {
    let text: Vec<String> = trace
        .iter()
        .filter(|l| l.kind == Kind::Verdict)
        .map(|l| l.to_string())
        .collect();
    let title = text.join("\n");
    match verdict {
        Verdict::Converged { at } => vec![
            Item::span(*at, end, "stability", "stable").title(format!(
                "{title}\nheld for the stability window until {}",
                fmt_time(end)
            )),
            Item::span(*at, *at, "converged", "converged")
                .label(format!("CONVERGED at {}", fmt_duration(*at)))
                .title(title),
        ],
        Verdict::NotConverged { deadline, gaps } => {
            vec![Item::span(*deadline, *deadline, "deadline", "deadline")
                .label(format!(
                    "NOT CONVERGED by the deadline {} ({} gaps)",
                    fmt_duration(*deadline),
                    gaps.len()
                ))
                .title(title)]
        }
        Verdict::InvariantViolated { at, invariant, .. } => {
            vec![Item::span(*at, *at, "violation", "deadline")
                .label(format!("INVARIANT VIOLATED: {invariant}"))
                .title(title)]
        }
        Verdict::TestbedError { at, .. } => {
            vec![Item::span(*at, *at, "testbed-error", "deadline")
                .label("TESTBED ERROR")
                .title(title)]
        }
    }
}

/// Does this step take the sled's software down (losing VMMs and V2P)?
fn wipes_sled(action: &Action, sled: &str) -> bool {
    match action {
        Action::Crash(h) | Action::Restart(h) => h == sled,
        Action::PowerOff => true,
        _ => false,
    }
}

/// The plan lane: steps as bands (a fault and its undoing) or markers.
fn plan_lane(steps: &[ResolvedStep], trace: &[TraceLine], end: Duration) -> Lane {
    let lines: Vec<&TraceLine> = trace
        .iter()
        .filter(|l| l.kind == Kind::Plan && field(l, "step").is_some())
        .collect();
    let describe = |i: usize| -> String {
        let s = &steps[i];
        let drawn = s
            .drawn_from
            .map(|w| format!("   (drawn from {w})"))
            .unwrap_or_default();
        match lines.get(i) {
            Some(l) => format!("{l}{drawn}"),
            None => format!("{}  plan  {}{drawn}", fmt_time(s.at), s.action),
        }
    };
    let mut row = Row::new("faults and actions", Layout::Pack);
    let mut open: Vec<usize> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let kind = step.action.kind();
        if let Some(pos) = open
            .iter()
            .position(|&o| closes(&steps[o].action, &step.action))
        {
            let o = open.remove(pos);
            row.items.push(
                Item::span(steps[o].at, step.at, "plan", "fault")
                    .label(band_label(&steps[o].action))
                    .title(format!("{}\n{}", describe(o), describe(i)))
                    .data("step", format!("{}..{kind}", steps[o].action.kind())),
            );
            continue;
        }
        if opens(&step.action) {
            open.push(i);
            continue;
        }
        let item = match step.action.window() {
            Some(window) => Item::span(step.at, (step.at + window).min(end), "plan", "fault"),
            None => Item::span(step.at, step.at, "plan", "action"),
        };
        row.items.push(
            item.label(step.action.to_string())
                .title(describe(i))
                .data("step", kind),
        );
    }
    for o in open {
        row.items.push(
            Item::span(steps[o].at, end, "plan", "fault")
                .label(format!("{} (to the end)", band_label(&steps[o].action)))
                .title(format!("{}\n(not undone before the end)", describe(o)))
                .data("step", steps[o].action.kind()),
        );
    }
    // Notes the driver adds to a step (a rejected request, a replacement).
    for l in trace
        .iter()
        .filter(|l| l.kind == Kind::Plan && field(l, "step").is_none())
    {
        row.items.push(Item::mark(l, "plan-note", "warn"));
    }
    row.items.sort_by_key(|i| i.from);
    Lane {
        name: "plan".into(),
        rows: vec![row],
    }
}

fn opens(a: &Action) -> bool {
    matches!(
        a,
        Action::HideSwitch(_)
            | Action::Partition { .. }
            | Action::PowerOff
            | Action::SidecarPowerOff(_)
            | Action::ScrimletReboot(_)
            | Action::ControlPlaneDown
            | Action::ControlPlaneCrash
            | Action::Crash(_)
    )
}

fn closes(open: &Action, close: &Action) -> bool {
    match (open, close) {
        (Action::HideSwitch(a), Action::RevealSwitch(b)) => a == b,
        (
            Action::Partition { a, b, oneway },
            Action::Heal {
                a: a2,
                b: b2,
                oneway: o2,
            },
        ) => a == a2 && b == b2 && oneway == o2,
        (Action::PowerOff, Action::ColdBoot) => true,
        (Action::SidecarPowerOff(a), Action::SidecarPowerOn(b)) => a == b,
        (Action::ScrimletReboot(a), Action::ScrimletBack(b)) => a == b,
        (Action::ControlPlaneDown | Action::ControlPlaneCrash, Action::ControlPlaneUp) => true,
        (Action::Crash(a), Action::Restart(b)) => a == b,
        _ => false,
    }
}

fn band_label(open: &Action) -> String {
    match open {
        Action::HideSwitch(s) => format!("{s} hidden from discovery"),
        Action::PowerOff => "rack powered off".into(),
        Action::SidecarPowerOff(s) => format!("sidecar {s} off"),
        Action::ScrimletReboot(s) => format!("{s}'s scrimlet rebooting"),
        Action::ControlPlaneDown => "control plane down (operator)".into(),
        Action::ControlPlaneCrash => "control plane crashed".into(),
        Action::Crash(h) => format!("{h} down"),
        other => other.to_string(),
    }
}

//! A sled's lane: zone starts, reconciler activations per task, VMMs and
//! V2P mappings.

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::trace::{fmt_duration, Kind, TraceLine};

use super::timeline::{field, Item, Layout, Row};

/// A sled's rows: zones, reconciler tasks, VMMs, V2P.
#[derive(Default)]
pub(super) struct SledRows {
    zones: Vec<Item>,
    zone_open: BTreeMap<String, TraceLine>,
    tasks: BTreeMap<String, Vec<Item>>,
    vmm: Vec<Item>,
    vmm_open: BTreeMap<(String, String), Item>,
    v2p: Vec<Item>,
    v2p_open: BTreeMap<(String, String), Item>,
    dataplane: Vec<Item>,
}

impl SledRows {
    pub(super) fn wipe(&mut self, at: Duration, why: &str) {
        for (_, mut item) in std::mem::take(&mut self.vmm_open) {
            item.to = Some(at);
            item.title += &format!("\nlost: {why}");
            self.vmm.push(item);
        }
        for (_, mut item) in std::mem::take(&mut self.v2p_open) {
            item.to = Some(at);
            item.title += &format!("\nlost: {why}");
            self.v2p.push(item);
        }
    }

    pub(super) fn record(&mut self, line: &TraceLine, end: Duration) {
        match line.kind {
            Kind::Boot => {
                if line.at > Duration::ZERO {
                    self.wipe(line.at, &line.to_string());
                }
                self.zones.push(Item::mark(line, "boot", "info"));
            }
            Kind::Zone => {
                let zone = field(line, "zone").unwrap_or("?").to_string();
                match field(line, "took_us").and_then(|t| t.parse::<u64>().ok()) {
                    None => {
                        self.zone_open.insert(zone, line.clone());
                    }
                    Some(took) => {
                        let started = self.zone_open.remove(&zone);
                        let took = Duration::from_micros(took);
                        if took >= Duration::from_secs(1) {
                            let from = started.as_ref().map(|l| l.at).unwrap_or(line.at - took);
                            let mut title = started.map(|l| format!("{l}\n")).unwrap_or_default();
                            title += &line.to_string();
                            self.zones.push(
                                Item::span(from, line.at, "zone", "zone-blocked")
                                    .label(format!("{zone} start blocked {}", fmt_duration(took)))
                                    .title(title)
                                    .data("zone", zone),
                            );
                        } else {
                            self.zones
                                .push(Item::mark(line, "zone", "ok").data("zone", zone));
                        }
                    }
                }
            }
            Kind::Reconciler => {
                let task = field(line, "task").unwrap_or("reconciler").to_string();
                let class = reconciler_class(line);
                self.tasks
                    .entry(task)
                    .or_default()
                    .push(Item::mark(line, "reconciler", class));
            }
            Kind::Vmm => {
                let key = (
                    field(line, "instance").unwrap_or("?").to_string(),
                    field(line, "vmm").unwrap_or("?").to_string(),
                );
                let destroyed = field(line, "op") == Some("destroyed");
                let prev = self.vmm_open.remove(&key);
                let history = prev
                    .as_ref()
                    .map(|p| format!("{}\n", p.title))
                    .unwrap_or_default()
                    + &line.to_string();
                match prev {
                    Some(mut p) => {
                        p.to = Some(line.at);
                        if destroyed {
                            p.title = history.clone();
                        } else {
                            p.label = None;
                        }
                        self.vmm.push(p);
                    }
                    None if destroyed => self.vmm.push(Item::mark(line, "vmm", "info")),
                    None => {}
                }
                if !destroyed {
                    let class = if field(line, "op") == Some("running") {
                        "vmm-run"
                    } else {
                        "vmm-reg"
                    };
                    self.vmm_open.insert(
                        key.clone(),
                        Item::span(line.at, line.at, "vmm", class)
                            .label(format!("{} VMM {}", key.0, key.1))
                            .title(history),
                    );
                }
            }
            Kind::V2p => {
                let key = (
                    field(line, "virtual_ip").unwrap_or("?").to_string(),
                    field(line, "target").unwrap_or("?").to_string(),
                );
                match field(line, "op") {
                    Some("remove") => match self.v2p_open.remove(&key) {
                        Some(mut item) => {
                            item.to = Some(line.at);
                            item.title += &format!("\n{line}");
                            self.v2p.push(item);
                        }
                        None => self.v2p.push(Item::mark(line, "v2p", "warn")),
                    },
                    _ => {
                        let label = format!("{} -> {}", key.0, key.1);
                        self.v2p_open.insert(
                            key,
                            Item::span(line.at, end, "v2p", "v2p")
                                .label(label)
                                .title(line.to_string()),
                        );
                    }
                }
            }
            _ => self.dataplane.push(Item::mark(line, "dataplane", "warn")),
        }
    }

    pub(super) fn missing_v2p(&mut self, sled: &str, gaps: &[String], end: Duration) {
        let prefix = format!("{sled} lacks the V2P mapping");
        for g in gaps.iter().filter(|g| g.starts_with(&prefix)) {
            let since = self
                .v2p
                .iter()
                .filter_map(|i| i.to)
                .max()
                .unwrap_or_default();
            self.v2p.push(
                Item::span(since, end, "missing", "missing")
                    .label("V2P MISSING at the deadline")
                    .title(format!("at the deadline: {g}")),
            );
        }
    }

    pub(super) fn finish(mut self, end: Duration) -> Vec<Row> {
        for (zone, line) in std::mem::take(&mut self.zone_open) {
            self.zones.push(
                Item::span(line.at, end, "zone", "zone-blocked")
                    .label(format!("{zone} never started"))
                    .title(format!("{line}\n(not started by the end)"))
                    .data("zone", zone),
            );
        }
        self.wipe(end, "(still there at the end)");
        // Spans that reached the end were not lost: say so plainly.
        for item in self.vmm.iter_mut().chain(self.v2p.iter_mut()) {
            item.title = item
                .title
                .replace("lost: (still there at the end)", "(still there at the end)");
        }
        let mut rows = Vec::new();
        let mut zones = Row::new("zones", Layout::Pack);
        zones.items = self.zones;
        zones.items.sort_by_key(|i| i.from);
        rows.push(zones);
        for (task, items) in self.tasks {
            let mut r = Row::new(format!("task {task}"), Layout::Overlay);
            r.items = items;
            rows.push(r);
        }
        for (label, mut items) in [
            ("VMMs", self.vmm),
            ("V2P", self.v2p),
            ("dataplane", self.dataplane),
        ] {
            if !items.is_empty() {
                items.sort_by_key(|i| i.from);
                let layout = if label == "dataplane" {
                    Layout::Overlay
                } else {
                    Layout::Pack
                };
                let mut r = Row::new(label, layout);
                r.items = items;
                rows.push(r);
            }
        }
        rows
    }
}

/// Colour of a reconciler record: its `outcome` field when it has one;
/// otherwise a hint from its text.
fn reconciler_class(line: &TraceLine) -> &'static str {
    let text = line.text.to_ascii_lowercase();
    let troubled = ["error", "fail", "timed out", "unavailable", "refused"]
        .iter()
        .any(|w| text.contains(w));
    let outcome = field(line, "outcome").unwrap_or("");
    let level = field(line, "level").unwrap_or("");
    if outcome == "inert" {
        "inert"
    } else if outcome.contains("fail") || outcome.contains("error") || level == "error" {
        "bad"
    } else if troubled || level.starts_with("warn") {
        "warn"
    } else if !outcome.is_empty() || line.fields.contains_key("activation") {
        // A completed activation (its outcome, or its activation count).
        "ok"
    } else {
        "info"
    }
}

//! The switch lanes: the rack's desired NAT entries against each table's
//! actual ones, built from dpd's `nat` records.

use std::{collections::BTreeMap, time::Duration};

use racksim_sim::{
    plan::ResolvedStep,
    trace::{Kind, TraceLine},
    Action,
};

use super::{
    timeline::{field, Item, Lane, Layout, Row},
    RunInput,
};

/// A NAT table key as dpd keys entries (address and port range).
type NatKey = (String, u16, u16);

/// The switch lanes: desired NAT entries against the table's actual ones.
pub(super) struct NatLanes {
    switches: Vec<String>,
    end: Duration,
    /// Per switch: entries that should be there, with their label.
    desired: BTreeMap<String, Vec<(NatKey, String, String)>>,
    /// Per switch and key: the spans so far, and the open one.
    rows: BTreeMap<(String, NatKey), Vec<Item>>,
    open: BTreeMap<(String, NatKey), Item>,
    /// Per switch: dataplane dropping spans and table resets.
    dataplane: BTreeMap<String, Vec<Item>>,
    dropping: BTreeMap<String, (Duration, String)>,
    zone_names: BTreeMap<NatKey, String>,
}

impl NatLanes {
    pub(super) fn new(input: &RunInput<'_>, switches: &[String], end: Duration) -> Self {
        let rack = &input.scenario.rack;
        let mut zone_names = BTreeMap::new();
        let mut desired_keys = Vec::new();
        for e in rack.desired_nat() {
            let key: NatKey = (e.external_ip.to_string(), e.first_port, e.last_port);
            let zone = rack
                .zone_for(e.external_ip, e.first_port)
                .map(|z| format!("{} on {}", z.kind, rack.sleds[z.sled].name))
                .unwrap_or_else(|| "unknown zone".into());
            let target = rack
                .sleds
                .iter()
                .find(|s| s.address == e.target.internal_ip)
                .map(|s| s.name.clone())
                .unwrap_or_else(|| e.target.internal_ip.to_string());
            zone_names.insert(key.clone(), zone.clone());
            desired_keys.push((key, zone, target));
        }
        let desired = rack
            .switches
            .iter()
            .filter(|s| s.uplinked)
            .map(|s| (s.name(), desired_keys.clone()))
            .collect();
        NatLanes {
            switches: switches.to_vec(),
            end,
            desired,
            rows: BTreeMap::new(),
            open: BTreeMap::new(),
            dataplane: BTreeMap::new(),
            dropping: BTreeMap::new(),
            zone_names,
        }
    }

    fn desired_target(&self, switch: &str, key: &NatKey) -> Option<&str> {
        self.desired
            .get(switch)?
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, t)| t.as_str())
    }

    fn close(&mut self, switch: &str, key: &NatKey, at: Duration, why: String) {
        if let Some(mut item) = self.open.remove(&(switch.to_string(), key.clone())) {
            item.to = Some(at.max(item.from));
            item.title += &format!("\n{why}");
            self.rows
                .entry((switch.to_string(), key.clone()))
                .or_default()
                .push(item);
        }
    }

    fn wipe(&mut self, switch: &str, at: Duration, why: &str) {
        let keys: Vec<NatKey> = self
            .open
            .keys()
            .filter(|(s, _)| s == switch)
            .map(|(_, k)| k.clone())
            .collect();
        for k in keys {
            self.close(switch, &k, at, why.to_string());
        }
    }

    /// The entry key of the first zone of `kind` (the one a plan step on
    /// that kind acts on).
    fn zone_key(&self, kind: racksim_sim::rack::ZoneKind) -> Option<(String, u16, u16)> {
        self.zone_names
            .iter()
            .find(|(_, z)| z.starts_with(&format!("{kind} on")))
            .map(|(k, _)| k.clone())
    }

    pub(super) fn apply_step(&mut self, step: &ResolvedStep, line: &TraceLine) {
        for sw in self.switches.clone() {
            if wipes_switch(&step.action, &sw) {
                self.wipe(&sw, line.at, &format!("table lost: {line}"));
            }
        }
        if let Action::StaleEntry { switch, zone } = &step.action {
            let sw = switch.to_string();
            if let Some(key) = self.zone_key(*zone) {
                self.close(&sw, &key, line.at, format!("replaced: {line}"));
                let item = Item::span(line.at, line.at, "nat-span", "nat-stale")
                    .title(format!(
                        "{line}\n(planted directly in the table; no dpd record)"
                    ))
                    .data("origin", "untraced");
                self.open.insert((sw, key), item);
            }
        }
        if let Action::LostEntry { switch, zone } = &step.action {
            let sw = switch.to_string();
            if let Some(key) = self.zone_key(*zone) {
                self.close(
                    &sw,
                    &key,
                    line.at,
                    format!("deleted behind dpd's back: {line}"),
                );
            }
        }
    }

    pub(super) fn boot(&mut self, line: &TraceLine) {
        if line.at > Duration::ZERO {
            self.wipe(
                &line.host,
                line.at,
                &format!("table lost with the zone: {line}"),
            );
        }
        self.dataplane
            .entry(line.host.clone())
            .or_default()
            .push(Item::mark(line, "boot", "info"));
    }

    pub(super) fn record(&mut self, line: &TraceLine) {
        let switch = field(line, "switch").unwrap_or(&line.host).to_string();
        if line.kind == Kind::Dataplane {
            match field(line, "dropping") {
                Some("true") => {
                    self.dropping
                        .entry(switch)
                        .or_insert((line.at, line.to_string()));
                }
                _ => {
                    if let Some((from, first)) = self.dropping.remove(&switch) {
                        self.dataplane.entry(switch).or_default().push(
                            Item::span(from, line.at, "dataplane", "drop")
                                .label("dropping inbound")
                                .title(format!("{first}\n{line}")),
                        );
                    }
                }
            }
            return;
        }
        let op = field(line, "op").unwrap_or("");
        if op == "reset" {
            self.wipe(&switch, line.at, &line.to_string());
            self.dataplane
                .entry(switch)
                .or_default()
                .push(Item::mark(line, "nat-reset", "warn"));
            return;
        }
        let key: NatKey = (
            field(line, "external_ip").unwrap_or("?").to_string(),
            field(line, "first_port")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
            field(line, "last_port")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
        );
        match op {
            "add" => {
                self.close(&switch, &key, line.at, format!("replaced: {line}"));
                let target = field(line, "target").unwrap_or("?");
                let class = match self.desired_target(&switch, &key) {
                    Some(t) if t != target => "nat-wrong",
                    _ => "nat-actual",
                };
                self.open.insert(
                    (switch, key),
                    Item::span(line.at, line.at, "nat-span", class).title(line.to_string()),
                );
            }
            "remove" => {
                let k = (switch.clone(), key.clone());
                // An entry from before the run or planted without a
                // record: it was there from the start.
                self.open.entry(k).or_insert_with(|| {
                    Item::span(Duration::ZERO, Duration::ZERO, "nat-span", "nat-stale")
                        .title("(in the table before any record of it)")
                        .data("origin", "untraced")
                });
                self.close(&switch, &key, line.at, line.to_string());
            }
            _ => {}
        }
    }

    /// Red where the verdict says an entry is missing (or wrong) at the end.
    pub(super) fn missing(&mut self, gaps: &[String]) {
        for g in gaps {
            let (switch, rest, stale) =
                if let Some((sw, rest)) = g.split_once(" lacks the NAT entry of ") {
                    (sw, rest.split_once(": ").map(|x| x.1).unwrap_or(""), false)
                } else if let Some((sw, rest)) = g.split_once(" holds a stale NAT entry: ") {
                    (sw, rest, true)
                } else {
                    continue;
                };
            if !self.switches.iter().any(|s| s == switch) {
                continue;
            }
            let Some(key) = parse_entry(rest) else {
                continue;
            };
            let k = (switch.to_string(), key);
            let open = self.open.get(&k).map(|i| i.from);
            let last_end = self
                .rows
                .get(&k)
                .and_then(|r| r.iter().filter_map(|i| i.to).max())
                .unwrap_or_default();
            let (from, class, label) = match (stale, open) {
                (true, Some(from)) => (from, "missing-stale", "WRONG entry at the end"),
                (true, None) => (last_end, "missing-stale", "WRONG entry at the end"),
                (false, Some(from)) => (from, "missing-stale", "MISSING (wrong entry held)"),
                (false, None) => (last_end, "missing", "MISSING at the deadline"),
            };
            let item = Item::span(from, self.end, "missing", class)
                .label(label)
                .title(format!("at the deadline: {g}"));
            self.rows.entry(k).or_default().push(item);
        }
    }

    pub(super) fn finish(mut self) -> Vec<Lane> {
        let keys: Vec<(String, NatKey)> = self.open.keys().cloned().collect();
        for (sw, key) in keys {
            let end = self.end;
            self.close(&sw, &key, end, "(still in the table at the end)".into());
        }
        let unclosed: Vec<(String, (Duration, String))> =
            std::mem::take(&mut self.dropping).into_iter().collect();
        for (sw, (from, first)) in unclosed {
            self.dataplane.entry(sw).or_default().push(
                Item::span(from, self.end, "dataplane", "drop")
                    .label("dropping inbound (to the end)")
                    .title(first),
            );
        }
        let mut lanes = Vec::new();
        for sw in &self.switches {
            let mut rows = Vec::new();
            let desired = self.desired.get(sw).cloned().unwrap_or_default();
            for (key, zone, target) in &desired {
                let mut row = Row::new(zone.clone(), Layout::Overlay);
                row.items.push(
                    Item::span(Duration::ZERO, self.end, "nat-desired", "nat-desired").title(
                        format!(
                            "desired on {sw}: {}/{}-{} -> {target} ({zone})",
                            key.0, key.1, key.2
                        ),
                    ),
                );
                let mut actual = self
                    .rows
                    .remove(&(sw.clone(), key.clone()))
                    .unwrap_or_default();
                actual.sort_by_key(|i| (i.kind == "missing", i.from));
                row.items.extend(actual);
                rows.push(row);
            }
            // Entries nobody desires from the rack: instances, strays.
            let extra: Vec<(String, NatKey)> =
                self.rows.keys().filter(|(s, _)| s == sw).cloned().collect();
            for k in extra {
                let mut items = self.rows.remove(&k).unwrap_or_default();
                items.sort_by_key(|i| (i.kind == "missing", i.from));
                let (ip, lo, hi) = &k.1;
                let mut row = Row::new(format!("{ip}/{lo}-{hi}"), Layout::Overlay);
                row.items = items;
                rows.push(row);
            }
            let mut dp = Row::new("dataplane", Layout::Pack);
            dp.items = self.dataplane.remove(sw).unwrap_or_default();
            dp.items.sort_by_key(|i| i.from);
            rows.push(dp);
            lanes.push(Lane {
                name: sw.clone(),
                rows,
            });
        }
        lanes
    }
}

/// `198.51.100.1/16384-32767 -> sled2 (...)` → its key.
fn parse_entry(s: &str) -> Option<NatKey> {
    let head = s.split_whitespace().next()?;
    let (ip, ports) = head.split_once('/')?;
    let (lo, hi) = ports.split_once('-')?;
    Some((ip.to_string(), lo.parse().ok()?, hi.parse().ok()?))
}

/// Does this step empty the switch's NAT table?
fn wipes_switch(action: &Action, switch: &str) -> bool {
    match action {
        Action::DpdRestart(s)
        | Action::SidecarPowerOff(s)
        | Action::ScrimletReboot(s)
        | Action::ReplaceScrimlet(s) => s.to_string() == switch,
        Action::Crash(h) | Action::Restart(h) => h == switch,
        Action::PowerOff => true,
        _ => false,
    }
}

//! Each mechanism's era on its own: `MECHANISM=ERA` choices over a preset.
//!
//! A strategy (or an instance start implementation) is a preset: it stands
//! for one era of upstream, and [`ControlPlaneEra::of`] derives every
//! mechanism from it. Upstream's bugs lived in one mechanism at a time, so
//! a run may set any mechanism to another of its eras and keep the rest of
//! the preset: `saga+nat-ensure=matches-removed` is today's control plane
//! with the NAT ensure query before omicron #4610. The same words are a
//! scenario file's `[expect."…"]` key, a `--strategy` value, and a line of
//! the report header.
//!
//! | mechanism | eras (the preset's in **bold** where every preset agrees) |
//! |---|---|
//! | `nexus-service-nat` | `off`, `inventory-tracker` (omicron #4857 until `1a20a12eb1`) |
//! | `dpd-nat-rpw` | `off` (before omicron #3804: operations push instance NAT to every dpd inline), `on` |
//! | `nexus-v2p` | `off` (before omicron #5568: operations push V2P to every sled inline), `on` |
//! | `instance-watcher` | `off`, `on` |
//! | `reincarnation` | `off`, `on` |
//! | `nat-ensure` | `matches-removed` (before omicron #4610), **`live-only`** |
//! | `dpd-notify` | `fatal` (before omicron #8914), **`logged`** |
//! | `nat-changeset` | `added-order` (before omicron #5036), **`version-order`** |
//! | `remove-notify` | `fatal` (before omicron #10389), **`logged`** |
//!
//! Choices that no run could tell apart from the preset are refused
//! ([`EraChoices::check`]): the instance mechanisms' code matters only
//! where instances run through today's control plane, and the service-zone
//! NAT task only writes rows a dpd NAT RPW pulls.

use std::fmt;

use racksim_reconciler::instances::{DpdNotify, NatChangeset, NatEnsure, StartImpl};

use super::{ControlPlaneEra, NexusServiceNat, Task};

/// The mechanisms a run may choose, in the order they are written.
pub const MECHANISMS: [&str; 9] = [
    "nexus-service-nat",
    "dpd-nat-rpw",
    "nexus-v2p",
    "instance-watcher",
    "reincarnation",
    "nat-ensure",
    "dpd-notify",
    "nat-changeset",
    "remove-notify",
];

/// The mechanisms set to an era other than the preset's: `None` keeps the
/// preset's. Ordered and hashed as a whole, so that a variant with choices
/// is a key of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EraChoices {
    pub nexus_service_nat: Option<NexusServiceNat>,
    pub dpd_nat_rpw: Option<Task>,
    pub nexus_v2p: Option<Task>,
    pub instance_watcher: Option<Task>,
    pub reincarnation: Option<Task>,
    pub nat_ensure: Option<NatEnsure>,
    pub dpd_notify: Option<DpdNotify>,
    pub nat_changeset: Option<NatChangeset>,
    pub remove_notify: Option<DpdNotify>,
}

impl EraChoices {
    /// No choice: the preset as it is.
    pub fn is_empty(&self) -> bool {
        *self == EraChoices::default()
    }

    /// Set `mechanism` to `era` (both as written, e.g. `nat-ensure`,
    /// `matches-removed`). A mechanism chosen twice is refused.
    pub fn set(&mut self, mechanism: &str, era: &str) -> Result<(), String> {
        fn pick<T: Copy>(
            slot: &mut Option<T>,
            mechanism: &str,
            era: &str,
            parse: fn(&str) -> Option<T>,
            known: &str,
        ) -> Result<(), String> {
            let value = parse(era)
                .ok_or_else(|| format!("unknown era {era:?} of {mechanism} (expected {known})"))?;
            if slot.is_some() {
                return Err(format!("{mechanism} is chosen twice"));
            }
            *slot = Some(value);
            Ok(())
        }
        let task = |name: &str| match name {
            "on" => Some(Task::On),
            "off" => Some(Task::Off),
            _ => None,
        };
        match mechanism {
            "nexus-service-nat" => pick(
                &mut self.nexus_service_nat,
                mechanism,
                era,
                |n| match n {
                    "off" => Some(NexusServiceNat::Off),
                    "inventory-tracker" => Some(NexusServiceNat::InventoryTracker),
                    _ => None,
                },
                "off or inventory-tracker",
            ),
            "dpd-nat-rpw" => pick(&mut self.dpd_nat_rpw, mechanism, era, task, "on or off"),
            "nexus-v2p" => pick(&mut self.nexus_v2p, mechanism, era, task, "on or off"),
            "instance-watcher" => pick(
                &mut self.instance_watcher,
                mechanism,
                era,
                task,
                "on or off",
            ),
            "reincarnation" => pick(&mut self.reincarnation, mechanism, era, task, "on or off"),
            "nat-ensure" => pick(
                &mut self.nat_ensure,
                mechanism,
                era,
                NatEnsure::from_name,
                "matches-removed or live-only",
            ),
            "dpd-notify" => pick(
                &mut self.dpd_notify,
                mechanism,
                era,
                DpdNotify::from_name,
                "fatal or logged",
            ),
            "nat-changeset" => pick(
                &mut self.nat_changeset,
                mechanism,
                era,
                NatChangeset::from_name,
                "added-order or version-order",
            ),
            "remove-notify" => pick(
                &mut self.remove_notify,
                mechanism,
                era,
                DpdNotify::from_name,
                "fatal or logged",
            ),
            other => Err(format!(
                "unknown mechanism {other:?} (expected one of {})",
                MECHANISMS.join(", ")
            )),
        }
    }

    /// Parse `MECHANISM=ERA` choices separated by `+` (the part of a
    /// variant's name after its preset).
    pub fn parse(text: &str) -> Result<EraChoices, String> {
        let mut choices = EraChoices::default();
        for part in text.split('+') {
            let (mechanism, era) = part.split_once('=').ok_or_else(|| {
                format!("{part:?} is not MECHANISM=ERA (e.g. nat-ensure=matches-removed)")
            })?;
            choices.set(mechanism.trim(), era.trim())?;
        }
        Ok(choices)
    }

    /// The preset's control plane with these choices made.
    pub fn apply(&self, mut era: ControlPlaneEra) -> ControlPlaneEra {
        if let Some(v) = self.nexus_service_nat {
            era.nexus_service_nat = v;
        }
        if let Some(v) = self.dpd_nat_rpw {
            era.dpd_nat_rpw = v;
        }
        if let Some(v) = self.nexus_v2p {
            era.nexus_v2p = v;
        }
        if let Some(v) = self.instance_watcher {
            era.instance_watcher = v;
        }
        if let Some(v) = self.reincarnation {
            era.reincarnation = v;
        }
        if let Some(v) = self.nat_ensure {
            era.nat_ensure = v;
        }
        if let Some(v) = self.dpd_notify {
            era.dpd_notify = v;
        }
        if let Some(v) = self.nat_changeset {
            era.nat_changeset = v;
        }
        if let Some(v) = self.remove_notify {
            era.remove_notify = v;
        }
        era
    }

    /// Refuse choices no run could tell from the preset, or that make a
    /// control plane no era had: `preset` is the preset's control plane,
    /// `start` its instance start, `instances` whether the run has any.
    pub fn check(
        &self,
        preset: ControlPlaneEra,
        start: StartImpl,
        instances: bool,
    ) -> Result<(), String> {
        let era = self.apply(preset);
        let same = |mechanism: &str, chosen: bool| {
            if chosen {
                Err(format!(
                    "{mechanism} is already that era in this preset: the choice changes nothing"
                ))
            } else {
                Ok(())
            }
        };
        same(
            "nexus-service-nat",
            self.nexus_service_nat == Some(preset.nexus_service_nat),
        )?;
        same("dpd-nat-rpw", self.dpd_nat_rpw == Some(preset.dpd_nat_rpw))?;
        same("nexus-v2p", self.nexus_v2p == Some(preset.nexus_v2p))?;
        same(
            "instance-watcher",
            self.instance_watcher == Some(preset.instance_watcher),
        )?;
        same(
            "reincarnation",
            self.reincarnation == Some(preset.reincarnation),
        )?;
        same("nat-ensure", self.nat_ensure == Some(preset.nat_ensure))?;
        same("dpd-notify", self.dpd_notify == Some(preset.dpd_notify))?;
        same(
            "nat-changeset",
            self.nat_changeset == Some(preset.nat_changeset),
        )?;
        same(
            "remove-notify",
            self.remove_notify == Some(preset.remove_notify),
        )?;
        if self.nat_changeset.is_some() && era.dpd_nat_rpw == Task::Off {
            return Err(
                "nat-changeset is the query dpd's NAT RPW pages through: it needs dpd-nat-rpw=on"
                    .into(),
            );
        }
        if era.nexus_service_nat == NexusServiceNat::InventoryTracker
            && era.dpd_nat_rpw == Task::Off
        {
            return Err(
                "nexus-service-nat=inventory-tracker needs dpd-nat-rpw=on: the task only writes rows for dpd to pull".into(),
            );
        }
        if self.dpd_nat_rpw.is_some() && !instances && era.nexus_service_nat == NexusServiceNat::Off
        {
            return Err(
                "dpd-nat-rpw changes nothing here: without instances or Nexus's service-zone NAT task nobody writes rows for it to pull".into(),
            );
        }
        let instance_code = self.nat_ensure.is_some()
            || self.dpd_notify.is_some()
            || self.remove_notify.is_some()
            || self.nexus_v2p.is_some()
            || self.instance_watcher.is_some()
            || self.reincarnation.is_some();
        if instance_code && !instances {
            return Err(
                "the instance mechanisms (nexus-v2p, instance-watcher, reincarnation, nat-ensure, dpd-notify) need a run with instances: choose them in a kind = \"instances\" scenario".into(),
            );
        }
        if (self.nat_ensure.is_some() || self.dpd_notify.is_some() || self.remove_notify.is_some())
            && start == StartImpl::Inline
        {
            return Err(
                "nat-ensure, dpd-notify and remove-notify are the code of naive and saga starts, which write rows for dpd to pull; inline pushes NAT itself".into(),
            );
        }
        Ok(())
    }
}

/// `+mechanism=era` for each choice, in [`MECHANISMS`]' order (empty for
/// none), so `preset` followed by this is the variant's name.
impl fmt::Display for EraChoices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let service_nat = self.nexus_service_nat.map(|v| match v {
            NexusServiceNat::Off => "off",
            NexusServiceNat::InventoryTracker => "inventory-tracker",
        });
        let values = [
            service_nat,
            self.dpd_nat_rpw.map(Task::name),
            self.nexus_v2p.map(Task::name),
            self.instance_watcher.map(Task::name),
            self.reincarnation.map(Task::name),
            self.nat_ensure.map(NatEnsure::as_str),
            self.dpd_notify.map(DpdNotify::as_str),
            self.nat_changeset.map(NatChangeset::as_str),
            self.remove_notify.map(DpdNotify::as_str),
        ];
        for (mechanism, value) in MECHANISMS.iter().zip(values) {
            if let Some(value) = value {
                write!(f, "+{mechanism}={value}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

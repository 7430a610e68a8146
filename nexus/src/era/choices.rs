//! Each mechanism's era on its own: `MECHANISM=ERA` choices over a preset.
//!
//! A strategy (or an instance start implementation) is a preset: it stands
//! for one era of upstream, and [`Era::of`] derives every
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
//! | `nat-conflict` | `fatal` (before omicron #4694), **`takeover`** |
//! | `switch-lookup` | `mgs-retry` (before omicron #8914), **`dpd`** |
//! | `run-reply` | `after-boot` (before omicron #4691: sled-agent holds RUN for the zone's install and boot), **`at-once`** |
//!
//! Choices that no run could tell apart from the preset are refused
//! ([`EraChoices::check`]): the instance mechanisms' code matters only
//! where instances run through today's control plane, and the service-zone
//! NAT task only writes rows a dpd NAT RPW pulls.

use std::fmt;

use crate::instances::{DpdNotify, NatChangeset, NatConflict, NatEnsure, StartImpl, SwitchLookup};

use super::{Era, NexusServiceNat, PeriodicTask, RunReply};

/// One table of the mechanisms a run may choose, in the order they are
/// written: each a field of [`Era`] (and of [`EraChoices`]),
/// its name, and its eras as written. Everything that goes mechanism by
/// mechanism — parsing, the name, applying, "already that era" — is made
/// from it, so a mechanism is added in one place.
macro_rules! mechanisms {
    ($($field:ident: $ty:ty => $name:literal [$($era:literal),+],)+) => {
        /// The mechanisms a run may choose, in the order they are written.
        pub const MECHANISMS: [&str; [$($name),+].len()] = [$($name),+];

        /// The mechanisms set to an era other than the preset's: `None`
        /// keeps the preset's. Ordered and hashed as a whole, so that a
        /// strategy with choices is a key of its own.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct EraChoices {
            $(pub $field: Option<$ty>,)+
        }

        impl EraChoices {
            /// Set `mechanism` to `era` (both as written, e.g.
            /// `nat-ensure`, `matches-removed`). A mechanism chosen twice
            /// is refused.
            pub fn set(&mut self, mechanism: &str, era: &str) -> Result<(), String> {
                match mechanism {
                    $($name => {
                        let value = <$ty>::from_name(era).ok_or_else(|| {
                            format!(
                                "unknown era {era:?} of {mechanism} (expected {})",
                                [$($era),+].join(" or ")
                            )
                        })?;
                        if self.$field.replace(value).is_some() {
                            return Err(format!("{mechanism} is chosen twice"));
                        }
                        Ok(())
                    })+
                    other => Err(format!(
                        "unknown mechanism {other:?} (expected one of {})",
                        MECHANISMS.join(", ")
                    )),
                }
            }

            /// The preset's control plane with these choices made.
            pub fn apply(&self, mut era: Era) -> Era {
                $(if let Some(v) = self.$field {
                    era.$field = v;
                })+
                era
            }

            /// The first mechanism chosen to be the era `preset` already has.
            fn unchanged_in(&self, preset: Era) -> Option<&'static str> {
                $(if self.$field == Some(preset.$field) {
                    return Some($name);
                })+
                None
            }
        }

        /// `+mechanism=era` for each choice, in [`MECHANISMS`]' order
        /// (empty for none), so `preset` followed by this is the strategy's
        /// name.
        impl fmt::Display for EraChoices {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(if let Some(v) = self.$field {
                    write!(f, "+{}={}", $name, v.as_str())?;
                })+
                Ok(())
            }
        }

        #[cfg(test)]
        /// Every era of every mechanism, as written (for tests).
        const ERAS: &[(&str, &[&str])] = &[$(($name, &[$($era),+])),+];
    };
}

mechanisms! {
    nexus_service_nat: NexusServiceNat => "nexus-service-nat" ["off", "inventory-tracker"],
    dpd_nat_rpw: PeriodicTask => "dpd-nat-rpw" ["on", "off"],
    nexus_v2p: PeriodicTask => "nexus-v2p" ["on", "off"],
    instance_watcher: PeriodicTask => "instance-watcher" ["on", "off"],
    reincarnation: PeriodicTask => "reincarnation" ["on", "off"],
    nat_ensure: NatEnsure => "nat-ensure" ["matches-removed", "live-only"],
    dpd_notify: DpdNotify => "dpd-notify" ["fatal", "logged"],
    nat_changeset: NatChangeset => "nat-changeset" ["added-order", "version-order"],
    remove_notify: DpdNotify => "remove-notify" ["fatal", "logged"],
    nat_conflict: NatConflict => "nat-conflict" ["fatal", "takeover"],
    switch_lookup: SwitchLookup => "switch-lookup" ["mgs-retry", "dpd"],
    run_reply: RunReply => "run-reply" ["after-boot", "at-once"],
}

impl EraChoices {
    /// No choice: the preset as it is.
    pub fn is_empty(&self) -> bool {
        *self == EraChoices::default()
    }

    /// A strategy's name split into its preset and its choices:
    /// `saga+nat-ensure=matches-removed` is `("saga", nat-ensure=…)`.
    pub fn split(name: &str) -> Result<(&str, EraChoices), String> {
        match name.split_once('+') {
            None => Ok((name, EraChoices::default())),
            Some((preset, choices)) => Ok((preset, EraChoices::parse(choices)?)),
        }
    }

    /// Parse `MECHANISM=ERA` choices separated by `+` (the part of a
    /// strategy's name after its preset).
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

    /// Refuse choices no run could tell from the preset, or that make a
    /// control plane no era had: `preset` is the preset's control plane,
    /// `start` its instance start, `instances` whether the run has any.
    pub fn check(&self, preset: Era, start: StartImpl, instances: bool) -> Result<(), String> {
        let era = self.apply(preset);
        if let Some(mechanism) = self.unchanged_in(preset) {
            return Err(format!(
                "{mechanism} is already that era in this preset: the choice changes nothing"
            ));
        }
        if self.nat_changeset.is_some() && era.dpd_nat_rpw == PeriodicTask::Off {
            return Err(
                "nat-changeset is the query dpd's NAT RPW pages through: it needs dpd-nat-rpw=on"
                    .into(),
            );
        }
        if era.nexus_service_nat == NexusServiceNat::InventoryTracker
            && era.dpd_nat_rpw == PeriodicTask::Off
        {
            return Err(
                "nexus-service-nat=inventory-tracker needs dpd-nat-rpw=on: the task only writes rows for dpd to pull".into(),
            );
        }
        if (self.dpd_nat_rpw.is_some() || self.nat_changeset.is_some())
            && !instances
            && era.nexus_service_nat == NexusServiceNat::Off
        {
            return Err(
                "dpd-nat-rpw and nat-changeset change nothing here: without instances or Nexus's service-zone NAT task nobody writes rows for dpd to pull".into(),
            );
        }
        let instance_code = self.nat_ensure.is_some()
            || self.nat_conflict.is_some()
            || self.dpd_notify.is_some()
            || self.remove_notify.is_some()
            || self.switch_lookup.is_some()
            || self.nexus_v2p.is_some()
            || self.instance_watcher.is_some()
            || self.reincarnation.is_some()
            || self.run_reply.is_some();
        if instance_code && !instances {
            return Err(
                "the instance mechanisms (nexus-v2p, instance-watcher, reincarnation, nat-ensure, nat-conflict, dpd-notify, remove-notify, switch-lookup, run-reply) need a run with instances: choose them in a kind = \"instances\" scenario".into(),
            );
        }
        if (self.nat_ensure.is_some()
            || self.nat_conflict.is_some()
            || self.dpd_notify.is_some()
            || self.remove_notify.is_some())
            && start == StartImpl::Inline
        {
            return Err(
                "nat-ensure, nat-conflict, dpd-notify and remove-notify are the code of naive and saga starts, which write rows for dpd to pull; inline pushes NAT itself".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

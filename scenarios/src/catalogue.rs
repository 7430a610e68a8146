//! The built-in scenarios: the files in `scenarios/`, compiled into the
//! binary so `racksim run NAME` works from any directory.

use crate::file::{self, Scenario};

/// `(name, file name, text)` of every catalogued scenario, in listing order.
/// A catalogue entry: the file `scenarios/NAME.toml`, compiled in.
macro_rules! entry {
    ($name:literal) => {
        (
            $name,
            concat!($name, ".toml"),
            include_str!(concat!("../", $name, ".toml")),
        )
    };
}

pub const CATALOGUE: &[(&str, &str, &str)] = &[
    entry!("madrid-one-switch"),
    entry!("zone-start-blocked"),
    entry!("switch-replaced-before-ensure"),
    entry!("dpd-restart-control-plane-down"),
    entry!("sidecar-power-cycle"),
    entry!("stale-entry"),
    entry!("entry-lost-behind-dpd"),
    entry!("inventory-misses-a-sled"),
    entry!("shared-snat"),
    entry!("dns-and-nexus-loss"),
    entry!("full-rack-combined"),
    entry!("cold-boot"),
    entry!("network-faults"),
    entry!("cold-boot-restart"),
    entry!("cold-boot-restart-workaround"),
    entry!("start-delete-race"),
    entry!("concurrent-starts"),
    entry!("control-plane-crash-mid-saga"),
    entry!("instance-migrate-like-move"),
    entry!("config-change"),
    entry!("config-invalid"),
];

/// Every catalogued scenario, parsed. They are validated by the test suite,
/// so a failure here is a bug in the catalogue.
pub fn all() -> Vec<Scenario> {
    CATALOGUE
        .iter()
        .map(|(_, file, text)| {
            file::parse(&format!("scenarios/{file}"), text)
                .unwrap_or_else(|e| panic!("catalogued scenario is invalid:\n{e}"))
        })
        .collect()
}

/// A catalogued scenario by name.
pub fn get(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

pub fn names() -> Vec<&'static str> {
    CATALOGUE.iter().map(|(n, _, _)| *n).collect()
}

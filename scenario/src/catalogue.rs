//! The built-in scenarios: the files in `scenarios/`, compiled into the
//! binary so `racksim run NAME` works from any directory. Every command
//! that takes a scenario takes a catalogue name or a file's path
//! ([`resolve`]); `racksim list` prints the catalogue and the era each
//! strategy stands for ([`listing`]).

use std::path::Path;

use racksim_nexus::instances::StartImpl;
use racksim_sim::{Era, InstanceEra, ServiceNat};

use crate::file::{self, Scenario};

/// `(name, file name, text)` of every catalogued scenario, in listing order.
/// A catalogue entry: the file `scenarios/NAME.toml`, compiled in.
macro_rules! entry {
    ($name:literal) => {
        (
            $name,
            concat!($name, ".toml"),
            include_str!(concat!("../../scenarios/", $name, ".toml")),
        )
    };
}

pub const CATALOGUE: &[(&str, &str, &str)] = &[
    entry!("madrid-one-switch"),
    entry!("zone-start-blocked"),
    entry!("switch-replaced-before-ensure"),
    entry!("dpd-restart-control-plane-down"),
    entry!("dpd-restart-control-plane-up"),
    entry!("scrimlet-reboot"),
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
    entry!("instance-restart-on-the-same-sled"),
    entry!("instance-start-while-a-dpd-fails"),
    entry!("instance-stop-while-a-dpd-fails"),
    entry!("instance-start-while-a-switch-zone-is-down"),
    entry!("instance-start-while-an-mgs-hangs"),
    entry!("leftover-nat-row-blocks-a-start"),
    entry!("sled-reboot-loses-v2p"),
    entry!("dpd-restart-with-a-hundred-nat-changes"),
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

/// A scenario argument: a catalogue name, or else the path of a scenario
/// file.
pub fn resolve(arg: &str) -> Result<Scenario, String> {
    if let Some(s) = get(arg) {
        return Ok(s);
    }
    let path = Path::new(arg);
    if path.exists() {
        return file::load(path);
    }
    Err(format!(
        "error: no scenario {arg:?}: it is neither a catalogue name ({}) nor an existing file",
        names().join(", ")
    ))
}

/// The catalogued scenarios `only` names (every one when it is empty), in
/// catalogue order; an unknown name is an error.
pub fn select(only: &[String]) -> Result<Vec<Scenario>, String> {
    let mut scenarios = all();
    for name in only {
        if !scenarios.iter().any(|s| &s.name == name) {
            return Err(format!(
                "error: no catalogued scenario {name:?} (known: {})",
                names().join(", ")
            ));
        }
    }
    if !only.is_empty() {
        scenarios.retain(|s| only.contains(&s.name));
    }
    Ok(scenarios)
}

/// What `racksim list` prints: a line per scenario (its description and
/// each strategy's expectation), then [`eras`].
pub fn listing() -> String {
    let scenarios = all();
    let width = scenarios.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for s in scenarios {
        let strategies: Vec<String> = s
            .expectations
            .iter()
            .map(|(st, e)| format!("{st}: {}", e.summary()))
            .collect();
        out += &format!(
            "{:<width$}  {}  [{}]\n",
            s.name,
            s.description,
            strategies.join("; ")
        );
    }
    out + &eras()
}

/// Which era of upstream's code each strategy and start implementation
/// stands for, and the control-plane tasks its runs get (`racksim_sim::era`).
pub fn eras() -> String {
    let mut out = String::from(
        "\neras (the upstream code each strategy stands for; its runs get that era's control plane):\n",
    );
    // One column for every name, strategies and starts alike.
    let width = ServiceNat::ALL
        .iter()
        .map(|s| s.name().len())
        .chain(StartImpl::ALL.iter().map(|i| i.as_str().len()))
        .max()
        .unwrap_or(0);
    for s in ServiceNat::ALL {
        let era = s.era();
        out += &format!(
            "  {:<width$}  {era}: {}\n  {:<width$}    control plane: {}\n",
            s.name(),
            era.upstream(),
            "",
            Era::of(s.era(), StartImpl::Saga)
        );
    }
    out += "instance starts (kind = \"instances\"; service NAT as the file fixes it):\n";
    for i in StartImpl::ALL {
        let era = InstanceEra::of(i);
        let cp = Era::of(ServiceNat::LEGACY.era(), i);
        out += &format!(
            "  {:<width$}  {era}: {}\n  {:<width$}    control plane: dpd NAT RPW {}, nexus V2P task {}\n",
            i.as_str(),
            era.upstream(),
            "",
            cp.dpd_nat_rpw,
            cp.nexus_v2p
        );
    }
    out += "mechanisms a strategy may set to another era (PRESET+MECHANISM=ERA, e.g. \
            saga+nat-ensure=matches-removed; docs/upstream-bugs.md):\n";
    out += &format!("  {}\n", racksim_nexus::era::MECHANISMS.join(", "));
    out
}

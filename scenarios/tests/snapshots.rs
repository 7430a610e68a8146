//! Insta snapshots of convergence traces (seed 1), reviewed like code:
//! `cargo insta review` after a change that alters behaviour. Each snapshot
//! is exactly what `racksim run NAME --seed 1 --strategy S` prints. One test
//! per scenario and strategy, so a review shows every changed trace at once.

use racksim::{catalogue, report, runner};
use racksim_sim::Strategy;

fn snapshot(name: &str, strategy: Strategy) {
    let scenario = catalogue::get(name).expect("catalogued");
    let judged = runner::run(&scenario, strategy, 1).expect("has an expectation");
    let text = report::render(&scenario, name, strategy, 1, false, &judged);
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("racksim run {name} --seed 1 --strategy {strategy}"),
    }, {
        insta::assert_snapshot!(format!("{name}__{strategy}__seed1"), text);
    });
}

macro_rules! snapshots {
    ($($module:ident => $name:literal,)*) => {
        $(
            mod $module {
                use super::*;

                #[test]
                fn legacy() {
                    snapshot($name, Strategy::Legacy);
                }

                #[test]
                fn sled_task() {
                    snapshot($name, Strategy::SledTask);
                }

                #[test]
                fn scrimlet_local() {
                    snapshot($name, Strategy::ScrimletLocal);
                }
            }
        )*

        /// Every catalogued scenario has snapshot tests, and every file in
        /// snapshots/ belongs to one (a renamed scenario leaves no orphan).
        #[test]
        fn snapshots_cover_the_catalogue_exactly() {
            let tested = [$($name),*];
            for name in catalogue::names() {
                assert!(tested.contains(&name), "scenario {name} has no snapshot test");
            }
            assert_eq!(Strategy::ALL.len(), 3, "a new strategy needs snapshot tests");
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
            for entry in std::fs::read_dir(dir).expect("snapshots/ exists") {
                let file = entry.unwrap().file_name().into_string().unwrap();
                if let Some(stem) = file.strip_suffix(".snap") {
                    let known = tested.iter().any(|n| {
                        Strategy::ALL.iter().any(|s| stem == format!("{n}__{s}__seed1"))
                    });
                    assert!(known, "snapshots/{file} belongs to no scenario; delete it");
                }
            }
        }
    };
}

snapshots! {
    madrid_one_switch => "madrid-one-switch",
    zone_start_blocked => "zone-start-blocked",
    switch_replaced_before_ensure => "switch-replaced-before-ensure",
    dpd_restart_control_plane_down => "dpd-restart-control-plane-down",
    sidecar_power_cycle => "sidecar-power-cycle",
    stale_entry => "stale-entry",
    cold_boot => "cold-boot",
    network_faults => "network-faults",
}

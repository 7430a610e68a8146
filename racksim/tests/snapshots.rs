//! Insta snapshots of convergence traces (seed 1), reviewed like code:
//! `cargo insta review` after a change that alters behaviour. Each snapshot
//! is exactly what `racksim run NAME --seed 1 --strategy S` prints. One test
//! per scenario and strategy, so a review shows every changed trace at once.

use racksim::{catalogue, report, runner};

fn snapshot(name: &str, strategy: &str) {
    let scenario = catalogue::get(name).expect("catalogued");
    let strategy = scenario
        .strategy(strategy)
        .expect("a strategy of this scenario");
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

/// `service_nat: [module => "scenario", ...]` and `instances: [...]`: a
/// test module per scenario, with a test per service-NAT strategy or per
/// start implementation.
macro_rules! snapshots {
    (
        service_nat: [$($nat:ident => $nat_name:literal,)*]
        instances: [$($starts:ident => $starts_name:literal,)*]
        eras: [$($era_module:ident => $era_name:literal: [$($era_test:ident => $era_variant:literal),*],)*]
    ) => {
        snapshots!(@each
            $($nat => $nat_name: [
                legacy => "legacy",
                sled_task => "sled-task",
                scrimlet_local => "scrimlet-local",
                shipped => "scrimlet-local-with-zone-start"
            ],)*
            $($starts => $starts_name: [inline => "inline", naive => "naive", saga => "saga"],)*
            $($era_module => $era_name: [$($era_test => $era_variant),*],)*
        );
    };
    (@each $($module:ident => $name:literal: [$($test:ident => $strategy:literal),*],)*) => {
        $(
            mod $module {
                use super::*;

                $(
                    #[test]
                    fn $test() {
                        snapshot($name, $strategy);
                    }
                )*
            }
        )*

        /// Every catalogued scenario has snapshot tests, and every file in
        /// snapshots/ belongs to one (a renamed scenario leaves no orphan).
        #[test]
        fn snapshots_cover_the_catalogue_exactly() {
            let tested: Vec<String> = vec![$($(format!("{}__{}__seed1", $name, $strategy)),*),*];
            for s in catalogue::all() {
                for v in s.expectations.keys() {
                    let want = format!("{}__{v}__seed1", s.name);
                    assert!(tested.contains(&want), "{} / {v} has no snapshot test", s.name);
                }
            }
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
            for entry in std::fs::read_dir(dir).expect("snapshots/ exists") {
                let file = entry.unwrap().file_name().into_string().unwrap();
                if let Some(stem) = file.strip_suffix(".snap") {
                    assert!(tested.iter().any(|t| t == stem), "snapshots/{file} belongs to no scenario; delete it");
                }
            }
        }
    };
}

snapshots! {
    service_nat: [
        madrid_one_switch => "madrid-one-switch",
        zone_start_blocked => "zone-start-blocked",
        switch_replaced_before_ensure => "switch-replaced-before-ensure",
        dpd_restart_control_plane_down => "dpd-restart-control-plane-down",
        dpd_restart_control_plane_up => "dpd-restart-control-plane-up",
        scrimlet_reboot => "scrimlet-reboot",
        sidecar_power_cycle => "sidecar-power-cycle",
        stale_entry => "stale-entry",
        entry_lost_behind_dpd => "entry-lost-behind-dpd",
        inventory_misses_a_sled => "inventory-misses-a-sled",
        shared_snat => "shared-snat",
        dns_and_nexus_loss => "dns-and-nexus-loss",
        full_rack_combined => "full-rack-combined",
        cold_boot => "cold-boot",
        network_faults => "network-faults",
        config_change => "config-change",
        config_invalid => "config-invalid",
    ]
    instances: [
        cold_boot_restart => "cold-boot-restart",
        cold_boot_restart_workaround => "cold-boot-restart-workaround",
        start_delete_race => "start-delete-race",
        concurrent_starts => "concurrent-starts",
        control_plane_crash_mid_saga => "control-plane-crash-mid-saga",
        instance_migrate_like_move => "instance-migrate-like-move",
        instance_restart_on_the_same_sled => "instance-restart-on-the-same-sled",
        instance_start_while_a_dpd_fails => "instance-start-while-a-dpd-fails",
        instance_stop_while_a_dpd_fails => "instance-stop-while-a-dpd-fails",
        instance_start_while_a_switch_zone_is_down => "instance-start-while-a-switch-zone-is-down",
        instance_start_while_an_mgs_hangs => "instance-start-while-an-mgs-hangs",
        leftover_nat_row_blocks_a_start => "leftover-nat-row-blocks-a-start",
        sled_reboot_loses_v2p => "sled-reboot-loses-v2p",
        dpd_restart_with_a_hundred_nat_changes => "dpd-restart-with-a-hundred-nat-changes",
    ]
    // A preset with one mechanism in the era before a fix: the bug's side
    // of a scenario from upstream's tracker (docs/upstream-bugs.md).
    eras: [
        leftover_nat_row_blocks_a_start_before_4694 => "leftover-nat-row-blocks-a-start":
            [naive_nat_conflict_fatal => "naive+nat-conflict=fatal",
             saga_nat_conflict_fatal => "saga+nat-conflict=fatal"],
        instance_stop_while_a_dpd_fails_before_10389 => "instance-stop-while-a-dpd-fails":
            [saga_remove_notify_fatal => "saga+remove-notify=fatal"],
        scrimlet_reboot_before_4857 => "scrimlet-reboot":
            [legacy_nexus_service_nat_off => "legacy+nexus-service-nat=off"],
        dpd_restart_control_plane_up_before_4857 => "dpd-restart-control-plane-up":
            [legacy_nexus_service_nat_off => "legacy+nexus-service-nat=off"],
        instance_restart_on_the_same_sled_before_4610 => "instance-restart-on-the-same-sled":
            [saga_nat_ensure_matches_removed => "saga+nat-ensure=matches-removed"],
        instance_start_while_a_dpd_fails_before_8914 => "instance-start-while-a-dpd-fails":
            [saga_dpd_notify_fatal => "saga+dpd-notify=fatal",
             saga_dpd_notify_fatal_switch_lookup_mgs_retry => "saga+dpd-notify=fatal+switch-lookup=mgs-retry"],
        instance_start_while_a_switch_zone_is_down_before_8914 => "instance-start-while-a-switch-zone-is-down":
            [saga_switch_lookup_mgs_retry => "saga+switch-lookup=mgs-retry",
             saga_dpd_notify_fatal => "saga+dpd-notify=fatal",
             saga_dpd_notify_fatal_switch_lookup_mgs_retry => "saga+dpd-notify=fatal+switch-lookup=mgs-retry"],
        instance_start_while_an_mgs_hangs_before_8914 => "instance-start-while-an-mgs-hangs":
            [saga_switch_lookup_mgs_retry => "saga+switch-lookup=mgs-retry"],
        sled_reboot_loses_v2p_before_5568 => "sled-reboot-loses-v2p":
            [saga_nexus_v2p_off => "saga+nexus-v2p=off"],
        dpd_restart_with_a_hundred_nat_changes_before_5036 => "dpd-restart-with-a-hundred-nat-changes":
            [saga_nat_changeset_added_order => "saga+nat-changeset=added-order"],
    ]
}

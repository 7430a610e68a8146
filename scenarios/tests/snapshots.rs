//! Insta snapshots of convergence traces (seed 1), reviewed like code:
//! `cargo insta review` after a change that alters behaviour. Each snapshot
//! is exactly what `racksim run NAME --seed 1 --strategy S` prints.

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

#[test]
fn madrid_one_switch_legacy() {
    snapshot("madrid-one-switch", Strategy::Legacy);
}

#[test]
fn madrid_one_switch_sled_task() {
    snapshot("madrid-one-switch", Strategy::SledTask);
}

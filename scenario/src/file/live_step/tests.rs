use racksim_sim::InstanceSpec;

use super::*;

fn checker() -> StepChecker {
    StepChecker::new(
        &crate::catalogue::get("sidecar-power-cycle").unwrap().rack,
        &[InstanceSpec { name: "web".into() }],
    )
}

#[test]
fn reads_steps_as_a_scenario_file_does() {
    let mut c = checker();
    assert_eq!(
        c.check("action = \"crash\"\nhost = \"sled1\"").unwrap(),
        Action::Crash("sled1".into())
    );
    assert!(matches!(
        c.check("action = \"instance-start\"\ninstance = \"web\"\nsled = \"sled2\""),
        Ok(Action::InstanceStart { .. })
    ));
    assert!(c
        .check("action = \"instance-stop\"\ninstance = \"db\"")
        .unwrap_err()
        .contains("unknown instance"));
    assert!(matches!(
        c.check("action = \"partition\"\na = \"sled0\"\nb = [\"switch0\", \"switch1\"]"),
        Ok(Action::Partition { oneway: false, .. })
    ));
}

#[test]
fn refusals_name_the_field_and_change_nothing() {
    let mut c = checker();
    let e = c
        .check("action = \"crash\"\nhost = \"sled99\"")
        .unwrap_err();
    assert!(e.contains("unknown host \"sled99\""), "{e}");
    assert!(e.contains("host = \"sled99\""), "{e}");
    assert!(e.contains("hint: hosts of this rack"), "{e}");
    let e = c.check("action = \"explode\"").unwrap_err();
    assert!(e.contains("unknown action"), "{e}");
    let e = c.check("action = \"crash\"\nhots = \"sled1\"").unwrap_err();
    assert!(e.contains("hots"), "{e}");
    // Healing a partition never made is refused, and a refused
    // power-on leaves the sidecar's state as it was.
    let e = c
        .check("action = \"heal\"\na = \"sled0\"\nb = \"switch0\"")
        .unwrap_err();
    assert!(e.contains("partition"), "{e}");
    assert!(c
        .check("action = \"sidecar-power-on\"\nswitch = \"switch0\"")
        .is_err());
    c.check("action = \"sidecar-power-off\"\nswitch = \"switch0\"")
        .unwrap();
    assert!(c
        .check("action = \"sidecar-power-off\"\nswitch = \"switch0\"")
        .is_err());
    c.check("action = \"sidecar-power-on\"\nswitch = \"switch0\"")
        .unwrap();
}

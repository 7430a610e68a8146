use std::time::Duration;

use crate::{catalogue, file};

use super::*;

/// Every catalogued scenario, written and parsed again, is the same
/// scenario, and writing it again gives the same bytes.
#[test]
fn catalogue_round_trips() {
    for s in catalogue::all() {
        let text = scenario_toml(&s, &["from the catalogue".into()]);
        let again = file::parse("written", &text).unwrap_or_else(|e| {
            panic!("{}: the written file does not parse:\n{e}\n{text}", s.name)
        });
        assert_eq!(again.plan, s.plan, "{}", s.name);
        assert_eq!(again.expectations, s.expectations, "{}", s.name);
        assert_eq!(again.instances, s.instances, "{}", s.name);
        assert_eq!(
            (
                again.kind,
                again.service_nat,
                again.stability,
                again.ntp_return_switch
            ),
            (s.kind, s.service_nat, s.stability, s.ntp_return_switch),
            "{}",
            s.name
        );
        assert_eq!(
            (&again.name, &again.description, &again.rack_name),
            (&s.name, &s.description, &s.rack_name)
        );
        assert_eq!(again.rack, s.rack, "{}", s.name);
        assert_eq!(scenario_toml(&again, &["from the catalogue".into()]), text);
    }
}

/// A rack declared in a `[rack]` table is written back as one, and parses
/// to the same rack.
#[test]
fn a_declared_rack_round_trips() {
    // With the timing bounds of `converges`, which are written back too.
    let text = format!(
        "{}converged_by = \"2m\"\nrepair_within = \"30s\"\n",
        crate::file::tests::DECLARED
    );
    let s = file::parse("t.toml", &text).unwrap();
    assert!(s.expectations.values().all(|e| e.repair_within.is_some()));
    let written = scenario_toml(&s, &[]);
    assert!(written.contains("\n[rack]\n"), "{written}");
    assert!(!written.contains("rack = "), "{written}");
    let again = file::parse("written", &written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(again.rack, s.rack);
    assert_eq!(again.expectations, s.expectations);
    assert_eq!(scenario_toml(&again, &[]), written);
}

#[test]
fn durations_are_written_exactly() {
    for us in [
        0u64,
        1,
        999,
        1_000,
        1_001,
        59_999_999,
        3_600_000_001,
        7_384_005_006,
    ] {
        let d = Duration::from_micros(us);
        let text = duration(d);
        assert_eq!(file::parse_duration(&text), Ok(d), "{text}");
    }
    assert_eq!(duration(Duration::from_millis(90_250)), "1m30s250ms");
    assert_eq!(duration(Duration::ZERO), "0s");
}

/// The fields of `any` and the verdict texts round-trip: a list of
/// invariants, `some_seeds_fail` and `verdict_mentions_any`.
#[test]
fn sweep_requirements_and_verdict_alternatives_round_trip() {
    let text = r#"name = "t"
description = "d"
kind = "instances"
service_nat = "legacy"
rack = "madrid"
ntp_return_switch = "switch0"

[[instance]]
name = "web1"

[expect.inline]
outcome = "any"
deadline = "8m"
verdict_mentions = ["web1"]
verdict_mentions_any = ["sled1", "sled2"]
zone_start_at_least = "1s"
some_seeds_violate = ["one-vmm", "nat-follows-vmm"]
some_seeds_fail = true

[expect.naive]
outcome = "any"
deadline = "8m"
some_seeds_violate = "one-vmm"

[expect.saga]
outcome = "violates"
invariant = "one-vmm"
deadline = "8m"
verdict_mentions = ["VMM 2"]
"#;
    let s = file::parse("t.toml", text).unwrap();
    let written = scenario_toml(&s, &[]);
    assert!(
        written.contains("verdict_mentions_any = [\"sled1\", \"sled2\"]\n"),
        "{written}"
    );
    assert!(written.contains("some_seeds_fail = true\n"), "{written}");
    assert!(
        written.contains("some_seeds_violate = [\"one-vmm\", \"nat-follows-vmm\"]\n"),
        "{written}"
    );
    let again = file::parse("written", &written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(again.expectations, s.expectations);
    assert_eq!(scenario_toml(&again, &[]), written);
    // The written file says what the text said, field for field.
    assert_eq!(
        written[written.find("[expect").unwrap()..],
        text[text.find("[expect").unwrap()..]
    );
}

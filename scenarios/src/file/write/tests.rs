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
        assert_eq!(scenario_toml(&again, &["from the catalogue".into()]), text);
    }
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

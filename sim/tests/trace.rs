//! The trace's time stamps and durations.

use std::time::Duration;

use racksim_sim::trace::{fmt_duration, fmt_time};

#[test]
fn time_stamps_are_fixed_width() {
    assert_eq!(fmt_time(Duration::from_millis(0)), "00:00:00.000000");
    assert_eq!(
        fmt_time(Duration::from_millis(3_723_004)),
        "01:02:03.004000"
    );
    assert_eq!(
        fmt_time(Duration::from_micros(1_100_350)),
        "00:00:01.100350"
    );
}

#[test]
fn durations_are_compact() {
    assert_eq!(fmt_duration(Duration::ZERO), "0s");
    assert_eq!(fmt_duration(Duration::from_millis(250)), "250ms");
    assert_eq!(fmt_duration(Duration::from_micros(50)), "50us");
    assert_eq!(fmt_duration(Duration::from_micros(1_250)), "1.25ms");
    assert_eq!(fmt_duration(Duration::from_secs(300)), "5m");
    assert_eq!(fmt_duration(Duration::from_millis(3_723_500)), "1h2m3.5s");
}

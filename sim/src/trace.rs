//! The trace: one canonical line per meaningful event.
//!
//! A line is `HH:MM:SS.mmm  host  what happened`, stamped with simulated time
//! and host *names*. Nothing in a line depends on wall-clock time, request
//! ids or registration order, so the same seed gives byte-identical traces
//! and a reviewer's diff shows only behaviour that changed.

use std::{fmt, time::Duration};

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceLine {
    pub at: Duration,
    pub host: String,
    pub text: String,
}

impl fmt::Display for TraceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {:<12}  {}", fmt_time(self.at), self.host, self.text)
    }
}

/// `HH:MM:SS.mmm` since the start of the run.
pub fn fmt_time(d: Duration) -> String {
    let us = d.as_micros();
    let (h, rem) = (us / 3_600_000_000, us % 3_600_000_000);
    let (m, rem) = (rem / 60_000_000, rem % 60_000_000);
    let (s, us) = (rem / 1_000_000, rem % 1_000_000);
    format!("{h:02}:{m:02}:{s:02}.{us:06}")
}

/// A compact duration for humans and scenario files: `1h2m3.5s`, `300ms`, `0s`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        return "0s".to_string();
    }
    if us < 1000 {
        return format!("{us}us");
    }
    let ms = d.as_millis();
    if ms < 1000 {
        let frac = us % 1000;
        if frac == 0 {
            return format!("{ms}ms");
        }
        let f = format!("{frac:03}");
        return format!("{ms}.{}ms", f.trim_end_matches('0'));
    }
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, frac) = (rem / 1000, rem % 1000);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if s > 0 || frac > 0 {
        if frac > 0 {
            let f = format!("{frac:03}");
            out += &format!("{s}.{}s", f.trim_end_matches('0'));
        } else {
            out += &format!("{s}s");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

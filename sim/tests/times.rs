//! Service times: drawn from the seed, within their ranges, with RUN's
//! tail past Nexus's timeout.

use std::time::Duration;

use racksim_sim::services::times::{Draws, ServiceTime, ServiceTimes};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn seq(seed: u64, t: &ServiceTime, n: usize) -> Vec<Duration> {
    let d = Draws::from_seed(seed);
    (0..n).map(|_| d.draw(t)).collect()
}

#[test]
fn the_same_seed_draws_the_same_times() {
    let t = ServiceTimes::default();
    for time in [t.register, t.run, t.stop, t.unregister, t.dpd_nat, t.mgs] {
        assert_eq!(seq(7, &time, 200), seq(7, &time, 200));
        assert_ne!(seq(7, &time, 200), seq(8, &time, 200));
    }
}

#[test]
fn draws_stay_in_their_ranges() {
    let t = ServiceTimes::default();
    let cases = [
        (t.register, ms(20), ms(300)),
        (t.run, s(2), s(90)),
        (t.stop, s(1), s(5)),
        (t.unregister, ms(10), ms(50)),
        (t.dpd_nat, ms(1), ms(10)),
        (t.mgs, ms(1), ms(5)),
    ];
    for (time, lo, hi) in cases {
        for d in seq(1, &time, 5000) {
            assert!(lo <= d && d <= hi, "{d:?} outside {lo:?}..={hi:?}");
        }
        assert_eq!(time.max(), hi);
    }
}

#[test]
fn runs_have_a_tail_past_nexuss_sixty_second_timeout() {
    let runs = seq(3, &ServiceTimes::default().run, 20_000);
    let body = runs.iter().filter(|d| **d <= s(10)).count();
    let past_timeout = runs.iter().filter(|d| **d > s(60)).count();
    // 95% in the body; the tail is 5%, 3/8 of it past 60 s: ~1.9%.
    assert!((18_700..=19_300).contains(&body), "{body}");
    assert!((250..=500).contains(&past_timeout), "{past_timeout}");
}

#[test]
fn fixed_and_uniform_parse_and_draw() {
    let secs = |d: &str| {
        d.trim_end_matches('s')
            .parse()
            .map(Duration::from_secs)
            .map_err(|e| format!("{e}"))
    };
    let p = |text: &str| ServiceTime::parse(text, secs);
    assert_eq!(p("90s"), Ok(ServiceTime::Fixed(s(90))));
    assert_eq!(p("2s..10s"), Ok(ServiceTime::Uniform(s(2), s(10))));
    assert!(p("10s..2s").unwrap_err().contains("empty range"));
    assert_eq!(seq(1, &ServiceTime::Fixed(s(90)), 3), vec![s(90); 3]);
    assert_eq!(
        ServiceTime::Uniform(s(2), s(10)).to_string(),
        "2s..10s".to_string()
    );
}

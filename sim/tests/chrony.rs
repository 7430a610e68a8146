//! The chrony model's polling, on its own: pure arithmetic over time.

use std::time::Duration;

use racksim_sim::hosts::sled::ntp::chrony::{Sample, Source, SYNC_SAMPLES};

/// Poll `source` against a server that answers (well, or not at all)
/// from `answers_from` on, with replies arriving at once; returns when
/// the source synchronised.
fn time_to_sync(source: &mut Source, answers_from: Duration, limit: Duration) -> Option<Duration> {
    let mut now = Duration::ZERO;
    while now < limit {
        let mut next = source.transmit();
        if now >= answers_from {
            let (sample, delay) = source.reply(true);
            if sample == Sample::Synchronised {
                return Some(now);
            }
            next = delay;
        }
        now += next;
    }
    None
}

#[test]
fn a_reachable_upstream_synchronises_within_its_burst() {
    let mut s = Source::new();
    let at = time_to_sync(&mut s, Duration::ZERO, Duration::from_secs(60)).unwrap();
    // Four good samples at burst spacing (a quarter of 1 s, shrinking).
    assert!(at < Duration::from_secs(1), "{at:?}");
    assert_eq!(s.samples(), SYNC_SAMPLES);
    assert!(s.synchronised());
}

#[test]
fn an_unreachable_upstream_is_polled_ever_more_slowly_up_to_32_s() {
    let mut s = Source::new();
    let mut delays = Vec::new();
    for _ in 0..60 {
        delays.push(s.transmit());
    }
    assert_eq!(
        delays[0],
        Duration::from_millis(250),
        "the burst's spacing at poll 0"
    );
    assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");
    assert_eq!(*delays.last().unwrap(), Duration::from_secs(32));
    assert!(!s.synchronised());
}

#[test]
fn after_a_long_outage_synchronising_takes_the_backed_off_polls() {
    let mut s = Source::new();
    let outage = Duration::from_secs(600);
    let at = time_to_sync(&mut s, outage, Duration::from_secs(1200)).unwrap();
    let after = at - outage;
    // The first answered poll comes up to 32 s after the outage ends,
    // then three more samples at about 27.5 s, 24 s and 21.7 s.
    assert!(
        (Duration::from_secs(70)..=Duration::from_secs(110)).contains(&after),
        "{after:?}"
    );
}

#[test]
fn a_rejected_reply_backs_off_less_than_silence_and_is_no_sample() {
    let mut silent = Source::new();
    let mut rejected = Source::new();
    for _ in 0..20 {
        silent.transmit();
        rejected.transmit();
        assert_eq!(rejected.reply(false).0, Sample::Rejected);
    }
    assert_eq!(rejected.samples(), 0);
    assert!(rejected.delay() < silent.delay());
}

#[test]
fn samples_are_counted_until_the_first_update() {
    let mut s = Source::new();
    for n in 1..SYNC_SAMPLES {
        s.transmit();
        assert_eq!(s.reply(true).0, Sample::Taken { samples: n });
    }
    s.transmit();
    assert_eq!(s.reply(true).0, Sample::Synchronised);
}

//! The part of chrony that sets how long synchronisation takes: when a
//! source is polled, and how many good samples the first clock update
//! needs. Pure arithmetic over simulated time, so it is tested on its own.
//!
//! Facts (chrony's `ntp_core.c`, and omicron's `zone-setup` at b848b6df,
//! which writes every NTP zone's `chrony.conf`):
//!
//! * Both kinds of NTP zone poll with `minpoll 0 maxpoll 5 iburst`: the
//!   interval is `2^poll` seconds, `poll` between 0 (1 s) and 5 (32 s).
//! * `iburst` starts with a burst of up to [`BURST_TOTAL`] requests that
//!   ends early after [`BURST_GOOD`] good samples; a burst request goes
//!   out after `min(2 s, 2^poll / 4)`.
//! * Each request sent while the previous one is still unanswered adds
//!   [`MISSED_ADJ`] to `poll` ([`SYNCED_MISSED_ADJ`] once the source is the
//!   one the clock follows): an unreachable upstream is polled ever more
//!   slowly, up to every 32 s — so a NAT entry that arrives late is noticed
//!   only at the next, backed-off, poll.
//! * A reply that fails chrony's tests (a boundary server that has not
//!   synchronised itself answers as unsynchronised) adds [`BAD_REPLY_ADJ`].
//! * A good sample moves `poll` towards keeping [`POLL_TARGET`] samples,
//!   twice as fast while there are fewer: after a long outage the interval
//!   shrinks slowly, sample by sample.
//!
//! What is simplified, and labelled as such: the model's first clock
//! update — the moment the zone's time counts as synchronised (omicron's
//! `ntp-admin` then reports `sync`: after `makestep` the correction is far
//! under its 0.05 s bound) — is the [`SYNC_SAMPLES`]-th good sample, the
//! number of good samples chrony's initial burst collects so that it can
//! make its first update. chrony's source selection, sample filters,
//! root-distance tests and the ±2 % randomness of its intervals are not
//! modelled, nor is losing synchronisation afterwards.

use std::time::Duration;

/// `minpoll 0`: the shortest interval, 1 s.
pub const MIN_POLL: f64 = 0.0;
/// `maxpoll 5`: the longest interval, 32 s.
pub const MAX_POLL: f64 = 5.0;
/// chrony's `IBURST_TOTAL_SAMPLES`: requests in the initial burst.
pub const BURST_TOTAL: u32 = 8;
/// chrony's `IBURST_GOOD_SAMPLES`: good samples that end the burst early.
pub const BURST_GOOD: u32 = 4;
/// chrony's `MAX_BURST_INTERVAL`: the longest spacing of a burst, 2 s.
const MAX_BURST_INTERVAL: f64 = 2.0;
/// chrony's `MAX_BURST_POLL_RATIO`: a burst's spacing against `2^poll`.
const MAX_BURST_POLL_RATIO: f64 = 0.25;
/// What each missed reply adds to `poll` (chrony's `transmit_timeout`).
pub const MISSED_ADJ: f64 = 0.25;
/// The same once the source is the one the clock follows.
pub const SYNCED_MISSED_ADJ: f64 = 0.1;
/// What a reply that fails chrony's tests adds to `poll`.
pub const BAD_REPLY_ADJ: f64 = 0.1;
/// chrony's default `polltarget`.
pub const POLL_TARGET: f64 = 8.0;
/// Good samples before the model's first clock update.
pub const SYNC_SAMPLES: u32 = BURST_GOOD;

/// One NTP source as chrony polls it: `server` or one address of a `pool`.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// chrony's `local_poll`: log2 of the interval, in seconds.
    poll: f64,
    /// Requests left in the initial burst.
    burst_total: u32,
    /// Good samples left to end the burst early.
    burst_good: u32,
    /// Requests since the last reply (chrony's `tx_count`).
    unanswered: u32,
    /// Good samples so far.
    samples: u32,
}

impl Default for Source {
    fn default() -> Self {
        Self::new()
    }
}

/// What a reply did to the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// A good sample; the clock is not yet updated.
    Taken { samples: u32 },
    /// The good sample that made the first clock update: time is
    /// synchronised from now on.
    Synchronised,
    /// A reply that failed chrony's tests (the server is unsynchronised).
    Rejected,
}

impl Source {
    /// A source as chrony starts it with `iburst`.
    pub fn new() -> Self {
        Self {
            poll: MIN_POLL,
            burst_total: BURST_TOTAL,
            burst_good: BURST_GOOD,
            unanswered: 0,
            samples: 0,
        }
    }

    /// A request goes out now; returns how long until the next one, if
    /// no reply changes it first.
    pub fn transmit(&mut self) -> Duration {
        self.unanswered += 1;
        // The previous request went unanswered: back off.
        if self.unanswered >= 2 {
            let adj = if self.synchronised() {
                SYNCED_MISSED_ADJ
            } else {
                MISSED_ADJ
            };
            self.adjust(adj);
        }
        self.burst_total = self.burst_total.saturating_sub(1);
        self.delay()
    }

    /// A reply came. A good one is a sample; returns what it did, and
    /// the interval the next request keeps from the last one sent.
    pub fn reply(&mut self, good: bool) -> (Sample, Duration) {
        self.unanswered = 0;
        let sample = if good {
            self.samples += 1;
            self.burst_good = self.burst_good.saturating_sub(1);
            if self.burst_good == 0 {
                self.burst_total = 0;
            }
            let samples = f64::from(self.samples);
            let mut adj = (samples / POLL_TARGET - 1.0) / POLL_TARGET;
            if samples < POLL_TARGET {
                adj *= 2.0;
            }
            self.adjust(adj);
            if self.samples == SYNC_SAMPLES {
                Sample::Synchronised
            } else {
                Sample::Taken {
                    samples: self.samples,
                }
            }
        } else {
            self.adjust(BAD_REPLY_ADJ);
            Sample::Rejected
        };
        (sample, self.delay())
    }

    /// Whether this source has made the first clock update.
    pub fn synchronised(&self) -> bool {
        self.samples >= SYNC_SAMPLES
    }

    /// Good samples so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// The interval between requests now: a burst's, or `2^poll`.
    pub fn delay(&self) -> Duration {
        let interval = self.poll.exp2();
        let secs = if self.burst_total > 0 {
            (MAX_BURST_POLL_RATIO * interval).min(MAX_BURST_INTERVAL)
        } else {
            interval
        };
        // Whole microseconds, so that replay does not depend on how a
        // float rounds into nanoseconds.
        Duration::from_micros((secs * 1e6).round() as u64)
    }

    fn adjust(&mut self, adj: f64) {
        self.poll = (self.poll + adj).clamp(MIN_POLL, MAX_POLL);
    }
}

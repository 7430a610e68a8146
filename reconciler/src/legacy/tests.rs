use std::{
    net::Ipv4Addr,
    sync::{Arc, Mutex},
};

use rand::{rngs::SmallRng, SeedableRng};
use serde_json::json;

use super::*;
use crate::{
    discovery::DiscoveryError,
    dpd::{MacAddr, NatTarget},
    testing::{zone_ip, FakeNet, FakeResponse},
    SERVICES_VNI,
};

/// A resolver whose answer the test changes while the code runs.
#[derive(Clone, Default)]
struct SharedResolver(Arc<Mutex<Vec<Ipv6Addr>>>);

impl SharedResolver {
    /// A resolver that answers `addrs` until told otherwise.
    fn answering(addrs: Vec<Ipv6Addr>) -> Self {
        let resolver = SharedResolver::default();
        resolver.set(addrs);
        resolver
    }

    fn set(&self, addrs: Vec<Ipv6Addr>) {
        *self.0.lock().unwrap() = addrs;
    }
}

impl SwitchZoneResolver for SharedResolver {
    async fn switch_zones(&self) -> Result<Vec<Ipv6Addr>, DiscoveryError> {
        Ok(self.0.lock().unwrap().clone())
    }
}

/// A fake net with switch0's zone at `zone_ip(1)` and switch1's at
/// `zone_ip(2)`.
fn two_switch_zones() -> FakeNet {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    net.add_switch_zone(zone_ip(2), 1);
    net
}

fn ntp_entry() -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::new(198, 51, 100, 2),
        first_port: 0,
        last_port: 16383,
        target: NatTarget {
            internal_ip: "fd00:1122:3344:101::1".parse().unwrap(),
            inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, 0x01]),
            vni: SERVICES_VNI,
        },
    }
}

fn both() -> BTreeSet<SwitchSlot> {
    SwitchSlot::ALL.into_iter().collect()
}

struct Running {
    progress: watch::Receiver<LegacyProgress>,
    task: tokio::task::JoinHandle<(Vec<SwitchSlot>, Duration)>,
}

/// A day of (paused) time: far more than any run here takes to finish.
const FINISHES_WITHIN: Duration = Duration::from_secs(24 * 3600);

impl Running {
    /// What the run programmed and how long it took. A run that has not
    /// finished within [`FINISHES_WITHIN`] fails the test instead of
    /// hanging it: the legacy task retries a found switch for ever, so a
    /// bug that fails every request to the switches would never end.
    async fn finished(&mut self) -> (Vec<SwitchSlot>, Duration) {
        tokio::time::timeout(FINISHES_WITHIN, &mut self.task)
            .await
            .expect("the legacy run finishes within a day")
            .unwrap()
    }
}

fn start(
    net: &FakeNet,
    resolver: &SharedResolver,
    expected: BTreeSet<SwitchSlot>,
    seed: u64,
) -> Running {
    let (tx, rx) = watch::channel(LegacyProgress::LookingUpSwitches);
    let connector = net.connector();
    let resolver = resolver.clone();
    let task = tokio::spawn(async move {
        let mut rng = SmallRng::seed_from_u64(seed);
        let start = Instant::now();
        let programmed = ensure_zone_nat(
            &connector,
            &resolver,
            &expected,
            &ntp_entry(),
            &mut rng,
            &tx,
        )
        .await;
        (programmed, start.elapsed())
    });
    Running { progress: rx, task }
}

/// Draws `n` delays of `policy` with `seed`, checking each against its
/// jitter band around the expected base interval; returns them and the
/// final base.
fn draw_checked(policy: BackoffPolicy, seed: u64, n: usize) -> (Vec<f64>, f64) {
    let mut backoff = Backoff::new(policy, SmallRng::seed_from_u64(seed));
    let cap = policy.max_interval.as_secs_f64();
    let mut base = policy.initial.as_secs_f64();
    let mut delays = Vec::new();
    for _ in 0..n {
        let d = backoff.next_delay().as_secs_f64();
        assert!(d >= base * 0.5 - 1e-9, "{d} < 0.5 * {base}");
        assert!(d <= base * 1.5 + 1e-9, "{d} > 1.5 * {base}");
        delays.push(d);
        base = (base * 1.2).min(cap);
    }
    (delays, base)
}

#[test]
fn ensure_backoff_grows_by_1_2_with_jitter_of_half_and_caps_the_interval_at_3m() {
    let (delays, base) = draw_checked(INTERNAL_SERVICE_AGGRESSIVE, 7, 60);
    // Grown to minutes: the interval is at its 3-minute cap.
    assert_eq!(base, 180.0);
    assert!(delays[59] >= 90.0 && delays[59] <= 270.0, "{}", delays[59]);
    // Far past the lookup's 15 s cap: the two policies really differ.
    assert!(delays[50..].iter().all(|&d| d > 22.5), "{delays:?}");
    // Jitter really varies...
    assert!(delays.windows(2).any(|w| (w[1] / w[0] - 1.2).abs() > 0.01));
    // ...and is a pure function of the seed.
    let mut again = Backoff::new(INTERNAL_SERVICE_AGGRESSIVE, SmallRng::seed_from_u64(7));
    let replay: Vec<f64> = (0..60).map(|_| again.next_delay().as_secs_f64()).collect();
    assert_eq!(delays, replay);
    let mut other = Backoff::new(INTERNAL_SERVICE_AGGRESSIVE, SmallRng::seed_from_u64(8));
    let different: Vec<f64> = (0..60).map(|_| other.next_delay().as_secs_f64()).collect();
    assert_ne!(delays, different);
}

#[test]
fn lookup_backoff_caps_the_interval_at_15s() {
    for seed in 0..50 {
        let (delays, base) = draw_checked(SWITCH_MAPPING, seed, 80);
        assert_eq!(base, 15.0);
        // 100 ms x1.2^n passes 15 s at n = 28: from there on every
        // delay is 15 s jittered, never more than 22.5 s.
        assert!(
            delays[28..]
                .iter()
                .all(|&d| (7.5 - 1e-9..=22.5 + 1e-9).contains(&d)),
            "seed {seed}: {delays:?}"
        );
        assert!(delays[28..].iter().any(|&d| d > 15.0), "seed {seed}");
    }
    assert_eq!(SWITCH_MAPPING.max_delay(), Duration::from_millis(22_500));
    assert_eq!(
        INTERNAL_SERVICE_AGGRESSIVE.max_delay(),
        Duration::from_secs(270)
    );
}

/// The give-up: the first lookup at or after 5 minutes (here lookups
/// take no time), over many seeds: never before 5:00, never after
/// 5:00 + 22.5 s; and the 15 s cap really is what bounds it (with the
/// 3-minute cap some seeds give up well after 5:30).
#[test]
fn give_up_lands_between_5m_and_5m22_5s_over_many_seeds() {
    let give_up = |policy: BackoffPolicy, seed: u64| {
        let mut backoff = Backoff::new(policy, SmallRng::seed_from_u64(seed));
        let mut t = Duration::ZERO;
        while t < SWITCH_DISCOVERY_TIMEOUT {
            t += backoff.next_delay();
        }
        t
    };
    let times: Vec<Duration> = (0..2000)
        .map(|seed| give_up(SWITCH_MAPPING, seed))
        .collect();
    let latest = SWITCH_DISCOVERY_TIMEOUT + SWITCH_MAPPING.max_delay();
    assert!(times
        .iter()
        .all(|t| *t >= SWITCH_DISCOVERY_TIMEOUT && *t <= latest));
    // The band is used, not a single point.
    let max = times.iter().max().unwrap();
    assert!(
        *max > SWITCH_DISCOVERY_TIMEOUT + Duration::from_secs(10),
        "{max:?}"
    );
    let old_cap = (0..2000)
        .map(|seed| give_up(INTERNAL_SERVICE_AGGRESSIVE, seed))
        .max()
        .unwrap();
    assert!(
        old_cap > SWITCH_DISCOVERY_TIMEOUT + Duration::from_secs(60),
        "{old_cap:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn both_switches_found_programs_both_without_waiting() {
    let net = two_switch_zones();
    let resolver = SharedResolver::answering(vec![zone_ip(2), zone_ip(1)]);
    let mut run = start(&net, &resolver, both(), 1);
    let (programmed, elapsed) = run.finished().await;
    assert_eq!(programmed, vec![SwitchSlot::Switch0, SwitchSlot::Switch1]);
    assert_eq!(elapsed, Duration::ZERO);
    assert_eq!(*run.progress.borrow(), LegacyProgress::Done { programmed });
    for zone in [zone_ip(1), zone_ip(2)] {
        assert_eq!(net.nat(zone), vec![ntp_entry().to_dpd()]);
    }
}

/// Only uplinked switches are programmed: a switch without an uplink is
/// neither waited for nor given the entry, even when it answers; and
/// one that answers alone does not count as found.
#[tokio::test(start_paused = true)]
async fn only_uplinked_switches_are_programmed() {
    let net = two_switch_zones();
    let resolver = SharedResolver::answering(vec![zone_ip(1), zone_ip(2)]);
    let switch0: BTreeSet<SwitchSlot> = [SwitchSlot::Switch0].into_iter().collect();
    let mut run = start(&net, &resolver, switch0.clone(), 4);
    let (programmed, elapsed) = run.finished().await;
    assert_eq!(programmed, vec![SwitchSlot::Switch0]);
    assert_eq!(elapsed, Duration::ZERO);
    assert_eq!(net.nat(zone_ip(1)), vec![ntp_entry().to_dpd()]);
    assert!(net.nat(zone_ip(2)).is_empty());
    assert!(net.requests(zone_ip(2), DPD_PORT).is_empty());

    // DNS shows only the switch without an uplink: nothing is found, so
    // no five-minute give-up either; it keeps looking.
    let net = two_switch_zones();
    resolver.set(vec![zone_ip(2)]);
    let run = start(&net, &resolver, switch0, 5);
    tokio::time::sleep(2 * SWITCH_DISCOVERY_TIMEOUT).await;
    assert!(!run.task.is_finished());
    assert_eq!(*run.progress.borrow(), LegacyProgress::LookingUpSwitches);
    assert!(net.requests(zone_ip(2), DPD_PORT).is_empty());
    run.task.abort();
}

/// No uplinked switch at all: nothing to look up, the zone starts at
/// once and no switch is asked anything.
#[tokio::test(start_paused = true)]
async fn no_uplinks_programs_nothing_without_a_lookup() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    let resolver = SharedResolver::answering(vec![zone_ip(1)]);
    let mut run = start(&net, &resolver, BTreeSet::new(), 6);
    let (programmed, elapsed) = run.finished().await;
    assert!(programmed.is_empty());
    assert_eq!(elapsed, Duration::ZERO);
    assert!(net.requests(zone_ip(1), MGS_PORT).is_empty());
    assert!(net.requests(zone_ip(1), DPD_PORT).is_empty());
}

#[tokio::test(start_paused = true)]
async fn one_switch_missing_waits_the_full_five_minutes_then_programs_only_one() {
    let net = two_switch_zones();
    // madrid: DNS only ever shows switch0's zone.
    let resolver = SharedResolver::answering(vec![zone_ip(1)]);
    let mut run = start(&net, &resolver, both(), 2);

    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        *run.progress.borrow(),
        LegacyProgress::WaitingForSwitches {
            found: [(SwitchSlot::Switch0, zone_ip(1))].into_iter().collect(),
            missing: vec![SwitchSlot::Switch1],
        }
    );
    assert!(
        net.nat(zone_ip(1)).is_empty(),
        "nothing is programmed while waiting"
    );
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert!(!run.task.is_finished());

    let (programmed, elapsed) = run.finished().await;
    assert_eq!(programmed, vec![SwitchSlot::Switch0]);
    assert!(elapsed >= SWITCH_DISCOVERY_TIMEOUT, "{elapsed:?}");
    assert!(
        elapsed <= SWITCH_DISCOVERY_TIMEOUT + SWITCH_MAPPING.max_delay(),
        "{elapsed:?}"
    );
    assert_eq!(net.nat(zone_ip(1)), vec![ntp_entry().to_dpd()]);
    // Bug 2: the other switch never gets the entry.
    assert!(net.nat(zone_ip(2)).is_empty());
    assert!(net.requests(zone_ip(2), DPD_PORT).is_empty());
    // It kept asking DNS/MGS all along, with growing delays: 28 lookups
    // in the first ~80 s while the interval grows to its 15 s cap, then
    // about one per 15 s: ~43 for 5 minutes, not thousands (and more
    // than the ~35 the 3-minute cap would make).
    let lookups = net.requests(zone_ip(1), MGS_PORT).len();
    assert!((38..=52).contains(&lookups), "{lookups} lookups");
}

#[tokio::test(start_paused = true)]
async fn no_switch_found_retries_forever() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    let resolver = SharedResolver::default();
    let mut run = start(&net, &resolver, both(), 3);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!run.task.is_finished());
    assert_eq!(*run.progress.borrow(), LegacyProgress::LookingUpSwitches);
    // A zone whose MGS is broken is not "found" either.
    net.fail(
        zone_ip(1),
        MGS_PORT,
        "GET",
        "/local/switch-id",
        Some(FakeResponse::error(503, "no SP")),
    );
    resolver.set(vec![zone_ip(1)]);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!run.task.is_finished());
    // An hour in, the lookup interval is long at its 15 s cap: at most
    // 22.5 s between lookups, so at least 160 in this hour (the
    // 3-minute cap would make ~27).
    let lookups = net.requests(zone_ip(1), MGS_PORT).len();
    assert!(lookups >= 160, "{lookups} lookups");
    // Once it appears, the 5-minute clock has long run out: proceed with
    // one as soon as it is seen, within one capped delay.
    net.clear_failures();
    tokio::time::sleep(SWITCH_MAPPING.max_delay() + Duration::from_millis(10)).await;
    assert!(run.task.is_finished());
    let (programmed, _) = run.finished().await;
    assert_eq!(programmed, vec![SwitchSlot::Switch0]);
}

#[tokio::test(start_paused = true)]
async fn compares_only_internal_ip() {
    let net = two_switch_zones();
    // switch0: right sled, stale MAC, VNI and range -> accepted as is.
    let mut stale = ntp_entry();
    stale.target.inner_mac = MacAddr::new([2, 0, 0, 0, 0, 0x99]);
    stale.target.vni = 7;
    stale.last_port = 32767;
    net.insert_nat(zone_ip(1), stale.to_dpd());
    // switch1: wrong sled -> replaced.
    let mut moved = ntp_entry();
    moved.target.internal_ip = "fd00:1122:3344:104::1".parse().unwrap();
    net.insert_nat(zone_ip(2), moved.to_dpd());
    let resolver = SharedResolver::answering(vec![zone_ip(1), zone_ip(2)]);
    let (programmed, _) = start(&net, &resolver, both(), 4).finished().await;
    assert_eq!(programmed, vec![SwitchSlot::Switch0, SwitchSlot::Switch1]);

    assert_eq!(
        net.nat(zone_ip(1)),
        vec![stale.to_dpd()],
        "bug: stale MAC/VNI/range kept"
    );
    assert_eq!(
        net.requests(zone_ip(1), DPD_PORT),
        vec!["GET /nat/ipv4/198.51.100.2/0"]
    );
    assert_eq!(net.nat(zone_ip(2)), vec![ntp_entry().to_dpd()]);
    assert_eq!(
        net.requests(zone_ip(2), DPD_PORT),
        vec![
            "GET /nat/ipv4/198.51.100.2/0",
            "DELETE /nat/ipv4/198.51.100.2/0",
            "PUT /nat/ipv4/198.51.100.2/0/16383",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_found_switch_that_dies_is_retried_forever_even_after_replacement() {
    let net = two_switch_zones();
    // switch1's dpd dies right after MGS answered.
    net.fail(
        zone_ip(2),
        DPD_PORT,
        "GET",
        "/nat/ipv4/198.51.100.2/0",
        Some(FakeResponse::error(503, "dead")),
    );
    let resolver = SharedResolver::answering(vec![zone_ip(1), zone_ip(2)]);
    let run = start(&net, &resolver, both(), 5);
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The scrimlet is replaced: switch1's zone now lives at a new address.
    net.remove_switch_zone(zone_ip(2));
    net.add_switch_zone(zone_ip(3), 1);
    resolver.set(vec![zone_ip(1), zone_ip(3)]);
    tokio::time::sleep(Duration::from_secs(3600)).await;

    assert!(!run.task.is_finished(), "bug 3: stuck on the dead address");
    match &*run.progress.borrow() {
        LegacyProgress::EnsuringNat {
            switch,
            address,
            attempts,
            last_error,
        } => {
            assert_eq!(*switch, SwitchSlot::Switch1);
            assert_eq!(*address, zone_ip(2));
            // Still retrying after an hour: ~30 attempts to reach the
            // 3-minute interval, then one every 1.5-4.5 minutes.
            assert!(*attempts > 40, "{attempts}");
            assert!(
                last_error.as_deref().unwrap().contains("connecting to"),
                "{last_error:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(net.nat(zone_ip(1)), vec![ntp_entry().to_dpd()]);
    assert!(net.nat(zone_ip(3)).is_empty());
    assert!(net.requests(zone_ip(3), DPD_PORT).is_empty());
    run.task.abort();
}

#[test]
fn progress_serializes_with_phase_tag() {
    let p = LegacyProgress::GaveUpWaiting {
        found: [(SwitchSlot::Switch0, zone_ip(1))].into_iter().collect(),
        missing: vec![SwitchSlot::Switch1],
    };
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"phase": "gave_up_waiting", "found": {"switch0": "fd00:1122:3344:1::2"},
               "missing": ["switch1"]})
    );
}

/// The progress lines the logs (and so the traces) show, one per phase.
#[test]
fn progress_reads_as_its_phase() {
    let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    let found = BTreeMap::from([(SwitchSlot::Switch0, zone)]);
    let missing = vec![SwitchSlot::Switch1];
    let lines = [
        LegacyProgress::LookingUpSwitches,
        LegacyProgress::WaitingForSwitches {
            found: found.clone(),
            missing: missing.clone(),
        },
        LegacyProgress::GaveUpWaiting { found, missing },
        LegacyProgress::EnsuringNat {
            switch: SwitchSlot::Switch0,
            address: zone,
            attempts: 1,
            last_error: None,
        },
        LegacyProgress::EnsuringNat {
            switch: SwitchSlot::Switch0,
            address: zone,
            attempts: 2,
            last_error: Some("503".into()),
        },
        LegacyProgress::Done {
            programmed: vec![SwitchSlot::Switch0],
        },
    ]
    .map(|p| p.to_string());
    assert_eq!(
        lines,
        [
            "looking up switch zones",
            "found [switch0]; waiting up to 5m for [switch1]",
            "gave up waiting for [switch1]; proceeding with [switch0]",
            "ensuring NAT entry on switch0 at fd00:1122:3344:101::2",
            "ensure on switch0 failing, retrying forever: 503",
            "NAT ensured on [switch0]",
        ]
    );
}

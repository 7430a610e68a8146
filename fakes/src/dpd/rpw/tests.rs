//! dpd's NAT RPW: changes applied as dendrite applies them, and the
//! schedule it runs on (on paused tokio time).

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::{Arc, Mutex},
    time::Duration,
};

use racksim_wire::dpd::MacAddr;
use tokio::time::Instant;

use super::*;

fn nat_change(first_port: u16, last_port: u16, sled: u16, gen: i64, deleted: bool) -> NatEntryView {
    NatEntryView {
        external_address: Ipv4Addr::new(203, 0, 113, 10),
        first_port,
        last_port,
        sled_address: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x100 + sled, 0, 0, 0, 1),
        vni: 1001,
        mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 5]),
        gen,
        deleted,
    }
}

/// Whether applying a change deleted an entry, then created one.
fn replaced(ops: &[Result<NatChange, String>]) -> bool {
    matches!(ops, [Ok(NatChange::Deleted(_)), Ok(NatChange::Created(_))])
}

#[test]
fn changes_are_applied_as_dendrite_does() {
    let mut dpd = DpdState::new(0);
    // Removing an absent entry does nothing.
    assert!(dpd
        .apply_nat_change(&nat_change(0, 99, 1, 1, true))
        .is_empty());
    // Set: created; the same again: nothing.
    let ops = dpd.apply_nat_change(&nat_change(0, 99, 1, 2, false));
    assert!(matches!(ops[..], [Ok(NatChange::Created(_))]), "{ops:?}");
    assert!(dpd
        .apply_nat_change(&nat_change(0, 99, 1, 2, false))
        .is_empty());
    // Set another target at the same key: replaced.
    let ops = dpd.apply_nat_change(&nat_change(0, 99, 2, 3, false));
    assert!(replaced(&ops), "{ops:?}");
    assert_eq!(
        dpd.ipv4_entries()[0].target,
        nat_change(0, 99, 2, 3, false).target()
    );
    // An overlapping range at another key: the overlapping entry is
    // cleared and the change set, as dendrite does on a conflict.
    let ops = dpd.apply_nat_change(&nat_change(50, 150, 3, 4, false));
    assert!(replaced(&ops), "{ops:?}");
    assert_eq!(
        dpd.ipv4_entries(),
        vec![nat_change(50, 150, 3, 4, false).to_dpd()]
    );
    // A removal clears the entry at its key, whatever its target.
    let ops = dpd.apply_nat_change(&nat_change(50, 150, 1, 5, true));
    assert!(matches!(ops[..], [Ok(NatChange::Deleted(_))]), "{ops:?}");
    assert!(dpd.ipv4_entries().is_empty());
    // A change that cannot be set at all (a bad range) is reported.
    let ops = dpd.apply_nat_change(&nat_change(99, 0, 1, 6, false));
    assert!(
        matches!(&ops[..], [Err(m)] if m.contains("generation 6")),
        "{ops:?}"
    );
    // Applying does not move the generation: the RPW sets it.
    assert_eq!(dpd.generation(), 0);
}

/// A removal is dendrite's `remove_mapping` over the change's whole
/// range: the first entry (in port order) that overlaps it goes, whatever
/// its target or exact range, and only that one.
#[test]
fn a_removal_removes_the_first_overlapping_entry_whatever_its_target() {
    let mut dpd = DpdState::new(0);
    for (low, high, sled) in [(0, 99, 1), (100, 199, 2), (200, 299, 3)] {
        dpd.apply_nat_change(&nat_change(low, high, sled, 1, false));
    }
    let lows = |dpd: &DpdState| dpd.ipv4_entries().iter().map(|e| e.low).collect::<Vec<_>>();
    // [150, 250] overlaps the entries at 100 and 200: only the first
    // (100-199, another sled's target than the change's) is removed.
    let ops = dpd.apply_nat_change(&nat_change(150, 250, 9, 2, true));
    match &ops[..] {
        [Ok(NatChange::Deleted(e))] => assert_eq!((e.low, e.high), (100, 199)),
        other => panic!("{other:?}"),
    }
    assert_eq!(lows(&dpd), vec![0, 200]);
    // A range inside an entry but not at its first port still removes it.
    let ops = dpd.apply_nat_change(&nat_change(250, 260, 3, 3, true));
    assert!(matches!(ops[..], [Ok(NatChange::Deleted(_))]), "{ops:?}");
    assert_eq!(lows(&dpd), vec![0]);
    // No overlap: nothing; another address: nothing.
    assert!(dpd
        .apply_nat_change(&nat_change(100, 199, 1, 4, true))
        .is_empty());
    let mut elsewhere = nat_change(0, 99, 1, 5, true);
    elsewhere.external_address = Ipv4Addr::new(203, 0, 113, 11);
    assert!(dpd.apply_nat_change(&elsewhere).is_empty());
    assert_eq!(lows(&dpd), vec![0]);
    // An invalid range is refused, as dendrite's `PortRange::new` does.
    let ops = dpd.apply_nat_change(&nat_change(99, 0, 1, 6, true));
    assert!(
        matches!(&ops[..], [Err(m)] if m.contains("invalid port range")),
        "{ops:?}"
    );
    assert_eq!(lows(&dpd), vec![0]);
}

const PERIOD: Duration = Duration::from_secs(30);

/// An RPW running on `timer` with pulls that take `pull_time(n)` for pull
/// `n`, recording when each pull starts, in seconds since `t0`, and how
/// often its task was polled. Dropping it aborts its task.
struct Rpw {
    t0: Instant,
    starts: Arc<Mutex<Vec<f64>>>,
    polls: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// Records a pull's start in `starts`; returns its number.
fn record(starts: &Mutex<Vec<f64>>, t0: Instant) -> usize {
    let mut l = starts.lock().unwrap();
    l.push((Instant::now() - t0).as_secs_f64());
    l.len() - 1
}

impl Rpw {
    /// [`run_nat_rpw`], as the fake runs it.
    fn spawn(
        timer: Arc<NatRpwTimer>,
        t0: Instant,
        pull_time: impl Fn(usize) -> Duration + 'static,
    ) -> Rpw {
        Rpw::spawn_with(t0, |starts| {
            run_nat_rpw(
                timer,
                PERIOD,
                move || {
                    let d = pull_time(record(&starts, t0));
                    async move {
                        tokio::time::sleep(d).await;
                        Ok(())
                    }
                },
                |_| {},
            )
        })
    }

    /// [`reference_rpw`]: dendrite's literal loop.
    fn reference(
        timer: Arc<NatRpwTimer>,
        t0: Instant,
        pull_time: impl Fn(usize) -> Duration + 'static,
    ) -> Rpw {
        Rpw::spawn_with(t0, |starts| reference_rpw(timer, t0, pull_time, starts))
    }

    fn spawn_with<F: std::future::Future<Output = ()> + 'static>(
        t0: Instant,
        rpw: impl FnOnce(Arc<Mutex<Vec<f64>>>) -> F,
    ) -> Rpw {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = tokio::task::spawn_local(Polls {
            inner: Box::pin(rpw(starts.clone())),
            count: polls.clone(),
        });
        Rpw {
            t0,
            starts,
            polls,
            task,
        }
    }

    /// `secs` after `t0`.
    fn at(&self, secs: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(secs)
    }

    /// Sleeps until `secs` after `t0`.
    async fn until(&self, secs: f64) {
        tokio::time::sleep_until(self.at(secs)).await;
    }

    fn starts(&self) -> Vec<f64> {
        self.starts.lock().unwrap().clone()
    }

    fn polls(&self) -> usize {
        self.polls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the RPW's future and waits until it is gone; the pulls it
    /// started.
    async fn stop(&mut self) -> Vec<f64> {
        self.task.abort();
        let _ = (&mut self.task).await;
        self.starts()
    }
}

impl Drop for Rpw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fresh timer, and an RPW on it started now.
fn start(pull_time: impl Fn(usize) -> Duration + 'static) -> (Arc<NatRpwTimer>, Rpw) {
    let timer = Arc::new(NatRpwTimer::new());
    let rpw = Rpw::spawn(timer.clone(), Instant::now(), pull_time);
    (timer, rpw)
}

async fn run_local<F: std::future::Future<Output = ()>>(f: F) {
    tokio::task::LocalSet::new().run_until(f).await
}

/// At start, then every 30 s after the last *scheduled* run, seen on
/// the wait's 1 s polls, which start when the previous run ends.
#[tokio::test(start_paused = true)]
async fn runs_at_start_then_30s_after_the_last_scheduled_time_on_1s_polls() {
    run_local(async {
        // Each pull takes 5.5 s: the polls after it fall on x.5 s, so
        // the run due at 30 s starts at 30.5 s; the next is still due
        // at 60 s (not 60.5 s), seen at the poll at 60 s exactly.
        let (timer, rpw) = start(|_| Duration::from_millis(5500));
        rpw.until(126.0).await;
        assert_eq!(rpw.starts(), vec![0.0, 30.5, 60.0, 90.5, 120.0]);
        assert_eq!(timer.due_at(), rpw.at(150.0));
    })
    .await
}

/// A trigger while the RPW waits makes it due at the trigger's
/// instant: the run starts at the next poll (within 1 s), and the
/// next scheduled run is 30 s after the trigger.
#[tokio::test(start_paused = true)]
async fn a_trigger_is_seen_within_a_poll_and_rebases_the_schedule() {
    run_local(async {
        let (timer, rpw) = start(|_| Duration::ZERO);
        rpw.until(10.3).await;
        timer.trigger();
        rpw.until(45.0).await;
        assert_eq!(rpw.starts(), vec![0.0, 11.0, 41.0]);
        assert!(NAT_RPW_POLL == Duration::from_secs(1));
    })
    .await
}

/// A trigger that arrives while a pull runs (after its last fetch)
/// only moves the base: the change it announces waits a whole period.
#[tokio::test(start_paused = true)]
async fn a_trigger_during_a_pull_waits_for_the_next_period() {
    run_local(async {
        let (timer, rpw) = start(|_| Duration::from_secs(2));
        rpw.until(1.0).await;
        timer.trigger();
        rpw.until(40.0).await;
        // Not at 2 s when the pull ended: at 1 + 30 = 31 s.
        assert_eq!(rpw.starts(), vec![0.0, 31.0]);
    })
    .await
}

/// A run longer than the period is followed at once by the runs it
/// missed, one by one, until the schedule is caught up.
#[tokio::test(start_paused = true)]
async fn a_long_run_is_caught_up_at_once() {
    run_local(async {
        let (_timer, rpw) = start(|n| Duration::from_secs(if n == 0 { 70 } else { 0 }));
        rpw.until(95.0).await;
        // Due at 30 and 60 while the first ran: both at 70; then 90.
        assert_eq!(rpw.starts(), vec![0.0, 70.0, 70.0, 90.0]);
    })
    .await
}

/// Cancel safety: a trigger made while no RPW waits (its future was
/// dropped mid-wait) is kept in the timer, and a new RPW on that timer
/// runs at its first look. `restart` re-bases the schedule at the RPW's
/// next poll.
#[tokio::test(start_paused = true)]
async fn dropping_the_rpw_loses_no_trigger_and_restart_rebases() {
    run_local(async {
        let (timer, mut first) = start(|_| Duration::ZERO);
        first.until(5.2).await;
        assert_eq!(first.stop().await, vec![0.0]);
        timer.trigger();
        first.until(8.0).await;
        let second = Rpw::spawn(timer.clone(), first.t0, |_| Duration::ZERO);
        second.until(20.4).await;
        timer.restart();
        second.until(60.0).await;
        // 8: the kept trigger; 21: the restart, seen at the poll
        // after 20.4 s (polls fall on whole seconds after 8 s); 51:
        // 30 s after the restart was seen.
        assert_eq!(second.starts(), vec![8.0, 21.0, 51.0]);
    })
    .await
}

/// dendrite's `wait` as written: look, and while the timer is in the
/// future, sleep a poll and look again. The reference [`NatRpwTimer::wait`]
/// must agree with.
async fn dendrite_wait(timer: &NatRpwTimer) {
    loop {
        if timer
            .restarted
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            *timer.next() = Instant::now();
        }
        if Instant::now() >= *timer.next() {
            return;
        }
        tokio::time::sleep(NAT_RPW_POLL).await;
    }
}

/// [`run_nat_rpw`] with dendrite's literal `wait`, recording when each
/// pull starts.
async fn reference_rpw(
    timer: Arc<NatRpwTimer>,
    t0: Instant,
    pull_time: impl Fn(usize) -> Duration,
    starts: Arc<Mutex<Vec<f64>>>,
) {
    loop {
        dendrite_wait(&timer).await;
        let process = timer.restart_count();
        let n = record(&starts, t0);
        tokio::select! {
            biased;
            () = timer.restarted_since(process) => continue,
            () = tokio::time::sleep(pull_time(n)) => {}
        }
        timer.advance(PERIOD);
    }
}

/// A future that counts its polls: how often its task was woken.
struct Polls<F> {
    inner: std::pin::Pin<Box<F>>,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl<F: std::future::Future> std::future::Future for Polls<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

/// What a schedule does to the timer at an instant.
#[derive(Clone, Copy, Debug)]
enum Move {
    Trigger,
    Restart,
}

/// Runs one schedule of moves against the RPW and against dendrite's
/// literal loop, each on a timer of its own, and returns both lists of
/// pull starts.
async fn both(
    moves: &[(f64, Move)],
    pull_time: impl Fn(usize) -> Duration + Clone + 'static,
    until: f64,
) -> (Vec<f64>, Vec<f64>) {
    let t0 = Instant::now();
    let (ours, theirs) = (Arc::new(NatRpwTimer::new()), Arc::new(NatRpwTimer::new()));
    let ours_rpw = Rpw::spawn(ours.clone(), t0, pull_time.clone());
    let reference = Rpw::reference(theirs.clone(), t0, pull_time);
    for &(at, m) in moves {
        ours_rpw.until(at).await;
        for timer in [&ours, &theirs] {
            match m {
                Move::Trigger => timer.trigger(),
                Move::Restart => timer.restart(),
            }
        }
    }
    ours_rpw.until(until).await;
    (ours_rpw.starts(), reference.starts())
}

/// The RPW starts its pulls at the very instants dendrite's literal loop
/// does, whatever the triggers, restarts and pull lengths: drawn
/// schedules, each move between two of the loop's looks (a move at the
/// instant of a look is ordered by the runtime, in either loop).
#[tokio::test(start_paused = true)]
async fn pulls_start_when_dendrite_s_loop_starts_them() {
    run_local(async {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut draw = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        for case in 0..200 {
            let mut at = 0.0;
            let mut moves = Vec::new();
            for _ in 0..draw(6) {
                // Milliseconds and a half: never on one of the looks,
                // which land on whole milliseconds.
                at += draw(50_000) as f64 / 1000.0 + 0.0005;
                let m = if draw(4) == 0 {
                    Move::Restart
                } else {
                    Move::Trigger
                };
                moves.push((at, m));
            }
            let lengths: Vec<u64> = (0..8).map(|_| draw(45_000)).collect();
            let pull = move |n: usize| Duration::from_millis(lengths[n % lengths.len()]);
            let (ours, theirs) = both(&moves, pull, at + 300.0).await;
            assert_eq!(ours, theirs, "case {case}: moves {moves:?}");
            assert!(ours.len() >= 6, "case {case}: {ours:?}");
        }
    })
    .await
}

/// Between two pulls the RPW wakes at most twice (the first poll, which
/// puts its looks on whole timer ticks, and the look that finds it due),
/// where dendrite's loop wakes once a second: in a simulated run those
/// wakes were a third of a small rack's events.
#[tokio::test(start_paused = true)]
async fn between_pulls_the_rpw_wakes_only_to_pull() {
    run_local(async {
        let pull = |_| Duration::from_millis(2500);
        let (_timer, rpw) = start(pull);
        let reference = Rpw::reference(Arc::new(NatRpwTimer::new()), rpw.t0, pull);
        rpw.until(301.0).await;
        let starts = rpw.starts();
        assert_eq!(starts, reference.starts());
        assert_eq!(starts.len(), 11, "{starts:?}");
        let (ours, theirs) = (rpw.polls(), reference.polls());
        // Each pull: polled at its start and when its sleep ends; each
        // wait: at most two wakes. dendrite's loop: 28 more per period.
        assert!(ours <= 4 * starts.len() + 2, "{ours} polls");
        assert!(theirs >= 28 * (starts.len() - 1), "{theirs} polls");
    })
    .await
}

/// A trigger at the very instant of a look the RPW slept through counts
/// as after that look: seen at the next one, a poll later. (In a
/// simulated rack the look's timer fires before the trigger's request
/// is delivered and handled at that instant, so dendrite's loop looked
/// first there too.)
#[tokio::test(start_paused = true)]
async fn a_trigger_on_a_skipped_look_is_seen_at_the_next() {
    run_local(async {
        let (timer, rpw) = start(|_| Duration::ZERO);
        rpw.until(10.0).await;
        timer.trigger();
        rpw.until(45.0).await;
        // The next run is 30 s after the trigger, whose instant was a look.
        assert_eq!(rpw.starts(), vec![0.0, 11.0, 40.0]);
    })
    .await
}

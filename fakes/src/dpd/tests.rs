use std::net::Ipv6Addr;

use http::{Method, StatusCode};
use racksim_wire::{
    dpd::{Ipv4Nat, Ipv6Nat, MacAddr, ResultsPage},
    nexus::NatEntryView,
};

use super::*;

fn target(n: u8) -> NatTarget {
    NatTarget {
        internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1),
        inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0, n]),
        vni: 100,
    }
}

fn req(method: Method, path: &str, body: &str) -> ApiRequest {
    ApiRequest::new(method, path, body.to_string()).versioned(API_VERSION)
}

fn put(dpd: &mut DpdState, path: &str, t: NatTarget) -> (ApiResponse, Option<NatChange>) {
    dpd.handle(&req(Method::PUT, path, &serde_json::to_string(&t).unwrap()))
}

#[test]
fn create_is_idempotent_and_overlap_is_dendrites_conflict() {
    let mut dpd = DpdState::new(0);
    let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(matches!(change, Some(NatChange::Created(_))));
    // The same entry again: success, no change.
    let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
    let before = dpd.ipv4_entries();
    // Overlapping range, or the same range with another target: 409 with
    // dendrite's body, and the table as it was.
    for (path, t) in [
        ("/nat/ipv4/198.51.100.1/150/300", target(1)),
        ("/nat/ipv4/198.51.100.1/100/199", target(2)),
        ("/nat/ipv4/198.51.100.1/0/100", target(1)),
    ] {
        let (r, change) = put(&mut dpd, path, t);
        assert_eq!(r.status, StatusCode::CONFLICT, "{path}");
        assert_eq!(r.error_code(), Some("conflicting mapping"));
        assert_eq!(r.message(), Some("Conflict"));
        assert!(change.is_none());
        assert_eq!(dpd.ipv4_entries(), before);
    }
    // A disjoint range on the same address is fine.
    let (r, _) = put(&mut dpd, "/nat/ipv4/198.51.100.1/200/299", target(2));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(dpd.ipv4_entries().len(), 2);
}

#[test]
fn get_finds_the_covering_entry_and_delete_of_an_absent_one_is_204() {
    let mut dpd = DpdState::new(0);
    put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/150", ""));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body.unwrap(), serde_json::to_value(target(1)).unwrap());
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/200", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), Some("no mapping"));
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/199", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(matches!(change, Some(NatChange::Deleted(e)) if e.low == 100 && e.high == 199));
    // Nothing covers it any more: still 204, nothing changes.
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/150", ""));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
    assert!(dpd.ipv4_entries().is_empty());
}

fn lows(r: &ApiResponse) -> (Vec<u16>, Option<String>) {
    let page: ResultsPage<Ipv4Nat> = serde_json::from_value(r.body.clone().unwrap()).unwrap();
    (page.items.iter().map(|e| e.low).collect(), page.next_page)
}

#[test]
fn pages_hold_at_most_64_and_every_non_empty_page_has_a_token() {
    let mut dpd = DpdState::new(0);
    for i in 0..100u16 {
        put(
            &mut dpd,
            &format!("/nat/ipv4/198.51.100.1/{i}/{i}"),
            target(1),
        );
    }
    // Asked for more than 64 (or nothing: dropshot's default of 100), dpd
    // returns 64.
    for query in ["?limit=1000", ""] {
        let (r, _) = dpd.handle(&req(
            Method::GET,
            &format!("/nat/ipv4/198.51.100.1{query}"),
            "",
        ));
        let (items, next) = lows(&r);
        assert_eq!(items, (0..64).collect::<Vec<_>>(), "{query:?}");
        assert_eq!(next.as_deref(), Some("63"));
    }
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv4/198.51.100.1?limit=64&page_token=63",
        "",
    ));
    let (items, next) = lows(&r);
    assert_eq!(items, (64..100).collect::<Vec<_>>());
    // Not a full page, but not empty: a token still.
    assert_eq!(next.as_deref(), Some("99"));
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv4/198.51.100.1?page_token=99",
        "",
    ));
    assert_eq!(lows(&r), (vec![], None));
}

#[test]
fn ipv6_tokens_are_percent_decoded() {
    let mut dpd = DpdState::new(0);
    let addrs: Vec<Ipv6Addr> = (1..=3u16)
        .map(|i| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i))
        .collect();
    for a in &addrs {
        put(&mut dpd, &format!("/nat/ipv6/{a}/0/65535"), target(1));
    }
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv6?limit=2", ""));
    let page: ResultsPage<Ipv6Addr> = serde_json::from_value(r.body.unwrap()).unwrap();
    assert_eq!(page.items, addrs[..2]);
    let token = page.next_page.unwrap();
    assert_eq!(token, "fd00::2");
    // A client encodes the token's colons; the server decodes them.
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv6?limit=2&page_token=fd00%3A%3A2",
        "",
    ));
    let page: ResultsPage<Ipv6Addr> = serde_json::from_value(r.body.unwrap()).unwrap();
    assert_eq!(page.items, addrs[2..]);
    // And a percent-encoded address in the path.
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv6/fd00%3A%3A3", ""));
    let page: ResultsPage<Ipv6Nat> = serde_json::from_value(r.body.unwrap()).unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(dpd.ipv6_get(addrs[0], 80).map(|e| e.low), Some(0));
}

#[test]
fn bad_requests_get_a_clear_400_and_change_nothing() {
    let mut dpd = DpdState::new(0);
    put(&mut dpd, "/nat/ipv4/198.51.100.1/0/9", target(1));
    let before = dpd.ipv4_entries();
    let good = serde_json::to_string(&target(1)).unwrap();
    let big_vni = serde_json::to_string(&NatTarget {
        vni: 1 << 24,
        ..target(1)
    })
    .unwrap();
    for (method, path, body, needle) in [
        (Method::GET, "/nat/ipv4?limit=0", "", "limit"),
        (Method::GET, "/nat/ipv4?limit=many", "", "limit"),
        (Method::GET, "/nat/ipv4?page_token=nope", "", "page token"),
        (Method::GET, "/nat/ipv4/not-an-ip", "", "ipv4"),
        (Method::GET, "/nat/ipv4/198.51.100.1/70000", "", "low"),
        (Method::PUT, "/nat/ipv4/198.51.100.1/10/20", "", "JSON"),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/20",
            "{\"internal_ip\":1}",
            "JSON",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/99999",
            good.as_str(),
            "high",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.300/10/20",
            good.as_str(),
            "ipv4",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/20/10",
            good.as_str(),
            "invalid port range",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/20",
            big_vni.as_str(),
            "VNI",
        ),
        (
            Method::PUT,
            "/nat/ipv6/fd00::1/20/10",
            good.as_str(),
            "invalid port range",
        ),
        (Method::DELETE, "/nat/ipv4/198.51.100.1/x", "", "low"),
    ] {
        let (r, change) = dpd.handle(&req(method.clone(), path, body));
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {path}");
        let message = r.message().unwrap();
        assert!(message.contains(needle), "{method} {path}: {message}");
        assert!(change.is_none());
        assert_eq!(dpd.ipv4_entries(), before, "{method} {path}");
        assert!(dpd.ipv6_entries().is_empty());
    }
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv5", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[test]
fn requests_without_a_supported_api_version_are_refused() {
    let mut dpd = DpdState::new(0);
    let body = serde_json::to_string(&target(1)).unwrap();
    let path = "/nat/ipv4/198.51.100.1/0/9";
    for (version, needle) in [
        (None, "missing expected header \"api-version\""),
        (Some("thirteen"), "bad value for header"),
        (Some("14.0.0"), "does not support this API version"),
    ] {
        let mut r = ApiRequest::new(Method::PUT, path, body.clone());
        r.api_version = version.map(str::to_string);
        let (resp, change) = dpd.handle(&r);
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{version:?}");
        assert!(resp.message().unwrap().contains(needle), "{resp:?}");
        assert!(change.is_none());
        assert!(dpd.ipv4_entries().is_empty());
    }
    // An older version is served (dropshot serves every version up to the
    // server's).
    let (resp, _) = dpd.handle(&ApiRequest::new(Method::PUT, path, body).versioned("12.0.0"));
    assert_eq!(resp.status, StatusCode::NO_CONTENT);
}

#[test]
fn reset_empties_the_table_and_identifiers_name_the_slot() {
    let mut dpd = DpdState::new(1);
    put(&mut dpd, "/nat/ipv4/198.51.100.1/0/65535", target(1));
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(change, Some(NatChange::Reset { removed: 1 }));
    assert!(dpd.ipv4_entries().is_empty());
    let (r, _) = dpd.handle(&req(Method::GET, "/switch/identifiers", ""));
    let ids = r.body.unwrap();
    assert_eq!(ids["slot"], 1);
    // dendrite sends the ASIC's manufacturing identifiers, null when it has
    // none: the keys are there.
    for key in ["fab", "lot", "lotnum", "wafer", "wafer_loc", "fuse"] {
        assert_eq!(ids.get(key), Some(&serde_json::Value::Null), "{key}: {ids}");
    }
    dpd.set_generation(7);
    let (r, _) = dpd.handle(&req(Method::GET, "/rpw/nat/gen", ""));
    assert_eq!(r.body.unwrap(), serde_json::json!(7));
    let (r, _) = dpd.handle(&req(Method::POST, "/rpw/nat/trigger", ""));
    assert_eq!(
        (r.status, r.body),
        (StatusCode::OK, Some(serde_json::Value::Null))
    );
}

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
    assert!(
        matches!(
            ops[..],
            [Ok(NatChange::Deleted(_)), Ok(NatChange::Created(_))]
        ),
        "{ops:?}"
    );
    assert_eq!(
        dpd.ipv4_entries()[0].target,
        nat_change(0, 99, 2, 3, false).target()
    );
    // An overlapping range at another key: the overlapping entry is
    // cleared and the change set, as dendrite does on a conflict.
    let ops = dpd.apply_nat_change(&nat_change(50, 150, 3, 4, false));
    assert!(
        matches!(
            ops[..],
            [Ok(NatChange::Deleted(_)), Ok(NatChange::Created(_))]
        ),
        "{ops:?}"
    );
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

mod rpw {
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };

    use tokio::time::Instant;

    use super::super::{run_nat_rpw, NatRpwTimer, NAT_RPW_POLL};

    const PERIOD: Duration = Duration::from_secs(30);

    /// Runs the RPW with pulls that take `pull_time(n)` for pull `n` and
    /// records when each pull starts, in seconds since `t0`.
    fn spawn(
        timer: Arc<NatRpwTimer>,
        t0: Instant,
        pull_time: impl Fn(usize) -> Duration + 'static,
    ) -> (Arc<Mutex<Vec<f64>>>, tokio::task::JoinHandle<()>) {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let log = starts.clone();
        let task = tokio::task::spawn_local(async move {
            run_nat_rpw(
                timer,
                PERIOD,
                || {
                    let n = {
                        let mut l = log.lock().unwrap();
                        l.push((Instant::now() - t0).as_secs_f64());
                        l.len() - 1
                    };
                    let d = pull_time(n);
                    async move {
                        tokio::time::sleep(d).await;
                        Ok(())
                    }
                },
                |_| {},
            )
            .await
        });
        (starts, task)
    }

    fn at(t0: Instant, secs: f64) -> Instant {
        t0 + Duration::from_secs_f64(secs)
    }

    async fn run_local<F: std::future::Future<Output = ()>>(f: F) {
        tokio::task::LocalSet::new().run_until(f).await
    }

    /// At start, then every 30 s after the last *scheduled* run, seen on
    /// the wait's 1 s polls, which start when the previous run ends.
    #[tokio::test(start_paused = true)]
    async fn runs_at_start_then_30s_after_the_last_scheduled_time_on_1s_polls() {
        run_local(async {
            let t0 = Instant::now();
            let timer = Arc::new(NatRpwTimer::new());
            // Each pull takes 5.5 s: the polls after it fall on x.5 s, so
            // the run due at 30 s starts at 30.5 s; the next is still due
            // at 60 s (not 60.5 s), seen at the poll at 60 s exactly.
            let (starts, task) = spawn(timer.clone(), t0, |_| Duration::from_millis(5500));
            tokio::time::sleep_until(at(t0, 126.0)).await;
            assert_eq!(*starts.lock().unwrap(), vec![0.0, 30.5, 60.0, 90.5, 120.0]);
            assert_eq!(timer.due_at(), at(t0, 150.0));
            task.abort();
        })
        .await
    }

    /// A trigger while the RPW waits makes it due at the trigger's
    /// instant: the run starts at the next poll (within 1 s), and the
    /// next scheduled run is 30 s after the trigger.
    #[tokio::test(start_paused = true)]
    async fn a_trigger_is_seen_within_a_poll_and_rebases_the_schedule() {
        run_local(async {
            let t0 = Instant::now();
            let timer = Arc::new(NatRpwTimer::new());
            let (starts, task) = spawn(timer.clone(), t0, |_| Duration::ZERO);
            tokio::time::sleep_until(at(t0, 10.3)).await;
            timer.trigger();
            tokio::time::sleep_until(at(t0, 45.0)).await;
            assert_eq!(*starts.lock().unwrap(), vec![0.0, 11.0, 41.0]);
            assert!(NAT_RPW_POLL == Duration::from_secs(1));
            task.abort();
        })
        .await
    }

    /// A trigger that arrives while a pull runs (after its last fetch)
    /// only moves the base: the change it announces waits a whole period.
    #[tokio::test(start_paused = true)]
    async fn a_trigger_during_a_pull_waits_for_the_next_period() {
        run_local(async {
            let t0 = Instant::now();
            let timer = Arc::new(NatRpwTimer::new());
            let (starts, task) = spawn(timer.clone(), t0, |_| Duration::from_secs(2));
            tokio::time::sleep_until(at(t0, 1.0)).await;
            timer.trigger();
            tokio::time::sleep_until(at(t0, 40.0)).await;
            // Not at 2 s when the pull ended: at 1 + 30 = 31 s.
            assert_eq!(*starts.lock().unwrap(), vec![0.0, 31.0]);
            task.abort();
        })
        .await
    }

    /// A run longer than the period is followed at once by the runs it
    /// missed, one by one, until the schedule is caught up.
    #[tokio::test(start_paused = true)]
    async fn a_long_run_is_caught_up_at_once() {
        run_local(async {
            let t0 = Instant::now();
            let timer = Arc::new(NatRpwTimer::new());
            let (starts, task) = spawn(timer.clone(), t0, |n| {
                Duration::from_secs(if n == 0 { 70 } else { 0 })
            });
            tokio::time::sleep_until(at(t0, 95.0)).await;
            // Due at 30 and 60 while the first ran: both at 70; then 90.
            assert_eq!(*starts.lock().unwrap(), vec![0.0, 70.0, 70.0, 90.0]);
            task.abort();
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
            let t0 = Instant::now();
            let timer = Arc::new(NatRpwTimer::new());
            let (first, task) = spawn(timer.clone(), t0, |_| Duration::ZERO);
            tokio::time::sleep_until(at(t0, 5.2)).await;
            task.abort();
            let _ = task.await;
            assert_eq!(*first.lock().unwrap(), vec![0.0]);
            timer.trigger();
            tokio::time::sleep_until(at(t0, 8.0)).await;
            let (second, task) = spawn(timer.clone(), t0, |_| Duration::ZERO);
            tokio::time::sleep_until(at(t0, 20.4)).await;
            timer.restart();
            tokio::time::sleep_until(at(t0, 60.0)).await;
            // 8: the kept trigger; 21: the restart, seen at the poll
            // after 20.4 s (polls fall on whole seconds after 8 s); 51:
            // 30 s after the restart was seen.
            assert_eq!(*second.lock().unwrap(), vec![8.0, 21.0, 51.0]);
            task.abort();
        })
        .await
    }
}

use std::net::SocketAddr;

use serde_json::json;

use super::*;
use crate::{
    dpd::MacAddr,
    http::HttpClient,
    testing::{complete, one_switch_zone, FakeConnector, FakeNet, FakeResponse},
    DPD_PORT, SERVICES_VNI,
};

fn sled(n: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, n, 0, 0, 0, 1)
}

fn entry(ip: [u8; 4], first: u16, last: u16, sled_n: u16) -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::from(ip),
        first_port: first,
        last_port: last,
        target: NatTarget {
            internal_ip: sled(sled_n),
            inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, u8::try_from(sled_n).unwrap()]),
            vni: SERVICES_VNI,
        },
    }
}

const NEXUS: [u8; 4] = [198, 51, 100, 1];
const NTP: [u8; 4] = [198, 51, 100, 2];
const DNS: [u8; 4] = [198, 51, 100, 3];

/// Nexus, boundary NTP (its quarter of the ports) and DNS, all on sled 1.
fn all_on_sled_1() -> [NatEntry; 3] {
    [
        entry(NEXUS, 0, 65535, 1),
        entry(NTP, 0, 16383, 1),
        entry(DNS, 0, 65535, 1),
    ]
}

#[test]
fn display_and_overlaps() {
    let e = entry(NEXUS, 0, 65535, 1);
    assert_eq!(
        e.to_string(),
        "198.51.100.1/0-65535 -> fd00:1122:3344:1::1 (a8:40:25:ff:00:01, vni 100)"
    );
    assert!(e.overlaps(&entry(NEXUS, 65535, 65535, 2)));
    assert!(!e.overlaps(&entry(NTP, 0, 65535, 1)));
    let a = entry(NTP, 0, 16383, 1);
    assert!(a.overlaps(&entry(NTP, 16383, 32767, 1)));
    assert!(!a.overlaps(&entry(NTP, 16384, 32767, 1)));
    assert!(entry(NTP, 16384, 32767, 1).overlaps(&a) == a.overlaps(&entry(NTP, 16384, 32767, 1)));
    assert_eq!(NatEntry::from_dpd(&e.to_dpd()), e);
}

#[test]
fn plan_of_an_empty_switch_creates_everything_sorted() {
    let desired = [
        entry(NTP, 0, 16383, 1),
        entry(NEXUS, 0, 65535, 2),
        entry(NTP, 0, 16383, 1),
    ];
    let p = plan(&desired, &[]);
    assert_eq!(
        p,
        NatPlan {
            unchanged: vec![],
            to_remove: vec![],
            to_create: vec![entry(NEXUS, 0, 65535, 2), entry(NTP, 0, 16383, 1)],
        }
    );
    assert!(!p.is_noop());
}

#[test]
fn plan_keeps_exact_matches() {
    let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
    let p = plan(&desired, &desired);
    assert_eq!(
        p.unchanged,
        vec![entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)]
    );
    assert!(p.is_noop());
}

#[test]
fn plan_replaces_stale_target_wrong_range_and_overlapping() {
    let desired = all_on_sled_1();
    let mut stale_mac = entry(DNS, 0, 65535, 1);
    stale_mac.target.inner_mac = MacAddr::new([2, 0, 0, 0, 0, 9]);
    let mut stale_vni = entry(DNS, 0, 65535, 1);
    stale_vni.target.vni = 7;
    let current = [
        // stale target: zone moved from sled 2 to sled 1
        entry(NEXUS, 0, 65535, 2),
        // wrong range
        entry(NTP, 0, 32767, 1),
        // overlapping leftover on the same address
        entry(NTP, 40000, 40010, 3),
        stale_mac,
        stale_vni,
    ];
    let p = plan(&desired, &current);
    assert_eq!(p.unchanged, vec![]);
    let mut expected_remove = current.to_vec();
    expected_remove.sort();
    assert_eq!(p.to_remove, expected_remove);
    assert_eq!(
        p.to_create,
        vec![
            entry(NEXUS, 0, 65535, 1),
            entry(NTP, 0, 16383, 1),
            entry(DNS, 0, 65535, 1)
        ]
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    // Sorted by external IP first.
    assert_eq!(p.to_create[0].external_ip, Ipv4Addr::from(NEXUS));
    assert!(p.to_remove.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn plan_mixed() {
    let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
    let current = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 4)];
    assert_eq!(
        plan(&desired, &current),
        NatPlan {
            unchanged: vec![entry(NEXUS, 0, 65535, 1)],
            to_remove: vec![entry(NTP, 0, 16383, 4)],
            to_create: vec![entry(NTP, 0, 16383, 1)],
        }
    );
}

#[test]
fn outcome_serializes_with_result_tag() {
    let o = NatReconcileOutcome::Complete {
        unchanged: 1,
        removed: 0,
        remove_failures: vec![],
        created: 2,
        create_failures: vec!["x".into()],
    };
    assert_eq!(
        serde_json::to_value(&o).unwrap(),
        json!({"result": "complete", "unchanged": 1, "removed": 0, "remove_failures": [],
               "created": 2, "create_failures": ["x"]})
    );
    assert!(!o.is_converged());
    let f = NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
        error: ClientError::Connect {
            addr: "[::1]:1".into(),
            message: "refused".into(),
        },
    };
    assert_eq!(
        serde_json::to_value(&f).unwrap(),
        json!({"result": "failed_reading_current_dpd_nat_entries",
               "error": {"kind": "connect", "addr": "[::1]:1", "message": "refused"}})
    );
}

fn client(net: &FakeNet, zone: Ipv6Addr) -> DpdClient<FakeConnector> {
    DpdClient::new(HttpClient::new(
        net.connector(),
        SocketAddr::new(zone.into(), DPD_PORT),
    ))
}

fn scope_of(desired: &[NatEntry]) -> Scope {
    Scope::ExternalRanges(desired.iter().map(ExternalRange::of).collect())
}

/// The mutating requests, in order.
fn mutations(net: &FakeNet, zone: Ipv6Addr) -> Vec<String> {
    net.requests(zone, DPD_PORT)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn removes_before_creating_and_converges() {
    let (net, zone) = one_switch_zone(0);
    // Stale: Nexus's entry points at its old sled; NTP has the wrong
    // range; someone else's entry on another address must survive.
    net.insert_nat(zone, entry(NEXUS, 0, 65535, 2).to_dpd());
    net.insert_nat(zone, entry(NTP, 0, 32767, 1).to_dpd());
    net.insert_nat(zone, entry(DNS, 0, 65535, 1).to_dpd());
    let other = entry([203, 0, 113, 5], 0, 65535, 9);
    net.insert_nat(zone, other.to_dpd());

    let desired = all_on_sled_1();
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    assert_eq!(outcome, complete(1, 2, 2));
    assert_eq!(
        mutations(&net, zone),
        vec![
            "DELETE /nat/ipv4/198.51.100.1/0",
            "DELETE /nat/ipv4/198.51.100.2/0",
            "PUT /nat/ipv4/198.51.100.1/0/65535",
            "PUT /nat/ipv4/198.51.100.2/0/16383",
        ]
    );
    let mut expected: Vec<_> = desired.iter().chain([&other]).map(|e| e.to_dpd()).collect();
    expected.sort();
    assert_eq!(net.nat(zone), expected);

    // A second pass has nothing to do.
    net.clear_log();
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    assert!(outcome.is_converged());
    assert_eq!(outcome, complete(3, 0, 0));
    assert_eq!(mutations(&net, zone), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn continues_past_individual_failures() {
    let (net, zone) = one_switch_zone(1);
    net.insert_nat(zone, entry(NEXUS, 0, 65535, 2).to_dpd());
    net.insert_nat(zone, entry(DNS, 0, 65535, 2).to_dpd());
    // The first delete fails; the first create conflicts.
    net.fail(
        zone,
        DPD_PORT,
        "DELETE",
        "/nat/ipv4/198.51.100.1/0",
        Some(FakeResponse::error(500, "asic busy")),
    );
    net.fail(
        zone,
        DPD_PORT,
        "PUT",
        "/nat/ipv4/198.51.100.1/0/65535",
        Some(FakeResponse::error(409, "overlapping NAT entry")),
    );
    let desired = all_on_sled_1();
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    let addr = SocketAddr::new(zone.into(), DPD_PORT);
    assert_eq!(
        outcome,
        NatReconcileOutcome::Complete {
            unchanged: 0,
            removed: 1,
            remove_failures: vec![format!(
                "removing {}: DELETE /nat/ipv4/198.51.100.1/0 on {addr}: HTTP 500: asic busy",
                entry(NEXUS, 0, 65535, 2)
            )],
            created: 2,
            create_failures: vec![format!(
                "creating {}: PUT /nat/ipv4/198.51.100.1/0/65535 on {addr}: HTTP 409: overlapping NAT entry",
                entry(NEXUS, 0, 65535, 1)
            )],
        }
    );
    assert_eq!(
        mutations(&net, zone),
        vec![
            "DELETE /nat/ipv4/198.51.100.1/0",
            "DELETE /nat/ipv4/198.51.100.3/0",
            "PUT /nat/ipv4/198.51.100.1/0/65535",
            "PUT /nat/ipv4/198.51.100.2/0/16383",
            "PUT /nat/ipv4/198.51.100.3/0/65535",
        ]
    );
    assert!(!outcome.is_converged());

    // Once the switch behaves, the next pass repairs the rest.
    net.clear_failures();
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    assert_eq!(outcome, complete(2, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_delete_answered_404_counts_as_removed() {
    let (net, zone) = one_switch_zone(0);
    net.insert_nat(zone, entry(NTP, 0, 16383, 2).to_dpd());
    net.fail(
        zone,
        DPD_PORT,
        "DELETE",
        "/nat/ipv4/198.51.100.2/0",
        Some(FakeResponse::error(404, "gone")),
    );
    let desired = [entry(NTP, 0, 16383, 1)];
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    match outcome {
        NatReconcileOutcome::Complete {
            removed,
            remove_failures,
            ..
        } => {
            assert_eq!(removed, 1);
            assert!(remove_failures.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn read_failure_is_reported_and_nothing_is_changed() {
    let (net, zone) = one_switch_zone(0);
    net.fail(
        zone,
        DPD_PORT,
        "GET",
        "/nat/ipv4/198.51.100.2",
        Some(FakeResponse::error(503, "restarting")),
    );
    let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    match &outcome {
        NatReconcileOutcome::FailedReadingCurrentDpdNatEntries { error } => {
            assert_eq!(error.status(), Some(503));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(mutations(&net, zone), Vec::<String>::new());

    // An unreachable dpd is a read failure too.
    net.remove_switch_zone(zone);
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
    assert!(matches!(
        outcome,
        NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
            error: ClientError::Connect { .. }
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn reads_every_page() {
    let (net, zone) = one_switch_zone(0);
    // 300 single-port entries on one address, asked for in pages of 128;
    // dpd caps a page at 64: 64 * 4 + 45 + empty.
    let desired: Vec<NatEntry> = (0..300u16)
        .map(|p| entry(NTP, p * 10, p * 10 + 9, 1))
        .collect();
    for e in &desired {
        net.insert_nat(zone, e.to_dpd());
    }
    // One stale entry at the very end of the listing must be found.
    let stale = entry(NTP, 5000, 5009, 2);
    net.insert_nat(zone, stale.to_dpd());
    // The whole address is in scope (the paging is under test here).
    let scope = Scope::ExternalRanges(
        [ExternalRange {
            ip: Ipv4Addr::from(NTP),
            first_port: 0,
            last_port: 65535,
        }]
        .into_iter()
        .collect(),
    );
    let outcome = reconcile_switch(&client(&net, zone), &desired, &scope).await;
    assert_eq!(outcome, complete(300, 1, 0));
    let lists: Vec<String> = net
        .requests(zone, DPD_PORT)
        .into_iter()
        .filter(|r| r.starts_with("GET /nat/ipv4/198.51.100.2?"))
        .collect();
    assert_eq!(
        lists,
        vec![
            "GET /nat/ipv4/198.51.100.2?limit=128",
            "GET /nat/ipv4/198.51.100.2?limit=128&page_token=630",
            "GET /nat/ipv4/198.51.100.2?limit=128&page_token=1270",
            "GET /nat/ipv4/198.51.100.2?limit=128&page_token=1910",
            "GET /nat/ipv4/198.51.100.2?limit=128&page_token=2550",
            "GET /nat/ipv4/198.51.100.2?limit=128&page_token=5000",
        ]
    );
    assert_eq!(
        mutations(&net, zone),
        vec!["DELETE /nat/ipv4/198.51.100.2/5000"]
    );
}

/// Two boundary NTP zones on two sleds share one source-NAT address on
/// disjoint port ranges. Each sled's reconciler owns its range, so each
/// repairs its own entry and never removes the other's — in either
/// order, and however often they run.
#[tokio::test(start_paused = true)]
async fn range_scope_leaves_the_other_zone_on_a_shared_address_alone() {
    let (net, zone) = one_switch_zone(0);
    let low = entry(NTP, 0, 16383, 1);
    let high = entry(NTP, 16384, 32767, 2);
    // A stale entry of the low zone (its previous sled, and a range
    // overlapping its own) must go.
    net.insert_nat(zone, entry(NTP, 0, 8191, 3).to_dpd());
    for _ in 0..2 {
        for desired in [[high], [low]] {
            let outcome =
                reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
            assert!(outcome.is_converged(), "{outcome:?}");
        }
    }
    let mut expected = vec![low.to_dpd(), high.to_dpd()];
    expected.sort();
    assert_eq!(net.nat(zone), expected);
    // Neither ever deleted the other's entry: the only delete is of the
    // stale one.
    let deletes: Vec<String> = mutations(&net, zone)
        .into_iter()
        .filter(|r| r.starts_with("DELETE"))
        .collect();
    assert_eq!(deletes, vec!["DELETE /nat/ipv4/198.51.100.2/0"]);
}

#[tokio::test(start_paused = true)]
async fn vni_scope_reads_all_addresses_and_keeps_only_its_vni() {
    let (net, zone) = one_switch_zone(0);
    // 130 addresses (more than a page), half of them an instance's VNI.
    let mut instance_entries = Vec::new();
    for i in 0..130u8 {
        let mut e = entry([10, 0, 1, i], 0, 65535, 1);
        if i % 2 == 0 {
            e.target.vni = 4242;
            instance_entries.push(e);
        }
        net.insert_nat(zone, e.to_dpd());
    }
    let desired = [entry(NEXUS, 0, 65535, 1)];
    let outcome = reconcile_switch(&client(&net, zone), &desired, &Scope::Vni(SERVICES_VNI)).await;
    assert_eq!(outcome, complete(0, 65, 1));
    let mut expected: Vec<_> = instance_entries
        .iter()
        .chain(desired.iter())
        .map(|e| e.to_dpd())
        .collect();
    expected.sort();
    assert_eq!(net.nat(zone), expected);
    let address_pages = net
        .requests(zone, DPD_PORT)
        .into_iter()
        .filter(|r| r.starts_with("GET /nat/ipv4?limit=128"))
        .count();
    // dpd caps a page at 64: 64 + 64 + 2 + empty.
    assert_eq!(address_pages, 4);
}

#[test]
fn scope_serializes() {
    let s = Scope::ExternalRanges(
        [ExternalRange {
            ip: Ipv4Addr::from(NTP),
            first_port: 0,
            last_port: 16383,
        }]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        json!({"external_ranges": [{"ip": "198.51.100.2", "first_port": 0, "last_port": 16383}]})
    );
    assert_eq!(
        serde_json::to_value(Scope::Vni(100)).unwrap(),
        json!({"vni": 100})
    );
}

/// The outcome line the task's status (and so the traces) shows: counts
/// that are not zero, then each failure.
#[test]
fn outcome_reads_as_counts_then_failures() {
    let outcome = |removed, created, remove_failures: &[&str], create_failures: &[&str]| {
        NatReconcileOutcome::Complete {
            unchanged: 1,
            removed,
            remove_failures: remove_failures.iter().map(|e| e.to_string()).collect(),
            created,
            create_failures: create_failures.iter().map(|e| e.to_string()).collect(),
        }
        .to_string()
    };
    assert_eq!(outcome(0, 0, &[], &[]), "unchanged 1");
    assert_eq!(outcome(1, 0, &[], &[]), "unchanged 1, removed 1");
    assert_eq!(outcome(0, 2, &[], &[]), "unchanged 1, created 2");
    assert_eq!(
        outcome(1, 2, &["a"], &["b"]),
        "unchanged 1, removed 1, created 2, remove failed: a, create failed: b"
    );
    let failed = NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
        error: crate::http::ClientError::Connect {
            addr: "switch0".into(),
            message: "refused".into(),
        },
    };
    assert!(
        failed.to_string().starts_with("cannot read NAT entries: "),
        "{failed}"
    );
}

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::json;
use tokio::{sync::watch, time::Instant};

use super::*;
use crate::{
    discovery::StaticResolver,
    http::{ClientError, DEFAULT_REQUEST_TIMEOUT},
    task::{run_reconciler_task, TaskStatus, DEFAULT_PERIOD},
    testing::{complete, service_entry as entry, zone_ip, FakeNet, FakeResponse},
};

#[derive(Clone)]
struct SharedResolver(Arc<Mutex<Result<Vec<Ipv6Addr>, DiscoveryError>>>);

impl SwitchZoneResolver for SharedResolver {
    async fn switch_zones(&self) -> Result<Vec<Ipv6Addr>, DiscoveryError> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test(start_paused = true)]
async fn empty_config_does_nothing() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    let mut r = SledNatReconciler::new(net.connector(), StaticResolver(vec![zone_ip(1)]));
    assert_eq!(
        r.reconcile(&vec![], ActivationReason::Startup).await,
        SledNatStatus::NoNatEntriesConfig
    );
    assert!(net.requests(zone_ip(1), DPD_PORT).is_empty());
}

#[tokio::test(start_paused = true)]
async fn discovery_failure_is_reported() {
    let net = FakeNet::new();
    let resolver = SharedResolver(Arc::new(Mutex::new(Err(DiscoveryError("dns down".into())))));
    let mut r = SledNatReconciler::new(net.connector(), resolver);
    assert_eq!(
        r.reconcile(
            &vec![entry([198, 51, 100, 2], 0, 16383, 1)],
            ActivationReason::Startup
        )
        .await,
        SledNatStatus::DiscoveryFailed {
            error: DiscoveryError("dns down".into())
        }
    );
}

#[tokio::test(start_paused = true)]
async fn reconciles_every_switch_independently_and_only_its_own_addresses() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    net.add_switch_zone(zone_ip(2), 1);
    let ntp = entry([198, 51, 100, 2], 0, 16383, 1);
    let nexus = entry([198, 51, 100, 1], 0, 65535, 1);
    // switch0: Nexus's entry still points at its previous sled, and
    // another sled's entry must be left alone.
    net.insert_nat(zone_ip(1), entry([198, 51, 100, 1], 0, 65535, 5).to_dpd());
    let foreign = entry([198, 51, 100, 3], 0, 65535, 6);
    net.insert_nat(zone_ip(1), foreign.to_dpd());
    // switch1: /switch/identifiers is broken, and it already has NTP.
    net.insert_nat(zone_ip(2), ntp.to_dpd());
    net.fail(
        zone_ip(2),
        DPD_PORT,
        "GET",
        "/switch/identifiers",
        Some(FakeResponse::error(500, "no asic")),
    );

    let mut r = SledNatReconciler::new(
        net.connector(),
        StaticResolver(vec![zone_ip(2), zone_ip(1)]),
    );
    let status = r
        .reconcile(&vec![ntp, nexus], ActivationReason::Startup)
        .await;
    assert_eq!(
        status,
        SledNatStatus::Reconciled {
            switches: [
                (
                    zone_ip(1),
                    SwitchNatStatus {
                        slot: Some(SwitchSlot::Switch0),
                        outcome: complete(0, 1, 2)
                    }
                ),
                (
                    zone_ip(2),
                    SwitchNatStatus {
                        slot: None,
                        outcome: complete(1, 0, 1)
                    }
                ),
            ]
            .into_iter()
            .collect()
        }
    );
    let mut expected0 = vec![ntp.to_dpd(), nexus.to_dpd(), foreign.to_dpd()];
    expected0.sort();
    assert_eq!(net.nat(zone_ip(1)), expected0);
    let mut expected1 = vec![ntp.to_dpd(), nexus.to_dpd()];
    expected1.sort();
    assert_eq!(net.nat(zone_ip(2)), expected1);
    // Never listed the foreign address.
    assert!(!net
        .requests(zone_ip(1), DPD_PORT)
        .iter()
        .any(|r| r.contains("198.51.100.3")));

    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["result"], json!("reconciled"));
    assert_eq!(
        json["switches"]["fd00:1122:3344:1::2"]["slot"],
        json!("switch0")
    );
    assert_eq!(json["switches"]["fd00:1122:3344:2::2"]["slot"], json!(null));
    assert_eq!(
        json["switches"]["fd00:1122:3344:2::2"]["outcome"]["created"],
        json!(1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_switch_does_not_delay_the_other() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    net.add_switch_zone(zone_ip(2), 1);
    net.fail(zone_ip(2), DPD_PORT, "GET", "/switch/identifiers", None);
    net.fail(zone_ip(2), DPD_PORT, "GET", "/nat/ipv4/198.51.100.2", None);
    let ntp = entry([198, 51, 100, 2], 0, 16383, 1);
    let mut r = SledNatReconciler::new(
        net.connector(),
        StaticResolver(vec![zone_ip(1), zone_ip(2)]),
    );

    let start = Instant::now();
    let config = vec![ntp];
    let reconcile = r.reconcile(&config, ActivationReason::PeriodicTimer);
    tokio::pin!(reconcile);
    // switch0 is programmed at once even though switch1 hangs.
    tokio::select! {
        _ = &mut reconcile => panic!("finished while switch1 hangs"),
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    assert_eq!(net.nat(zone_ip(1)), vec![ntp.to_dpd()]);
    let status = reconcile.await;
    // Two sequential requests to the hanging dpd, each timing out.
    assert_eq!(start.elapsed(), 2 * DEFAULT_REQUEST_TIMEOUT);
    let SledNatStatus::Reconciled { switches } = status else {
        panic!("{status:?}")
    };
    assert_eq!(switches[&zone_ip(1)].outcome, complete(0, 0, 1));
    assert_eq!(switches[&zone_ip(2)].slot, None);
    assert!(matches!(
        switches[&zone_ip(2)].outcome,
        NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
            error: ClientError::Timeout { .. }
        }
    ));
}

/// The zone-start NAT issue's scenario end to end: the task recovers from a missing
/// switch, a dpd restart (table emptied), and a replaced scrimlet.
#[tokio::test(start_paused = true)]
async fn as_a_task_it_repairs_what_legacy_cannot() {
    let net = FakeNet::new();
    net.add_switch_zone(zone_ip(1), 0);
    net.add_switch_zone(zone_ip(2), 1);
    let resolver = SharedResolver(Arc::new(Mutex::new(Ok(vec![zone_ip(1)]))));
    let ntp = entry([198, 51, 100, 2], 0, 16383, 1);
    let (_config_tx, config_rx) = watch::channel(vec![ntp]);
    let (status_tx, status_rx) = watch::channel(TaskStatus::NotYetRun);
    let task = tokio::spawn(run_reconciler_task(
        SledNatReconciler::new(net.connector(), resolver.clone()),
        config_rx,
        None,
        DEFAULT_PERIOD,
        status_tx,
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(net.nat(zone_ip(1)), vec![ntp.to_dpd()]);
    assert!(net.nat(zone_ip(2)).is_empty());

    // madrid: switch1 shows up in DNS later; the next periodic
    // activation programs it.
    *resolver.0.lock().unwrap() = Ok(vec![zone_ip(1), zone_ip(2)]);
    tokio::time::sleep(DEFAULT_PERIOD).await;
    assert_eq!(net.nat(zone_ip(2)), vec![ntp.to_dpd()]);

    // dpd restart on switch0: table lost, restored within a period.
    net.remove_switch_zone(zone_ip(1));
    net.add_switch_zone(zone_ip(1), 0);
    tokio::time::sleep(DEFAULT_PERIOD).await;
    assert_eq!(net.nat(zone_ip(1)), vec![ntp.to_dpd()]);

    // switch1's scrimlet replaced at a new address.
    net.remove_switch_zone(zone_ip(2));
    net.add_switch_zone(zone_ip(3), 1);
    *resolver.0.lock().unwrap() = Ok(vec![zone_ip(1), zone_ip(3)]);
    tokio::time::sleep(DEFAULT_PERIOD).await;
    assert_eq!(net.nat(zone_ip(3)), vec![ntp.to_dpd()]);

    let status = status_rx.borrow().clone();
    let completion = status.last_completion().unwrap();
    assert_eq!(completion.activation_count, 4);
    let SledNatStatus::Reconciled { switches } = &completion.status else {
        panic!("{status:?}")
    };
    assert_eq!(
        switches.keys().copied().collect::<Vec<_>>(),
        vec![zone_ip(1), zone_ip(3)]
    );
    assert!(switches.values().all(|s| s.outcome.is_converged()));
    task.abort();
}

/// The status line each activation logs (and the traces show), and which
/// statuses count as failed.
#[test]
fn status_reads_per_switch_and_fails_on_any_switch_or_discovery() {
    let complete = |created, create_failures: Vec<String>| NatReconcileOutcome::Complete {
        unchanged: 1,
        removed: 0,
        remove_failures: Vec::new(),
        created,
        create_failures,
    };
    let zone = |n: u16| Ipv6Addr::new(0xfd00, 0x1122, 0x3344, n, 0, 0, 0, 2);
    let ok = SledNatStatus::Reconciled {
        switches: BTreeMap::from([
            (
                zone(101),
                SwitchNatStatus {
                    slot: Some(SwitchSlot::Switch0),
                    outcome: complete(0, Vec::new()),
                },
            ),
            (
                zone(102),
                SwitchNatStatus {
                    slot: None,
                    outcome: complete(1, Vec::new()),
                },
            ),
        ]),
    };
    assert_eq!(
        ok.to_string(),
        "switch0: unchanged 1; fd00:1122:3344:66::2: unchanged 1, created 1"
    );
    assert!(!ok.failed());
    let one_failed = SledNatStatus::Reconciled {
        switches: BTreeMap::from([(
            zone(101),
            SwitchNatStatus {
                slot: Some(SwitchSlot::Switch0),
                outcome: complete(0, vec!["503".into()]),
            },
        )]),
    };
    assert!(one_failed.failed());
    let none = SledNatStatus::Reconciled {
        switches: BTreeMap::new(),
    };
    assert_eq!(none.to_string(), "no switch zones found");
    assert!(!SledNatStatus::NoNatEntriesConfig.failed());
    assert_eq!(
        SledNatStatus::NoNatEntriesConfig.to_string(),
        "no NAT entries configured"
    );
}

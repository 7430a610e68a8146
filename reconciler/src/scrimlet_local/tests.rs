use std::{
    net::SocketAddrV6,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use serde_json::json;
use tokio::task::JoinHandle;

use super::*;
use crate::{
    dpd::MacAddr,
    task::{Completion, DEFAULT_PERIOD},
    testing::{complete, one_switch_zone, service_entry as entry, zone_ip, FakeNet, FakeResponse},
};

const NEXUS: [u8; 4] = [198, 51, 100, 1];
const NTP: [u8; 4] = [198, 51, 100, 2];
const DNS: [u8; 4] = [198, 51, 100, 3];

/// A config of these entries, each named after its kind (told by its
/// address: [`NTP`], [`DNS`], anything else is a Nexus) and position.
fn config(generation: u64, entries: Vec<NatEntry>) -> Option<SystemNetworkingConfig> {
    let service_nat = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let kind = match entry.external_ip.octets() {
                NTP => ServiceZoneKind::BoundaryNtp,
                DNS => ServiceZoneKind::ExternalDns,
                _ => ServiceZoneKind::Nexus,
            };
            ServiceZoneNat {
                zone: format!("{kind}.{i}"),
                kind,
                entry,
            }
        })
        .collect();
    Some(SystemNetworkingConfig {
        generation,
        service_nat,
    })
}

/// One zone of each kind: boundary NTP on sled 3, Nexus on 4, DNS on 5.
fn full() -> Vec<NatEntry> {
    vec![
        entry(NTP, 0, 16383, 3),
        entry(NEXUS, 0, 65535, 4),
        entry(DNS, 0, 65535, 5),
    ]
}

/// The status of a pass that reached dpd: `switch` reconciled at config
/// `generation`, with `outcome`.
fn reconciled(
    switch: SwitchSlot,
    generation: u64,
    outcome: NatReconcileOutcome,
) -> ScrimletNatStatus {
    ScrimletNatStatus::Reconciled {
        switch,
        generation,
        outcome,
    }
}

fn sorted_dpd(entries: &[NatEntry]) -> Vec<crate::dpd::Ipv4Nat> {
    let mut v: Vec<_> = entries.iter().map(NatEntry::to_dpd).collect();
    v.sort();
    v
}

/// The mutating requests made to a zone's dpd, in order.
fn mutations(net: &FakeNet, zone: Ipv6Addr) -> Vec<String> {
    net.requests(zone, DPD_PORT)
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect()
}

/// A running handle with the caller's ends of its inputs.
struct Harness {
    handle: ScrimletReconcilers,
    config: watch::Sender<Option<SystemNetworkingConfig>>,
    scrimlet: watch::Sender<ScrimletStatus>,
    driver: JoinHandle<()>,
}

impl Harness {
    fn start(
        net: &FakeNet,
        services: SwitchZoneServices,
        initial: Option<SystemNetworkingConfig>,
        scrimlet: ScrimletStatus,
    ) -> Self {
        let (config_tx, config_rx) = watch::channel(initial);
        let (scrimlet_tx, scrimlet_rx) = watch::channel(scrimlet);
        let (handle, driver) = scrimlet_reconcilers(
            net.connector(),
            services,
            config_rx,
            scrimlet_rx,
            DEFAULT_PERIOD,
        );
        Harness {
            handle,
            config: config_tx,
            scrimlet: scrimlet_tx,
            driver: tokio::spawn(driver),
        }
    }

    /// The reconcilers of a scrimlet whose switch zone is at `zone`.
    fn on_scrimlet(net: &FakeNet, zone: Ipv6Addr, initial: Option<SystemNetworkingConfig>) -> Self {
        Harness::start(
            net,
            SwitchZoneServices::UnderlayIp(zone),
            initial,
            ScrimletStatus::Scrimlet,
        )
    }

    /// The latest completed activation: its reason, its count and the
    /// status it ended with.
    fn last_activation(&self) -> (ActivationReason, u64, ScrimletNatStatus) {
        let last = self.last();
        (last.activation_reason, last.activation_count, last.status)
    }

    /// The last error of a handle still determining its switch slot after
    /// `attempts` failed attempts; panics in any other status.
    fn slot_error_after(&self, attempts: u64) -> String {
        match self.handle_status() {
            HandleStatus::DeterminingSwitchSlot {
                attempts: a,
                last_error: Some(error),
            } if a == attempts => error,
            other => panic!("{other:?}"),
        }
    }

    fn handle_status(&self) -> HandleStatus {
        self.handle.handle_status().borrow().clone()
    }

    fn nat_status(&self) -> TaskStatus<ScrimletNatStatus> {
        self.handle.nat_status().borrow().clone()
    }

    fn last(&self) -> Completion<ScrimletNatStatus> {
        self.nat_status()
            .last_completion()
            .cloned()
            .expect("the NAT task has completed an activation")
    }
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[test]
fn services_addresses() {
    let ip = zone_ip(4);
    let prod = SwitchZoneServices::UnderlayIp(ip);
    assert_eq!(prod.dpd(), SocketAddr::new(ip.into(), DPD_PORT));
    assert_eq!(prod.mgs(), SocketAddr::new(ip.into(), MGS_PORT));
    let dpd = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 40001, 0, 0));
    let mgs = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 40002, 0, 0));
    let test = SwitchZoneServices::Explicit { dpd, mgs };
    assert_eq!((test.dpd(), test.mgs()), (dpd, mgs));
}

#[test]
fn statuses_serialize_with_tags() {
    assert_eq!(
        serde_json::to_value(HandleStatus::DeterminingSwitchSlot {
            attempts: 2,
            last_error: Some("refused".into())
        })
        .unwrap(),
        json!({"state": "determining_switch_slot", "attempts": 2, "last_error": "refused"})
    );
    assert_eq!(
        serde_json::to_value(HandleStatus::Running {
            switch: SwitchSlot::Switch1
        })
        .unwrap(),
        json!({"state": "running", "switch": "switch1"})
    );
    assert_eq!(
        serde_json::to_value(ScrimletNatStatus::NoNatEntriesConfig).unwrap(),
        json!({"result": "no_nat_entries_config"})
    );
    let json = serde_json::to_value(ScrimletNatStatus::Reconciled {
        switch: SwitchSlot::Switch0,
        generation: 3,
        outcome: complete(1, 0, 2),
    })
    .unwrap();
    assert_eq!(json["result"], json!("reconciled"));
    assert_eq!(json["switch"], json!("switch0"));
    assert_eq!(json["generation"], json!(3));
    assert_eq!(json["outcome"]["result"], json!("complete"));
    assert_eq!(json["outcome"]["created"], json!(2));
    let cfg = config(7, full()).unwrap();
    assert_eq!(
        serde_json::to_value(&cfg).unwrap()["service_nat"][0]["kind"],
        json!("boundary_ntp")
    );
    let round: SystemNetworkingConfig =
        serde_json::from_value(serde_json::to_value(&cfg).unwrap()).unwrap();
    assert_eq!(round, cfg);
}

/// The sled boots before its sidecar: MGS refuses connections, then
/// answers from t = 12 s. Attempts run at 0, 5, 10 and 15 s; the NAT task
/// does not run (nor touch dpd) until the slot is known.
#[tokio::test(start_paused = true)]
async fn slot_is_learned_once_mgs_answers() {
    let (net, zone) = one_switch_zone(0);
    // An injected MGS address (the test mode of the scrimlet-reconcilers PR's review), not
    // on the network yet.
    let mgs = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 40002);
    let services = SwitchZoneServices::Explicit {
        dpd: SocketAddr::new(zone.into(), DPD_PORT),
        mgs,
    };
    let h = Harness::start(&net, services, config(1, full()), ScrimletStatus::Scrimlet);
    assert_eq!(
        h.handle_status(),
        HandleStatus::DeterminingSwitchSlot {
            attempts: 0,
            last_error: None
        }
    );

    sleep_ms(1).await;
    let error = h.slot_error_after(1);
    assert!(error.contains("[::1]:40002"), "{error}");
    assert!(error.contains("refused"), "{error}");
    assert_eq!(h.nat_status(), TaskStatus::NotYetRun);

    // Just before the third attempt, two have failed; just after, three.
    sleep_ms(9_998).await;
    assert!(matches!(
        h.handle_status(),
        HandleStatus::DeterminingSwitchSlot { attempts: 2, .. }
    ));
    sleep_ms(2).await;
    assert!(matches!(
        h.handle_status(),
        HandleStatus::DeterminingSwitchSlot { attempts: 3, .. }
    ));

    // The sidecar comes up at 12 s, answering "switch 1".
    sleep_ms(2_000).await;
    let asked = Arc::new(AtomicU64::new(0));
    let counter = asked.clone();
    net.set_custom(mgs, move |method, path, _| {
        assert_eq!((method, path), ("GET", "/local/switch-id"));
        counter.fetch_add(1, Ordering::SeqCst);
        FakeResponse::json(200, json!({"type": "switch", "slot": 1}))
    });
    sleep_ms(2_999).await;
    assert!(matches!(
        h.handle_status(),
        HandleStatus::DeterminingSwitchSlot { attempts: 3, .. }
    ));
    assert!(net.requests(zone, DPD_PORT).is_empty());

    sleep_ms(2).await;
    assert_eq!(
        h.handle_status(),
        HandleStatus::Running {
            switch: SwitchSlot::Switch1
        }
    );
    assert_eq!(net.nat(zone), sorted_dpd(&full()));
    assert_eq!(
        h.last().status,
        reconciled(SwitchSlot::Switch1, 1, complete(0, 0, 3))
    );
    assert_eq!(h.last().activation_reason, ActivationReason::Startup);

    // Learned once: periodic activations do not ask MGS again.
    tokio::time::sleep(3 * DEFAULT_PERIOD).await;
    assert_eq!(h.last().activation_count, 4);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    h.driver.abort();
}

/// An MGS that answers, but names no switch, is a misconfiguration that
/// is reported and retried, not a slot.
#[tokio::test(start_paused = true)]
async fn an_mgs_naming_no_switch_is_retried() {
    let (net, zone) = one_switch_zone(0);
    net.fail(
        zone,
        MGS_PORT,
        "GET",
        "/local/switch-id",
        Some(FakeResponse::json(200, json!({"type": "sled", "slot": 0}))),
    );
    let h = Harness::on_scrimlet(&net, zone, config(1, vec![]));
    sleep_ms(5_001).await;
    let error = h.slot_error_after(2);
    assert!(error.contains("names no switch slot"), "{error}");
    net.clear_failures();
    sleep_ms(5_000).await;
    assert_eq!(
        h.handle_status(),
        HandleStatus::Running {
            switch: SwitchSlot::Switch0
        }
    );
    assert_eq!(net.requests(zone, MGS_PORT).len(), 3);
    h.driver.abort();
}

/// Startup programs the whole rack-wide config onto this scrimlet's own
/// dpd, and only there: the other switch is the other scrimlet's job.
#[tokio::test(start_paused = true)]
async fn startup_programs_own_switch_only() {
    let net = FakeNet::new();
    let own = zone_ip(1);
    let other = zone_ip(2);
    net.add_switch_zone(own, 0);
    net.add_switch_zone(other, 1);
    let desired = vec![
        entry(NTP, 0, 16383, 3),
        entry(NEXUS, 0, 65535, 4),
        entry(DNS, 0, 65535, 5),
    ];
    let h = Harness::on_scrimlet(&net, own, config(1, desired.clone()));
    sleep_ms(1_000).await;

    assert_eq!(net.nat(own), sorted_dpd(&desired));
    assert!(net.nat(other).is_empty());
    assert!(net.requests(other, DPD_PORT).is_empty());
    assert!(net.requests(other, MGS_PORT).is_empty());
    assert_eq!(
        h.nat_status(),
        TaskStatus::Idle {
            last_completion: Completion {
                activation_reason: ActivationReason::Startup,
                activation_count: 1,
                ran_for: Duration::ZERO,
                status: reconciled(SwitchSlot::Switch0, 1, complete(0, 0, 3)),
            }
        }
    );
    h.driver.abort();
}

/// A stale entry (same address and range, wrong MAC) is removed before
/// its replacement is created; a services entry absent from the config
/// is removed; an instance's entry (another VNI) is never touched.
#[tokio::test(start_paused = true)]
async fn stale_entries_are_replaced_remove_before_create() {
    let (net, zone) = one_switch_zone(1);
    let ntp = entry(NTP, 0, 16383, 1);
    let nexus = entry(NEXUS, 0, 65535, 2);
    let mut stale_ntp = ntp;
    stale_ntp.target.inner_mac = MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0, 0x99]);
    let leftover_dns = entry(DNS, 0, 65535, 7);
    let dns = entry(DNS, 0, 65535, 5);
    let mut instance = entry([203, 0, 113, 9], 0, 65535, 8);
    instance.target.vni = 4242;
    for e in [stale_ntp, nexus, leftover_dns, instance] {
        net.insert_nat(zone, e.to_dpd());
    }

    let h = Harness::on_scrimlet(&net, zone, config(4, vec![ntp, nexus, dns]));
    sleep_ms(1_000).await;

    assert_eq!(
        mutations(&net, zone),
        vec![
            "DELETE /nat/ipv4/198.51.100.2/0",
            "DELETE /nat/ipv4/198.51.100.3/0",
            "PUT /nat/ipv4/198.51.100.2/0/16383",
            "PUT /nat/ipv4/198.51.100.3/0/65535",
        ]
    );
    assert_eq!(net.nat(zone), sorted_dpd(&[ntp, nexus, dns, instance]));
    assert_eq!(
        h.last().status,
        reconciled(SwitchSlot::Switch1, 4, complete(1, 2, 2))
    );
    h.driver.abort();
}

/// A new generation from the bootstore activates the task at once, well
/// before the periodic timer would.
#[tokio::test(start_paused = true)]
async fn new_generation_activates_with_config_changed() {
    let (net, zone) = one_switch_zone(0);
    let [ntp, nexus, dns] = full().try_into().unwrap();
    let h = Harness::on_scrimlet(&net, zone, config(1, vec![ntp, nexus, dns]));
    sleep_ms(1_000).await;
    assert_eq!(h.last().activation_count, 1);

    // A second Nexus is added, and NTP moves to sled 1.
    let nexus2 = entry([198, 51, 100, 4], 0, 65535, 2);
    let moved_ntp = entry(NTP, 0, 16383, 1);
    h.config
        .send_replace(config(2, vec![moved_ntp, nexus, dns, nexus2]));
    sleep_ms(1_000).await;
    assert_eq!(
        h.last_activation(),
        (
            ActivationReason::SystemNetworkingConfigChanged,
            2,
            reconciled(SwitchSlot::Switch0, 2, complete(2, 1, 2))
        )
    );
    assert_eq!(net.nat(zone), sorted_dpd(&[moved_ntp, nexus, dns, nexus2]));
    h.driver.abort();
}

/// What omicron's `ServiceZoneNatEntries` refuses, this refuses: a
/// missing kind, overlapping entries, one zone twice.
#[test]
fn validate_refuses_what_omicron_refuses() {
    assert_eq!(config(1, full()).unwrap().validate(), Ok(()));
    // Two NTP zones sharing the SNAT address with disjoint ranges are
    // fine (a real rack has exactly that).
    let mut two_ntp = full();
    two_ntp.push(entry(NTP, 16384, 32767, 6));
    assert_eq!(config(1, two_ntp).unwrap().validate(), Ok(()));

    let no_nexus = config(2, vec![entry(NTP, 0, 16383, 3), entry(DNS, 0, 65535, 5)]);
    let err = no_nexus.unwrap().validate().unwrap_err();
    assert_eq!(
        err,
        InvalidSystemNetworkingConfig::MissingZoneKinds {
            missing: vec![ServiceZoneKind::Nexus]
        }
    );
    assert_eq!(err.to_string(), "no NAT entry for any zone of kind nexus");
    let empty = config(2, vec![]).unwrap().validate().unwrap_err();
    assert_eq!(
        empty,
        InvalidSystemNetworkingConfig::MissingZoneKinds {
            missing: ServiceZoneKind::ALL.to_vec()
        }
    );

    let mut overlap = full();
    overlap.push(entry(NTP, 16000, 20000, 6));
    let err = config(3, overlap).unwrap().validate().unwrap_err();
    assert_eq!(
        err,
        InvalidSystemNetworkingConfig::OverlappingEntries {
            external_ip: NTP.into(),
            zone: "boundary-ntp.0".into(),
            ports: (0, 16383),
            other_zone: "boundary-ntp.3".into(),
            other_ports: (16000, 20000),
        }
    );
    assert!(
        err.to_string().contains("198.51.100.2 ports 0-16383"),
        "{err}"
    );

    let mut twice = config(4, full()).unwrap();
    let mut again = twice.service_nat[1].clone();
    again.entry = entry([198, 51, 100, 9], 0, 65535, 4);
    twice.service_nat.push(again);
    assert_eq!(
        twice.validate(),
        Err(InvalidSystemNetworkingConfig::DuplicateZone {
            zone: "nexus.1".into()
        })
    );
}

/// An invalid config is refused with a status and changes nothing: the
/// entries stay as they are — never "remove everything the config
/// lacks" — and dpd is not even asked. A valid generation after it is
/// applied at once.
#[tokio::test(start_paused = true)]
async fn an_invalid_config_is_refused_and_changes_nothing() {
    let (net, zone) = one_switch_zone(0);
    let h = Harness::on_scrimlet(&net, zone, config(1, full()));
    sleep_ms(1_000).await;
    assert_eq!(net.nat(zone), sorted_dpd(&full()));
    net.clear_log();

    // The only Nexus removed: a config that would cut the rack off.
    let [ntp, _nexus, dns] = full().try_into().unwrap();
    h.config.send_replace(config(2, vec![ntp, dns]));
    sleep_ms(1_000).await;
    let last = h.last();
    assert_eq!(
        last.activation_reason,
        ActivationReason::SystemNetworkingConfigChanged
    );
    assert_eq!(
        last.status,
        ScrimletNatStatus::InvalidSystemNetworkingConfig {
            switch: SwitchSlot::Switch0,
            generation: 2,
            error: InvalidSystemNetworkingConfig::MissingZoneKinds {
                missing: vec![ServiceZoneKind::Nexus]
            },
        }
    );
    assert!(
        last.status.to_string().contains("INVALID, nothing changed"),
        "{}",
        last.status
    );
    // The periodic activations refuse it again, and still touch nothing.
    tokio::time::sleep(2 * DEFAULT_PERIOD).await;
    assert_eq!(h.last().activation_count, 4);
    assert!(matches!(
        h.last().status,
        ScrimletNatStatus::InvalidSystemNetworkingConfig { .. }
    ));
    assert_eq!(net.nat(zone), sorted_dpd(&full()));
    assert!(net.requests(zone, DPD_PORT).is_empty());

    // Overlapping entries: refused the same way.
    let mut overlap = full();
    overlap.push(entry(DNS, 53, 53, 6));
    h.config.send_replace(config(3, overlap));
    sleep_ms(1_000).await;
    assert!(matches!(
        h.last().status,
        ScrimletNatStatus::InvalidSystemNetworkingConfig {
            generation: 3,
            error: InvalidSystemNetworkingConfig::OverlappingEntries { .. },
            ..
        }
    ));
    assert!(net.requests(zone, DPD_PORT).is_empty());

    // A valid config again (Nexus moved to sled 2): applied at once.
    let moved = entry(NEXUS, 0, 65535, 2);
    h.config.send_replace(config(4, vec![ntp, moved, dns]));
    sleep_ms(1_000).await;
    assert_eq!(
        h.last().status,
        reconciled(SwitchSlot::Switch0, 4, complete(2, 1, 1))
    );
    assert_eq!(net.nat(zone), sorted_dpd(&[ntp, moved, dns]));
    h.driver.abort();
}

/// The sidecar goes away: the task goes inert and leaves dpd alone (no
/// periodic activations). When it comes back its dpd has an empty table;
/// the activation that ends the inert state restores it at once.
#[tokio::test(start_paused = true)]
async fn inert_while_not_a_scrimlet_then_restores_emptied_table() {
    let (net, zone) = one_switch_zone(0);
    let desired = full();
    let h = Harness::on_scrimlet(&net, zone, config(1, desired.clone()));
    sleep_ms(1_000).await;
    assert_eq!(net.nat(zone), sorted_dpd(&desired));
    let first = h.last();

    h.scrimlet.send_replace(ScrimletStatus::NotScrimlet);
    net.remove_switch_zone(zone);
    sleep_ms(1).await;
    assert_eq!(
        h.nat_status(),
        TaskStatus::Inert {
            reason: InertReason::NoLongerAScrimlet,
            last_completion: Some(first.clone()),
        }
    );
    // The zone comes back (its dpd restarted, table empty) before the
    // sled notices the sidecar; while inert, nothing runs, however long.
    net.add_switch_zone(zone, 0);
    net.clear_log();
    tokio::time::sleep(3 * DEFAULT_PERIOD).await;
    assert!(net.requests(zone, DPD_PORT).is_empty());
    assert!(net.nat(zone).is_empty());
    assert!(matches!(h.nat_status(), TaskStatus::Inert { .. }));

    h.scrimlet.send_replace(ScrimletStatus::Scrimlet);
    sleep_ms(1).await;
    assert_eq!(
        h.last_activation(),
        (
            ActivationReason::ScrimletStatusChanged,
            2,
            reconciled(SwitchSlot::Switch0, 1, complete(0, 0, 3))
        )
    );
    assert_eq!(net.nat(zone), sorted_dpd(&desired));
    // The slot was learned once, at the start, not again on resume.
    assert!(net.requests(zone, MGS_PORT).is_empty());
    h.driver.abort();
}

/// Until the bootstore delivers a config there is nothing to reconcile
/// against: no dpd call at all. The config's arrival activates the task.
#[tokio::test(start_paused = true)]
async fn no_config_reports_no_nat_entries_config() {
    let (net, zone) = one_switch_zone(0);
    // A services entry no config has vouched for yet: must survive.
    let unknown = entry(DNS, 0, 65535, 9);
    net.insert_nat(zone, unknown.to_dpd());
    let h = Harness::on_scrimlet(&net, zone, None);
    sleep_ms(1_000).await;
    assert_eq!(h.last().status, ScrimletNatStatus::NoNatEntriesConfig);
    assert_eq!(h.last().activation_reason, ActivationReason::Startup);
    assert!(net.requests(zone, DPD_PORT).is_empty());
    assert_eq!(net.nat(zone), vec![unknown.to_dpd()]);

    h.config.send_replace(config(1, full()));
    sleep_ms(1_000).await;
    assert_eq!(
        h.last().activation_reason,
        ActivationReason::SystemNetworkingConfigChanged
    );
    assert_eq!(
        h.last().status,
        reconciled(SwitchSlot::Switch0, 1, complete(0, 1, 3))
    );
    assert_eq!(net.nat(zone), sorted_dpd(&full()));
    h.driver.abort();
}

/// A sled that is not a scrimlet has no switch zone to ask: the handle
/// asks MGS nothing until it becomes one, then learns its slot at once.
#[tokio::test(start_paused = true)]
async fn slot_is_not_asked_for_until_the_sled_is_a_scrimlet() {
    let (net, zone) = one_switch_zone(1);
    let h = Harness::start(
        &net,
        SwitchZoneServices::UnderlayIp(zone),
        config(1, full()),
        ScrimletStatus::NotScrimlet,
    );
    tokio::time::sleep(10 * MGS_RETRY_INTERVAL).await;
    assert_eq!(h.handle_status(), HandleStatus::NotAScrimlet);
    assert!(net.requests(zone, MGS_PORT).is_empty());
    assert_eq!(h.nat_status(), TaskStatus::NotYetRun);

    h.scrimlet.send_replace(ScrimletStatus::Scrimlet);
    sleep_ms(1).await;
    assert_eq!(
        h.handle_status(),
        HandleStatus::Running {
            switch: SwitchSlot::Switch1
        }
    );
    assert_eq!(net.requests(zone, MGS_PORT).len(), 1);
    assert_eq!(net.nat(zone), sorted_dpd(&full()));

    // Closing the scrimlet input while waiting ends the future too.
    let h = Harness::start(
        &net,
        SwitchZoneServices::UnderlayIp(zone),
        None,
        ScrimletStatus::NotScrimlet,
    );
    sleep_ms(1).await;
    let Harness {
        handle,
        config: _config,
        scrimlet,
        driver,
    } = h;
    drop(scrimlet);
    sleep_ms(1).await;
    assert!(driver.is_finished());
    assert_eq!(
        *handle.nat_status().borrow(),
        TaskStatus::Inert {
            reason: InertReason::TaskExitedUnexpectedly,
            last_completion: None,
        }
    );
}

/// Closing an input ends the future, whether the slot is known yet or not.
#[tokio::test(start_paused = true)]
async fn closed_inputs_end_the_future() {
    let net = FakeNet::new();
    let zone = zone_ip(1);

    // Still determining the slot (no switch zone on the network).
    let h = Harness::on_scrimlet(&net, zone, None);
    sleep_ms(1).await;
    let Harness {
        handle,
        config,
        scrimlet,
        driver,
    } = h;
    drop(scrimlet);
    tokio::time::sleep(MGS_RETRY_INTERVAL).await;
    assert!(driver.is_finished());
    assert_eq!(
        *handle.nat_status().borrow(),
        TaskStatus::Inert {
            reason: InertReason::TaskExitedUnexpectedly,
            last_completion: None,
        }
    );
    drop(config);

    // Running.
    net.add_switch_zone(zone, 0);
    let h = Harness::on_scrimlet(&net, zone, None);
    sleep_ms(1).await;
    assert_eq!(h.last().activation_count, 1);
    let Harness {
        handle,
        config,
        scrimlet: _scrimlet,
        driver,
    } = h;
    drop(config);
    sleep_ms(1).await;
    assert!(driver.is_finished());
    assert!(matches!(
        *handle.nat_status().borrow(),
        TaskStatus::Inert {
            reason: InertReason::TaskExitedUnexpectedly,
            last_completion: Some(_),
        }
    ));
}

/// The handle's log lines, and which task statuses count as failed: a
/// refused config is not (it changed nothing on purpose).
#[test]
fn handle_lines_and_failed_statuses() {
    assert_eq!(
        HandleStatus::NotAScrimlet.to_string(),
        "not a scrimlet (no sidecar); waiting to become one"
    );
    assert_eq!(
        HandleStatus::DeterminingSwitchSlot {
            attempts: 0,
            last_error: None
        }
        .to_string(),
        "asking own MGS which switch this is"
    );
    assert_eq!(
        HandleStatus::DeterminingSwitchSlot {
            attempts: 2,
            last_error: Some("refused".into())
        }
        .to_string(),
        "own MGS not answering, retrying every 5s: refused"
    );
    assert_eq!(
        HandleStatus::Running {
            switch: SwitchSlot::Switch1
        }
        .to_string(),
        "this scrimlet manages switch1; reconcilers running"
    );
    let reconciled = |create_failures: Vec<String>| ScrimletNatStatus::Reconciled {
        switch: SwitchSlot::Switch0,
        generation: 1,
        outcome: crate::nat::NatReconcileOutcome::Complete {
            unchanged: 3,
            removed: 0,
            remove_failures: Vec::new(),
            created: 0,
            create_failures,
        },
    };
    assert!(!reconciled(Vec::new()).failed());
    assert!(reconciled(vec!["503".into()]).failed());
    assert!(!ScrimletNatStatus::NoNatEntriesConfig.failed());
}

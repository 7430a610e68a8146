use std::{collections::BTreeMap, net::Ipv6Addr};

use racksim_mutants::{select, Mutant};

use super::{compare_only_internal_ip, stop_at_first_failure};

use crate::{
    discovery::DiscoveryError,
    dpd::MacAddr,
    http::ClientError,
    nat::{NatEntry, NatReconcileOutcome},
    sled_task::{SledNatStatus, SwitchNatStatus},
    task::ActivationStatus,
    testing::service_entry,
};

/// Boundary NTP's entry, its MAC ending in `mac_last`.
fn entry(mac_last: u8) -> NatEntry {
    let mut e = service_entry([198, 51, 100, 1], 0, 16383, 1);
    e.target.inner_mac = MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0, mac_last]);
    e
}

#[test]
fn internal_ip_only_planner_accepts_a_stale_mac_the_real_one_replaces() {
    let (want, stale) = (entry(1), entry(0xfe));
    let real = crate::nat::plan(&[want], &[stale]);
    assert_eq!(real.to_remove, vec![stale]);
    assert_eq!(real.to_create, vec![want]);
    let mutant = compare_only_internal_ip::plan(&[want], &[stale]);
    assert!(mutant.is_noop());
    assert_eq!(mutant.unchanged, vec![stale]);
}

#[test]
fn the_attribute_replaces_the_function_only_while_its_mutant_is_selected() {
    let (want, stale) = (entry(1), entry(0xfe));
    {
        let _other = select(Some(Mutant::OwnByIp)).unwrap();
        assert!(!crate::nat::plan(&[want], &[stale]).is_noop());
    }
    {
        let _g = select(Some(Mutant::CompareOnlyInternalIp)).unwrap();
        assert!(crate::nat::plan(&[want], &[stale]).is_noop());
    }
    assert!(!crate::nat::plan(&[want], &[stale]).is_noop());
}

fn reconciled(outcome: NatReconcileOutcome) -> SledNatStatus {
    let address: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    SledNatStatus::Reconciled {
        switches: BTreeMap::from([(
            address,
            SwitchNatStatus {
                slot: None,
                outcome,
            },
        )]),
    }
}

#[test]
fn stop_at_first_failure_stops_after_a_failed_status_only() {
    use stop_at_first_failure::carries_on_after;
    let complete = |create_failures: Vec<String>| NatReconcileOutcome::Complete {
        unchanged: 3,
        removed: 0,
        remove_failures: vec![],
        created: 0,
        create_failures,
    };
    let failed = [
        SledNatStatus::DiscoveryFailed {
            error: DiscoveryError("internal DNS unreachable".into()),
        },
        reconciled(complete(vec!["creating x: 500".into()])),
        reconciled(NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
            error: ClientError::Timeout {
                addr: "[fd00:1122:3344:101::2]:12224".into(),
                after_ms: 1000,
            },
        }),
    ];
    for status in &failed {
        assert!(status.failed(), "{status}");
        assert!(!carries_on_after(status), "{status}");
    }
    let fine = [
        SledNatStatus::NoNatEntriesConfig,
        SledNatStatus::Reconciled {
            switches: BTreeMap::new(),
        },
        reconciled(complete(vec![])),
    ];
    for status in &fine {
        assert!(!status.failed(), "{status}");
        assert!(carries_on_after(status), "{status}");
    }
}

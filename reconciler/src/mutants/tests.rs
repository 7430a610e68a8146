use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::{
    dpd::{MacAddr, NatTarget},
    nat::NatEntry,
};

#[test]
fn selection_is_per_thread_and_restored() {
    assert!(!active(Mutant::NoPeriodicTimer));
    {
        let _g = select(Some(Mutant::NoPeriodicTimer)).unwrap();
        assert!(active(Mutant::NoPeriodicTimer));
        assert!(!active(Mutant::FirstSwitchOnly));
        // Another thread (another run) does not see it.
        std::thread::spawn(|| assert!(!active(Mutant::NoPeriodicTimer)))
            .join()
            .unwrap();
    }
    assert!(!active(Mutant::NoPeriodicTimer));
}

#[test]
fn names_round_trip() {
    for m in Mutant::ALL {
        assert_eq!(m.name().parse::<Mutant>(), Ok(m));
    }
    assert!("no-such"
        .parse::<Mutant>()
        .unwrap_err()
        .contains("expected one of"));
}

fn entry(mac_last: u8) -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::new(198, 51, 100, 1),
        first_port: 0,
        last_port: 16383,
        target: NatTarget {
            internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1),
            inner_mac: MacAddr {
                a: [0xa8, 0x40, 0x25, 0xff, 0, mac_last],
            },
            vni: crate::SERVICES_VNI,
        },
    }
}

#[test]
fn internal_ip_only_planner_accepts_a_stale_mac_the_real_one_replaces() {
    let (want, stale) = (entry(1), entry(0xfe));
    let real = crate::nat::plan(&[want], &[stale]);
    assert_eq!(real.to_remove, vec![stale]);
    assert_eq!(real.to_create, vec![want]);
    let mutant = plan_comparing_internal_ip(&[want], &[stale]);
    assert!(mutant.is_noop());
    assert_eq!(mutant.unchanged, vec![stale]);
}

#[test]
fn stop_after_only_with_the_mutant_and_a_failure() {
    assert!(!stops_after(&"create failed: 500"));
    let _g = select(Some(Mutant::StopAtFirstFailure)).unwrap();
    assert!(stops_after(&"switch0: create failed: 500"));
    assert!(stops_after(&"cannot read NAT entries: timed out"));
    assert!(!stops_after(&"switch0: unchanged 3"));
}

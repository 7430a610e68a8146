use crate::instances::{DpdNotify, NatChangeset, NatEnsure, StartImpl};

use super::EraChoices;
use crate::era::{Era, NexusServiceNat, PeriodicTask, ServiceNatEra};

fn today(start: StartImpl) -> Era {
    Era::of(ServiceNatEra::Target, start)
}

#[test]
fn choices_parse_and_print_in_one_order() {
    let c = EraChoices::parse("dpd-notify=fatal+nat-ensure=matches-removed").unwrap();
    assert_eq!(c.nat_ensure, Some(NatEnsure::MatchesRemoved));
    assert_eq!(c.dpd_notify, Some(DpdNotify::Fatal));
    // Printed in the table's order, whatever order they were written in,
    // so one strategy has one name.
    assert_eq!(
        c.to_string(),
        "+nat-ensure=matches-removed+dpd-notify=fatal"
    );
    assert_eq!(EraChoices::parse(&c.to_string()[1..]).unwrap(), c);
    assert!(!c.is_empty());
    assert!(EraChoices::default().is_empty());
    assert_eq!(EraChoices::default().to_string(), "");
}

#[test]
fn bad_choices_are_refused_with_what_is_known() {
    let e = EraChoices::parse("nat-ensur=live-only").unwrap_err();
    assert!(
        e.contains("unknown mechanism \"nat-ensur\"") && e.contains("nat-ensure"),
        "{e}"
    );
    let e = EraChoices::parse("nat-ensure=sometimes").unwrap_err();
    assert!(e.contains("matches-removed or live-only"), "{e}");
    let e = EraChoices::parse("nat-ensure").unwrap_err();
    assert!(e.contains("MECHANISM=ERA"), "{e}");
    let e = EraChoices::parse("dpd-notify=fatal+dpd-notify=logged").unwrap_err();
    assert!(e.contains("chosen twice"), "{e}");
}

#[test]
fn apply_changes_only_what_is_chosen() {
    let preset = today(StartImpl::Saga);
    let c = EraChoices::parse("nexus-v2p=off+nat-ensure=matches-removed").unwrap();
    let era = c.apply(preset);
    assert_eq!(era.nexus_v2p, PeriodicTask::Off);
    assert_eq!(era.nat_ensure, NatEnsure::MatchesRemoved);
    assert_eq!(
        Era {
            nexus_v2p: preset.nexus_v2p,
            nat_ensure: preset.nat_ensure,
            ..era
        },
        preset
    );
    // The era names the code before the fix it chose.
    assert!(
        era.to_string()
            .contains("NAT ensure matches-removed (before omicron #4610)"),
        "{era}"
    );
    assert!(!preset.to_string().contains("NAT ensure"), "{preset}");
}

#[test]
fn choices_no_run_could_tell_apart_are_refused() {
    let saga = today(StartImpl::Saga);
    let check = |text: &str, preset: Era, start: StartImpl, instances: bool| {
        EraChoices::parse(text)
            .unwrap()
            .check(preset, start, instances)
    };
    assert!(check("nat-ensure=matches-removed", saga, StartImpl::Saga, true).is_ok());
    let e = check("nat-ensure=live-only", saga, StartImpl::Saga, true).unwrap_err();
    assert!(e.contains("already that era"), "{e}");
    let e = check("dpd-notify=fatal", saga, StartImpl::Saga, false).unwrap_err();
    assert!(e.contains("need a run with instances"), "{e}");
    let inline = today(StartImpl::Inline);
    let e = check(
        "nat-ensure=matches-removed",
        inline,
        StartImpl::Inline,
        true,
    )
    .unwrap_err();
    assert!(e.contains("inline pushes NAT itself"), "{e}");
    let legacy = Era::of(ServiceNatEra::Legacy, StartImpl::Saga);
    assert_eq!(legacy.nexus_service_nat, NexusServiceNat::InventoryTracker);
    let e = check("dpd-nat-rpw=off", legacy, StartImpl::Saga, false).unwrap_err();
    assert!(e.contains("needs dpd-nat-rpw=on"), "{e}");
    assert!(check("nexus-service-nat=off", legacy, StartImpl::Saga, false).is_ok());
    let e = check("dpd-nat-rpw=off", saga, StartImpl::Saga, false).unwrap_err();
    assert!(e.contains("nobody writes rows"), "{e}");
}

#[test]
fn the_changeset_order_is_a_mechanism_of_dpd_s_pull() {
    let c = EraChoices::parse("nat-changeset=added-order").unwrap();
    let saga = today(StartImpl::Saga);
    let era = c.apply(saga);
    assert_eq!(era.nat_changeset, NatChangeset::AddedOrder);
    assert!(
        era.to_string()
            .contains("NAT changeset added-order (before omicron #5036)"),
        "{era}"
    );
    assert!(c.check(saga, StartImpl::Saga, true).is_ok());
    // Service-zone rows are pulled too: the tracker's era needs no instances.
    let legacy = Era::of(ServiceNatEra::Legacy, StartImpl::Saga);
    assert!(c.check(legacy, StartImpl::Saga, false).is_ok());
    let inline = today(StartImpl::Inline);
    let e = c.check(inline, StartImpl::Inline, true).unwrap_err();
    assert!(e.contains("needs dpd-nat-rpw=on"), "{e}");
}

/// Every era the table writes parses as its mechanism's type and prints
/// back as written, and the error for an unknown one lists them.
#[test]
fn every_era_of_the_table_parses_and_prints_as_written() {
    for (mechanism, eras) in super::ERAS {
        for era in *eras {
            let mut c = EraChoices::default();
            c.set(mechanism, era)
                .unwrap_or_else(|e| panic!("{mechanism}={era}: {e}"));
            assert_eq!(c.to_string(), format!("+{mechanism}={era}"));
        }
        let e = EraChoices::default().set(mechanism, "bogus").unwrap_err();
        assert!(e.contains(&eras.join(" or ")), "{e}");
    }
    assert_eq!(super::MECHANISMS.len(), super::ERAS.len());
}

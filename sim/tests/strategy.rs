//! The strategy registry: names, handles, and what each shipped strategy
//! says of its era and parts.

use racksim_reconciler::nat::NatEntry;

use racksim_sim::era::ServiceNatEra;
use racksim_sim::strategy::{NatStrategy, Parts, ServiceNat, SledContext, SledStrategy};

/// A strategy that is not registered: a test's own.
struct Unregistered;

impl NatStrategy for Unregistered {
    fn name(&self) -> &'static str {
        "a-test-strategy"
    }
    fn era(&self) -> ServiceNatEra {
        ServiceNatEra::Target
    }
    fn start_on_sled(&self, _: &SledContext, _: &[NatEntry]) -> Box<dyn SledStrategy> {
        Box::new(())
    }
}

#[test]
fn the_registered_strategies_parse_by_name_and_keep_their_order() {
    let names: Vec<&str> = ServiceNat::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        [
            "legacy",
            "sled-task",
            "scrimlet-local",
            "scrimlet-local-with-zone-start"
        ]
    );
    for s in ServiceNat::ALL {
        assert_eq!(s.name().parse::<ServiceNat>(), Ok(s));
        assert_eq!(s.to_string(), s.name());
    }
    let mut sorted = ServiceNat::ALL;
    sorted.reverse();
    sorted.sort();
    assert_eq!(
        sorted,
        ServiceNat::ALL,
        "reports list them in registration order"
    );
}

#[test]
fn an_unregistered_strategy_is_a_handle_but_not_a_name() {
    let mine = ServiceNat::new(&Unregistered);
    assert_eq!(mine, ServiceNat::new(&Unregistered), "compared by name");
    assert_ne!(mine, ServiceNat::SCRIMLET_LOCAL);
    assert!(
        ServiceNat::ALL.iter().all(|s| *s < mine),
        "it sorts after them"
    );
    let err = "a-test-strategy".parse::<ServiceNat>().unwrap_err();
    assert!(
        err.contains("unknown strategy") && err.contains("scrimlet-local-with-zone-start"),
        "{err}"
    );
    assert_eq!(mine.live(), None, "live mode does not know how to run it");
    assert!(!mine.blocks_zone_start(), "the default");
    assert_eq!(format!("{mine:?}"), "ServiceNat(a-test-strategy)");
}

#[test]
fn each_shipped_strategy_says_its_era_and_its_live_parts() {
    let table = ServiceNat::ALL.map(|s| {
        let p = s.live().expect("a shipped strategy runs live");
        (
            s.era(),
            s.blocks_zone_start(),
            p.scrimlet_reconcilers,
            p.sled_task,
        )
    });
    assert_eq!(
        table,
        [
            (ServiceNatEra::Legacy, true, false, false),
            (ServiceNatEra::Proposal, false, false, true),
            (ServiceNatEra::Target, false, true, false),
            (ServiceNatEra::Shipped, true, true, false),
        ]
    );
    assert_eq!(Parts::default(), Parts::NONE);
}

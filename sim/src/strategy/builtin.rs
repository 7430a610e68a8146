//! The built-in service-NAT strategies (the four `racksim list` names, not
//! the era `shipped`, which is one of them): each is racksim's reconciler parts
//! ([`Parts`]: the per-scrimlet reconcilers, the per-sled task) plus,
//! where the era has it, sled-agent's legacy zone-start path. One
//! implementation of [`NatStrategy`] serves all four; what each stands for
//! upstream is said at its `static`.

use racksim_reconciler::nat::NatEntry;

use super::{scrimlet_local, sled_task, NatStrategy, Parts, SledContext, SledStrategy};
use crate::era::ServiceNatEra;

/// A strategy made of racksim's reconciler parts and, optionally, the
/// legacy zone-start path.
pub struct Builtin {
    name: &'static str,
    era: ServiceNatEra,
    zone_start: bool,
    parts: Parts,
}

impl Builtin {
    /// No parts, no zone-start path.
    const fn new(name: &'static str, era: ServiceNatEra) -> Builtin {
        Builtin {
            name,
            era,
            zone_start: false,
            parts: Parts::NONE,
        }
    }

    /// sled-agent blocks each zone's start on the legacy path.
    const fn zone_start(mut self) -> Builtin {
        self.zone_start = true;
        self
    }

    const fn scrimlet_reconcilers(mut self) -> Builtin {
        self.parts.scrimlet_reconcilers = true;
        self
    }

    const fn sled_task(mut self) -> Builtin {
        self.parts.sled_task = true;
        self
    }
}

/// Omicron before the scrimlet reconcilers: nothing runs on the sled for
/// service NAT; sled-agent's zone-start path sets up each zone's entry
/// before the zone runs (`legacy::ensure_zone_nat`, with the bugs the
/// zone-start NAT issue describes), and the legacy era's Nexus runs its
/// service-zone NAT task beside it.
pub static LEGACY: Builtin = Builtin::new("legacy", ServiceNatEra::Legacy).zone_start();

/// The zone-start NAT issue's proposal: each sled runs one periodic task
/// that owns its own zones' entries on every switch it discovers; zones
/// start at once. It never shipped; it runs on the legacy era's control
/// plane (Nexus's service-zone NAT task beside it).
pub static SLED_TASK: Builtin = Builtin::new("sled-task", ServiceNatEra::Proposal).sled_task();

/// The scrimlet-reconcilers PR's design alone, as after omicron #9727
/// removes the zone-start path: each scrimlet reconciles its own switch
/// zone from the rack-wide config the bootstore carries; an ordinary sled
/// runs nothing; zones start at once.
pub static SCRIMLET_LOCAL: Builtin =
    Builtin::new("scrimlet-local", ServiceNatEra::Target).scrimlet_reconcilers();

/// What ships at omicron b848b6df: #10961 runs the per-scrimlet
/// reconcilers in sled-agent, but sled-agent still sets up each zone's NAT
/// in its zone-start path (`ServiceManager::opte_ports_needed`) for update
/// safety, until #9727 removes it: two writers of the same switches'
/// tables.
pub static SCRIMLET_LOCAL_WITH_ZONE_START: Builtin =
    Builtin::new("scrimlet-local-with-zone-start", ServiceNatEra::Shipped)
        .scrimlet_reconcilers()
        .zone_start();

impl NatStrategy for Builtin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn era(&self) -> ServiceNatEra {
        self.era
    }

    fn blocks_zone_start(&self) -> bool {
        self.zone_start
    }

    /// The reconcilers start with sled-agent, before any zone, as
    /// upstream's long-running task does: a zone blocked in the zone-start
    /// path does not hold them up.
    fn start_on_sled(&self, sled: &SledContext, zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        if self.parts.scrimlet_reconcilers {
            scrimlet_local::start_scrimlet_reconcilers(sled);
        }
        if self.parts.sled_task {
            return Box::new(sled_task::start(sled, zones));
        }
        Box::new(())
    }

    fn live(&self) -> Option<Parts> {
        Some(self.parts)
    }
}

//! `scrimlet-local-with-zone-start`: what ships at omicron b848b6df.
//! #10961 runs the per-scrimlet reconcilers in sled-agent, but sled-agent
//! still sets up each zone's NAT in its zone-start path
//! (`ServiceManager::opte_ports_needed`) for update safety, until #9727
//! removes it: two writers of the same switches' tables. The reconcilers
//! start with sled-agent, before any zone, as upstream's long-running task
//! does, so a zone blocked in the zone-start path does not hold them up.

use racksim_reconciler::nat::NatEntry;

use super::{scrimlet_local, LiveParts, NatStrategy, SledContext, SledStrategy};
use crate::era::Era;

/// See the [module](self).
pub struct ScrimletLocalWithZoneStart;

impl NatStrategy for ScrimletLocalWithZoneStart {
    fn name(&self) -> &'static str {
        "scrimlet-local-with-zone-start"
    }

    fn era(&self) -> Era {
        Era::Shipped
    }

    fn blocks_zone_start(&self) -> bool {
        true
    }

    fn start_on_sled(&self, sled: &SledContext, _zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        scrimlet_local::start_scrimlet_reconcilers(sled);
        Box::new(())
    }

    fn live(&self) -> Option<LiveParts> {
        Some(LiveParts {
            scrimlet_reconcilers: true,
            ..LiveParts::default()
        })
    }
}

//! `legacy`: omicron before the scrimlet reconcilers. Nothing runs on the
//! sled for service NAT; sled-agent's zone-start path sets up each zone's
//! entry before the zone runs (`legacy::ensure_zone_nat`, with the bugs the
//! zone-start NAT issue describes), and the legacy era's Nexus runs its
//! service-zone NAT task beside it.

use racksim_reconciler::nat::NatEntry;

use super::{LiveParts, NatStrategy, SledContext, SledStrategy};
use crate::era::Era;

/// See the [module](self).
pub struct Legacy;

impl NatStrategy for Legacy {
    fn name(&self) -> &'static str {
        "legacy"
    }

    fn era(&self) -> Era {
        Era::Legacy
    }

    fn blocks_zone_start(&self) -> bool {
        true
    }

    fn start_on_sled(&self, _sled: &SledContext, _zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        Box::new(())
    }

    fn live(&self) -> Option<LiveParts> {
        Some(LiveParts::default())
    }
}

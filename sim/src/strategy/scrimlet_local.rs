//! `scrimlet-local`: the scrimlet-reconcilers PR's design alone, as after
//! omicron #9727 removes the zone-start path. Each scrimlet reconciles its
//! own switch zone from the rack-wide config the bootstore carries; an
//! ordinary sled runs nothing; zones start at once.

use racksim_reconciler::{
    nat::NatEntry,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    task::DEFAULT_PERIOD,
};

use super::{LiveParts, NatStrategy, SledContext, SledStrategy};
use crate::era::Era;

/// See the [module](self).
pub struct ScrimletLocal;

impl NatStrategy for ScrimletLocal {
    fn name(&self) -> &'static str {
        "scrimlet-local"
    }

    fn era(&self) -> Era {
        Era::Target
    }

    fn start_on_sled(&self, sled: &SledContext, _zones: &[NatEntry]) -> Box<dyn SledStrategy> {
        start_scrimlet_reconcilers(sled);
        Box::new(())
    }

    fn live(&self) -> Option<LiveParts> {
        Some(LiveParts {
            scrimlet_reconcilers: true,
            ..LiveParts::default()
        })
    }
}

/// On a scrimlet, starts the per-scrimlet reconcilers of its own switch
/// zone (they follow the bootstore, not the sled's zones); on an ordinary
/// sled, nothing. Shared with `scrimlet-local-with-zone-start`.
pub(super) fn start_scrimlet_reconcilers(sled: &SledContext) {
    let Some(scrimlet) = sled.scrimlet() else {
        return;
    };
    // Its statuses are logged by the reconciler itself (`tracing`).
    let (_handle, driver) = scrimlet_reconcilers(
        sled.connector(),
        SwitchZoneServices::UnderlayIp(scrimlet.switch_zone),
        sled.bootstore(),
        scrimlet.status,
        DEFAULT_PERIOD,
    );
    sled.spawn(driver);
}

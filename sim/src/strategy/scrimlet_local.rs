//! The per-scrimlet reconcilers (the scrimlet-reconcilers PR's design): a
//! scrimlet reconciles its own switch zone from the rack-wide config the
//! bootstore carries. Strategies `scrimlet-local` and
//! `scrimlet-local-with-zone-start` run them.

use racksim_reconciler::{
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices},
    task::DEFAULT_PERIOD,
};

use super::SledContext;

/// On a scrimlet, starts the per-scrimlet reconcilers of its own switch
/// zone (they follow the bootstore, not the sled's zones); on an ordinary
/// sled, nothing.
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

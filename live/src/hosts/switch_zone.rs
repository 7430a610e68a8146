//! A switch zone of the live rack: its dpd and MGS, served by dropshot on
//! loopback, and its dpd's NAT RPW; started and stopped with the zone.

use std::{
    net::{Ipv6Addr, SocketAddr},
    sync::Arc,
};

use dropshot::HttpServer;
use racksim_fakes::{
    dpd::{DpdState, NatChange},
    mgs::MgsState,
};
use racksim_reconciler::{discovery::SwitchSlot, DPD_PORT, MGS_PORT};
use racksim_servers::{serve_dpd, serve_mgs, DpdContext, MgsContext};
use tokio::task::JoinHandle;

use super::{closed, loopback, Env, Hosts};
use crate::{net::LinkConnector, nexus::dpd_nat_rpw, trace::nat_line};

/// A switch zone: its dpd and MGS.
pub(crate) struct SwitchHost {
    pub slot: SwitchSlot,
    /// Its underlay address (what discovery names).
    pub zone: Ipv6Addr,
    pub dpd_addr: SocketAddr,
    pub mgs_addr: SocketAddr,
    pub dpd: DpdContext,
    pub mgs: MgsContext,
    pub(super) servers: Option<(HttpServer<DpdContext>, HttpServer<MgsContext>)>,
    /// dpd's instance NAT RPW, while the zone runs.
    pub(super) rpw: Option<JoinHandle<()>>,
    /// Servers being closed; a restart waits for them to let go of the
    /// ports.
    pub(super) closing: Vec<JoinHandle<()>>,
}
impl SwitchHost {
    pub fn up(&self) -> bool {
        self.servers.is_some()
    }
}
/// A live rack dropped without `stop()` (a failing test) leaves nothing
/// running: its dropshot servers shut down when dropped, and the tasks are
/// aborted here. Only aborts: a `Drop` may run while the runtime shuts
/// down, where spawning (as `stop` does, to close servers) could fail.
impl Drop for SwitchHost {
    fn drop(&mut self) {
        if let Some(rpw) = &self.rpw {
            rpw.abort();
        }
    }
}

impl Env {
    pub(super) fn new_dpd(&self, slot: SwitchSlot) -> DpdContext {
        let trace = self.shared.trace.clone();
        let name = slot.to_string();
        DpdContext::new(DpdState::new(slot.index())).with_observer(Arc::new(
            move |c: &NatChange| trace.record(&name, nat_line(c)),
        ))
    }
    pub(super) fn new_switch(&self, slot: SwitchSlot, zone: Ipv6Addr) -> SwitchHost {
        SwitchHost {
            slot,
            zone,
            dpd_addr: loopback(),
            mgs_addr: loopback(),
            dpd: self.new_dpd(slot),
            mgs: MgsContext::new(MgsState::new(slot.index())),
            servers: None,
            rpw: None,
            closing: Vec::new(),
        }
    }
}

impl Hosts {
    /// Starts the switch zone in `slot` from nothing; nothing if it runs.
    pub async fn start_switch(&mut self, env: &Env, slot: SwitchSlot) -> Result<(), String> {
        let s = self.switches.get_mut(&slot).expect("a switch of the rack");
        if s.up() {
            return Ok(());
        }
        closed(&mut s.closing, &slot.to_string()).await?;
        *s.dpd.lock() = DpdState::new(slot.index());
        s.dpd.resume();
        s.mgs.resume();
        let dpd = serve_dpd(s.dpd_addr, s.dpd.clone()).map_err(|e| format!("{slot} dpd: {e}"))?;
        let mgs = serve_mgs(s.mgs_addr, s.mgs.clone()).map_err(|e| format!("{slot} MGS: {e}"))?;
        s.dpd_addr = dpd.local_addr();
        s.mgs_addr = mgs.local_addr();
        for (port, real) in [(DPD_PORT, s.dpd_addr), (MGS_PORT, s.mgs_addr)] {
            env.shared.links.serves(&slot.to_string(), real);
            env.shared
                .links
                .maps(SocketAddr::new(s.zone.into(), port), real);
        }
        env.shared.resolver.register(slot, s.zone);
        if env.spec.switch(slot).is_some_and(|sw| sw.uplinked) {
            env.inventory.boundary_switch(slot, s.zone);
        }
        // dendrite of the instance-start networking issue's time (what the `inline` start models) had no
        // NAT RPW: Nexus pushed instance NAT to it. The era says whether
        // anything writes rows for dpd to pull (instance operations, or
        // the legacy era's service-zone NAT tracker).
        if env.shared.era.dpd_nat_rpw == racksim_nexus::era::PeriodicTask::On {
            // A started dpd's RPW is due at once, its schedule based on
            // this start (dendrite's `WorkflowServer::new`), whatever the
            // timer held from the previous incarnation.
            s.dpd.trigger().trigger();
            s.rpw = Some(tokio::spawn(dpd_nat_rpw(
                slot,
                s.dpd.clone(),
                env.nexus,
                LinkConnector {
                    from: slot.to_string(),
                    links: env.shared.links.clone(),
                },
                env.shared.period,
                env.shared.trace.clone(),
            )));
        }
        s.servers = Some((dpd, mgs));
        Ok(())
    }
    /// Stops the switch zone in `slot`: its table is gone.
    pub fn stop_switch(&mut self, slot: SwitchSlot) {
        let s = self.switches.get_mut(&slot).expect("a switch of the rack");
        if let Some(rpw) = s.rpw.take() {
            rpw.abort();
        }
        if let Some((dpd, mgs)) = s.servers.take() {
            // Requests held by a hang die with the host, so the server
            // can close.
            s.dpd.interrupt();
            s.mgs.interrupt();
            s.closing.push(tokio::spawn(async move {
                let _ = dpd.close().await;
                let _ = mgs.close().await;
            }));
            *s.dpd.lock() = DpdState::new(slot.index());
        }
    }
}

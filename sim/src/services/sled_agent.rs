//! sled-agent on the simulated network: the state machine of
//! `racksim-fakes` ([`SledAgentState`](racksim_fakes::sled_agent::SledAgentState), kept in the world so that the checks
//! can read it), each change it makes recorded in the trace with host names.
//!
//! One route is the simulation's own: `GET /timesync`, which Nexus polls to
//! learn whether time is synchronised. It stands for sled-agent's time-sync
//! endpoint, which is not part of the published subset racksim fakes, and,
//! like the rest of the simulation's control plane, is unversioned.

use std::future::Future;

use http::Method;
use racksim_fakes::{
    http::{ApiRequest, ApiResponse},
    sled_agent::SledAgentChange,
};
use racksim_reconciler::instances::{VirtualNetworkInterfaceHost, VmmState};
use serde::{Deserialize, Serialize};

use super::http::Handler;
use crate::{trace::Kind, world::World};

/// sled-agent's `GET /timesync` answer (the fields we use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSync {
    pub sync: bool,
}

/// The sled-agent API of sled `index`.
pub struct SledAgentApi {
    pub world: World,
    pub index: usize,
}

impl Handler for SledAgentApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        std::future::ready(self.handle(&req))
    }
}

impl SledAgentApi {
    fn handle(&self, req: &ApiRequest) -> ApiResponse {
        let w = &self.world;
        if req.method == Method::GET && req.segments() == ["timesync"] {
            // From this sled's own NTP zone, boundary or internal.
            return ApiResponse::json(&TimeSync {
                sync: w.lock().sleds.time_synced(self.index),
            });
        }
        let (response, change) = {
            let mut st = w.lock();
            let (response, change) = st.sleds.agents.entry(self.index).or_default().handle(req);
            if change.is_some() {
                st.version += 1;
            }
            (response, change)
        };
        if let Some(change) = change {
            self.record(&change);
        }
        response
    }

    /// A change of this sled-agent's state as a trace line.
    fn record(&self, change: &SledAgentChange) {
        let w = &self.world;
        let host = w.sled(self.index).name;
        let v2p = |op: &str, sign: char, m: &VirtualNetworkInterfaceHost| {
            w.line(
                &host,
                Kind::V2p,
                format!("sled-agent: V2P {sign} {}", fmt_v2p(w, m)),
            )
            .field("sled", &host)
            .field("op", op)
            .field("virtual_ip", m.virtual_ip)
            .field("target", w.name_of(m.physical_host_ip))
            .field("vni", m.vni)
        };
        let vmm = |instance: u32, vmm: u64, op: &str| {
            let instance = w.instance_name(instance);
            w.line(
                &host,
                Kind::Vmm,
                format!("sled-agent: VMM {vmm} of {instance} {op}"),
            )
            .field("sled", &host)
            .field("instance", instance)
            .field("vmm", vmm)
            .field("op", op)
        };
        let line = match *change {
            SledAgentChange::V2pSet(m) => v2p("add", '+', &m),
            SledAgentChange::V2pRemoved(m) => v2p("remove", '-', &m),
            SledAgentChange::VmmRegistered { instance, vmm: id } => vmm(instance, id, "registered"),
            SledAgentChange::VmmDestroyed { instance, vmm: id } => vmm(instance, id, "destroyed"),
            SledAgentChange::VmmState {
                instance,
                vmm: id,
                state,
            } => vmm(instance, id, state_name(state)),
        };
        w.record(line);
    }
}

fn state_name(state: VmmState) -> &'static str {
    match state {
        VmmState::Starting => "starting",
        VmmState::Running => "running",
        VmmState::Stopped => "stopped",
    }
}

/// `172.30.0.11 -> sled2 (vni 1001)`
fn fmt_v2p(world: &World, m: &VirtualNetworkInterfaceHost) -> String {
    format!(
        "{} -> {} (vni {})",
        m.virtual_ip,
        world.name_of(m.physical_host_ip),
        m.vni
    )
}

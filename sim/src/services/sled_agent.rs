//! sled-agent on the simulated network: the state machine of
//! `racksim-fakes` ([`SledAgentState`](racksim_fakes::sled_agent::SledAgentState), kept in the world so that the checks
//! can read it), each change it makes recorded in the trace with host names.
//!
//! One route is the simulation's own: `GET /timesync`, which Nexus polls to
//! learn whether time is synchronised. It stands for sled-agent's time-sync
//! endpoint, which is not part of the published subset racksim fakes, and,
//! like the rest of the simulation's control plane, is unversioned.
//!
//! REGISTER, RUN, stop and unregister take their time
//! ([`super::times::ServiceTimes`]), and their work is detached from the
//! connection, as upstream's are: sled-agent's dropshot server runs each
//! handler as a detached task (omicron b848b6df `sled-agent/src/server.rs`
//! takes `config.dropshot`, which `smf/sled-agent/*/config.toml` leaves
//! `default_handler_task_mode` out of, and dropshot's default is
//! `HandlerTaskMode::Detached`): a caller that times out and closes the
//! connection does not cancel it.

use std::{future::Future, rc::Rc};

use http::Method;
use racksim_fakes::{
    http::{ApiError, ApiRequest, ApiResponse},
    sled_agent::SledAgentChange,
};
use racksim_nexus::instances::{VirtualNetworkInterfaceHost, VmmState};
use serde::{Deserialize, Serialize};

use super::{http::Handler, times::Draws};
use crate::{era::RunReply, trace::Kind, world::World};

/// sled-agent's `GET /timesync` answer (the fields we use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSync {
    pub sync: bool,
}

/// The sled-agent API of sled `index`.
#[derive(Clone)]
pub struct SledAgentApi {
    pub world: World,
    pub index: usize,
    /// This boot's service times ([`super::times`]).
    draws: Rc<Draws>,
}

/// A sled-agent operation that takes its time: what a request is, by its
/// method and path segments (and, for a state change, the state asked
/// for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `PUT /vmms/{propolis_id}`.
    Register,
    /// `PUT /vmms/{propolis_id}/state` to `running`.
    Run,
    /// The same to `stopped`.
    Stop,
    /// `DELETE /vmms/{propolis_id}`.
    Unregister,
}

/// Which timed [`Operation`] `req` is, if any: every other request (V2P,
/// reads, `/timesync`) is answered at once. It reads the route and, for a
/// state change, only the body's `state`.
pub fn operation(req: &ApiRequest) -> Option<Operation> {
    let segs = req.segments();
    let segs: Vec<&str> = segs.iter().map(|s| &**s).collect();
    match (&req.method, segs.as_slice()) {
        (&Method::PUT, ["vmms", _]) => Some(Operation::Register),
        (&Method::PUT, ["vmms", _, "state"]) => {
            let body: serde_json::Value = serde_json::from_slice(&req.body).ok()?;
            match body.get("state")?.as_str()? {
                "running" => Some(Operation::Run),
                "stopped" => Some(Operation::Stop),
                _ => None,
            }
        }
        (&Method::DELETE, ["vmms", _]) => Some(Operation::Unregister),
        _ => None,
    }
}

impl Handler for SledAgentApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let api = self.clone();
        async move {
            let Some(op) = operation(&req) else {
                return api.handle(&req);
            };
            let params = &api.world.params;
            let times = &params.service_times;
            let time = api.draws.draw(match op {
                Operation::Register => &times.register,
                Operation::Run => &times.run,
                Operation::Stop => &times.stop,
                // Unregistering a VMM whose guest runs terminates it:
                // Propolis stops and the zone is halted and deleted, a
                // stop's work (`Instance::terminate`); one that never ran
                // only has its runner exit.
                Operation::Unregister if api.runs_a_guest(&req) => &times.stop,
                Operation::Unregister => &times.unregister,
            });
            // The state changes at the END of the service time: the VMM is
            // registered, running or gone when sled-agent's work is done
            // (RUN: when the zone is installed and Propolis has booted), not
            // when the request arrives, so a crash of the sled meanwhile
            // loses the work with the sled (its tasks die with it).
            //
            // Today's sled-agent answers RUN at once and boots afterwards
            // (`RunReply::AtOnce`, omicron #4691): the reply is what the
            // request would answer now — 404 for a VMM it does not have —
            // and the boot goes on without the caller.
            if op == Operation::Run && params.era.run_reply == RunReply::AtOnce {
                let reply = api.answer_now(&req);
                if reply.status.is_success() {
                    crate::task::spawn(async move {
                        tokio::time::sleep(time).await;
                        api.handle(&req);
                    });
                }
                return reply;
            }
            // Detached, as dropshot's `HandlerTaskMode::Detached`: the work
            // is a task of the sled's own, so a caller that gives up (its
            // timeout closes the connection, and hyper drops this future)
            // does not cancel it; the reply then goes nowhere.
            let (tx, rx) = tokio::sync::oneshot::channel();
            crate::task::spawn(async move {
                tokio::time::sleep(time).await;
                let _ = tx.send(api.handle(&req));
            });
            rx.await.unwrap_or_else(|_| {
                ApiError::unavailable("sled-agent's work ended without an answer").into_response()
            })
        }
    }
}

impl SledAgentApi {
    /// Whether the VMM `req`'s path names runs a guest on this sled now.
    fn runs_a_guest(&self, req: &ApiRequest) -> bool {
        let segs = req.segments();
        let Some(id) = segs.get(1).and_then(|s| s.parse::<u64>().ok()) else {
            return false;
        };
        self.world
            .lock()
            .sleds
            .agents
            .get(&self.index)
            .and_then(|a| a.vmms.get(&id))
            .is_some_and(|v| v.state == VmmState::Running)
    }

    /// The API of sled `index` in its boot `boot`.
    pub fn new(world: World, index: usize, boot: u64) -> SledAgentApi {
        let host = world.sled(index).name;
        let draws = Rc::new(Draws::new(&world, &host, "sled-agent", boot));
        SledAgentApi {
            world,
            index,
            draws,
        }
    }

    /// What `req` would answer now, changing nothing: the state
    /// machine's answer on a copy of this sled-agent's state.
    fn answer_now(&self, req: &ApiRequest) -> ApiResponse {
        let mut copy = self
            .world
            .lock()
            .sleds
            .agents
            .get(&self.index)
            .map(|a| racksim_fakes::sled_agent::SledAgentState::clone(a))
            .unwrap_or_default();
        copy.handle(req).0
    }

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
            let agent = st.sleds.agents.entry(self.index).or_default();
            let (response, change) = std::sync::Arc::make_mut(agent).handle(req);
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

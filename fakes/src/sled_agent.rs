//! Fake sled-agent: the V2P mappings and VMMs of one sled.
//!
//! `/v2p` is sled-agent's published API (`list_v2p`, `set_v2p`, `del_v2p`):
//! a sled holds one mapping per `(vni, virtual_ip)`, so a `PUT` replaces the
//! mapping of that virtual NIC and a `DELETE` removes it by that key (an
//! absent one is nothing to remove: 204). `/vmms/{propolis_id}` is a
//! reduced form of upstream's VMM API, keyed as upstream's by the VMM's
//! (Propolis) id, a number here: register a VMM for an instance
//! (idempotent for the same pair; a second VMM of the same instance is
//! registered beside the first, as upstream's), set its state (404
//! `NO_SUCH_INSTANCE` without it; `stopped` destroys and unregisters it),
//! read its state (the same 404, as upstream's `vmm_get_state`) and
//! unregister it (`DELETE`; a VMM the sled does not have is success).
//! `GET /vmms` lists them: racksim's own route, for checks and tests.
//! Bodies are parsed strictly in the reference wire format — a MAC sent as dpd's `{"a": [..]}` is a 400 — and a VNI above 24
//! bits is a 400. Nothing survives a sled-agent restart: a new
//! [`SledAgentState`] is empty.

use std::collections::{BTreeMap, BTreeSet};

use http::{Method, StatusCode};
use racksim_wire::{
    dpd::MAX_VNI,
    sled_agent::{
        VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest,
        VmmUnregisterResponse, API_VERSION as SLED_AGENT_API_VERSION, NO_SUCH_INSTANCE,
    },
};

use crate::http::{ApiError, ApiRequest, ApiResponse};

/// One sled-agent's volatile state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SledAgentState {
    /// VMMs by propolis id, as upstream's instance manager keys them
    /// (`InstanceManagerRunner::jobs`): one instance may have several on a
    /// sled.
    pub vmms: BTreeMap<u64, VmmInfo>,
    pub v2p: BTreeSet<VirtualNetworkInterfaceHost>,
}

/// A change of a sled-agent's state: what a trace records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SledAgentChange {
    /// A mapping was added or replaced another of the same virtual NIC.
    V2pSet(VirtualNetworkInterfaceHost),
    /// The mapping of a virtual NIC was removed (as it was).
    V2pRemoved(VirtualNetworkInterfaceHost),
    VmmRegistered {
        instance: u32,
        vmm: u64,
    },
    VmmState {
        instance: u32,
        vmm: u64,
        state: VmmState,
    },
    VmmDestroyed {
        instance: u32,
        vmm: u64,
    },
}

fn check_vni(m: &VirtualNetworkInterfaceHost) -> Result<(), ApiError> {
    if m.vni > MAX_VNI {
        return Err(ApiError::bad_request(format!(
            "invalid VNI {}: a VNI is 24 bits (at most {MAX_VNI})",
            m.vni
        )));
    }
    Ok(())
}

impl SledAgentState {
    /// `PUT /v2p`.
    pub fn v2p_set(
        &mut self,
        m: VirtualNetworkInterfaceHost,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        check_vni(&m)?;
        let same = self.take_v2p(&m) == [m];
        self.v2p.insert(m);
        Ok((!same).then_some(SledAgentChange::V2pSet(m)))
    }

    /// `DELETE /v2p`: removes the mapping of `m`'s virtual NIC.
    pub fn v2p_del(
        &mut self,
        m: &VirtualNetworkInterfaceHost,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        check_vni(m)?;
        Ok(self
            .take_v2p(m)
            .first()
            .map(|o| SledAgentChange::V2pRemoved(*o)))
    }

    /// `GET /v2p`, in key order.
    pub fn v2p_list(&self) -> Vec<VirtualNetworkInterfaceHost> {
        self.v2p.iter().copied().collect()
    }

    /// Removes and returns the mappings of `m`'s virtual NIC.
    fn take_v2p(&mut self, m: &VirtualNetworkInterfaceHost) -> Vec<VirtualNetworkInterfaceHost> {
        let old: Vec<_> = self.v2p.iter().filter(|x| x.same_nic(m)).copied().collect();
        for o in &old {
            self.v2p.remove(o);
        }
        old
    }

    /// `PUT /vmms/{propolis_id}` (upstream's `vmm_register`, which
    /// `InstanceManagerRunner::ensure_registered` serves): registers VMM
    /// `propolis` of instance `reg.instance_id`, `starting`. Idempotent for
    /// the same pair; another VMM of the same instance is registered beside
    /// it (a start after a failed one, a migration's target). A propolis id
    /// already registered for another instance is upstream's
    /// `PropolisAlreadyRegistered`, which its `HttpError` conversion leaves
    /// a 500.
    pub fn register(
        &mut self,
        propolis: u64,
        reg: VmmRegistration,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        let instance = reg.instance_id;
        match self.vmms.get(&propolis) {
            Some(v) if v.instance_id == instance => Ok(None),
            Some(v) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some("Internal"),
                format!(
                    "propolis id {propolis} is already registered for instance {}",
                    v.instance_id
                ),
            )),
            None => {
                self.vmms.insert(
                    propolis,
                    VmmInfo {
                        instance_id: instance,
                        vmm_id: propolis,
                        state: VmmState::Starting,
                    },
                );
                Ok(Some(SledAgentChange::VmmRegistered {
                    instance,
                    vmm: propolis,
                }))
            }
        }
    }

    /// `PUT /vmms/{propolis_id}/state` (upstream's `vmm_put_state`): 404
    /// `NO_SUCH_INSTANCE` for a VMM the sled does not have
    /// (`InstanceManagerRunner::ensure_state`). `stopped` destroys the VMM
    /// and unregisters it, as upstream ends up doing: `InstanceRunner::
    /// put_state` terminates a VMM that has no Propolis zone yet at once,
    /// and stops a running one, whereupon `handle_monitor_message` sees it
    /// halted and terminates the runner, which deregisters it from the
    /// instance manager (`InstanceRunner::run`'s `ticket.deregister()`). A
    /// VMM is thus never left registered and stopped.
    pub fn set_state(
        &mut self,
        propolis: u64,
        want: VmmStateRequest,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        let Some(v) = self.vmms.get_mut(&propolis) else {
            return Err(no_such_vmm(propolis));
        };
        let instance = v.instance_id;
        Ok(match want.state {
            VmmState::Stopped => {
                self.vmms.remove(&propolis);
                Some(SledAgentChange::VmmDestroyed {
                    instance,
                    vmm: propolis,
                })
            }
            state => {
                let changed = v.state != state;
                v.state = state;
                changed.then_some(SledAgentChange::VmmState {
                    instance,
                    vmm: propolis,
                    state,
                })
            }
        })
    }

    /// `DELETE /vmms/{propolis_id}` (upstream's `vmm_unregister`, served by
    /// `InstanceManagerRunner::ensure_unregistered`): the VMM is
    /// terminated, whatever its state, and unregistered; its last state is
    /// answered, as `stopped`. A VMM the sled does not have is success
    /// (`updated_runtime: None`), not an error.
    pub fn unregister(
        &mut self,
        propolis: u64,
    ) -> (VmmUnregisterResponse, Option<SledAgentChange>) {
        match self.vmms.remove(&propolis) {
            None => (
                VmmUnregisterResponse {
                    updated_runtime: None,
                },
                None,
            ),
            Some(v) => (
                VmmUnregisterResponse {
                    updated_runtime: Some(VmmInfo {
                        state: VmmState::Stopped,
                        ..v
                    }),
                },
                Some(SledAgentChange::VmmDestroyed {
                    instance: v.instance_id,
                    vmm: propolis,
                }),
            ),
        }
    }

    /// `GET /vmms/{propolis_id}/state` (upstream's `vmm_get_state`): the
    /// VMM, or the 404 with error code `NO_SUCH_INSTANCE` that upstream's
    /// sled-agent answers for a VMM it does not have (as after a reboot).
    pub fn state(&self, propolis: u64) -> Result<VmmInfo, ApiError> {
        self.vmms
            .get(&propolis)
            .copied()
            .ok_or_else(|| no_such_vmm(propolis))
    }

    /// `GET /vmms`, by propolis id: racksim's own route (upstream's
    /// sled-agent lists no VMMs), for the checks and tests.
    pub fn vmm_list(&self) -> Vec<VmmInfo> {
        self.vmms.values().copied().collect()
    }

    /// The VMMs of instance `instance`, by propolis id.
    pub fn vmms_of(&self, instance: u32) -> impl Iterator<Item = &VmmInfo> {
        self.vmms
            .values()
            .filter(move |v| v.instance_id == instance)
    }

    /// Serves one request of the sled-agent API (the servers that are not
    /// dropshot).
    pub fn handle(&mut self, req: &ApiRequest) -> (ApiResponse, Option<SledAgentChange>) {
        match self.route(req) {
            Ok(ok) => ok,
            Err(e) => (e.into_response(), None),
        }
    }

    fn route(
        &mut self,
        req: &ApiRequest,
    ) -> Result<(ApiResponse, Option<SledAgentChange>), ApiError> {
        req.check_version(SLED_AGENT_API_VERSION)?;
        let segs = req.segments();
        let segs: Vec<&str> = segs.iter().map(|s| &**s).collect();
        let changed = |c| Ok((ApiResponse::no_content(), c));
        match (req.method.clone(), segs.as_slice()) {
            (Method::GET, ["v2p"]) => Ok((ApiResponse::json(&self.v2p_list()), None)),
            (Method::PUT, ["v2p"]) => changed(self.v2p_set(req.json_body()?)?),
            (Method::DELETE, ["v2p"]) => changed(self.v2p_del(&req.json_body()?)?),
            (Method::GET, ["vmms"]) => Ok((ApiResponse::json(&self.vmm_list()), None)),
            (Method::PUT, ["vmms", id]) => {
                let id = propolis_id(id)?;
                changed(self.register(id, req.json_body()?)?)
            }
            (Method::DELETE, ["vmms", id]) => {
                let (answer, change) = self.unregister(propolis_id(id)?);
                Ok((ApiResponse::json(&answer), change))
            }
            (Method::GET, ["vmms", id, "state"]) => {
                let id = propolis_id(id)?;
                Ok((ApiResponse::json(&self.state(id)?), None))
            }
            (Method::PUT, ["vmms", id, "state"]) => {
                let id = propolis_id(id)?;
                changed(self.set_state(id, req.json_body()?)?)
            }
            _ => Err(crate::upstream::unrouted(
                crate::upstream::Service::SledAgent,
                req,
            )),
        }
    }
}

/// The path's propolis id: a number in racksim (upstream's is a UUID).
fn propolis_id(raw: &str) -> Result<u64, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid propolis id {raw:?}")))
}

/// Upstream's `NoSuchVmm`, as its `HttpError` conversion answers it.
fn no_such_vmm(propolis: u64) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some(NO_SUCH_INSTANCE),
        format!("VMM with ID {propolis} not found"),
    )
}

#[cfg(test)]
mod tests;

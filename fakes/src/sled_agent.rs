//! Fake sled-agent: the V2P mappings and VMMs of one sled.
//!
//! `/v2p` is sled-agent's published API (`list_v2p`, `set_v2p`, `del_v2p`):
//! a sled holds one mapping per `(vni, virtual_ip)`, so a `PUT` replaces the
//! mapping of that virtual NIC and a `DELETE` removes it by that key (an
//! absent one is nothing to remove: 204). `/instances` is this project's
//! reduced instance API: register a VMM for an instance (idempotent for the
//! same VMM, 409 for another), set its state (404 without one; `stopped`
//! destroys it), read one VMM's state (404 `NO_SUCH_INSTANCE` without one,
//! as upstream's `vmm_get_state`), list them. Bodies are parsed strictly in the reference wire
//! format — a MAC sent as dpd's `{"a": [..]}` is a 400 — and a VNI above 24
//! bits is a 400. Nothing survives a sled-agent restart: a new
//! [`SledAgentState`] is empty.

use std::collections::{BTreeMap, BTreeSet};

use http::{Method, StatusCode};
use racksim_wire::{
    dpd::MAX_VNI,
    sled_agent::{
        VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest,
        API_VERSION as SLED_AGENT_API_VERSION, NO_SUCH_INSTANCE,
    },
};

use crate::http::{ApiError, ApiRequest, ApiResponse};

/// One sled-agent's volatile state.
#[derive(Clone, Debug, Default)]
pub struct SledAgentState {
    /// VMMs by instance id.
    pub vmms: BTreeMap<u32, VmmInfo>,
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

    /// `PUT /instances/{id}`.
    pub fn register(
        &mut self,
        instance: u32,
        reg: VmmRegistration,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        match self.vmms.get(&instance) {
            Some(v) if v.vmm_id == reg.vmm_id => Ok(None),
            Some(v) => Err(ApiError::new(
                StatusCode::CONFLICT,
                Some("ObjectAlreadyExists"),
                format!(
                    "instance {instance} already has VMM {} on this sled",
                    v.vmm_id
                ),
            )),
            None => {
                self.vmms.insert(
                    instance,
                    VmmInfo {
                        instance_id: instance,
                        vmm_id: reg.vmm_id,
                        state: VmmState::Starting,
                    },
                );
                Ok(Some(SledAgentChange::VmmRegistered {
                    instance,
                    vmm: reg.vmm_id,
                }))
            }
        }
    }

    /// `PUT /instances/{id}/state`.
    pub fn set_state(
        &mut self,
        instance: u32,
        want: VmmStateRequest,
    ) -> Result<Option<SledAgentChange>, ApiError> {
        let Some(v) = self.vmms.get_mut(&instance) else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                Some("ObjectNotFound"),
                format!("no VMM for instance {instance} on this sled"),
            ));
        };
        let vmm = v.vmm_id;
        Ok(match want.state {
            VmmState::Stopped => {
                self.vmms.remove(&instance);
                Some(SledAgentChange::VmmDestroyed { instance, vmm })
            }
            state => {
                let changed = v.state != state;
                v.state = state;
                changed.then_some(SledAgentChange::VmmState {
                    instance,
                    vmm,
                    state,
                })
            }
        })
    }

    /// `GET /instances/{id}/state`: the instance's VMM, or the 404 with
    /// error code `NO_SUCH_INSTANCE` that upstream's sled-agent answers for
    /// a VMM it does not have (as after a reboot).
    pub fn state(&self, instance: u32) -> Result<VmmInfo, ApiError> {
        self.vmms.get(&instance).copied().ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                Some(NO_SUCH_INSTANCE),
                format!("no VMM for instance {instance} on this sled"),
            )
        })
    }

    /// `GET /instances`, by instance id.
    pub fn instances(&self) -> Vec<VmmInfo> {
        self.vmms.values().copied().collect()
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
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let changed = |c| Ok((ApiResponse::no_content(), c));
        match (req.method.clone(), segs.as_slice()) {
            (Method::GET, ["v2p"]) => Ok((ApiResponse::json(&self.v2p_list()), None)),
            (Method::PUT, ["v2p"]) => changed(self.v2p_set(req.json_body()?)?),
            (Method::DELETE, ["v2p"]) => changed(self.v2p_del(&req.json_body()?)?),
            (Method::GET, ["instances"]) => Ok((ApiResponse::json(&self.instances()), None)),
            (Method::PUT, ["instances", id]) => {
                let id = instance_id(id)?;
                changed(self.register(id, req.json_body()?)?)
            }
            (Method::GET, ["instances", id, "state"]) => {
                let id = instance_id(id)?;
                Ok((ApiResponse::json(&self.state(id)?), None))
            }
            (Method::PUT, ["instances", id, "state"]) => {
                let id = instance_id(id)?;
                changed(self.set_state(id, req.json_body()?)?)
            }
            _ => Err(crate::upstream::unrouted(
                crate::upstream::Service::SledAgent,
                req,
            )),
        }
    }
}

fn instance_id(raw: &str) -> Result<u32, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid instance id {raw:?}")))
}

#[cfg(test)]
mod tests;

//! Internal DNS on the simulated network: the records are the world's
//! switch zones (dendrite instances) that discovery can currently see — a
//! plan step can hide one, as happened on madrid — answered by the DNS
//! state machine of `racksim-fakes`.

use std::future::Future;

use racksim_fakes::{
    dns::InternalDns,
    http::{ApiRequest, ApiResponse},
};

use super::http::Handler;
use crate::world::World;

/// The zone as the world has it now.
pub fn zone(world: &World) -> InternalDns {
    let st = world.lock();
    let dendrite = st
        .switches
        .addresses
        .iter()
        .filter(|(slot, _)| !st.dns.hidden.contains(slot))
        .map(|(_, addr)| *addr)
        .collect();
    InternalDns {
        services: [("dendrite".to_string(), dendrite)].into_iter().collect(),
    }
}

pub fn handle(world: &World, req: &ApiRequest) -> ApiResponse {
    zone(world).handle(req)
}

/// The internal DNS server of the sled that hosts it.
pub struct InternalDnsApi {
    pub world: World,
}

impl Handler for InternalDnsApi {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        std::future::ready(handle(&self.world, &req))
    }
}

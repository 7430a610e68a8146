//! The control plane (Nexus), reduced to what service NAT needs: it comes up
//! only once time is synchronised, then runs its background task (an RPW)
//! that makes every dpd's service NAT entries match the database.

use std::{
    net::{SocketAddr, SocketAddrV6},
    time::Duration,
};

use racksim_reconciler::{
    discovery::SwitchZoneResolver,
    dpd::DpdClient,
    http::HttpClient,
    nat::{reconcile_switch, Scope},
    DPD_PORT, SERVICES_VNI,
};

use super::{fmt_outcome, name_addrs, sled::TimeSync};
use crate::{
    net::{InternalDnsResolver, TurmoilConnector, SLED_AGENT_PORT},
    world::World,
};

/// How often Nexus checks whether time has synchronised before it starts.
pub const TIMESYNC_POLL: Duration = Duration::from_secs(5);
/// Period of Nexus's service NAT background task.
pub const RPW_PERIOD: Duration = Duration::from_secs(30);

/// Runs inside the Nexus zone on sled `index`.
pub async fn run(world: World, index: usize, resolver: InternalDnsResolver) {
    let rack = world.params.rack.clone();
    let host = rack.sleds[index].name.clone();
    let sled_agent = HttpClient::new(
        TurmoilConnector,
        SocketAddr::new(rack.sleds[index].address.into(), SLED_AGENT_PORT),
    );
    loop {
        if let Ok(TimeSync { sync: true }) = sled_agent.get::<TimeSync>("/timesync").await {
            break;
        }
        tokio::time::sleep(TIMESYNC_POLL).await;
    }
    {
        let mut st = world.lock();
        st.control_plane_up = true;
        st.version += 1;
    }
    world.trace(
        &host,
        "nexus: control plane up (time synchronised); starting background tasks",
    );

    let desired = rack.desired_nat();
    let mut activation = 0u64;
    let mut interval = tokio::time::interval(RPW_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        activation += 1;
        let line = match resolver.switch_zones().await {
            Err(e) => format!("discovery failed: {}", name_addrs(&rack, &e.0)),
            Ok(mut zones) => {
                zones.sort();
                let mut parts = Vec::new();
                for z in zones {
                    let dpd = DpdClient::new(HttpClient::new(
                        TurmoilConnector,
                        SocketAddrV6::new(z, DPD_PORT, 0, 0).into(),
                    ));
                    let outcome = reconcile_switch(&dpd, &desired, &Scope::Vni(SERVICES_VNI)).await;
                    parts.push(format!(
                        "{}: {}",
                        rack.name_of(z),
                        fmt_outcome(&rack, &outcome)
                    ));
                }
                parts.join("; ")
            }
        };
        world.trace(
            &host,
            format!("nexus service-NAT RPW #{activation}: {line}"),
        );
    }
}

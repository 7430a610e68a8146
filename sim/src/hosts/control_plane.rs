//! The control plane (Nexus), reduced to what service NAT needs: it comes up
//! only once time is synchronised, then runs its background task (an RPW)
//! that makes every dpd's service NAT entries match the database. An
//! operator (a plan step) can take it down and bring it back.

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

use super::{fmt_outcome, sled::TimeSync};
use crate::{
    net::{InternalDnsResolver, TurmoilConnector, SLED_AGENT_PORT},
    world::World,
};

/// How often Nexus checks whether time has synchronised before it starts.
pub const TIMESYNC_POLL: Duration = Duration::from_secs(5);
/// Period of Nexus's service NAT background task.
pub const RPW_PERIOD: Duration = Duration::from_secs(30);

/// Runs inside the Nexus zone on sled `index`, for as long as the zone runs.
pub async fn run(world: World, index: usize, resolver: InternalDnsResolver) {
    let host = world.sled(index).name;
    let mut enabled = world.nexus_enabled();
    loop {
        if enabled.wait_for(|on| *on).await.is_err() {
            return;
        }
        tokio::select! {
            biased;
            // Cancel-safe: `wait_for` only observes the channel; dropping it
            // loses nothing.
            r = enabled.wait_for(|on| !*on) => {
                if r.is_err() {
                    return;
                }
                let was_up = {
                    let mut st = world.lock();
                    let was_up = st.control_plane_up;
                    st.control_plane_up = false;
                    st.version += 1;
                    was_up
                };
                let what = if was_up { "control plane down" } else { "control plane start cancelled" };
                world.trace(&host, format!("nexus: {what} (operator)"));
            }
            // Not cancel-safe in general, and it need not be: taking Nexus
            // down abandons whatever it was doing, as a crash would.
            () = serve(&world, &host, index, &resolver) => {}
        }
    }
}

/// Wait for time sync, come up, then run the service NAT RPW forever.
async fn serve(world: &World, host: &str, index: usize, resolver: &InternalDnsResolver) {
    let sled_agent = HttpClient::new(
        TurmoilConnector,
        SocketAddr::new(world.sled(index).address.into(), SLED_AGENT_PORT),
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
        host,
        "nexus: control plane up (time synchronised); starting background tasks",
    );

    let desired = world.rack().desired_nat();
    let mut activation = 0u64;
    let mut interval = tokio::time::interval(RPW_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        activation += 1;
        let line = match resolver.switch_zones().await {
            Err(e) => format!("discovery failed: {}", world.name_addrs(&e.0)),
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
                        world.name_of(z),
                        fmt_outcome(world, &outcome)
                    ));
                }
                parts.join("; ")
            }
        };
        world.trace(host, format!("nexus service-NAT RPW #{activation}: {line}"));
    }
}

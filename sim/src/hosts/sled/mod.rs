//! A sled: sled-agent, the zones it hosts, and its OPTE (the end of the
//! data path that delivers NAT'd traffic to a zone). One module per concept:
//!
//! * this module — the sled host: it boots sled-agent (the fake of
//!   `racksim-fakes`, served by [`crate::fakes::sled_agent`]), the internal
//!   DNS server if the sled hosts it, OPTE, the strategy's reconcilers, and
//!   then its zones;
//! * [`reconcilers`] — the NAT reconcilers a strategy runs beside the zones
//!   (`sled-task`: [`SledNatReconciler`]; `scrimlet-local`: the scrimlet's
//!   reconcilers of its own switch zone);
//! * [`zones`] — zone start, per strategy: `legacy` blocks each zone's
//!   start on `legacy::ensure_zone_nat`, the others start zones at once;
//! * [`opte`] — delivery of Geneve traffic to the zone it is for;
//! * [`ntp`] — boundary NTP's client of the upstream server.
//!
//! [`SledNatReconciler`]: racksim_reconciler::sled_task::SledNatReconciler

mod ntp;
mod opte;
mod reconcilers;
mod zones;

use racksim_reconciler::nat::NatEntry;

pub use self::ntp::NTP_POLL_INTERVAL;
use super::spawn_server;
pub use crate::fakes::sled_agent::TimeSync;
use crate::{
    fakes::{dns::InternalDnsApi, sled_agent::SledAgentApi},
    net::{InternalDnsResolver, INTERNAL_DNS_PORT, SLED_AGENT_PORT},
    rack::ZoneSpec,
    trace::Kind,
    world::{SledAgentState, World},
};

pub async fn run(world: World, index: usize) -> turmoil::Result {
    let rack = world.params.rack.clone();
    let sled = world.sled(index);
    let name = sled.name.clone();
    let boot = world.boot(&name);
    let zones: Vec<ZoneSpec> = rack
        .zones
        .iter()
        .filter(|z| z.sled == index)
        .cloned()
        .collect();
    {
        // sled-agent's instance and V2P state does not survive a restart.
        let mut st = world.lock();
        st.sleds_up.insert(index);
        st.sled_agents.insert(index, SledAgentState::default());
        st.version += 1;
    }
    world.trace(&name, Kind::Boot, "sled-agent up");
    spawn_server(
        &world,
        &name,
        SLED_AGENT_PORT,
        SledAgentApi {
            world: world.clone(),
            index,
        },
    );
    if rack.internal_dns_sled == index {
        spawn_server(
            &world,
            &name,
            INTERNAL_DNS_PORT,
            InternalDnsApi {
                world: world.clone(),
            },
        );
        world.record(
            world
                .line(&name, Kind::Zone, "zone internal-dns started")
                .field("zone", "internal-dns")
                .field("took_us", 0),
        );
    }
    tokio::task::spawn_local(opte::opte(world.clone(), index));

    let resolver = InternalDnsResolver::new(rack.sleds[rack.internal_dns_sled].address);
    let entries: Vec<NatEntry> = zones.iter().map(|z| rack.nat_entry(z)).collect();

    // The reconcilers start with sled-agent, independently of zones. Their
    // input senders live as long as this host's software.
    let _config_tx = reconcilers::start(&world, index, &resolver, &entries);

    zones::start(&world, index, &name, boot, &zones, &resolver).await;
    std::future::pending::<()>().await;
    Ok(())
}

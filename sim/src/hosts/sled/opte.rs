//! OPTE: the end of the data path on a sled. It delivers Geneve traffic to
//! the zone it is for when the VNI and MAC match (a boundary NTP reply goes
//! to that zone's NTP client).

use crate::{
    dataplane::Geneve,
    hosts::{ntp_server::NTP_REPLY, PacketSocket},
    net::GENEVE_PORT,
    rack::ZoneKind,
    trace::Kind,
    world::World,
};

/// OPTE: deliver Geneve traffic to the zone it is for, if VNI and MAC match.
pub(super) async fn opte(world: World, index: usize) -> std::io::Result<()> {
    let host = world.sled(index).name;
    let mut sock = PacketSocket::bind(GENEVE_PORT).await?;
    loop {
        let g: Geneve = sock.recv().await?;
        // The zones here now: a zone moved away no longer takes traffic.
        let zone = world.with_zones(|zones| {
            zones
                .zone_for(g.inner.dst_ip, g.inner.dst_port)
                .filter(|z| z.spec.sled == index)
                .map(|z| z.spec.clone())
        });
        match zone {
            Some(z) if z.mac == g.inner_mac && g.vni == racksim_reconciler::SERVICES_VNI => {
                if z.kind == ZoneKind::BoundaryNtp && g.inner.payload == NTP_REPLY {
                    // The zone takes the sample (a zone that is not
                    // listening any more drops it).
                    if let Some(zone) = world.lock().sleds.ntp_replies.get(&index) {
                        let _ = zone.send(g.via);
                    }
                }
            }
            _ => world.trace(
                &host,
                Kind::Dataplane,
                format!(
                    "opte: dropped packet for {}:{} via {}: no zone here with that address, MAC and VNI",
                    g.inner.dst_ip, g.inner.dst_port, g.via
                ),
            ),
        }
    }
}

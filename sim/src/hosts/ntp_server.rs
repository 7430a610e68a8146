//! The outside world's NTP server. Its replies return to the rack through
//! one chosen switch's uplink (the scenario picks which), where they are
//! dropped unless that switch holds boundary NTP's NAT entry.

use std::net::SocketAddr;

use crate::{
    dataplane::{Inbound, NtpQuery},
    hosts::PacketSocket,
    net::{NTP_PORT, UPLINK_PORT},
    rack::UPSTREAM_NTP_NAME,
    world::World,
};

/// Payload of an NTP reply.
pub const NTP_REPLY: &str = "ntp-reply";

pub async fn run(world: World) -> turmoil::Result {
    world.boot(UPSTREAM_NTP_NAME);
    let mut sock = PacketSocket::bind(NTP_PORT).await?;
    loop {
        let q: NtpQuery = sock.recv().await?;
        let Some(switch_zone) = world.switch_zone_address(world.params.ntp_return_switch) else {
            continue;
        };
        let reply = Inbound {
            dst_ip: q.reply_ip,
            dst_port: q.reply_port,
            payload: NTP_REPLY.to_string(),
        };
        let to = SocketAddr::new(switch_zone.into(), UPLINK_PORT);
        sock.send(&reply, to).await;
    }
}

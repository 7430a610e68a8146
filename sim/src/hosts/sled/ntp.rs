//! Boundary NTP's client: it queries the upstream server until a reply
//! arrives, which needs the NAT entry on the switch the reply comes through.

use std::{
    net::{Ipv6Addr, SocketAddr},
    time::Duration,
};

use crate::{
    dataplane::NtpQuery,
    net::NTP_PORT,
    rack::{ZoneSpec, UPSTREAM_NTP_ADDR},
    world::World,
};

/// How often boundary NTP queries upstream while unsynchronised.
pub const NTP_POLL_INTERVAL: Duration = Duration::from_secs(16);

/// Boundary NTP: query upstream until a reply arrives (through NAT).
pub(super) async fn ntp_client(world: World, index: usize, host: String, zone: ZoneSpec) {
    let sock = match turmoil::net::UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).await {
        Ok(s) => s,
        Err(e) => return world.testbed_error(&host, format!("boundary-ntp cannot bind: {e}")),
    };
    let query = NtpQuery {
        reply_ip: zone.external_ip,
        reply_port: zone.first_port,
    };
    let bytes = serde_json::to_vec(&query).expect("packets serialize");
    let upstream = SocketAddr::new(UPSTREAM_NTP_ADDR.into(), NTP_PORT);
    loop {
        if world.lock().sleds.ntp_synced.contains(&index) {
            return;
        }
        let _ = sock.send_to(&bytes, upstream).await;
        tokio::time::sleep(NTP_POLL_INTERVAL).await;
    }
}

//! Every sled's NTP zone, polling as chrony does ([`chrony`]):
//!
//! * **boundary NTP** (on the sleds the zone set gives one) queries the
//!   upstream server; the reply comes back through a switch, which drops
//!   it unless it holds the zone's NAT entry, and OPTE hands it to the
//!   zone. The zone also serves the rack's other NTP zones over the
//!   underlay, and answers them as unsynchronised until it has
//!   synchronised itself (boundary zones' `local ... activate 0.5` in
//!   omicron's `zone-setup`: no local reference before a first upstream
//!   sync).
//! * **internal NTP** (on every other sled) polls each boundary NTP zone
//!   of the rack over the underlay, so a partition or a down boundary
//!   sled delays it. Simplified: the boundary zones' addresses come from
//!   the zone set rather than from internal DNS, and the zone starts with
//!   sled-agent rather than through zone start.
//!
//! A sled's time counts as synchronised once its NTP zone has made its
//! first clock update; sled-agent's `GET /timesync` answers from it, and
//! Nexus's zone waits for it (omicron's `requires_timesync`). The state
//! is per sled, in [`crate::world::NtpClock`].

pub mod chrony;

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use racksim_reconciler::discovery::SwitchSlot;
use serde::{Deserialize, Serialize};
use tokio::{sync::mpsc, time::Instant};

pub use self::chrony::SYNC_SAMPLES;
use self::chrony::{Sample, Source};
use crate::{
    dataplane::NtpQuery,
    hosts::PacketSocket,
    net::NTP_PORT,
    rack::{ZoneKind, ZoneSpec, UPSTREAM_NTP_ADDR},
    trace::Kind,
    world::{NtpClock, NtpZone, World},
};

/// NTP between the rack's own zones, over the underlay: an internal NTP
/// zone's query, and a boundary zone's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum UnderlayNtp {
    Query,
    /// `synchronised: false` is chrony's unsynchronised answer, which the
    /// client rejects.
    Answer {
        synchronised: bool,
    },
}

/// Boundary NTP: poll upstream (replies arrive through OPTE) until the
/// first clock update, while serving the rack's internal NTP zones.
pub(super) async fn boundary_ntp(world: World, index: usize, host: String, zone: ZoneSpec) {
    let (tx, replies) = mpsc::unbounded_channel();
    {
        let mut st = world.lock();
        st.sleds.ntp.insert(index, NtpClock::new(NtpZone::Boundary));
        st.sleds.ntp_replies.insert(index, tx);
        st.version += 1;
    }
    let server = match PacketSocket::bind(NTP_PORT).await {
        Ok(s) => s,
        Err(e) => return world.testbed_error(&host, format!("boundary-ntp cannot bind: {e}")),
    };
    let sock = match PacketSocket::bind(0).await {
        Ok(s) => s,
        Err(e) => return world.testbed_error(&host, format!("boundary-ntp cannot bind: {e}")),
    };
    // The server lives as long as the zone: both end when its task does.
    tokio::join!(
        serve_internal_ntp(world.clone(), index, server),
        poll_upstream(world.clone(), index, host, zone, sock, replies),
    );
}

/// Boundary NTP's client of upstream, until its first clock update.
async fn poll_upstream(
    world: World,
    index: usize,
    host: String,
    zone: ZoneSpec,
    sock: PacketSocket,
    mut replies: mpsc::UnboundedReceiver<SwitchSlot>,
) {
    let query = NtpQuery {
        reply_ip: zone.external_ip,
        reply_port: zone.first_port,
    };
    let upstream = SocketAddr::new(UPSTREAM_NTP_ADDR.into(), NTP_PORT);
    let mut source = Source::new();
    let mut last_tx = Instant::now();
    let mut next_tx = last_tx;
    loop {
        tokio::select! {
            biased;
            // Cancel-safe: an unbounded channel's receive loses nothing.
            via = replies.recv() => {
                let Some(via) = via else { return };
                let (sample, delay) = source.reply(true);
                next_tx = last_tx + delay;
                if sample == Sample::Synchronised {
                    synchronised(&world, index, &host, &format!("upstream, the last via {via}"), Some(via));
                    // Simplified: after its first clock update the zone
                    // stops polling (see `chrony`'s doc).
                    return;
                }
            }
            // Cancel-safe: a sleep holds nothing but its deadline.
            () = tokio::time::sleep_until(next_tx) => {
                last_tx = Instant::now();
                next_tx = last_tx + source.transmit();
                sock.send(&query, upstream).await;
            }
        }
    }
}

/// A boundary zone's NTP server for the rack's internal NTP zones.
async fn serve_internal_ntp(world: World, index: usize, mut sock: PacketSocket) {
    while let Ok((packet, from)) = sock.recv_from::<UnderlayNtp>().await {
        if packet == UnderlayNtp::Query {
            let synchronised = world
                .lock()
                .sleds
                .ntp
                .get(&index)
                .is_some_and(|c| c.zone == NtpZone::Boundary && c.synchronised);
            sock.send(&UnderlayNtp::Answer { synchronised }, from).await;
        }
    }
}

/// Internal NTP: poll every boundary NTP zone of the rack until the first
/// clock update. It ends if the sled comes to host a boundary zone.
pub(super) async fn internal_ntp(world: World, index: usize, host: String) {
    {
        let mut st = world.lock();
        st.sleds.ntp.insert(index, NtpClock::new(NtpZone::Internal));
        st.version += 1;
    }
    let mut sock = match PacketSocket::bind(0).await {
        Ok(s) => s,
        Err(e) => return world.testbed_error(&host, format!("internal-ntp cannot bind: {e}")),
    };
    // One source per boundary zone (chrony's `pool` with `maxsources 16`),
    // by the boundary zone's sled: when each was last and is next polled.
    let mut sources: BTreeMap<usize, (Source, Instant, Instant)> = BTreeMap::new();
    loop {
        if world
            .lock()
            .sleds
            .ntp
            .get(&index)
            .is_none_or(|c| c.zone != NtpZone::Internal)
        {
            return;
        }
        let boundary = boundary_sleds(&world);
        sources.retain(|sled, _| boundary.contains(sled));
        let now = Instant::now();
        for &sled in &boundary {
            sources
                .entry(sled)
                .or_insert_with(|| (Source::new(), now, now));
        }
        let next = sources.values().map(|(_, _, next)| *next).min();
        tokio::select! {
            biased;
            // Cancel-safe: a datagram is taken whole or not at all.
            answer = sock.recv_from::<UnderlayNtp>() => {
                let (good, from) = match answer {
                    Ok((UnderlayNtp::Answer { synchronised }, from)) => (synchronised, from),
                    Ok((UnderlayNtp::Query, _)) => continue,
                    Err(e) => return world.testbed_error(&host, format!("internal-ntp cannot receive: {e}")),
                };
                let Some((&sled, (source, last_tx, next_tx))) = sources
                    .iter_mut()
                    .find(|(sled, _)| from.ip() == IpAddr::V6(world.sled(**sled).address))
                else {
                    continue;
                };
                let (sample, delay) = source.reply(good);
                *next_tx = *last_tx + delay;
                if sample == Sample::Synchronised {
                    let from = format!("boundary NTP on {}", world.sled(sled).name);
                    synchronised(&world, index, &host, &from, None);
                    return;
                }
            }
            // Cancel-safe: a sleep holds nothing but its deadline. With no
            // boundary zone in the zone set, look again later.
            () = sleep_until_or(next, Duration::from_secs(1)) => {
                let now = Instant::now();
                for (&sled, (source, last_tx, next_tx)) in sources.iter_mut() {
                    if *next_tx <= now {
                        *last_tx = now;
                        *next_tx = now + source.transmit();
                        let to = SocketAddr::new(world.sled(sled).address.into(), NTP_PORT);
                        sock.send(&UnderlayNtp::Query, to).await;
                    }
                }
            }
        }
    }
}

/// The sleds the zone set gives a boundary NTP zone, in order.
fn boundary_sleds(world: &World) -> Vec<usize> {
    let mut sleds: Vec<usize> = world.with_zones(|zones| {
        zones
            .zones()
            .iter()
            .filter(|z| z.spec.kind == ZoneKind::BoundaryNtp)
            .map(|z| z.spec.sled)
            .collect()
    });
    sleds.sort_unstable();
    sleds.dedup();
    sleds
}

async fn sleep_until_or(deadline: Option<Instant>, otherwise: Duration) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => tokio::time::sleep(otherwise).await,
    }
}

/// Record sled `index`'s NTP zone's first clock update.
fn synchronised(world: &World, index: usize, host: &str, from: &str, via: Option<SwitchSlot>) {
    let zone = {
        let mut st = world.lock();
        let Some(clock) = st.sleds.ntp.get_mut(&index) else {
            return;
        };
        clock.synchronised = true;
        let zone = clock.zone;
        st.version += 1;
        zone
    };
    let mut line = world
        .line(
            host,
            Kind::Ntp,
            format!("{zone}: time synchronised ({SYNC_SAMPLES} samples from {from})"),
        )
        .field("zone", zone);
    if let Some(via) = via {
        line = line.field("via", via);
    }
    world.record(line);
}

//! A switch zone: fake dpd and MGS, and the switch's data path (uplink
//! ingress through the NAT table).

use std::{
    future::Future,
    net::{Ipv6Addr, SocketAddr},
};

use racksim_reconciler::{discovery::SwitchSlot, nat::NatEntry, DPD_PORT, MGS_PORT};

use racksim_fakes::api::Fault;

use super::{fmt_entry, spawn_server};
use crate::{
    fakes::{
        dataplane::{Geneve, Inbound},
        dpd::{DpdState, NatChange},
        http::{ApiError, ApiRequest, ApiResponse, Handler},
        mgs::MgsState,
    },
    net::{GENEVE_PORT, UPLINK_PORT},
    trace::{Kind, TraceLine},
    world::{DpdFault, World},
};

/// The software of a switch zone host.
pub async fn run(world: World, slot: SwitchSlot) -> turmoil::Result {
    let name = slot.to_string();
    world.boot(&name);
    let held = {
        let mut st = world.lock();
        // The NAT table lives in the ASIC and is lost with the zone: a
        // crash or restart removed it (`World::host_down`), so this boot
        // starts empty. Only at the very start of a run may the ASIC hold
        // entries from before it (a plan step at 0s planted them).
        let held = st
            .dpd
            .entry(slot)
            .or_insert_with(|| DpdState::new(slot.index()))
            .ipv4_entries()
            .len();
        st.dropping.remove(&slot);
        st.version += 1;
        held
    };
    let table = match held {
        0 => "NAT table empty".to_string(),
        1 => "NAT table holds 1 entry from before this run".to_string(),
        n => format!("NAT table holds {n} entries from before this run"),
    };
    world.trace(
        &name,
        Kind::Boot,
        format!("switch zone up (dpd :12224, MGS :12225); {table}"),
    );
    spawn_server(
        &world,
        &name,
        DPD_PORT,
        DpdHandler {
            world: world.clone(),
            slot,
        },
    );
    spawn_server(
        &world,
        &name,
        MGS_PORT,
        MgsHandler(MgsState { slot: slot.index() }),
    );
    dataplane(world, slot).await
}

struct DpdHandler {
    world: World,
    slot: SwitchSlot,
}

impl Handler for DpdHandler {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let (world, slot) = (self.world.clone(), self.slot);
        async move {
            let now = turmoil::sim_elapsed().unwrap_or_default();
            let fault = world
                .lock()
                .dpd_faults
                .get(&slot)
                .copied()
                .filter(|f| now < f.until());
            match fault {
                Some(DpdFault::Errors { .. }) => {
                    return Fault::Errors.error("dpd").into_response();
                }
                Some(DpdFault::Hang { until }) => {
                    // Hold the request for the rest of the window; the
                    // client's timeout decides what it sees.
                    tokio::time::sleep(until - now).await;
                    return Fault::Hang.error("dpd").into_response();
                }
                None => {}
            }
            let (response, change) = {
                let mut st = world.lock();
                match st.dpd.get_mut(&slot) {
                    None => (
                        ApiError::unavailable("dpd is not running").into_response(),
                        None,
                    ),
                    Some(dpd) => {
                        let (resp, change) = dpd.handle(&req);
                        if change.is_some() {
                            // The simulation has no dpd-side RPW pulling
                            // NAT state from Nexus; it models the pull that
                            // follows a change by advancing the generation,
                            // so `/rpw/nat/gen` moves when the table does
                            // (and drops to 0 on a restart).
                            dpd.set_generation(dpd.generation() + 1);
                            st.version += 1;
                        }
                        (resp, change)
                    }
                }
            };
            if let Some(change) = change {
                world.record(nat_change_line(&world, slot, &change));
            }
            response
        }
    }
}

/// A NAT table change as a trace line with its entry's fields.
fn nat_change_line(world: &World, slot: SwitchSlot, change: &NatChange) -> TraceLine {
    let host = slot.to_string();
    let entry = |op: &str, text: String, ip: String, low: u16, high: u16, target: String, vni| {
        world
            .line(&host, Kind::Nat, text)
            .field("switch", slot)
            .field("op", op)
            .field("external_ip", ip)
            .field("first_port", low)
            .field("last_port", high)
            .field("target", target)
            .field("vni", vni)
    };
    let (op, sign) = match change {
        NatChange::Created(_) | NatChange::Created6(_) => ("add", '+'),
        _ => ("remove", '-'),
    };
    match change {
        NatChange::Created(e) | NatChange::Deleted(e) => {
            let n = NatEntry::from_dpd(e);
            let text = format!("dpd: NAT {sign} {}", fmt_entry(world, &n));
            let target = world.name_of(n.target.internal_ip);
            let ip = n.external_ip.to_string();
            entry(
                op,
                text,
                ip,
                n.first_port,
                n.last_port,
                target,
                n.target.vni,
            )
        }
        NatChange::Created6(e) | NatChange::Deleted6(e) => {
            let text = format!("dpd: NAT6 {sign} {}/{}-{}", e.external, e.low, e.high);
            let target = world.name_of(e.target.internal_ip);
            let ip = e.external.to_string();
            entry(op, text, ip, e.low, e.high, target, e.target.vni)
        }
        NatChange::Reset { removed } => world
            .line(
                &host,
                Kind::Nat,
                format!("dpd: NAT table reset ({removed} entries removed)"),
            )
            .field("switch", slot)
            .field("op", "reset"),
    }
}

struct MgsHandler(MgsState);

impl Handler for MgsHandler {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        std::future::ready(self.0.handle(&req))
    }
}

/// Inbound traffic from the uplink: NAT it to a sled or drop it.
async fn dataplane(world: World, slot: SwitchSlot) -> turmoil::Result {
    let sock = turmoil::net::UdpSocket::bind((Ipv6Addr::UNSPECIFIED, UPLINK_PORT)).await?;
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, _from) = sock.recv_from(&mut buf).await?;
        let Ok(pkt) = serde_json::from_slice::<Inbound>(&buf[..n]) else {
            continue;
        };
        let (hit, was_dropping) = {
            let st = world.lock();
            let hit = st
                .dpd
                .get(&slot)
                .and_then(|d| d.ipv4_get(pkt.dst_ip, pkt.dst_port));
            (hit, st.dropping.get(&slot).copied().unwrap_or(false))
        };
        match hit {
            Some(entry) => {
                if was_dropping {
                    dropping_changed(&world, slot, false, &pkt);
                }
                let g = Geneve {
                    via: slot,
                    vni: entry.target.vni,
                    inner_mac: entry.target.inner_mac,
                    inner: pkt,
                };
                let to = SocketAddr::new(entry.target.internal_ip.into(), GENEVE_PORT);
                let bytes = serde_json::to_vec(&g).expect("packets serialize");
                // Like the real data path, delivery is best effort.
                let _ = sock.send_to(&bytes, to).await;
            }
            None => {
                if !was_dropping {
                    dropping_changed(&world, slot, true, &pkt);
                }
            }
        }
    }
}

/// The switch starts or stops dropping inbound traffic: recorded once per
/// change, not per packet.
fn dropping_changed(world: &World, slot: SwitchSlot, dropping: bool, pkt: &Inbound) {
    world.lock().dropping.insert(slot, dropping);
    let text = if dropping {
        format!(
            "dataplane: dropping inbound {}:{}: no NAT entry",
            pkt.dst_ip, pkt.dst_port
        )
    } else {
        format!(
            "dataplane: forwarding inbound {}:{} again",
            pkt.dst_ip, pkt.dst_port
        )
    };
    world.record(
        world
            .line(&slot.to_string(), Kind::Dataplane, text)
            .field("switch", slot)
            .field("dropping", dropping),
    );
}

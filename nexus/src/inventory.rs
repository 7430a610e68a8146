//! Inventory, as far as service NAT reads it, and the legacy era's
//! service-zone NAT task that derives its rows from it.
//!
//! Upstream (omicron before `1a20a12eb1`, PR #10961) had two background
//! tasks here:
//!
//! * the **inventory collector** (`inventory.period_secs_collect = 600` in
//!   Nexus's config, and at Nexus start): asks every sled-agent what it
//!   runs and stores the collection in the database;
//! * the **service-zone NAT tracker** (`ServiceZoneNatTracker`,
//!   `nexus/src/app/background/tasks/sync_service_zone_nat.rs`, every 30 s):
//!   takes the latest collection, derives a NAT row for each running
//!   boundary NTP, Nexus and external DNS zone (services VNI 100), refuses
//!   to act on a collection with fewer than one of each, syncs the
//!   database's service rows to that set (`nat_sync_service_zones`) and, if
//!   any row was **added**, triggers every dpd, which pulls the change.
//!
//! It never read a dpd's table. So drift that creates no new version — an
//! entry planted or deleted behind dpd's back — is not repaired until that
//! dpd pulls from generation 0 again (a dpd restart). And a sled that does
//! not answer one collection (down, restarting, cut off from the collecting
//! Nexus) has its zones' rows soft-deleted until a later collection finds
//! them again: every dpd removes that NAT on its next pull.
//!
//! Simplified: upstream's Nexus loads the latest collection from the
//! database every 15 s (`inventory.period_secs_load`); here the tracker
//! reads the database's latest collection directly. A collection is one
//! instant: the simulation's host reads what each reachable sled-agent
//! would have answered ([`crate::NexusHost::inventory`]).

use std::{net::SocketAddr, time::Duration};

use racksim_reconciler::{
    discovery::SwitchZoneResolver,
    dpd::DpdClient,
    http::HttpClient,
    nat::NatEntry,
    scrimlet_local::{ServiceZoneKind, ServiceZoneNat},
    DPD_PORT,
};
use tokio::sync::watch;

use crate::{
    tasks::{every, tick_unless_stopped},
    Event, Lane, NexusHost, Write,
};

/// Period of Nexus's inventory collection (upstream's
/// `inventory.period_secs_collect = 600`).
pub const INVENTORY_PERIOD: Duration = Duration::from_secs(600);

/// What one sled's sled-agent answered an inventory collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SledInventory {
    pub sled: String,
    /// The service zones it reports running; `None` if it did not answer
    /// (its sled is down or cut off from the collecting Nexus).
    pub zones: Option<Vec<ServiceZoneNat>>,
}

/// One inventory collection, stored in the database (it outlives the
/// Nexus that collected it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collection {
    /// The collection's number (1 for the first), rack-wide.
    pub id: u64,
    pub sleds: Vec<SledInventory>,
}

impl Collection {
    /// The service zones' NAT rows this collection implies, as the tracker
    /// derives them — or why it refuses to act on it (upstream's
    /// `MIN_NTP_COUNT`, `MIN_NEXUS_COUNT`, `MIN_EXTERNAL_DNS_COUNT`, all 1,
    /// checked after "no values at all").
    pub fn service_zone_nat(&self) -> Result<Vec<NatEntry>, String> {
        let zones: Vec<&ServiceZoneNat> = self
            .sleds
            .iter()
            .flat_map(|s| s.zones.iter().flatten())
            .collect();
        if zones.is_empty() {
            return Err("no service zone NAT values could be generated from inventory".into());
        }
        let count = |kind| zones.iter().filter(|z| z.kind == kind).count();
        for (kind, what) in [
            (ServiceZoneKind::ExternalDns, "dns"),
            (ServiceZoneKind::BoundaryNtp, "ntp"),
            (ServiceZoneKind::Nexus, "nexus"),
        ] {
            if count(kind) < 1 {
                return Err(format!(
                    "generated config for fewer than the minimum allowed number of {what} zones"
                ));
            }
        }
        Ok(zones.iter().map(|z| z.entry).collect())
    }

    /// `collection #3: 5 zone(s) from 4 of 5 sleds (sled3 did not answer)`.
    pub fn summary(&self) -> String {
        let answered = self.sleds.iter().filter(|s| s.zones.is_some()).count();
        let zones: usize = self.sleds.iter().flat_map(|s| &s.zones).map(Vec::len).sum();
        let silent: Vec<&str> = self
            .sleds
            .iter()
            .filter(|s| s.zones.is_none())
            .map(|s| s.sled.as_str())
            .collect();
        let silent = if silent.is_empty() {
            String::new()
        } else {
            format!(" ({} did not answer)", silent.join(", "))
        };
        format!(
            "collection #{}: {zones} service zone(s) from {answered} of {} sled(s){silent}",
            self.id,
            self.sleds.len()
        )
    }
}

/// The inventory collector of the eras whose service-NAT task reads it: at
/// start and every [`INVENTORY_PERIOD`], collect and store the collection.
pub async fn collector<H: NexusHost>(host: &H, mut stop: watch::Receiver<bool>) {
    if !host.era().service_zone_nat_task() {
        return;
    }
    let mut interval = every(INVENTORY_PERIOD);
    while tick_unless_stopped(&mut interval, &mut stop).await {
        // The collection's requests to the sled-agents, and its insert.
        // A database error loses this collection: logged, and the next
        // period collects again (upstream's collector task).
        if let Err(e) = host.round_trip().await {
            host.record(
                Event::new(
                    Lane::Reconciler,
                    format!("nexus inventory: collection not stored: {e}"),
                )
                .field("task", "nexus-inventory"),
            );
            continue;
        }
        let sleds = host.inventory();
        let collection = host.db(|db| {
            let id = db.inventory.as_ref().map_or(0, |c| c.id) + 1;
            let c = Collection { id, sleds };
            db.inventory = Some(c.clone());
            c
        });
        host.record(
            Event::new(
                Lane::Reconciler,
                format!("nexus inventory: {}", collection.summary()),
            )
            .field("task", "nexus-inventory")
            .field("collection", collection.id),
        );
    }
}

/// The legacy era's service-zone NAT task (`ServiceZoneNatTracker`): every
/// period, sync the database's service-zone NAT rows to the latest
/// inventory collection and trigger every dpd if a row was added. An
/// activation is a trace line when it changed rows or its outcome differs
/// from the last one's (a refusal, a new collection): its effect on dpd
/// comes later, through each dpd's pull, and a reader needs to see which
/// collection it acted on — but not thirty identical lines an hour.
pub async fn service_zone_nat<H: NexusHost>(host: &H, mut stop: watch::Receiver<bool>) {
    if !host.era().service_zone_nat_task() {
        return;
    }
    let mut activation = 0u64;
    let mut interval = every(host.rpw_period());
    let (connector, resolver) = (host.connector(), host.resolver());
    let mut last = String::new();
    while tick_unless_stopped(&mut interval, &mut stop).await {
        activation += 1;
        let (line, changed) = sync_once(host, &connector, &resolver).await;
        // A change is always a line, even the same change again.
        if changed || line != last {
            record(host, activation, line.clone());
        }
        last = line;
    }
}

/// One activation of the tracker: its trace line, and whether it changed
/// any row.
async fn sync_once<H: NexusHost>(
    host: &H,
    connector: &H::Connector,
    resolver: &H::Resolver,
) -> (String, bool) {
    // A database error ends the activation: logged (its line), and the
    // next period tries again, as upstream's task returns its error.
    if let Err(e) = host.round_trip().await {
        return (format!("database: {e}"), false);
    }
    let Some(collection) = host.db(|db| db.inventory.clone()) else {
        return ("inventory collection is None".into(), false);
    };
    let values = match collection.service_zone_nat() {
        Ok(values) => values,
        Err(e) => return (format!("collection #{}: {e}", collection.id), false),
    };
    if let Err(e) = host.sequence_round_trip().await {
        return (format!("database: {e}"), false);
    }
    // One statement per row, as upstream's `nat_sync_service_zones`.
    let adds = crate::store::nat_statements(host, "service zone NAT row", |nat| {
        nat.begin_sync_service_zones(&values)
    })
    .await;
    let added = adds.iter().filter(|&&a| a).count();
    let removed = adds.len() - added;
    if added + removed > 0 {
        host.wrote(Write::Nat);
    }
    let mut line = format!(
        "collection #{}: {} row(s) wanted, {added} added, {removed} removed",
        collection.id,
        values.len()
    );
    // Upstream triggers on additions only: a removal waits for each dpd's
    // own 30 s timer.
    if added > 0 {
        line += &match resolver.switch_zones().await {
            Err(e) => format!("; dpd discovery failed: {}", host.names(&e.0)),
            Ok(mut zones) => {
                zones.sort();
                let mut parts = Vec::new();
                for z in zones {
                    let dpd = DpdClient::new(HttpClient::new(
                        connector.clone(),
                        SocketAddr::new(z.into(), DPD_PORT),
                    ));
                    let outcome = match dpd.nat_trigger_update().await {
                        Ok(()) => "triggered".to_string(),
                        // Logged, as upstream's `error!`, and not retried.
                        Err(e) => format!("trigger failed: {}", host.names(&e.to_string())),
                    };
                    parts.push(format!("{} {outcome}", host.zone_name(z)));
                }
                format!("; {}", parts.join(", "))
            }
        };
    }
    (line, added + removed > 0)
}

fn record<H: NexusHost>(host: &H, activation: u64, line: String) {
    host.record(
        Event::new(
            Lane::Reconciler,
            format!("nexus service-zone NAT tracker #{activation}: {line}"),
        )
        .field("task", "nexus-service-nat")
        .field("activation", activation),
    );
}

#[cfg(test)]
mod tests;

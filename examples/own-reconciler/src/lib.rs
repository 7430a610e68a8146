//! A service-NAT reconciler that racksim did not write: the kind of code
//! another team would bring to racksim's live fixture.
//!
//! It knows nothing of racksim. It talks to each switch zone's dpd through
//! a client progenitor generates from upstream's published dpd document
//! (dendrite's `dpd-client` is generated the same way), and makes every
//! switch's service entries — those on Omicron's services VNI — exactly the
//! desired ones: it lists the table with the generated stream helpers,
//! deletes the entries nobody wants and creates the missing ones. Guest
//! entries (other VNIs) are someone else's and left alone.
//!
//! Its test (`tests/fixture.rs`) starts a racksim rack in fakes-only mode,
//! points this reconciler at the printed dpd addresses, breaks the rack
//! through racksim's generated control client and asserts, through the
//! control API's gaps and wait, that the reconciler repairs it.

use std::{net::Ipv4Addr, time::Duration};

use futures::TryStreamExt;
pub use racksim_upstream_clients::dpd;
use racksim_upstream_clients::dpd::types::Ipv4Nat;
use tokio::sync::watch;

/// Omicron's VNI for service zones (`omicron_common::api::external::Vni::SERVICES_VNI`).
pub const SERVICES_VNI: u32 = 100;

/// What one pass did to one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchOutcome {
    /// The table now holds the desired service entries.
    Reconciled { created: usize, deleted: usize },
    /// A call to its dpd failed; the next pass tries again.
    Failed(String),
}

/// One switch zone's dpd, by a name of the caller's choosing.
pub struct Switch {
    pub name: String,
    pub dpd: dpd::Client,
}

/// The reconciler: every switch it is given, made to hold `desired`.
pub struct ServiceNatReconciler {
    switches: Vec<Switch>,
}

impl ServiceNatReconciler {
    /// A reconciler of the dpds at `switches` (`(name, base URL)`).
    pub fn new<'a>(switches: impl IntoIterator<Item = (&'a str, String)>) -> Self {
        ServiceNatReconciler {
            switches: switches
                .into_iter()
                .map(|(name, url)| Switch {
                    name: name.to_string(),
                    dpd: dpd::Client::new(&url),
                })
                .collect(),
        }
    }

    /// One pass over every switch, in order; a switch whose dpd fails does
    /// not stop the others.
    pub async fn reconcile(&self, desired: &[Ipv4Nat]) -> Vec<(String, SwitchOutcome)> {
        let mut out = Vec::new();
        for s in &self.switches {
            let outcome = match reconcile_switch(&s.dpd, desired).await {
                Ok((created, deleted)) => SwitchOutcome::Reconciled { created, deleted },
                Err(e) => SwitchOutcome::Failed(e),
            };
            out.push((s.name.clone(), outcome));
        }
        out
    }

    /// Reconciles every `period` and whenever `desired` changes, until the
    /// sender is dropped.
    pub async fn run(self, mut desired: watch::Receiver<Vec<Ipv4Nat>>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Both arms are cancel-safe: a tick or a change that loses the
            // race is seen on the next turn.
            tokio::select! {
                _ = tick.tick() => {}
                changed = desired.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            let want = desired.borrow_and_update().clone();
            self.reconcile(&want).await;
        }
    }
}

/// Every entry of one dpd's IPv4 NAT table.
pub async fn list_table(dpd: &dpd::Client) -> Result<Vec<Ipv4Nat>, String> {
    let addresses: Vec<Ipv4Addr> = dpd
        .nat_ipv4_addresses_list_stream(None)
        .try_collect()
        .await
        .map_err(|e| format!("listing addresses: {e}"))?;
    let mut entries = Vec::new();
    for ip in &addresses {
        let page: Vec<Ipv4Nat> = dpd
            .nat_ipv4_list_stream(ip, None)
            .try_collect()
            .await
            .map_err(|e| format!("listing {ip}: {e}"))?;
        entries.extend(page);
    }
    Ok(entries)
}

/// Deletes the service entries not desired (or desired with another
/// target), then creates the missing ones: `(created, deleted)`.
async fn reconcile_switch(
    dpd: &dpd::Client,
    desired: &[Ipv4Nat],
) -> Result<(usize, usize), String> {
    let have: Vec<Ipv4Nat> = list_table(dpd)
        .await?
        .into_iter()
        .filter(|e| e.target.vni.0 == SERVICES_VNI)
        .collect();
    let mut deleted = 0;
    for e in have.iter().filter(|e| !desired.contains(e)) {
        dpd.nat_ipv4_delete(&e.external, e.low)
            .await
            .map_err(|err| format!("deleting {}/{}: {err}", e.external, e.low))?;
        deleted += 1;
    }
    let mut created = 0;
    for e in desired.iter().filter(|e| !have.contains(e)) {
        dpd.nat_ipv4_create(&e.external, e.low, e.high, &e.target)
            .await
            .map_err(|err| format!("creating {}/{}-{}: {err}", e.external, e.low, e.high))?;
        created += 1;
    }
    Ok((created, deleted))
}

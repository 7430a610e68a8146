//! Desired service NAT model, the pure planner, and the executor.
//!
//! ## Why plan first
//!
//! Reconciling one switch is split into a *pure* step — compare what the
//! switch has with what it should have and decide — and an *effectful* step
//! that applies the decision. The pure step is where the interesting cases
//! live (stale target, wrong range, overlapping leftovers) and it is tested
//! exhaustively without any I/O; the effectful step is a dumb loop.
//!
//! ## Why remove before create
//!
//! dpd refuses (409) to create an entry whose port range overlaps an existing
//! one with a different target. When a zone moves to another sled, or its
//! range changes, the old entry is in the way of the new one: it has to go
//! first. Removing first briefly leaves the address without NAT, which is no
//! worse than the state being repaired (the old entry pointed at the wrong
//! place).
//!
//! ## Why continue past failures
//!
//! Entries are independent. One entry failing (a 409 from an entry outside
//! our scope, a transient 500) must not keep the others — boundary NTP's above
//! all — from being programmed. Every failure is recorded in the outcome as a
//! string and the next activation tries again.

use std::{
    collections::BTreeSet,
    fmt,
    net::{Ipv4Addr, Ipv6Addr},
};

use serde::{Deserialize, Serialize};

use crate::{
    dpd::{DpdClient, Ipv4Nat, NatTarget},
    http::{ClientError, Connector},
};

/// Page size used when listing a switch's NAT state.
pub const NAT_PAGE_SIZE: u32 = 128;

/// One desired NAT entry for a service zone.
///
/// Ordered by `(external_ip, first_port, last_port, target)`, which is the
/// order plans and statuses list entries in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NatEntry {
    pub external_ip: Ipv4Addr,
    pub first_port: u16,
    pub last_port: u16,
    pub target: NatTarget,
}

impl NatEntry {
    pub fn from_dpd(e: &Ipv4Nat) -> Self {
        NatEntry {
            external_ip: e.external,
            first_port: e.low,
            last_port: e.high,
            target: e.target,
        }
    }

    /// The dpd representation of this entry.
    pub fn to_dpd(&self) -> Ipv4Nat {
        Ipv4Nat {
            external: self.external_ip,
            low: self.first_port,
            high: self.last_port,
            target: self.target,
        }
    }

    /// Same external IP and intersecting (inclusive) port ranges: dpd would
    /// refuse to hold both unless they are identical.
    pub fn overlaps(&self, other: &NatEntry) -> bool {
        self.external_ip == other.external_ip
            && self.first_port <= other.last_port
            && other.first_port <= self.last_port
    }

    /// The sled this entry sends traffic to.
    pub fn internal_ip(&self) -> Ipv6Addr {
        self.target.internal_ip
    }
}

impl fmt::Display for NatEntry {
    /// `198.51.100.1/0-65535 -> fd00:1122:3344:101::1 (a8:40:25:ff:00:01, vni 100)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}-{} -> {} ({}, vni {})",
            self.external_ip,
            self.first_port,
            self.last_port,
            self.target.internal_ip,
            self.target.inner_mac,
            self.target.vni
        )
    }
}

/// The plan for one switch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatPlan {
    pub unchanged: Vec<NatEntry>,
    pub to_remove: Vec<NatEntry>,
    pub to_create: Vec<NatEntry>,
}

impl NatPlan {
    /// Nothing to do.
    pub fn is_noop(&self) -> bool {
        self.to_remove.is_empty() && self.to_create.is_empty()
    }
}

/// Pure: `current` are entries listed from the switch already filtered to the
/// ones this reconciler manages; `desired` need not be sorted or deduplicated.
/// Exact-match entries are unchanged; any current entry not exactly desired is
/// removed (stale target, wrong range, overlapping); any desired entry not
/// present exactly is created. Each list is sorted and free of duplicates.
///
/// Desired entries that overlap *each other* are a configuration error this
/// function does not hide: both are planned, and dpd's 409 on the second shows
/// up as a create failure.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(CompareOnlyInternalIp))]
pub fn plan(desired: &[NatEntry], current: &[NatEntry]) -> NatPlan {
    let desired: BTreeSet<NatEntry> = desired.iter().copied().collect();
    let current: BTreeSet<NatEntry> = current.iter().copied().collect();
    NatPlan {
        unchanged: current.intersection(&desired).copied().collect(),
        to_remove: current.difference(&desired).copied().collect(),
        to_create: desired.difference(&current).copied().collect(),
    }
}

/// Result of applying a plan to one switch (seed 003's status shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum NatReconcileOutcome {
    Complete {
        unchanged: usize,
        removed: usize,
        remove_failures: Vec<String>,
        created: usize,
        create_failures: Vec<String>,
    },
    FailedReadingCurrentDpdNatEntries {
        error: ClientError,
    },
}

/// `unchanged 1, removed 1, created 2, create failed: ...`: counts that
/// are not zero, then each failure.
impl std::fmt::Display for NatReconcileOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NatReconcileOutcome::Complete {
                unchanged,
                removed,
                remove_failures,
                created,
                create_failures,
            } => {
                write!(f, "unchanged {unchanged}")?;
                if *removed > 0 {
                    write!(f, ", removed {removed}")?;
                }
                if *created > 0 {
                    write!(f, ", created {created}")?;
                }
                for e in remove_failures {
                    write!(f, ", remove failed: {e}")?;
                }
                for e in create_failures {
                    write!(f, ", create failed: {e}")?;
                }
                Ok(())
            }
            NatReconcileOutcome::FailedReadingCurrentDpdNatEntries { error } => {
                write!(f, "cannot read NAT entries: {error}")
            }
        }
    }
}

impl NatReconcileOutcome {
    /// The switch already matched: nothing removed, nothing created, nothing
    /// failed.
    pub fn is_noop(&self) -> bool {
        matches!(
            self,
            NatReconcileOutcome::Complete {
                removed: 0,
                created: 0,
                ..
            }
        ) && self.is_converged()
    }

    /// Everything desired is known to be in place: the read succeeded and
    /// nothing failed.
    pub fn is_converged(&self) -> bool {
        matches!(
            self,
            NatReconcileOutcome::Complete { remove_failures, create_failures, .. }
                if remove_failures.is_empty() && create_failures.is_empty()
        )
    }
}

/// An external address and an inclusive port range: what one zone owns.
///
/// Ownership is by range, not by address: boundary NTP zones share one
/// source-NAT IP, each on its own chunk of ports, so "every entry on my IP
/// is mine" would make two sleds delete each other's entries forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ExternalRange {
    pub ip: Ipv4Addr,
    pub first_port: u16,
    pub last_port: u16,
}

impl ExternalRange {
    /// The range an entry occupies.
    pub fn of(entry: &NatEntry) -> Self {
        ExternalRange {
            ip: entry.external_ip,
            first_port: entry.first_port,
            last_port: entry.last_port,
        }
    }

    /// Whether `entry` is on this address and shares a port with the range.
    pub fn overlaps(&self, entry: &NatEntry) -> bool {
        entry.external_ip == self.ip
            && entry.first_port <= self.last_port
            && self.first_port <= entry.last_port
    }
}

/// Scope of what a reconciler manages on a switch, used to read current state.
///
/// A reconciler must only ever remove entries it owns; the scope is how it
/// says which those are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Entries overlapping these external ranges (a sled's own zones):
    /// every such entry is ours whatever its target or exact range, so a
    /// stale entry left by the zone's previous sled, or one with a wrong
    /// range, is repaired; an entry on the same address but another range
    /// belongs to another zone and is never touched.
    ExternalRanges(BTreeSet<ExternalRange>),
    /// Every address, entries with this VNI (the rack-wide services config).
    Vni(u32),
}

/// Reads the current entries within `scope`, sorted.
pub async fn read_current<C: Connector>(
    dpd: &DpdClient<C>,
    scope: &Scope,
) -> Result<Vec<NatEntry>, ClientError> {
    let mut current = BTreeSet::new();
    match scope {
        Scope::ExternalRanges(ranges) => {
            let ips: BTreeSet<Ipv4Addr> = ranges.iter().map(|r| r.ip).collect();
            for ip in ips {
                for e in dpd.nat_ipv4_list_all(ip, NAT_PAGE_SIZE).await? {
                    let e = NatEntry::from_dpd(&e);
                    if ranges.iter().any(|r| r.overlaps(&e)) {
                        current.insert(e);
                    }
                }
            }
        }
        Scope::Vni(vni) => {
            let addresses: BTreeSet<Ipv4Addr> = dpd
                .nat_ipv4_addresses_all(NAT_PAGE_SIZE)
                .await?
                .into_iter()
                .collect();
            for ip in addresses {
                for e in dpd.nat_ipv4_list_all(ip, NAT_PAGE_SIZE).await? {
                    if e.target.vni == *vni {
                        current.insert(NatEntry::from_dpd(&e));
                    }
                }
            }
        }
    }
    Ok(current.into_iter().collect())
}

/// List current (pages of [`NAT_PAGE_SIZE`]) within scope, plan, and
/// [`execute`] the plan.
pub async fn reconcile_switch<C: Connector>(
    dpd: &DpdClient<C>,
    desired: &[NatEntry],
    scope: &Scope,
) -> NatReconcileOutcome {
    let current = match read_current(dpd, scope).await {
        Ok(current) => current,
        Err(error) => return NatReconcileOutcome::FailedReadingCurrentDpdNatEntries { error },
    };
    let plan = plan(desired, &current);
    tracing::debug!(
        switch = %dpd.addr(),
        unchanged = plan.unchanged.len(),
        to_remove = plan.to_remove.len(),
        to_create = plan.to_create.len(),
        "NAT plan computed"
    );
    execute(dpd, plan).await
}

/// The effectful step: delete `to_remove` first (each failure recorded,
/// continue), then create `to_create` (same).
///
/// Deletes are by `(external_ip, first_port)`, the key dpd uses. A delete
/// answered 404 counts as removed: the entry is gone, which is what was
/// wanted (someone else — Nexus's RPW, a dpd restart — got there first).
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(CreateBeforeRemove))]
pub async fn execute<C: Connector>(dpd: &DpdClient<C>, plan: NatPlan) -> NatReconcileOutcome {
    let mut removed = 0;
    let mut remove_failures = Vec::new();
    for entry in &plan.to_remove {
        match dpd
            .nat_ipv4_delete(entry.external_ip, entry.first_port)
            .await
        {
            Ok(()) => {
                tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "removed", "NAT entry removed");
                removed += 1
            }
            Err(e) if e.status() == Some(404) => {
                tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "already gone", "NAT entry removed");
                removed += 1
            }
            Err(e) => {
                tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "failed", error = %e, "NAT entry removal failed");
                remove_failures.push(format!("removing {entry}: {e}"))
            }
        }
    }

    let mut created = 0;
    let mut create_failures = Vec::new();
    for entry in &plan.to_create {
        match dpd
            .nat_ipv4_create(
                entry.external_ip,
                entry.first_port,
                entry.last_port,
                &entry.target,
            )
            .await
        {
            Ok(()) => {
                tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "created", "NAT entry created");
                created += 1
            }
            Err(e) => {
                tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "failed", error = %e, "NAT entry creation failed");
                create_failures.push(format!("creating {entry}: {e}"))
            }
        }
    }

    NatReconcileOutcome::Complete {
        unchanged: plan.unchanged.len(),
        removed,
        remove_failures,
        created,
        create_failures,
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use serde_json::json;

    use super::*;
    use crate::{
        dpd::MacAddr,
        http::HttpClient,
        testing::{zone_ip, FakeConnector, FakeNet, FakeResponse},
        DPD_PORT, SERVICES_VNI,
    };

    fn sled(n: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0x1122, 0x3344, n, 0, 0, 0, 1)
    }

    fn entry(ip: [u8; 4], first: u16, last: u16, sled_n: u16) -> NatEntry {
        NatEntry {
            external_ip: Ipv4Addr::from(ip),
            first_port: first,
            last_port: last,
            target: NatTarget {
                internal_ip: sled(sled_n),
                inner_mac: MacAddr::new([
                    0xa8,
                    0x40,
                    0x25,
                    0xff,
                    0x00,
                    u8::try_from(sled_n).unwrap(),
                ]),
                vni: SERVICES_VNI,
            },
        }
    }

    const NEXUS: [u8; 4] = [198, 51, 100, 1];
    const NTP: [u8; 4] = [198, 51, 100, 2];
    const DNS: [u8; 4] = [198, 51, 100, 3];

    #[test]
    fn display_and_overlaps() {
        let e = entry(NEXUS, 0, 65535, 1);
        assert_eq!(
            e.to_string(),
            "198.51.100.1/0-65535 -> fd00:1122:3344:1::1 (a8:40:25:ff:00:01, vni 100)"
        );
        assert!(e.overlaps(&entry(NEXUS, 65535, 65535, 2)));
        assert!(!e.overlaps(&entry(NTP, 0, 65535, 1)));
        let a = entry(NTP, 0, 16383, 1);
        assert!(a.overlaps(&entry(NTP, 16383, 32767, 1)));
        assert!(!a.overlaps(&entry(NTP, 16384, 32767, 1)));
        assert!(
            entry(NTP, 16384, 32767, 1).overlaps(&a) == a.overlaps(&entry(NTP, 16384, 32767, 1))
        );
        assert_eq!(NatEntry::from_dpd(&e.to_dpd()), e);
    }

    #[test]
    fn plan_of_an_empty_switch_creates_everything_sorted() {
        let desired = [
            entry(NTP, 0, 16383, 1),
            entry(NEXUS, 0, 65535, 2),
            entry(NTP, 0, 16383, 1),
        ];
        let p = plan(&desired, &[]);
        assert_eq!(
            p,
            NatPlan {
                unchanged: vec![],
                to_remove: vec![],
                to_create: vec![entry(NEXUS, 0, 65535, 2), entry(NTP, 0, 16383, 1)],
            }
        );
        assert!(!p.is_noop());
    }

    #[test]
    fn plan_keeps_exact_matches() {
        let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
        let p = plan(&desired, &desired);
        assert_eq!(
            p.unchanged,
            vec![entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)]
        );
        assert!(p.is_noop());
    }

    #[test]
    fn plan_replaces_stale_target_wrong_range_and_overlapping() {
        let desired = [
            entry(NEXUS, 0, 65535, 1),
            entry(NTP, 0, 16383, 1),
            entry(DNS, 0, 65535, 1),
        ];
        let mut stale_mac = entry(DNS, 0, 65535, 1);
        stale_mac.target.inner_mac = MacAddr::new([2, 0, 0, 0, 0, 9]);
        let mut stale_vni = entry(DNS, 0, 65535, 1);
        stale_vni.target.vni = 7;
        let current = [
            // stale target: zone moved from sled 2 to sled 1
            entry(NEXUS, 0, 65535, 2),
            // wrong range
            entry(NTP, 0, 32767, 1),
            // overlapping leftover on the same address
            entry(NTP, 40000, 40010, 3),
            stale_mac,
            stale_vni,
        ];
        let p = plan(&desired, &current);
        assert_eq!(p.unchanged, vec![]);
        let mut expected_remove = current.to_vec();
        expected_remove.sort();
        assert_eq!(p.to_remove, expected_remove);
        assert_eq!(
            p.to_create,
            vec![
                entry(NEXUS, 0, 65535, 1),
                entry(NTP, 0, 16383, 1),
                entry(DNS, 0, 65535, 1)
            ]
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        // Sorted by external IP first.
        assert_eq!(p.to_create[0].external_ip, Ipv4Addr::from(NEXUS));
        assert!(p.to_remove.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn plan_mixed() {
        let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
        let current = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 4)];
        assert_eq!(
            plan(&desired, &current),
            NatPlan {
                unchanged: vec![entry(NEXUS, 0, 65535, 1)],
                to_remove: vec![entry(NTP, 0, 16383, 4)],
                to_create: vec![entry(NTP, 0, 16383, 1)],
            }
        );
    }

    #[test]
    fn outcome_serializes_with_result_tag() {
        let o = NatReconcileOutcome::Complete {
            unchanged: 1,
            removed: 0,
            remove_failures: vec![],
            created: 2,
            create_failures: vec!["x".into()],
        };
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            json!({"result": "complete", "unchanged": 1, "removed": 0, "remove_failures": [],
                   "created": 2, "create_failures": ["x"]})
        );
        assert!(!o.is_converged());
        let f = NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
            error: ClientError::Connect {
                addr: "[::1]:1".into(),
                message: "refused".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"result": "failed_reading_current_dpd_nat_entries",
                   "error": {"kind": "connect", "addr": "[::1]:1", "message": "refused"}})
        );
    }

    fn client(net: &FakeNet, zone: Ipv6Addr) -> DpdClient<FakeConnector> {
        DpdClient::new(HttpClient::new(
            net.connector(),
            SocketAddr::new(zone.into(), DPD_PORT),
        ))
    }

    fn scope_of(desired: &[NatEntry]) -> Scope {
        Scope::ExternalRanges(desired.iter().map(ExternalRange::of).collect())
    }

    /// The mutating requests, in order.
    fn mutations(net: &FakeNet, zone: Ipv6Addr) -> Vec<String> {
        net.requests(zone, DPD_PORT)
            .into_iter()
            .filter(|r| !r.starts_with("GET "))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn removes_before_creating_and_converges() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        // Stale: Nexus's entry points at its old sled; NTP has the wrong
        // range; someone else's entry on another address must survive.
        net.insert_nat(zone, entry(NEXUS, 0, 65535, 2).to_dpd());
        net.insert_nat(zone, entry(NTP, 0, 32767, 1).to_dpd());
        net.insert_nat(zone, entry(DNS, 0, 65535, 1).to_dpd());
        let other = entry([203, 0, 113, 5], 0, 65535, 9);
        net.insert_nat(zone, other.to_dpd());

        let desired = [
            entry(NEXUS, 0, 65535, 1),
            entry(NTP, 0, 16383, 1),
            entry(DNS, 0, 65535, 1),
        ];
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 1,
                removed: 2,
                remove_failures: vec![],
                created: 2,
                create_failures: vec![],
            }
        );
        assert_eq!(
            mutations(&net, zone),
            vec![
                "DELETE /nat/ipv4/198.51.100.1/0",
                "DELETE /nat/ipv4/198.51.100.2/0",
                "PUT /nat/ipv4/198.51.100.1/0/65535",
                "PUT /nat/ipv4/198.51.100.2/0/16383",
            ]
        );
        let mut expected: Vec<_> = desired.iter().chain([&other]).map(|e| e.to_dpd()).collect();
        expected.sort();
        assert_eq!(net.nat(zone), expected);

        // A second pass has nothing to do.
        net.clear_log();
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        assert!(outcome.is_converged());
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 3,
                removed: 0,
                remove_failures: vec![],
                created: 0,
                create_failures: vec![],
            }
        );
        assert_eq!(mutations(&net, zone), Vec::<String>::new());
    }

    #[tokio::test(start_paused = true)]
    async fn continues_past_individual_failures() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 1);
        net.insert_nat(zone, entry(NEXUS, 0, 65535, 2).to_dpd());
        net.insert_nat(zone, entry(DNS, 0, 65535, 2).to_dpd());
        // The first delete fails; the first create conflicts.
        net.fail(
            zone,
            DPD_PORT,
            "DELETE",
            "/nat/ipv4/198.51.100.1/0",
            Some(FakeResponse::error(500, "asic busy")),
        );
        net.fail(
            zone,
            DPD_PORT,
            "PUT",
            "/nat/ipv4/198.51.100.1/0/65535",
            Some(FakeResponse::error(409, "overlapping NAT entry")),
        );
        let desired = [
            entry(NEXUS, 0, 65535, 1),
            entry(NTP, 0, 16383, 1),
            entry(DNS, 0, 65535, 1),
        ];
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        let addr = SocketAddr::new(zone.into(), DPD_PORT);
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 0,
                removed: 1,
                remove_failures: vec![format!(
                    "removing {}: DELETE /nat/ipv4/198.51.100.1/0 on {addr}: HTTP 500: asic busy",
                    entry(NEXUS, 0, 65535, 2)
                )],
                created: 2,
                create_failures: vec![format!(
                    "creating {}: PUT /nat/ipv4/198.51.100.1/0/65535 on {addr}: HTTP 409: overlapping NAT entry",
                    entry(NEXUS, 0, 65535, 1)
                )],
            }
        );
        assert_eq!(
            mutations(&net, zone),
            vec![
                "DELETE /nat/ipv4/198.51.100.1/0",
                "DELETE /nat/ipv4/198.51.100.3/0",
                "PUT /nat/ipv4/198.51.100.1/0/65535",
                "PUT /nat/ipv4/198.51.100.2/0/16383",
                "PUT /nat/ipv4/198.51.100.3/0/65535",
            ]
        );
        assert!(!outcome.is_converged());

        // Once the switch behaves, the next pass repairs the rest.
        net.clear_failures();
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 2,
                removed: 1,
                remove_failures: vec![],
                created: 1,
                create_failures: vec![],
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_answered_404_counts_as_removed() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        net.insert_nat(zone, entry(NTP, 0, 16383, 2).to_dpd());
        net.fail(
            zone,
            DPD_PORT,
            "DELETE",
            "/nat/ipv4/198.51.100.2/0",
            Some(FakeResponse::error(404, "gone")),
        );
        let desired = [entry(NTP, 0, 16383, 1)];
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        match outcome {
            NatReconcileOutcome::Complete {
                removed,
                remove_failures,
                ..
            } => {
                assert_eq!(removed, 1);
                assert!(remove_failures.is_empty());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn read_failure_is_reported_and_nothing_is_changed() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        net.fail(
            zone,
            DPD_PORT,
            "GET",
            "/nat/ipv4/198.51.100.2",
            Some(FakeResponse::error(503, "restarting")),
        );
        let desired = [entry(NEXUS, 0, 65535, 1), entry(NTP, 0, 16383, 1)];
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        match &outcome {
            NatReconcileOutcome::FailedReadingCurrentDpdNatEntries { error } => {
                assert_eq!(error.status(), Some(503));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(mutations(&net, zone), Vec::<String>::new());

        // An unreachable dpd is a read failure too.
        net.remove_switch_zone(zone);
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
        assert!(matches!(
            outcome,
            NatReconcileOutcome::FailedReadingCurrentDpdNatEntries {
                error: ClientError::Connect { .. }
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn reads_every_page() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        // 300 single-port entries on one address, asked for in pages of 128;
        // dpd caps a page at 64: 64 * 4 + 45 + empty.
        let desired: Vec<NatEntry> = (0..300u16)
            .map(|p| entry(NTP, p * 10, p * 10 + 9, 1))
            .collect();
        for e in &desired {
            net.insert_nat(zone, e.to_dpd());
        }
        // One stale entry at the very end of the listing must be found.
        let stale = entry(NTP, 5000, 5009, 2);
        net.insert_nat(zone, stale.to_dpd());
        // The whole address is in scope (the paging is under test here).
        let scope = Scope::ExternalRanges(
            [ExternalRange {
                ip: Ipv4Addr::from(NTP),
                first_port: 0,
                last_port: 65535,
            }]
            .into_iter()
            .collect(),
        );
        let outcome = reconcile_switch(&client(&net, zone), &desired, &scope).await;
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 300,
                removed: 1,
                remove_failures: vec![],
                created: 0,
                create_failures: vec![],
            }
        );
        let lists: Vec<String> = net
            .requests(zone, DPD_PORT)
            .into_iter()
            .filter(|r| r.starts_with("GET /nat/ipv4/198.51.100.2?"))
            .collect();
        assert_eq!(
            lists,
            vec![
                "GET /nat/ipv4/198.51.100.2?limit=128",
                "GET /nat/ipv4/198.51.100.2?limit=128&page_token=630",
                "GET /nat/ipv4/198.51.100.2?limit=128&page_token=1270",
                "GET /nat/ipv4/198.51.100.2?limit=128&page_token=1910",
                "GET /nat/ipv4/198.51.100.2?limit=128&page_token=2550",
                "GET /nat/ipv4/198.51.100.2?limit=128&page_token=5000",
            ]
        );
        assert_eq!(
            mutations(&net, zone),
            vec!["DELETE /nat/ipv4/198.51.100.2/5000"]
        );
    }

    /// Two boundary NTP zones on two sleds share one source-NAT address on
    /// disjoint port ranges. Each sled's reconciler owns its range, so each
    /// repairs its own entry and never removes the other's — in either
    /// order, and however often they run.
    #[tokio::test(start_paused = true)]
    async fn range_scope_leaves_the_other_zone_on_a_shared_address_alone() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        let low = entry(NTP, 0, 16383, 1);
        let high = entry(NTP, 16384, 32767, 2);
        // A stale entry of the low zone (its previous sled, and a range
        // overlapping its own) must go.
        net.insert_nat(zone, entry(NTP, 0, 8191, 3).to_dpd());
        for _ in 0..2 {
            for desired in [[high], [low]] {
                let outcome =
                    reconcile_switch(&client(&net, zone), &desired, &scope_of(&desired)).await;
                assert!(outcome.is_converged(), "{outcome:?}");
            }
        }
        let mut expected = vec![low.to_dpd(), high.to_dpd()];
        expected.sort();
        assert_eq!(net.nat(zone), expected);
        // Neither ever deleted the other's entry: the only delete is of the
        // stale one.
        let deletes: Vec<String> = mutations(&net, zone)
            .into_iter()
            .filter(|r| r.starts_with("DELETE"))
            .collect();
        assert_eq!(deletes, vec!["DELETE /nat/ipv4/198.51.100.2/0"]);
    }

    #[tokio::test(start_paused = true)]
    async fn vni_scope_reads_all_addresses_and_keeps_only_its_vni() {
        let net = FakeNet::new();
        let zone = zone_ip(1);
        net.add_switch_zone(zone, 0);
        // 130 addresses (more than a page), half of them an instance's VNI.
        let mut instance_entries = Vec::new();
        for i in 0..130u8 {
            let mut e = entry([10, 0, 1, i], 0, 65535, 1);
            if i % 2 == 0 {
                e.target.vni = 4242;
                instance_entries.push(e);
            }
            net.insert_nat(zone, e.to_dpd());
        }
        let desired = [entry(NEXUS, 0, 65535, 1)];
        let outcome =
            reconcile_switch(&client(&net, zone), &desired, &Scope::Vni(SERVICES_VNI)).await;
        assert_eq!(
            outcome,
            NatReconcileOutcome::Complete {
                unchanged: 0,
                removed: 65,
                remove_failures: vec![],
                created: 1,
                create_failures: vec![],
            }
        );
        let mut expected: Vec<_> = instance_entries
            .iter()
            .chain(desired.iter())
            .map(|e| e.to_dpd())
            .collect();
        expected.sort();
        assert_eq!(net.nat(zone), expected);
        let address_pages = net
            .requests(zone, DPD_PORT)
            .into_iter()
            .filter(|r| r.starts_with("GET /nat/ipv4?limit=128"))
            .count();
        // dpd caps a page at 64: 64 + 64 + 2 + empty.
        assert_eq!(address_pages, 4);
    }

    #[test]
    fn scope_serializes() {
        let s = Scope::ExternalRanges(
            [ExternalRange {
                ip: Ipv4Addr::from(NTP),
                first_port: 0,
                last_port: 16383,
            }]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"external_ranges": [{"ip": "198.51.100.2", "first_port": 0, "last_port": 16383}]})
        );
        assert_eq!(
            serde_json::to_value(Scope::Vni(100)).unwrap(),
            json!({"vni": 100})
        );
    }
}

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
    future::Future,
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
        ExternalRange::of(self).overlaps(other)
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

/// Result of applying a plan to one switch (the scrimlet-reconcilers PR's status shape).
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

/// The effectful step: delete `to_remove` first, then create `to_create`,
/// each failure recorded and the rest carried on with.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(CreateBeforeRemove))]
pub async fn execute<C: Connector>(dpd: &DpdClient<C>, plan: NatPlan) -> NatReconcileOutcome {
    let removed = remove_entries(dpd, &plan.to_remove).await;
    let created = create_entries(dpd, &plan.to_create).await;
    NatReconcileOutcome::of(&plan, removed, created)
}

/// What one phase of [`execute`] did: how many entries it removed or
/// created, and each failure.
pub(crate) struct Phase {
    done: usize,
    failures: Vec<String>,
}

impl NatReconcileOutcome {
    /// The outcome of executing `plan` in its two phases.
    pub(crate) fn of(plan: &NatPlan, removed: Phase, created: Phase) -> Self {
        NatReconcileOutcome::Complete {
            unchanged: plan.unchanged.len(),
            removed: removed.done,
            remove_failures: removed.failures,
            created: created.done,
            create_failures: created.failures,
        }
    }
}

/// Deletes each of `entries`, by `(external_ip, first_port)`, the key dpd
/// uses. A delete answered 404 counts as removed: the entry is gone, which
/// is what was wanted (someone else — Nexus's RPW, a dpd restart — got
/// there first).
pub(crate) async fn remove_entries<C: Connector>(
    dpd: &DpdClient<C>,
    entries: &[NatEntry],
) -> Phase {
    Phase::run(dpd, entries, PhaseWords::REMOVE, |entry| async move {
        match delete_entry(dpd, entry).await {
            Ok(()) => Ok("removed"),
            Err(e) if e.status() == Some(404) => Ok("already gone"),
            Err(e) => Err(e),
        }
    })
    .await
}

/// Creates each of `entries`.
pub(crate) async fn create_entries<C: Connector>(
    dpd: &DpdClient<C>,
    entries: &[NatEntry],
) -> Phase {
    Phase::run(dpd, entries, PhaseWords::CREATE, |entry| async move {
        create_entry(dpd, entry).await.map(|()| "created")
    })
    .await
}

/// How one phase of [`execute`] speaks: its debug line's message for an
/// entry done and for one failed, and the verb its failures begin with.
struct PhaseWords {
    done: &'static str,
    failed: &'static str,
    verb: &'static str,
}

impl PhaseWords {
    const REMOVE: PhaseWords = PhaseWords {
        done: "NAT entry removed",
        failed: "NAT entry removal failed",
        verb: "removing",
    };
    const CREATE: PhaseWords = PhaseWords {
        done: "NAT entry created",
        failed: "NAT entry creation failed",
        verb: "creating",
    };
}

impl Phase {
    /// Runs `step` on each of `entries` in turn, carrying on after a
    /// failure. `step` answers how a done entry went (its debug line's
    /// `outcome`), or the error that failed it.
    async fn run<'a, C: Connector, Step: Future<Output = Result<&'static str, ClientError>>>(
        dpd: &DpdClient<C>,
        entries: &'a [NatEntry],
        words: PhaseWords,
        mut step: impl FnMut(&'a NatEntry) -> Step,
    ) -> Phase {
        let mut done = 0;
        let mut failures = Vec::new();
        for entry in entries {
            match step(entry).await {
                Ok(outcome) => {
                    tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome, "{}", words.done);
                    done += 1
                }
                Err(e) => {
                    tracing::debug!(switch = %dpd.addr(), entry = %entry, outcome = "failed", error = %e, "{}", words.failed);
                    failures.push(format!("{} {entry}: {e}", words.verb))
                }
            }
        }
        Phase { done, failures }
    }
}

/// What one switch holds at `entry`'s `(ip, first_port)`, if anything.
pub async fn get_entry<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &NatEntry,
) -> Result<Option<NatTarget>, ClientError> {
    dpd.nat_ipv4_get(entry.external_ip, entry.first_port).await
}

/// Removes what one switch holds at `entry`'s `(ip, first_port)` (dpd
/// answers 404 if there is nothing).
pub async fn delete_entry<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &NatEntry,
) -> Result<(), ClientError> {
    dpd.nat_ipv4_delete(entry.external_ip, entry.first_port)
        .await
}

/// Creates `entry` on one switch (dpd answers 409 if an overlapping entry
/// is in the way).
pub async fn create_entry<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &NatEntry,
) -> Result<(), ClientError> {
    dpd.nat_ipv4_create(
        entry.external_ip,
        entry.first_port,
        entry.last_port,
        &entry.target,
    )
    .await
}

#[cfg(test)]
mod tests;

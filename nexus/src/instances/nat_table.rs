//! The instance NAT table of the control plane's database ([`NatTable`]):
//! versioned rows, soft deletes, the statements that write them in two
//! phases, the unique index on live rows, and the changeset dpd pulls.
//! Split from `store.rs` (the store trait and the saga log) because
//! the table is a concept of its own (and most of the old file).

use std::collections::BTreeMap;

use super::{NatChangeset, NatConflict, NatEnsure, StoreError};
use racksim_reconciler::nat::NatEntry;

/// One change of the instance NAT table as Nexus serves it to dpd: a wire
/// type, `racksim-wire`'s (the fake dpd applies it too).
pub use racksim_wire::nexus::NatEntryView;

/// A changeset's entry as this crate's [`NatEntry`].
pub trait NatEntryViewExt {
    fn entry(&self) -> NatEntry;
}

impl NatEntryViewExt for NatEntryView {
    fn entry(&self) -> NatEntry {
        NatEntry::from_dpd(&self.to_dpd())
    }
}

/// One row of the instance NAT table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NatRow {
    /// The instance the row is for; `None` for a service zone's row
    /// (VNI 100), which the legacy era's service-zone NAT task writes.
    instance: Option<u32>,
    entry: NatEntry,
    version_added: i64,
    version_removed: Option<i64>,
}

/// The instance NAT table of the control plane's database, versioned as
/// Omicron's `ipv4_nat_entry`: every row added takes the next version as
/// `version_added`; a removed row is kept with `version_removed`, so a dpd
/// that asks "what changed since version N" learns of removals too.
/// (Omicron garbage-collects old removed rows; the simulation keeps them.)
///
/// Each write is one statement, as upstream's (`ensure_nat_entry`'s one
/// `INSERT … SELECT … WHERE NOT EXISTS`, `nat_delete`'s one `UPDATE`, each
/// its own implicit transaction), in two phases: [`NatTable::begin_set_instance`]
/// (or [`NatTable::begin_sync_service_zones`]) reads the table and draws
/// the version from the sequence — `nextval`, which is not transactional:
/// the draw is at once and for good — and holds the change *pending*;
/// [`NatTable::commit`] writes it. Pending is what a CockroachDB statement
/// is between its `nextval` and the write intent it lays: nobody sees it or
/// waits for it (a reader that scans before the intent exists reads past
/// it, and the write is then pushed above the reader's timestamp, yet keeps
/// the version it drew), so [`NatTable::changeset`] and the live rows show
/// only committed changes. A second writer of the same row meanwhile reads
/// it as committed and may change it first; the pending statement then
/// meets that newer write (CockroachDB's write-too-old), is retried, finds
/// nothing left to do, and its version is burnt, a gap. So is the version
/// of a statement that never laid its intent ([`NatTable::abort`]: its
/// gateway died). Simplified: between the intent and the commit the
/// simulation has no time, so a reader never waits; the retry's own
/// `nextval` is not drawn (its value would be a gap too).
///
/// **The unique index on live rows.** Omicron's
/// `overlapping_ipv4_nat_entry` (since #3804; `overlapping_nat_entry`
/// today, `schema/crdb/dbinit.sql`) is a unique index on
/// `(external_address, first_port, last_port) WHERE time_deleted IS NULL`:
/// despite its name, on the exact triple, and only over live rows (a
/// soft-delete sets `time_deleted` with `version_removed`). The ensure's
/// `INSERT … SELECT … WHERE NOT EXISTS` skips only a live row with all the
/// entry's values, so an entry whose address and ports a live row of
/// another target holds is inserted, and the index refuses it. The row's
/// `version_added` is `DEFAULT nextval(..)`, evaluated for the row before
/// the index is checked, and `nextval` is not rolled back: the refused
/// insert burns a version (a gap, harmless to dpd). What the ensure does
/// then is [`NatConflict`]'s era: fail ([`StoreError::NatConflict`]), or
/// soft-delete the blocking row and insert again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NatTable {
    /// Committed rows only. Written only by [`NatTable::commit`], which
    /// clears `instance_versions`.
    rows: Vec<NatRow>,
    /// [`NatTable::live_instance_versions_shared`], listed at the first
    /// read after a write.
    instance_versions: VersionsListing,
    /// The sequence's last value (`nat_version`).
    version: i64,
    /// Statements that drew their version and have not written yet.
    pending: std::collections::BTreeMap<i64, PendingChange>,
    /// Which rows the ensure query counts as already there: upstream's
    /// today (live rows), or its query before omicron #4610.
    ensure: NatEnsure,
    /// The changeset query's order: upstream's today, or before #5036.
    changeset_order: NatChangeset,
    /// What an ensure whose insert the unique index refuses does:
    /// upstream's today (take the address over), or before #4694 (fail).
    conflict: NatConflict,
}

/// The live instance rows' versions as last listed: a cache of `rows`,
/// not state of the table, so any two are equal (a table equals another
/// with the same rows whatever either has listed), and a table's `Debug`
/// does not show whether it was read.
#[derive(Clone, Default)]
struct VersionsListing(std::sync::OnceLock<std::sync::Arc<[(u32, NatEntry, i64)]>>);

impl std::fmt::Debug for VersionsListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VersionsListing")
    }
}

impl PartialEq for VersionsListing {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for VersionsListing {}

/// Whether two entries have the unique index's key: the same external
/// address and port range.
fn same_key(a: &NatEntry, b: &NatEntry) -> bool {
    a.external_ip == b.external_ip && a.first_port == b.first_port && a.last_port == b.last_port
}

/// A NAT statement between its `nextval` and its write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PendingChange {
    /// Insert this row (its `version_added` is the version drawn).
    Add(NatRow),
    /// Soft-delete the row at this index of `rows`.
    Remove(usize),
}

impl NatTable {
    /// The latest version (0 for a table that never changed): the
    /// sequence's, drawn or committed.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The table with the ensure query of `ensure`'s era.
    pub fn with_ensure(mut self, ensure: NatEnsure) -> Self {
        self.ensure = ensure;
        self
    }

    /// The table whose changeset query is `order`'s era's.
    pub fn with_changeset_order(mut self, order: NatChangeset) -> Self {
        self.changeset_order = order;
        self
    }

    /// The table whose ensure meets a refused insert as `conflict`'s era
    /// did.
    pub fn with_conflict(mut self, conflict: NatConflict) -> Self {
        self.conflict = conflict;
        self
    }

    /// The committed live row that the unique index would hold against
    /// `entry`: same address and port range, another target.
    fn blocker(&self, entry: &NatEntry) -> Option<usize> {
        self.rows.iter().position(|r| {
            r.version_removed.is_none() && same_key(&r.entry, entry) && r.entry != *entry
        })
    }

    /// The refused insert: its `nextval` ran, so its version is burnt;
    /// the error names the key.
    fn refuse(&mut self, entry: &NatEntry) -> StoreError {
        self.version += 1;
        StoreError::NatConflict {
            ip: entry.external_ip,
            first_port: entry.first_port,
            last_port: entry.last_port,
        }
    }

    /// Replace `instance`'s live rows by `entries`: rows not wanted are
    /// removed, wanted rows not present are added; identical rows stay as
    /// they are (no version is spent). Returns whether anything changed.
    /// Each change is one statement ([`NatTable::begin_set_instance`]),
    /// committed at once.
    ///
    /// Panics if the unique index refuses a row and the table is in the
    /// [`NatConflict::Fatal`] era, whose refusals
    /// [`NatTable::try_set_instance`] returns.
    pub fn set_instance(&mut self, instance: u32, entries: &[NatEntry]) -> bool {
        self.try_set_instance(instance, entries)
            .expect("a refused NAT row: use try_set_instance with NatConflict::Fatal")
    }

    /// [`NatTable::set_instance`], returning the unique index's refusal
    /// ([`StoreError::NatConflict`]) under [`NatConflict::Fatal`]; the
    /// statements before it stay committed, as upstream's did.
    pub fn try_set_instance(
        &mut self,
        instance: u32,
        entries: &[NatEntry],
    ) -> Result<bool, StoreError> {
        let mut changed = false;
        while let Some(v) = self.try_begin_set_instance(instance, entries)? {
            changed |= self.commit(v);
        }
        Ok(changed)
    }

    /// [`NatTable::try_begin_set_instance`] for a table whose ensure never
    /// fails (the default [`NatConflict::Takeover`], or a clear: removing
    /// rows meets no index). Panics on a refusal.
    pub fn begin_set_instance(&mut self, instance: u32, entries: &[NatEntry]) -> Option<i64> {
        self.try_begin_set_instance(instance, entries)
            .expect("a refused NAT row: use try_begin_set_instance with NatConflict::Fatal")
    }

    /// The next statement of [`NatTable::set_instance`], begun on the
    /// committed rows: the first live row of `instance` not in `entries` is
    /// to be soft-deleted, or else the first entry with no live row added,
    /// at a version drawn now; the change stays pending (seen by no one)
    /// until [`NatTable::commit`]. Returns the version drawn, or `None`
    /// when nothing is left to change.
    ///
    /// An entry whose address and ports a live row of another target
    /// holds meets the unique index: the refused insert burns a version,
    /// and then under [`NatConflict::Fatal`] the statement fails
    /// ([`StoreError::NatConflict`]), under [`NatConflict::Takeover`] the
    /// blocking row is soft-deleted (the next call inserts). The
    /// instance's own rows of another target are simplified under
    /// `Takeover`: they are removed first, as the replace they stand for,
    /// so no insert is refused and no version burnt for them (upstream's
    /// insert would fail once first); no catalogued run finds another
    /// owner's row in the way, so no existing run's versions move.
    pub fn try_begin_set_instance(
        &mut self,
        instance: u32,
        entries: &[NatEntry],
    ) -> Result<Option<i64>, StoreError> {
        let removal = self.rows.iter().position(|r| {
            r.instance == Some(instance)
                && r.version_removed.is_none()
                && !entries.contains(&r.entry)
        });
        if let Some(i) = removal {
            let stale = self.rows[i].entry;
            if self.conflict == NatConflict::Fatal {
                // Upstream's ensure before #4694 only inserted: its insert
                // of the wanted entry meets the instance's own stale row.
                if let Some(wanted) = entries.iter().find(|e| same_key(e, &stale)) {
                    let wanted = *wanted;
                    return Err(self.refuse(&wanted));
                }
            }
            return Ok(Some(self.draw(PendingChange::Remove(i))));
        }
        // Whether the ensure query counts a row with the entry's values as
        // already there: today only a live row of the instance's own;
        // before #4610 any row with the values, whatever its state or
        // owner.
        let counts = |r: &NatRow| match self.ensure {
            NatEnsure::LiveOnly => r.instance == Some(instance) && r.version_removed.is_none(),
            NatEnsure::MatchesRemoved => true,
        };
        let Some(entry) = entries
            .iter()
            .copied()
            .find(|e| !self.rows.iter().any(|r| r.entry == *e && counts(r)))
        else {
            return Ok(None);
        };
        if let Some(i) = self.blocker(&entry) {
            let refused = self.refuse(&entry);
            // Before #4694 the unique index's refusal failed the ensure.
            if self.conflict == NatConflict::Fatal {
                return Err(refused);
            }
            // #4694: `nat_delete_by_external_ip`, whatever the row's
            // target, then the insert again (the next statement).
            return Ok(Some(self.draw(PendingChange::Remove(i))));
        }
        Ok(Some(self.draw_add(Some(instance), entry)))
    }

    /// `nextval`: the sequence's next value, drawn for good, for `change`.
    fn draw(&mut self, change: PendingChange) -> i64 {
        self.version += 1;
        self.pending.insert(self.version, change);
        self.version
    }

    fn draw_add(&mut self, instance: Option<u32>, entry: NatEntry) -> i64 {
        let v = self.version + 1;
        self.draw(PendingChange::Add(NatRow {
            instance,
            entry,
            version_added: v,
            version_removed: None,
        }))
    }

    /// The statement that drew `version` writes and commits: its change
    /// becomes visible, at the version it drew. Returns whether it changed
    /// anything: not if a statement begun later already made the same
    /// change (the row is already removed, an identical row already live);
    /// the retried statement then does nothing and `version` is a gap.
    pub fn commit(&mut self, version: i64) -> bool {
        match self.pending.remove(&version) {
            None => false,
            Some(PendingChange::Remove(i)) => {
                if self.rows[i].version_removed.is_some() {
                    return false;
                }
                self.rows[i].version_removed = Some(version);
                self.instance_versions = VersionsListing::default();
                true
            }
            Some(PendingChange::Add(row)) => {
                let live = self.rows.iter().any(|r| {
                    r.instance == row.instance
                        && r.version_removed.is_none()
                        && r.entry == row.entry
                });
                if live {
                    return false;
                }
                // The unique index holds at the write too: a row of another
                // target that became live while this one was pending wins
                // (simplified: the statement does nothing, its version is a
                // gap, and its caller is not told; only concurrent writers
                // of one address reach this, which no catalogued run has).
                if self.blocker(&row.entry).is_some() {
                    return false;
                }
                self.rows.push(row);
                self.instance_versions = VersionsListing::default();
                true
            }
        }
    }

    /// The statement that drew `version` never wrote (its gateway died
    /// before laying the intent): its version stays unused.
    pub fn abort(&mut self, version: i64) {
        self.pending.remove(&version);
    }

    /// Whether any drawn version's statement has not written yet.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Remove every live row of `instance`.
    pub fn clear_instance(&mut self, instance: u32) -> bool {
        self.set_instance(instance, &[])
    }

    /// The legacy era's service-zone NAT sync, as omicron's
    /// `nat_sync_service_zones` (`nexus/db-queries/src/db/datastore/
    /// nat_entry.rs` before `1a20a12eb1`): the live rows with the services
    /// VNI that are not in `entries` are soft-deleted (each takes the next
    /// version as `version_removed`), then each entry with no live row is
    /// added. Identical rows stay as they are. Returns the number of rows
    /// **added** — upstream's count, on which the caller decides whether to
    /// trigger dpd: removals alone trigger nothing.
    ///
    /// Upstream runs these as separate statements, not one transaction; the
    /// simulation applies them at once.
    pub fn sync_service_zones(&mut self, entries: &[NatEntry]) -> usize {
        let mut added = 0;
        while let Some((v, add)) = self.begin_sync_service_zones(entries) {
            if self.commit(v) && add {
                added += 1;
            }
        }
        added
    }

    /// The next statement of [`NatTable::sync_service_zones`], begun (as
    /// [`NatTable::begin_set_instance`]): the version drawn, and whether
    /// the statement adds a row (else it removes one); `None` when nothing
    /// is left to change.
    pub fn begin_sync_service_zones(&mut self, entries: &[NatEntry]) -> Option<(i64, bool)> {
        let services = |r: &NatRow| {
            r.entry.target.vni == racksim_wire::SERVICES_VNI && r.version_removed.is_none()
        };
        if let Some(i) = self
            .rows
            .iter()
            .position(|r| services(r) && !entries.contains(&r.entry))
        {
            return Some((self.draw(PendingChange::Remove(i)), false));
        }
        let entry = *entries
            .iter()
            .find(|e| !self.rows.iter().any(|r| services(r) && r.entry == **e))?;
        Some((self.draw_add(None, entry), true))
    }

    /// The live service-zone rows (VNI 100), sorted.
    pub fn live_services(&self) -> Vec<NatEntry> {
        self.live_where(|owner| owner.is_none())
    }

    /// The live entries of one instance, sorted.
    pub fn live_of(&self, instance: u32) -> Vec<NatEntry> {
        self.live_where(|owner| owner == Some(instance))
    }

    /// The live entries of every instance that has any, each instance's
    /// sorted: [`NatTable::live_of`] for all of them in one pass over the
    /// rows (a check looks at every instance's rows on every change of
    /// the world, and the table keeps every removed row).
    pub fn live_by_instance(&self) -> BTreeMap<u32, Vec<NatEntry>> {
        let mut by: BTreeMap<u32, Vec<NatEntry>> = BTreeMap::new();
        for r in self.live_rows() {
            if let Some(i) = r.instance {
                by.entry(i).or_default().push(r.entry);
            }
        }
        for entries in by.values_mut() {
            entries.sort();
        }
        by
    }

    /// Every live instance entry, sorted (service zones' rows are
    /// [`NatTable::live_services`]).
    pub fn live(&self) -> Vec<NatEntry> {
        self.live_where(|owner| owner.is_some())
    }

    /// Each live instance row with its instance and `version_added`, in
    /// row order: what a check needs to tell a row a dpd has not pulled
    /// yet from one it pulled past.
    pub fn live_instance_versions(&self) -> Vec<(u32, NatEntry, i64)> {
        self.live_rows()
            .filter_map(|r| r.instance.map(|i| (i, r.entry, r.version_added)))
            .collect()
    }

    /// [`NatTable::live_instance_versions`] ordered by instance and entry
    /// (so by the unique index's key within an instance), listed once per
    /// change of the rows and shared: the checks read it at every look at
    /// the rack, and most looks follow no change of the table.
    pub fn live_instance_versions_shared(&self) -> std::sync::Arc<[(u32, NatEntry, i64)]> {
        self.instance_versions
            .0
            .get_or_init(|| {
                let mut v = self.live_instance_versions();
                v.sort_by_key(|&(instance, entry, _)| (instance, entry));
                v.into()
            })
            .clone()
    }

    /// The live rows whose owner (an instance, or `None` for a service
    /// zone) `keep` accepts, sorted.
    fn live_where(&self, keep: impl Fn(Option<u32>) -> bool) -> Vec<NatEntry> {
        let mut v: Vec<NatEntry> = self
            .live_rows()
            .filter(|r| keep(r.instance))
            .map(|r| r.entry)
            .collect();
        v.sort();
        v
    }

    /// The rows not removed, in row order: what every `live` reading
    /// of the table starts from.
    fn live_rows(&self) -> impl Iterator<Item = &NatRow> {
        self.rows.iter().filter(|r| r.version_removed.is_none())
    }

    /// The changes after version `from_gen`, ordered by version, at most
    /// `limit`: what a dpd at generation `from_gen` has not applied yet. As
    /// omicron's `nat_changes` view (`schema/crdb/dbinit.sql`, read by
    /// `DataStore::nat_changeset` in
    /// `nexus/db-queries/src/db/datastore/nat_entry.rs`) has it, each row is
    /// **one** change: a live row at its `version_added`, a removed row only
    /// at its `version_removed` (as `deleted`) — never both. So a row added
    /// and removed after `from_gen` comes back once, as its removal, and a
    /// restarted dpd asking from 0 gets every live row plus the removals
    /// still kept (removing an absent entry is harmless).
    pub fn changeset(&self, from_gen: i64, limit: u32) -> Vec<NatEntryView> {
        let mut changes: Vec<(i64, NatEntryView)> = self
            .rows
            .iter()
            .filter_map(|r| {
                let view = |gen, deleted| NatEntryView {
                    external_address: r.entry.external_ip,
                    first_port: r.entry.first_port,
                    last_port: r.entry.last_port,
                    sled_address: r.entry.target.internal_ip,
                    vni: r.entry.target.vni,
                    mac: r.entry.target.inner_mac,
                    gen,
                    deleted,
                };
                // The view's one version per row: the removal's if the
                // row is removed, else the addition's.
                let change = match r.version_removed {
                    Some(v) => view(v, true),
                    None => view(r.version_added, false),
                };
                (change.gen > from_gen).then_some((r.version_added, change))
            })
            .collect();
        match self.changeset_order {
            NatChangeset::VersionOrder => changes.sort_by_key(|(_, c)| c.gen),
            // Before #5036: the rows as the `version_added` index holds
            // them, each at its own change's version.
            NatChangeset::AddedOrder => changes.sort_by_key(|(added, _)| *added),
        }
        changes.truncate(limit as usize);
        changes.into_iter().map(|(_, c)| c).collect()
    }
}

//! Nexus's instance networking at the points where upstream changed it.
//!
//! Some of upstream's bugs were one query or one `?` wide, and the fix
//! changed that line and nothing else. To let a run stand for the code
//! before such a fix without a second copy of the code around it, the line
//! is a choice here, and the code that differs reads it. The default of
//! each is the code at omicron b848b6df; each variant names the change that
//! ended it. The simulation's eras (`racksim_sim::era`) choose them, one per
//! mechanism.

use serde::{Deserialize, Serialize};

use racksim_wire::enum_names;

/// Which existing rows the NAT ensure query counts as "already there"
/// (omicron's `ensure_ipv4_nat_entry`,
/// `nexus/db-queries/src/db/datastore/ipv4_nat_entry.rs`): it inserts a row
/// only when none it counts has the entry's values (external address, port
/// range, sled address, VNI, MAC).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NatEnsure {
    /// Before omicron #4610 (`2a0595c70e`, December 2023, the fix of
    /// #4589): every row counted, soft-deleted ones too. An instance
    /// stopped (its rows soft-deleted, and dpd removing the entries) and
    /// started again on the same sled with the same external IP got no new
    /// row, so no dpd ever put its entries back.
    MatchesRemoved,
    /// Since #4610: only live rows (`version_removed IS NULL`).
    #[default]
    LiveOnly,
}

enum_names!(NatEnsure {
    MatchesRemoved => "matches-removed",
    LiveOnly => "live-only",
});

/// What an instance operation that wrote its NAT rows does when a boundary
/// switch's dpd cannot be told to pull them (omicron's
/// `instance_ensure_dpd_config` in `nexus/src/app/instance_network.rs`,
/// which the start saga's `dpd_ensure` node calls).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DpdNotify {
    /// Before omicron #8914 (`ca916324cd`, October 2025, for #8206 and
    /// #6896): `notify_dendrite_nat_state(.., fail_fast: true)?` — the
    /// first dpd that could not be told failed the step, so with one switch
    /// zone down no instance could start (the start saga unwound).
    Fatal,
    /// Since #8914: logged as a warning; dpd's NAT RPW catches up when the
    /// switch zone is back.
    #[default]
    Logged,
}

enum_names!(DpdNotify {
    Fatal => "fatal",
    Logged => "logged",
});

/// How an instance operation's NAT or V2P changes reach the switches or the
/// sleds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Propagation {
    /// The operation itself programs every switch's dpd (NAT) or every
    /// sled-agent (V2P): NAT before dpd's NAT RPW (omicron #3804, November
    /// 2023), V2P before Nexus's V2P task (omicron #5568, May 2024). What a
    /// fault loses then stays lost until an operation runs again.
    Inline,
    /// The operation writes the database and activates the background
    /// task that carries it: dpd's NAT RPW pulls the rows, Nexus's V2P task
    /// pushes every sled's mappings.
    Background,
}

impl Propagation {
    /// What the start implementation `imp`'s own era did (the default of
    /// both, until a run chooses another).
    pub fn of(imp: super::StartImpl) -> Propagation {
        match imp {
            super::StartImpl::Inline => Propagation::Inline,
            super::StartImpl::Naive | super::StartImpl::Saga => Propagation::Background,
        }
    }
}

/// In which order Nexus's changeset query returns NAT changes (omicron's
/// `ipv4_nat_changeset`, which dpd's NAT RPW pages through 100 at a time,
/// setting its generation to each applied change's).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NatChangeset {
    /// Before omicron #5036 (`887a91e713`, February 2024, the fix of
    /// #5037): rows with `version_added > gen OR version_removed > gen`,
    /// `LIMIT 100`, no `ORDER BY`; a removed row's change is at its
    /// `version_removed`. #5036's message says the columns were not
    /// interleaved: racksim returns the rows in `version_added` order (the
    /// order of that index), so a page whose last row was removed late
    /// moves dpd's generation past rows added meanwhile that did not fit
    /// in the page, and dpd never applies them. Simplified: without `ORDER
    /// BY` CockroachDB's order is the plan's; this is the one #5036
    /// describes.
    AddedOrder,
    /// Since #5036: the `ipv4_nat_changes` view, one change per row at its
    /// own version, `ORDER BY version`.
    #[default]
    VersionOrder,
}

enum_names!(NatChangeset {
    AddedOrder => "added-order",
    VersionOrder => "version-order",
});

/// How Nexus finds which switch zone is which boundary switch before it
/// tells their dpds of NAT changes (omicron's `dpd_clients` in
/// `nexus/src/app/mod.rs`). Both eras first ask internal DNS for the
/// switch zones (a failed lookup fails the notify); they differ in whom
/// they ask next and in what a zone that does not answer does.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchLookup {
    /// Before omicron #8914 (`ca916324cd`, October 2025, for #8206):
    /// `switch_zone_address_mappings` asked each zone's MGS
    /// (`sp_local_switch_id`) and, if any of them failed, slept 2 s and
    /// started again from the DNS lookup — for ever. A switch zone still
    /// in DNS whose MGS did not answer held every caller (a saga's
    /// `dpd_ensure`, the RPWs) until it answered. Upstream looked the
    /// mapping up once per boundary switch, inside the notify's loop.
    MgsRetry,
    /// Since #8914: ask each dpd its `/switch/identifiers`, once; a dpd
    /// that fails is logged and left out of the mapping, and the caller
    /// decides what a missing switch means.
    #[default]
    Dpd,
}

enum_names!(SwitchLookup {
    MgsRetry => "mgs-retry",
    Dpd => "dpd",
});

/// The pause of [`SwitchLookup::MgsRetry`] between two rounds of asking
/// every MGS (upstream's `tokio::time::sleep(Duration::from_secs(2))` in
/// `switch_zone_address_mappings` before #8914).
pub const SWITCH_LOOKUP_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// What the NAT ensure does when its insert meets a live row with the same
/// external address and port range but another target (omicron's
/// `instance_ensure_dpd_config`, `nexus/src/app/instance_network.rs`, which
/// the start saga's `dpd_ensure` node calls). The database refuses such a
/// row in every era: the unique index `overlapping_ipv4_nat_entry` (today
/// `overlapping_nat_entry`) on `(external_address, first_port, last_port)
/// WHERE time_deleted IS NULL` (`schema/crdb/dbinit.sql`, since omicron
/// #3804), so the insert fails with a unique violation.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NatConflict {
    /// Before omicron #4694 (`cc64304519`, January 2024): each external
    /// IP's `ensure_nat_entry(..).await?` returned the unique violation (a
    /// 500 from `public_error_from_diesel`), so the step failed and a start
    /// saga unwound: a leftover live row at the address (a leaked one,
    /// another instance's) kept the instance from starting until someone
    /// removed it.
    Fatal,
    /// Since #4694 ("NAT RPW ensure is now more authoritative, and will
    /// remove conflicting entries if an initial insert fails"): on a failed
    /// insert it soft-deletes every live row at the address and port range
    /// (`nat_delete_by_external_ip`, whatever the row's target), then
    /// inserts again; only a second failure fails the step.
    #[default]
    Takeover,
}

enum_names!(NatConflict {
    Fatal => "fatal",
    Takeover => "takeover",
});

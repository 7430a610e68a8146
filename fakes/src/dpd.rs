//! Fake dendrite (`dpd`): the NAT tables of one switch.
//!
//! [`DpdState`] is the state machine — plain data, no I/O. Its semantics are
//! dendrite's (`dpd/src/nat.rs` of dpd 13.0.0):
//!
//! * entries are keyed by `(external IP, low port)` and cover an inclusive
//!   port range; `low > high` is a 400 (`"invalid port range"`);
//! * creating an identical entry succeeds and changes nothing; an entry
//!   that overlaps another is a 409 whose `error_code` is
//!   `"conflicting mapping"` (message `"Conflict"`);
//! * get finds the entry whose range contains the port, else 404 (`"no
//!   mapping"`); delete removes that entry, and deleting an absent one
//!   succeeds (204: nothing to clear);
//! * lists are pages of at most [`MAX_PAGE_ITEMS`] (dendrite caps every
//!   page at 64 whatever the client asks), a page starts after the key of
//!   the last item of the previous one, and — as dropshot's `ResultsPage`
//!   does — every non-empty page carries a `next_page` token, so the last
//!   page of a listing is an empty one;
//! * a VNI is 24 bits: a target with a larger one is a 400.
//!
//! `GET /rpw/nat/gen` answers the generation dpd's RPW last pulled from
//! Nexus; API calls do not change it (see [`DpdState::set_generation`]).
//! The table lives in the ASIC, so a new `DpdState` (a restarted dpd or
//! switch zone) starts empty with generation 0. Every operation that fails
//! leaves the tables as they were.
//!
//! IPv4 and IPv6 have a table each and the same operations, written once
//! over the address [`Family`]. dpd's NAT RPW — how it applies Nexus's
//! changesets and when it runs — is `rpw`'s.

use std::{
    collections::BTreeMap,
    fmt::Display,
    net::{Ipv4Addr, Ipv6Addr},
    str::FromStr,
};

use http::{Method, StatusCode};
pub use racksim_wire::dpd::SwitchIdentifiersV1;
use racksim_wire::dpd::{
    Ipv4Nat, Ipv6Nat, NatTarget, ResultsPage, SwitchIdentifiers, API_VERSION, MAX_VNI,
};
use serde::Serialize;

use crate::{
    http::{ApiError, ApiRequest, ApiResponse},
    upstream::Service,
};

/// Page size when the client gives no `limit` (dropshot's default).
pub const DEFAULT_PAGE_ITEMS: usize = 100;
/// Largest page dpd returns, whatever the client asks for.
pub const MAX_PAGE_ITEMS: usize = 64;

/// The page size dpd uses for a requested `limit`.
pub fn page_items(limit: Option<u32>) -> usize {
    limit
        .map_or(DEFAULT_PAGE_ITEMS, |l| l as usize)
        .min(MAX_PAGE_ITEMS)
}

/// dpd-api's `VERSION_DUAL_STACK_NAT_WORKFLOW`: from it, the NAT RPW's
/// endpoints are `/rpw/nat/gen` and `/rpw/nat/trigger`; before it,
/// `/rpw/nat/ipv4/gen` and `/rpw/nat/ipv4/trigger` (dendrite 2df9101
/// `dpd-api/src/lib.rs`).
pub const VERSION_DUAL_STACK_NAT_WORKFLOW: semver::Version = semver::Version::new(2, 0, 0);
/// dpd-api's `VERSION_ASIC_DETAILS`: from it, `/switch/identifiers` carries
/// `lotnum` and `fuse`; before it, the initial shape without them
/// ([`SwitchIdentifiersV1`]).
pub const VERSION_ASIC_DETAILS: semver::Version = semver::Version::new(10, 0, 0);

/// A change made to a NAT table: what a trace records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatChange {
    Created(Ipv4Nat),
    Deleted(Ipv4Nat),
    Created6(Ipv6Nat),
    Deleted6(Ipv6Nat),
    Reset { removed: usize },
}

/// Why a NAT operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatError {
    /// The range overlaps an entry with another range or target (409).
    Conflict,
    /// No entry covers the address and port (404).
    NotFound,
    /// The request itself is malformed (400).
    BadRequest(String),
}

impl From<NatError> for ApiError {
    fn from(e: NatError) -> Self {
        match e {
            NatError::Conflict => {
                ApiError::with_status(StatusCode::CONFLICT, "conflicting mapping")
            }
            NatError::NotFound => ApiError::with_status(StatusCode::NOT_FOUND, "no mapping"),
            NatError::BadRequest(m) => ApiError::bad_request(m),
        }
    }
}

/// An address family of dpd's NAT API: IPv4 (`/nat/ipv4/...`, entries
/// listed as [`Ipv4Nat`]) or IPv6 (`/nat/ipv6/...`, [`Ipv6Nat`]). dendrite
/// keeps a table per family and serves the two alike; so does the fake,
/// with each operation written once over the family ([`DpdState::create`]
/// and the rest, the `handle` router, and the dropshot handlers of
/// `crate::api`). Only what this trait names differs.
pub trait Family: Copy + Ord + Display + FromStr + Serialize + Send + Sync + 'static {
    /// An entry as dpd lists it.
    type Nat: Copy + Serialize + Send + Sync + 'static;
    /// The family's path segment, which is also the name of its address
    /// parameter: `ipv4`, `ipv6`.
    const NAME: &'static str;
    /// The entry of `external` over `low..=high`.
    fn nat(external: Self, low: u16, high: u16, target: NatTarget) -> Self::Nat;
    /// An entry's low port: its key among its address' entries.
    fn low(nat: &Self::Nat) -> u16;
    /// Where an entry sends traffic.
    fn target(nat: &Self::Nat) -> NatTarget;
    /// The change of creating an entry.
    fn created(nat: Self::Nat) -> NatChange;
    /// The change of deleting an entry.
    fn deleted(nat: Self::Nat) -> NatChange;
    /// The family's table in a dpd.
    fn table(dpd: &DpdState) -> &Table<Self>;
    /// The family's table in a dpd, to change.
    fn table_mut(dpd: &mut DpdState) -> &mut Table<Self>;
}

/// `impl Family` for one family: its address and entry types, its name,
/// its [`NatChange`] variants and its table field of [`DpdState`].
macro_rules! family {
    ($addr:ty, $nat:ident, $name:literal, $created:ident, $deleted:ident, $table:ident) => {
        impl Family for $addr {
            type Nat = $nat;
            const NAME: &'static str = $name;

            fn nat(external: Self, low: u16, high: u16, target: NatTarget) -> $nat {
                $nat {
                    external,
                    low,
                    high,
                    target,
                }
            }

            fn low(nat: &$nat) -> u16 {
                nat.low
            }

            fn target(nat: &$nat) -> NatTarget {
                nat.target
            }

            fn created(nat: $nat) -> NatChange {
                NatChange::$created(nat)
            }

            fn deleted(nat: $nat) -> NatChange {
                NatChange::$deleted(nat)
            }

            fn table(dpd: &DpdState) -> &Table<Self> {
                &dpd.$table
            }

            fn table_mut(dpd: &mut DpdState) -> &mut Table<Self> {
                dpd.v4_listed.take();
                &mut dpd.$table
            }
        }
    };
}

family!(Ipv4Addr, Ipv4Nat, "ipv4", Created, Deleted, v4);
family!(Ipv6Addr, Ipv6Nat, "ipv6", Created6, Deleted6, v6);

/// One address family's table: `external -> low -> (high, target)`. Opaque:
/// [`DpdState`]'s operations read and change it.
#[derive(Clone, Debug)]
pub struct Table<A: Ord + Copy> {
    entries: BTreeMap<A, BTreeMap<u16, (u16, NatTarget)>>,
}

impl<A: Ord + Copy> Table<A> {
    fn new() -> Self {
        Table {
            entries: BTreeMap::new(),
        }
    }

    fn covering(&self, ip: A, port: u16) -> Option<(u16, u16, NatTarget)> {
        let ports = self.entries.get(&ip)?;
        let (&low, &(high, target)) = ports.range(..=port).next_back()?;
        (port <= high).then_some((low, high, target))
    }

    /// `Ok(true)` when created, `Ok(false)` when the identical entry existed.
    fn create(&mut self, ip: A, low: u16, high: u16, target: NatTarget) -> Result<bool, NatError> {
        if low > high {
            return Err(NatError::BadRequest("invalid port range".to_string()));
        }
        if target.vni > MAX_VNI {
            return Err(NatError::BadRequest(format!(
                "invalid VNI {}: a VNI is 24 bits (at most {MAX_VNI})",
                target.vni
            )));
        }
        if let Some(ports) = self.entries.get(&ip) {
            if ports.get(&low) == Some(&(high, target)) {
                return Ok(false);
            }
            if ports.iter().any(|(&l, &(h, _))| l <= high && low <= h) {
                return Err(NatError::Conflict);
            }
        }
        self.entries
            .entry(ip)
            .or_default()
            .insert(low, (high, target));
        Ok(true)
    }

    fn delete(&mut self, ip: A, port: u16) -> Option<(u16, u16, NatTarget)> {
        let (low, high, target) = self.covering(ip, port)?;
        let ports = self.entries.get_mut(&ip).expect("covering entry exists");
        ports.remove(&low);
        if ports.is_empty() {
            self.entries.remove(&ip);
        }
        Some((low, high, target))
    }

    fn addresses_page(&self, after: Option<A>, limit: usize) -> Vec<A> {
        self.entries
            .keys()
            .filter(|a| after.is_none_or(|after| **a > after))
            .take(limit)
            .copied()
            .collect()
    }

    fn page(&self, ip: A, after_low: Option<u16>, limit: usize) -> Vec<(u16, u16, NatTarget)> {
        self.entries
            .get(&ip)
            .into_iter()
            .flat_map(|ports| ports.iter())
            .filter(|(low, _)| after_low.is_none_or(|after| **low > after))
            .take(limit)
            .map(|(&low, &(high, target))| (low, high, target))
            .collect()
    }

    fn all(&self) -> impl Iterator<Item = (A, u16, u16, NatTarget)> + '_ {
        self.entries.iter().flat_map(|(&ip, ports)| {
            ports
                .iter()
                .map(move |(&low, &(high, target))| (ip, low, high, target))
        })
    }

    fn len(&self) -> usize {
        self.entries.values().map(BTreeMap::len).sum()
    }
}

/// The NAT state of one dpd instance.
#[derive(Clone)]
pub struct DpdState {
    slot: u16,
    v4: Table<Ipv4Addr>,
    v6: Table<Ipv6Addr>,
    /// `GET /rpw/nat/gen`: in dendrite, the generation of the last NAT
    /// changes its RPW pulled from Nexus. Changes made through the API do
    /// not move it; whoever models the RPW sets it ([`Self::set_generation`]).
    generation: i64,
    /// The IPv4 table listed in key order, made at the first read after a
    /// change ([`Self::ipv4_entries_shared`]) and shared with whoever
    /// read it: the simulation's checks read every table after every
    /// change of the rack, and most of those looks find a table as the
    /// last one did. Cleared by every change of either table.
    v4_listed: std::sync::OnceLock<std::sync::Arc<[Ipv4Nat]>>,
}

/// The state without its listing cache: whether the table was read since
/// its last change is not the dpd's state, and must not show in a trace.
impl std::fmt::Debug for DpdState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdState")
            .field("slot", &self.slot)
            .field("v4", &self.v4)
            .field("v6", &self.v6)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl DpdState {
    /// A freshly started dpd: empty tables, generation 0.
    pub fn new(slot: u16) -> Self {
        DpdState {
            slot,
            v4: Table::new(),
            v6: Table::new(),
            generation: 0,
            v4_listed: std::sync::OnceLock::new(),
        }
    }

    pub fn slot(&self) -> u16 {
        self.slot
    }

    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Sets the generation: what dpd's RPW does after applying the changes
    /// it pulled from Nexus. The fakes have no RPW; a simulation or a test
    /// that models one calls this.
    pub fn set_generation(&mut self, generation: i64) {
        self.generation = generation;
    }

    /// Every entry of family `A`, in key order.
    pub fn entries<A: Family>(&self) -> Vec<A::Nat> {
        A::table(self)
            .all()
            .map(|(ip, l, h, t)| A::nat(ip, l, h, t))
            .collect()
    }

    /// The entry of `ip` whose range contains `port`.
    pub fn get<A: Family>(&self, ip: A, port: u16) -> Option<A::Nat> {
        A::table(self)
            .covering(ip, port)
            .map(|(l, h, t)| A::nat(ip, l, h, t))
    }

    /// Creates an entry; `Ok(None)` when the identical entry existed.
    pub fn create<A: Family>(
        &mut self,
        ip: A,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        let created = A::table_mut(self).create(ip, low, high, target)?;
        Ok(created.then(|| A::created(A::nat(ip, low, high, target))))
    }

    /// Removes the entry covering `port`; `None` when there was none (which
    /// dpd answers with a 204 too).
    pub fn delete<A: Family>(&mut self, ip: A, port: u16) -> Option<NatChange> {
        let (l, h, t) = A::table_mut(self).delete(ip, port)?;
        Some(A::deleted(A::nat(ip, l, h, t)))
    }

    /// `DELETE /nat/ipv4` (or `/nat/ipv6`): every entry of the family goes.
    pub fn reset<A: Family>(&mut self) -> Option<NatChange> {
        let table = A::table_mut(self);
        let removed = table.len();
        *table = Table::new();
        (removed > 0).then_some(NatChange::Reset { removed })
    }

    /// Addresses with entries of family `A`, after `after`, at most `limit`.
    pub fn addresses_page<A: Family>(&self, after: Option<A>, limit: usize) -> Vec<A> {
        A::table(self).addresses_page(after, limit)
    }

    /// `ip`'s entries whose low port is above `after_low`, at most `limit`.
    pub fn page<A: Family>(&self, ip: A, after_low: Option<u16>, limit: usize) -> Vec<A::Nat> {
        let page = A::table(self).page(ip, after_low, limit);
        page.into_iter()
            .map(|(l, h, t)| A::nat(ip, l, h, t))
            .collect()
    }

    // IPv4 by name: racksim's NAT (service zones and instances) is IPv4,
    // and the simulation, live mode and tests read, change and plant it
    // through these.

    /// Every IPv4 entry, in key order.
    pub fn ipv4_entries(&self) -> Vec<Ipv4Nat> {
        self.entries::<Ipv4Addr>()
    }

    /// Every IPv4 entry, in key order, shared: the same list (the same
    /// allocation) until the table next changes.
    pub fn ipv4_entries_shared(&self) -> std::sync::Arc<[Ipv4Nat]> {
        self.v4_listed
            .get_or_init(|| self.entries::<Ipv4Addr>().into())
            .clone()
    }

    /// Every IPv6 entry, in key order: racksim's own state has none, but
    /// a client (or live mode's `/plant`) may create them through the API,
    /// and the checks must see them.
    pub fn ipv6_entries(&self) -> Vec<Ipv6Nat> {
        self.entries::<Ipv6Addr>()
    }

    /// The IPv4 entry whose range contains `port`.
    pub fn ipv4_get(&self, ip: Ipv4Addr, port: u16) -> Option<Ipv4Nat> {
        self.get(ip, port)
    }

    /// Creates an IPv4 entry ([`Self::create`]).
    pub fn ipv4_create(
        &mut self,
        ip: Ipv4Addr,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        self.create(ip, low, high, target)
    }

    /// Removes the IPv4 entry covering `port` ([`Self::delete`]).
    pub fn ipv4_delete(&mut self, ip: Ipv4Addr, port: u16) -> Option<NatChange> {
        self.delete(ip, port)
    }

    /// Plants an IPv4 entry as it is, bypassing every check (a table left
    /// in a state the API would refuse to make, for tests).
    pub fn ipv4_plant(&mut self, e: Ipv4Nat) {
        self.v4_listed.take();
        let ports = self.v4.entries.entry(e.external).or_default();
        ports.insert(e.low, (e.high, e.target));
    }

    /// `GET /switch/identifiers`: made-up identity of the fake sidecar.
    pub fn identifiers(&self) -> SwitchIdentifiers {
        SwitchIdentifiers {
            asic_backend: "racksim".to_string(),
            model: "racksim-sidecar".to_string(),
            revision: 1,
            serial: format!("RSIM-SIDECAR-{}", self.slot),
            sidecar_id: format!("00000000-0000-4000-8000-00000000000{}", self.slot),
            slot: self.slot,
            // A fake ASIC has no manufacturing data; dendrite sends null.
            fab: None,
            lot: None,
            lotnum: None,
            wafer: None,
            wafer_loc: None,
            fuse: None,
        }
    }

    /// Serves one request of dpd's NAT API (the servers that are not
    /// dropshot). Returns the response and the change made, if any, so the
    /// caller can record it.
    pub fn handle(&mut self, req: &ApiRequest) -> (ApiResponse, Option<NatChange>) {
        match self.route(req) {
            Ok(ok) => ok,
            Err(e) => (e.into_response(), None),
        }
    }

    fn route(&mut self, req: &ApiRequest) -> Result<(ApiResponse, Option<NatChange>), ApiError> {
        let version = req.check_version(API_VERSION)?;
        let dual_stack = version >= VERSION_DUAL_STACK_NAT_WORKFLOW;
        let segs = req.segments();
        let segs: Vec<&str> = segs.iter().map(|s| &**s).collect();
        let m = &req.method;
        let ok = |r: ApiResponse| Ok((r, None));
        // Routes by version as dropshot does for dpd-api's versioned
        // endpoints: outside its versions, an endpoint is a plain 404.
        match segs.as_slice() {
            ["switch", "identifiers"] if m == Method::GET => {
                if version >= VERSION_ASIC_DETAILS {
                    ok(ApiResponse::json(&self.identifiers()))
                } else {
                    ok(ApiResponse::json(&SwitchIdentifiersV1::from(
                        self.identifiers(),
                    )))
                }
            }
            ["rpw", "nat", "gen"] | ["rpw", "nat", "trigger"] if !dual_stack => {
                Err(ApiError::not_found_route(req))
            }
            ["rpw", "nat", "ipv4", "gen"] | ["rpw", "nat", "ipv4", "trigger"] if dual_stack => {
                Err(ApiError::not_found_route(req))
            }
            ["rpw", "nat", "gen"] | ["rpw", "nat", "ipv4", "gen"] if m == Method::GET => {
                ok(ApiResponse::json(&self.generation))
            }
            ["rpw", "nat", "trigger"] | ["rpw", "nat", "ipv4", "trigger"] if m == Method::POST => {
                ok(ApiResponse::json(&serde_json::Value::Null))
            }
            ["nat", "ipv4", rest @ ..] => self.route_nat::<Ipv4Addr>(req, rest),
            ["nat", "ipv6", rest @ ..] => self.route_nat::<Ipv6Addr>(req, rest),
            _ => Err(crate::upstream::unrouted(Service::Dpd, req)),
        }
    }

    /// `/nat/{ipv4,ipv6}/...`: one family's table, `rest` the segments
    /// after the family's.
    fn route_nat<A: Family>(
        &mut self,
        req: &ApiRequest,
        rest: &[&str],
    ) -> Result<(ApiResponse, Option<NatChange>), ApiError> {
        let m = &req.method;
        let ok = |r: ApiResponse| Ok((r, None));
        let changed = |c: Option<NatChange>| Ok((ApiResponse::no_content(), c));
        match rest {
            [] if m == Method::GET => {
                let (after, limit) = page_params(req)?;
                let items = self.addresses_page::<A>(after, limit);
                ok(ApiResponse::json(&page(items, |a| *a)))
            }
            [] if m == Method::DELETE => changed(self.reset::<A>()),
            [ip] if m == Method::GET => {
                let ip: A = path_param(ip, A::NAME)?;
                let (after, limit) = page_params(req)?;
                let items = self.page(ip, after, limit);
                ok(ApiResponse::json(&page(items, A::low)))
            }
            [ip, low] if m == Method::GET => {
                let (ip, low): (A, u16) = (path_param(ip, A::NAME)?, path_param(low, "low")?);
                let e = self.get(ip, low).ok_or(NatError::NotFound)?;
                ok(ApiResponse::json(&A::target(&e)))
            }
            [ip, low] if m == Method::DELETE => {
                let (ip, low): (A, u16) = (path_param(ip, A::NAME)?, path_param(low, "low")?);
                changed(self.delete(ip, low))
            }
            [ip, low, high] if m == Method::PUT => {
                let ip: A = path_param(ip, A::NAME)?;
                let (low, high) = (path_param(low, "low")?, path_param(high, "high")?);
                let target: NatTarget = req.json_body()?;
                changed(self.create(ip, low, high, target)?)
            }
            _ => Err(crate::upstream::unrouted(Service::Dpd, req)),
        }
    }
}

fn path_param<T: FromStr>(raw: &str, name: &str) -> Result<T, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid path parameter {name}: {raw:?}")))
}

/// `limit` and `page_token` of a list request. The token of this server is
/// the key of the last item of the previous page, as text.
fn page_params<K: FromStr>(req: &ApiRequest) -> Result<(Option<K>, usize), ApiError> {
    let limit = match req.query("limit") {
        None => None,
        Some(raw) => match raw.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unable to parse query string: invalid value for limit: {raw:?} (expected an integer >= 1)"
                )))
            }
        },
    };
    let after = match req.query("page_token") {
        None => None,
        Some(token) => Some(
            token
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid page token {token:?}")))?,
        ),
    };
    Ok((after, page_items(limit)))
}

/// A page with a `next_page` token after every non-empty page, as
/// dropshot's `ResultsPage::new` has it.
fn page<T, K: Display>(items: Vec<T>, key: impl Fn(&T) -> K) -> ResultsPage<T> {
    let next_page = items.last().map(|last| key(last).to_string());
    ResultsPage { items, next_page }
}

mod rpw;
#[cfg(test)]
mod tests;

pub use rpw::{run_nat_rpw, NatRpwTimer, NAT_RPW_POLL};

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

/// One address family's table: `external -> low -> (high, target)`.
#[derive(Clone, Debug)]
struct Table<A: Ord + Copy> {
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

fn v4((external, low, high, target): (Ipv4Addr, u16, u16, NatTarget)) -> Ipv4Nat {
    Ipv4Nat {
        external,
        low,
        high,
        target,
    }
}

fn v6((external, low, high, target): (Ipv6Addr, u16, u16, NatTarget)) -> Ipv6Nat {
    Ipv6Nat {
        external,
        low,
        high,
        target,
    }
}

/// The NAT state of one dpd instance.
#[derive(Clone, Debug)]
pub struct DpdState {
    slot: u16,
    v4: Table<Ipv4Addr>,
    v6: Table<Ipv6Addr>,
    /// `GET /rpw/nat/gen`: in dendrite, the generation of the last NAT
    /// changes its RPW pulled from Nexus. Changes made through the API do
    /// not move it; whoever models the RPW sets it ([`Self::set_generation`]).
    generation: i64,
}

impl DpdState {
    /// A freshly started dpd: empty tables, generation 0.
    pub fn new(slot: u16) -> Self {
        DpdState {
            slot,
            v4: Table::new(),
            v6: Table::new(),
            generation: 0,
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

    /// Applies one change of Nexus's instance NAT changeset as dendrite's
    /// NAT RPW does (`apply_updates` in dendrite `dpd/src/rpw/mod.rs`):
    ///
    /// * a removal (`deleted`) is `nat::clear_mapping` with the change's
    ///   whole range: `remove_mapping` (dendrite `dpd/src/nat.rs`) removes
    ///   the *first* entry, in port order, of that external address whose
    ///   range overlaps `[first_port, last_port]` — whatever its target and
    ///   whatever its exact range — and only that one; with none, nothing;
    /// * an addition sets the entry, and when that conflicts with entries
    ///   whose ranges overlap it, clears every overlapping entry
    ///   (`clear_overlapping_mappings`) and sets it again (Nexus's table is
    ///   the truth).
    ///
    /// A change that still cannot be applied is reported and skipped, as
    /// dendrite logs it and moves on. Returns the table operations made.
    /// The caller moves the generation ([`Self::set_generation`]) past the
    /// changeset.
    pub fn apply_nat_change(
        &mut self,
        c: &racksim_wire::nexus::NatEntryView,
    ) -> Vec<Result<NatChange, String>> {
        let mut done = Vec::new();
        if c.deleted {
            if c.first_port > c.last_port {
                // dendrite's `PortRange::new` refuses it; the RPW logs the
                // error and goes on.
                done.push(Err(format!(
                    "cannot apply the change of generation {}: invalid port range",
                    c.gen
                )));
                return done;
            }
            // Entries are in port order (one address's entries never
            // overlap), so the first overlapping one is the lowest.
            let first_overlapping = self
                .ipv4_entries()
                .into_iter()
                .find(|e| {
                    e.external == c.external_address
                        && e.low <= c.last_port
                        && c.first_port <= e.high
                })
                .map(|e| e.low);
            if let Some(low) = first_overlapping {
                done.extend(self.ipv4_delete(c.external_address, low).map(Ok));
            }
            return done;
        }
        let at_key = self
            .ipv4_get(c.external_address, c.first_port)
            .filter(|e| e.low == c.first_port);
        let wanted = c.to_dpd();
        match at_key {
            Some(e) if e == wanted => return done,
            Some(_) => done.extend(self.ipv4_delete(c.external_address, c.first_port).map(Ok)),
            None => {}
        }
        let (ip, first, last) = (c.external_address, c.first_port, c.last_port);
        let mut created = self.ipv4_create(ip, first, last, c.target());
        if matches!(created, Err(NatError::Conflict)) {
            let overlapping: Vec<u16> = self
                .ipv4_entries()
                .into_iter()
                .filter(|e| e.external == ip && e.low <= last && first <= e.high)
                .map(|e| e.low)
                .collect();
            for low in overlapping {
                done.extend(self.ipv4_delete(ip, low).map(Ok));
            }
            created = self.ipv4_create(ip, first, last, c.target());
        }
        match created {
            Ok(change) => done.extend(change.map(Ok)),
            Err(e) => {
                let m = match e {
                    NatError::Conflict => "its range overlaps another entry".to_string(),
                    NatError::NotFound => "no such entry".to_string(),
                    NatError::BadRequest(m) => m,
                };
                done.push(Err(format!(
                    "cannot apply the change of generation {}: {m}",
                    c.gen
                )))
            }
        }
        done
    }

    /// Every IPv4 entry, in key order.
    pub fn ipv4_entries(&self) -> Vec<Ipv4Nat> {
        self.v4.all().map(v4).collect()
    }

    /// Every IPv6 entry, in key order.
    pub fn ipv6_entries(&self) -> Vec<Ipv6Nat> {
        self.v6.all().map(v6).collect()
    }

    /// The IPv4 entry whose range contains `port`.
    pub fn ipv4_get(&self, ip: Ipv4Addr, port: u16) -> Option<Ipv4Nat> {
        self.v4
            .covering(ip, port)
            .map(|(l, h, t)| v4((ip, l, h, t)))
    }

    /// The IPv6 entry whose range contains `port`.
    pub fn ipv6_get(&self, ip: Ipv6Addr, port: u16) -> Option<Ipv6Nat> {
        self.v6
            .covering(ip, port)
            .map(|(l, h, t)| v6((ip, l, h, t)))
    }

    /// Creates an entry; `Ok(None)` when the identical entry existed.
    pub fn ipv4_create(
        &mut self,
        ip: Ipv4Addr,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        let created = self.v4.create(ip, low, high, target)?;
        Ok(created.then(|| NatChange::Created(v4((ip, low, high, target)))))
    }

    /// Creates an entry; `Ok(None)` when the identical entry existed.
    pub fn ipv6_create(
        &mut self,
        ip: Ipv6Addr,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        let created = self.v6.create(ip, low, high, target)?;
        Ok(created.then(|| NatChange::Created6(v6((ip, low, high, target)))))
    }

    /// Removes the entry covering `port`; `None` when there was none (which
    /// dpd answers with a 204 too).
    pub fn ipv4_delete(&mut self, ip: Ipv4Addr, port: u16) -> Option<NatChange> {
        let (l, h, t) = self.v4.delete(ip, port)?;
        Some(NatChange::Deleted(v4((ip, l, h, t))))
    }

    /// Removes the entry covering `port`; `None` when there was none.
    pub fn ipv6_delete(&mut self, ip: Ipv6Addr, port: u16) -> Option<NatChange> {
        let (l, h, t) = self.v6.delete(ip, port)?;
        Some(NatChange::Deleted6(v6((ip, l, h, t))))
    }

    /// Plants an IPv4 entry as it is, bypassing every check (a table left
    /// in a state the API would refuse to make, for tests).
    pub fn ipv4_plant(&mut self, e: Ipv4Nat) {
        let ports = self.v4.entries.entry(e.external).or_default();
        ports.insert(e.low, (e.high, e.target));
    }

    /// `DELETE /nat/ipv4`.
    pub fn ipv4_reset(&mut self) -> Option<NatChange> {
        let removed = self.v4.len();
        self.v4 = Table::new();
        (removed > 0).then_some(NatChange::Reset { removed })
    }

    /// `DELETE /nat/ipv6`.
    pub fn ipv6_reset(&mut self) -> Option<NatChange> {
        let removed = self.v6.len();
        self.v6 = Table::new();
        (removed > 0).then_some(NatChange::Reset { removed })
    }

    /// Addresses with IPv4 entries, after `after`, at most `limit`.
    pub fn ipv4_addresses_page(&self, after: Option<Ipv4Addr>, limit: usize) -> Vec<Ipv4Addr> {
        self.v4.addresses_page(after, limit)
    }

    /// Addresses with IPv6 entries, after `after`, at most `limit`.
    pub fn ipv6_addresses_page(&self, after: Option<Ipv6Addr>, limit: usize) -> Vec<Ipv6Addr> {
        self.v6.addresses_page(after, limit)
    }

    /// `ip`'s IPv4 entries whose low port is above `after_low`.
    pub fn ipv4_page(&self, ip: Ipv4Addr, after_low: Option<u16>, limit: usize) -> Vec<Ipv4Nat> {
        let page = self.v4.page(ip, after_low, limit);
        page.into_iter()
            .map(|(l, h, t)| v4((ip, l, h, t)))
            .collect()
    }

    /// `ip`'s IPv6 entries whose low port is above `after_low`.
    pub fn ipv6_page(&self, ip: Ipv6Addr, after_low: Option<u16>, limit: usize) -> Vec<Ipv6Nat> {
        let page = self.v6.page(ip, after_low, limit);
        page.into_iter()
            .map(|(l, h, t)| v6((ip, l, h, t)))
            .collect()
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
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let m = &req.method;
        let ok = |r: ApiResponse| Ok((r, None));
        let changed = |c: Option<NatChange>| Ok((ApiResponse::no_content(), c));
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
            ["nat", "ipv4"] if m == Method::GET => {
                let (after, limit) = page_params(req)?;
                let items = self.ipv4_addresses_page(after, limit);
                ok(ApiResponse::json(&page(items, |a| *a)))
            }
            ["nat", "ipv6"] if m == Method::GET => {
                let (after, limit) = page_params(req)?;
                let items = self.ipv6_addresses_page(after, limit);
                ok(ApiResponse::json(&page(items, |a| *a)))
            }
            ["nat", "ipv4"] if m == Method::DELETE => changed(self.ipv4_reset()),
            ["nat", "ipv6"] if m == Method::DELETE => changed(self.ipv6_reset()),
            ["nat", "ipv4", ip] if m == Method::GET => {
                let ip = path_param(ip, "ipv4")?;
                let (after, limit) = page_params(req)?;
                let items = self.ipv4_page(ip, after, limit);
                ok(ApiResponse::json(&page(items, |e| e.low)))
            }
            ["nat", "ipv6", ip] if m == Method::GET => {
                let ip = path_param(ip, "ipv6")?;
                let (after, limit) = page_params(req)?;
                let items = self.ipv6_page(ip, after, limit);
                ok(ApiResponse::json(&page(items, |e| e.low)))
            }
            ["nat", "ipv4", ip, low] if m == Method::GET => {
                let (ip, low) = (path_param(ip, "ipv4")?, path_param(low, "low")?);
                let e = self.ipv4_get(ip, low).ok_or(NatError::NotFound)?;
                ok(ApiResponse::json(&e.target))
            }
            ["nat", "ipv6", ip, low] if m == Method::GET => {
                let (ip, low) = (path_param(ip, "ipv6")?, path_param(low, "low")?);
                let e = self.ipv6_get(ip, low).ok_or(NatError::NotFound)?;
                ok(ApiResponse::json(&e.target))
            }
            ["nat", "ipv4", ip, low] if m == Method::DELETE => {
                let (ip, low) = (path_param(ip, "ipv4")?, path_param(low, "low")?);
                changed(self.ipv4_delete(ip, low))
            }
            ["nat", "ipv6", ip, low] if m == Method::DELETE => {
                let (ip, low) = (path_param(ip, "ipv6")?, path_param(low, "low")?);
                changed(self.ipv6_delete(ip, low))
            }
            ["nat", "ipv4", ip, low, high] if m == Method::PUT => {
                let ip = path_param(ip, "ipv4")?;
                let (low, high) = (path_param(low, "low")?, path_param(high, "high")?);
                let target: NatTarget = req.json_body()?;
                changed(self.ipv4_create(ip, low, high, target)?)
            }
            ["nat", "ipv6", ip, low, high] if m == Method::PUT => {
                let ip = path_param(ip, "ipv6")?;
                let (low, high) = (path_param(low, "low")?, path_param(high, "high")?);
                let target: NatTarget = req.json_body()?;
                changed(self.ipv6_create(ip, low, high, target)?)
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

#[cfg(test)]
mod tests;

/// How often dendrite's `wait` looks at the RPW's timer
/// (`sleep(Duration::from_secs(1))` in `wait`, dendrite `dpd/src/rpw/mod.rs`).
pub const NAT_RPW_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The NAT RPW's timer, as dendrite keeps it (`WorkflowServer::timers` in
/// dendrite `dpd/src/rpw/mod.rs` at 2df9101e): one instant, the RPW's next
/// scheduled run, shared between the RPW and the API.
///
/// * It starts at the moment it is made (`WorkflowServer::new` sets it to
///   `Instant::now()`), so a started dpd pulls at once.
/// * `POST /rpw/nat/trigger` ([`Self::trigger`], dendrite's
///   `WorkflowServer::trigger`) sets it to *now*: it does not wake the RPW,
///   it makes the RPW due. The RPW's `wait` notices at its next look, within
///   [`NAT_RPW_POLL`].
/// * After each run (done or failed) the RPW adds the period to it
///   (`update_timer`): to the last *scheduled* time — or the last trigger's
///   time, if one came since — not to the end of the run. So a run longer
///   than the period is followed at once by another (the missed ones are
///   caught up, one by one), and a trigger that arrives *during* a run,
///   after its final (empty) fetch was answered, only moves the base: that
///   change waits for the next scheduled run, up to a period (30 s) later.
///
/// The timer is data, not a notification: dropping the RPW's future
/// (cancelling it, or the zone going down) loses no trigger, since a
/// trigger is a store into the timer that the next wait reads.
///
/// Every instant is `tokio::time::Instant`, so under turmoil or a paused
/// clock the schedule is simulated time and replays exactly. The
/// instants must come from one clock: [`Self::trigger`] is called from the
/// dpd's own server (the same runtime as its RPW); a caller on another
/// clock (a simulation's plan) uses [`Self::restart`] instead.
#[derive(Debug)]
pub struct NatRpwTimer {
    next: std::sync::Mutex<tokio::time::Instant>,
    restarted: std::sync::atomic::AtomicBool,
}

impl Default for NatRpwTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl NatRpwTimer {
    /// A new dpd's timer: due now.
    pub fn new() -> Self {
        NatRpwTimer {
            next: std::sync::Mutex::new(tokio::time::Instant::now()),
            restarted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn next(&self) -> std::sync::MutexGuard<'_, tokio::time::Instant> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `POST /rpw/nat/trigger`: the RPW is due now.
    pub fn trigger(&self) {
        *self.next() = tokio::time::Instant::now();
    }

    /// dpd restarted: its RPW starts over, as a new `WorkflowServer`'s
    /// would, at the RPW's next look at its timer (within
    /// [`NAT_RPW_POLL`]; simplified: a real dpd's new RPW starts when the
    /// process does). Takes no instant, so any clock may call it.
    pub fn restart(&self) {
        self.restarted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// When the RPW is next due (for tests and traces).
    pub fn due_at(&self) -> tokio::time::Instant {
        *self.next()
    }

    /// dendrite's `update_timer`: the next run is one period after the
    /// last scheduled (or triggered) one.
    fn advance(&self, period: std::time::Duration) {
        let mut next = self.next();
        *next += period;
    }

    /// dendrite's `wait`: look at the timer, and while it is in the
    /// future, sleep [`NAT_RPW_POLL`] and look again. Returns at once when
    /// it is due (`checked_duration_since` is `Some` from the timer's
    /// instant on). Cancel-safe: it holds nothing but a sleep.
    async fn wait(&self) {
        loop {
            if self
                .restarted
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                *self.next() = tokio::time::Instant::now();
            }
            if tokio::time::Instant::now() >= *self.next() {
                return;
            }
            tokio::time::sleep(NAT_RPW_POLL).await;
        }
    }
}

/// dpd's instance NAT RPW schedule, as dendrite's `nat_workflow` (dendrite
/// `dpd/src/rpw/mod.rs` at 2df9101e) runs it: wait until the timer is due
/// ([`NatRpwTimer`]: at start, `period` after the last scheduled run, or
/// after a trigger, each seen within [`NAT_RPW_POLL`]), make one pull —
/// `pull` fetches and applies changesets from the table's generation until
/// one comes back empty, or fails — then move the timer one `period` on
/// from its last scheduled time, whether the pull succeeded or not.
/// `failed` hears of a failure once, not every period while it lasts.
///
/// Runs until dropped, as long as its switch zone does; shared by the
/// simulation and live mode, which pull over their own sockets.
/// Cancel-safe: the schedule and the triggers live in `timer`, which
/// outlives this future; dropping it mid-wait loses nothing, and dropping
/// it mid-pull leaves whatever the pull applied (as killing dpd would).
pub async fn run_nat_rpw<F: std::future::Future<Output = Result<(), String>>>(
    timer: std::sync::Arc<NatRpwTimer>,
    period: std::time::Duration,
    mut pull: impl FnMut() -> F,
    mut failed: impl FnMut(&str),
) {
    let mut last_failure: Option<String> = None;
    loop {
        timer.wait().await;
        let failure = pull().await.err();
        if failure != last_failure {
            if let Some(e) = &failure {
                failed(e);
            }
            last_failure = failure;
        }
        timer.advance(period);
    }
}

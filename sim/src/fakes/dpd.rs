//! Fake dendrite (`dpd`): the NAT table of one switch, and its HTTP API.
//!
//! [`DpdState`] is the state machine — plain data, no I/O — so the simulated
//! (turmoil) server and a live (dropshot) server can share it. Its semantics
//! follow dendrite's: entries are keyed by `(external IP, low port)` and cover
//! an inclusive port range; creating an identical entry succeeds
//! (idempotent), an overlapping range with any other target is a 409; get and
//! delete find the entry whose range contains the port; lists paginate. The
//! table lives in the ASIC, so a new `DpdState` (a restarted dpd or switch
//! zone) starts empty.

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, Ipv6Addr},
};

use http::{Method, StatusCode};
use racksim_reconciler::dpd::{Ipv4Nat, Ipv6Nat, NatTarget, ResultsPage, SwitchIdentifiers};
use serde::de::DeserializeOwned;

use super::http::{ApiError, ApiRequest, ApiResponse};

/// Default page size when the client gives no `limit`.
pub const DEFAULT_PAGE_LIMIT: u32 = 100;
/// Largest page the server returns, whatever the client asks for.
pub const MAX_PAGE_LIMIT: u32 = 1000;

/// A change made to a NAT table: what the trace records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatChange {
    Created(Ipv4Nat),
    Deleted(Ipv4Nat),
    Created6(Ipv6Nat),
    Deleted6(Ipv6Nat),
    Reset { removed: usize },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatError {
    /// An overlapping range with a different target exists (409).
    Conflict(String),
    /// No entry covers the address and port (404).
    NotFound(String),
    /// The request itself is malformed (400).
    BadRequest(String),
}

impl NatError {
    fn into_api(self) -> ApiError {
        match self {
            NatError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "ObjectAlreadyExists", m),
            NatError::NotFound(m) => ApiError::new(StatusCode::NOT_FOUND, "ObjectNotFound", m),
            NatError::BadRequest(m) => ApiError::bad_request(m),
        }
    }
}

/// One address family's table: `external -> low -> (high, target)`.
#[derive(Clone, Debug)]
struct Table<A: Ord + Copy> {
    entries: BTreeMap<A, BTreeMap<u16, (u16, NatTarget)>>,
}

impl<A: Ord + Copy + std::fmt::Display> Table<A> {
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

    /// `Ok(true)` when created, `Ok(false)` when an identical entry existed.
    fn create(&mut self, ip: A, low: u16, high: u16, target: NatTarget) -> Result<bool, NatError> {
        if low > high {
            return Err(NatError::BadRequest(format!(
                "invalid port range {low}-{high}: low is above high"
            )));
        }
        let ports = self.entries.entry(ip).or_default();
        for (&l, &(h, t)) in ports.iter() {
            if l <= high && low <= h {
                if l == low && h == high && t == target {
                    return Ok(false);
                }
                return Err(NatError::Conflict(format!(
                    "{ip}/{low}-{high} overlaps existing entry {ip}/{l}-{h}"
                )));
            }
        }
        ports.insert(low, (high, target));
        Ok(true)
    }

    fn delete(&mut self, ip: A, port: u16) -> Result<(u16, u16, NatTarget), NatError> {
        let (low, high, target) = self
            .covering(ip, port)
            .ok_or_else(|| NatError::NotFound(format!("no NAT entry for {ip}/{port}")))?;
        let ports = self.entries.get_mut(&ip).expect("covering entry exists");
        ports.remove(&low);
        if ports.is_empty() {
            self.entries.remove(&ip);
        }
        Ok((low, high, target))
    }

    fn len(&self) -> usize {
        self.entries.values().map(BTreeMap::len).sum()
    }
}

/// The NAT state of one dpd instance.
#[derive(Clone, Debug)]
pub struct DpdState {
    slot: u16,
    v4: Table<Ipv4Addr>,
    v6: Table<Ipv6Addr>,
    /// The generation of the instance NAT changes this dpd has pulled
    /// from Nexus and applied (`GET /rpw/nat/gen`): set by its NAT RPW
    /// ([`DpdState::set_generation`]), not by changes made through the
    /// API. A restarted dpd starts again from 0.
    generation: i64,
}

impl DpdState {
    /// A freshly started dpd: empty tables.
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

    /// Records that the NAT RPW has applied every change up to `generation`.
    pub fn set_generation(&mut self, generation: i64) {
        self.generation = generation;
    }

    /// Every IPv4 entry, in key order.
    pub fn ipv4_entries(&self) -> Vec<Ipv4Nat> {
        self.v4
            .entries
            .iter()
            .flat_map(|(&external, ports)| {
                ports.iter().map(move |(&low, &(high, target))| Ipv4Nat {
                    external,
                    low,
                    high,
                    target,
                })
            })
            .collect()
    }

    pub fn ipv4_get(&self, ip: Ipv4Addr, port: u16) -> Option<Ipv4Nat> {
        self.v4
            .covering(ip, port)
            .map(|(low, high, target)| Ipv4Nat {
                external: ip,
                low,
                high,
                target,
            })
    }

    pub fn ipv4_create(
        &mut self,
        ip: Ipv4Addr,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        let created = self.v4.create(ip, low, high, target)?;
        Ok(created.then_some(NatChange::Created(Ipv4Nat {
            external: ip,
            low,
            high,
            target,
        })))
    }

    pub fn ipv4_delete(&mut self, ip: Ipv4Addr, port: u16) -> Result<NatChange, NatError> {
        let (low, high, target) = self.v4.delete(ip, port)?;
        Ok(NatChange::Deleted(Ipv4Nat {
            external: ip,
            low,
            high,
            target,
        }))
    }

    pub fn ipv6_create(
        &mut self,
        ip: Ipv6Addr,
        low: u16,
        high: u16,
        target: NatTarget,
    ) -> Result<Option<NatChange>, NatError> {
        let created = self.v6.create(ip, low, high, target)?;
        Ok(created.then_some(NatChange::Created6(Ipv6Nat {
            external: ip,
            low,
            high,
            target,
        })))
    }

    pub fn ipv6_delete(&mut self, ip: Ipv6Addr, port: u16) -> Result<NatChange, NatError> {
        let (low, high, target) = self.v6.delete(ip, port)?;
        Ok(NatChange::Deleted6(Ipv6Nat {
            external: ip,
            low,
            high,
            target,
        }))
    }

    fn reset_v4(&mut self) -> Option<NatChange> {
        let removed = self.v4.len();
        self.v4 = Table::new();
        (removed > 0).then_some(NatChange::Reset { removed })
    }

    fn reset_v6(&mut self) -> Option<NatChange> {
        let removed = self.v6.len();
        self.v6 = Table::new();
        (removed > 0).then_some(NatChange::Reset { removed })
    }

    /// Serve one HTTP request of dpd's NAT API. Returns the response and the
    /// change made, if any, so the caller can record it.
    pub fn handle(&mut self, req: &ApiRequest) -> (ApiResponse, Option<NatChange>) {
        match self.route(req) {
            Ok(ok) => ok,
            Err(e) => (e.into_response(), None),
        }
    }

    fn route(&mut self, req: &ApiRequest) -> Result<(ApiResponse, Option<NatChange>), ApiError> {
        let segs = req.segments();
        let m = &req.method;
        let none = |r: ApiResponse| Ok((r, None));
        match segs.as_slice() {
            ["switch", "identifiers"] if m == Method::GET => {
                none(ApiResponse::json(&self.identifiers()))
            }
            ["rpw", "nat", "gen"] if m == Method::GET => none(ApiResponse::json(&self.generation)),
            ["rpw", "nat", "trigger"] if m == Method::POST => {
                none(ApiResponse::json(&serde_json::Value::Null))
            }
            ["nat", "ipv4"] if m == Method::GET => {
                let addrs: Vec<Ipv4Addr> = self.v4.entries.keys().copied().collect();
                none(ApiResponse::json(&paginate(req, &addrs, |a| *a)?))
            }
            ["nat", "ipv4"] if m == Method::DELETE => {
                Ok((ApiResponse::no_content(), self.reset_v4()))
            }
            ["nat", "ipv6"] if m == Method::GET => {
                let addrs: Vec<Ipv6Addr> = self.v6.entries.keys().copied().collect();
                none(ApiResponse::json(&paginate(req, &addrs, |a| *a)?))
            }
            ["nat", "ipv6"] if m == Method::DELETE => {
                Ok((ApiResponse::no_content(), self.reset_v6()))
            }
            ["nat", "ipv4", ip] if m == Method::GET => {
                let ip: Ipv4Addr = path_param(ip, "ipv4")?;
                let items: Vec<Ipv4Nat> = self
                    .ipv4_entries()
                    .into_iter()
                    .filter(|e| e.external == ip)
                    .collect();
                none(ApiResponse::json(&paginate(req, &items, |e| e.low)?))
            }
            ["nat", "ipv6", ip] if m == Method::GET => {
                let ip: Ipv6Addr = path_param(ip, "ipv6")?;
                let items: Vec<Ipv6Nat> = self
                    .v6
                    .entries
                    .get(&ip)
                    .into_iter()
                    .flat_map(|ports| {
                        ports.iter().map(|(&low, &(high, target))| Ipv6Nat {
                            external: ip,
                            low,
                            high,
                            target,
                        })
                    })
                    .collect();
                none(ApiResponse::json(&paginate(req, &items, |e| e.low)?))
            }
            ["nat", "ipv4", ip, low] if m == Method::GET => {
                let (ip, low): (Ipv4Addr, u16) = (path_param(ip, "ipv4")?, path_param(low, "low")?);
                match self.v4.covering(ip, low) {
                    Some((_, _, target)) => none(ApiResponse::json(&target)),
                    None => {
                        Err(NatError::NotFound(format!("no NAT entry for {ip}/{low}")).into_api())
                    }
                }
            }
            ["nat", "ipv6", ip, low] if m == Method::GET => {
                let (ip, low): (Ipv6Addr, u16) = (path_param(ip, "ipv6")?, path_param(low, "low")?);
                match self.v6.covering(ip, low) {
                    Some((_, _, target)) => none(ApiResponse::json(&target)),
                    None => {
                        Err(NatError::NotFound(format!("no NAT entry for {ip}/{low}")).into_api())
                    }
                }
            }
            ["nat", "ipv4", ip, low] if m == Method::DELETE => {
                let (ip, low): (Ipv4Addr, u16) = (path_param(ip, "ipv4")?, path_param(low, "low")?);
                let change = self.ipv4_delete(ip, low).map_err(NatError::into_api)?;
                Ok((ApiResponse::no_content(), Some(change)))
            }
            ["nat", "ipv6", ip, low] if m == Method::DELETE => {
                let (ip, low): (Ipv6Addr, u16) = (path_param(ip, "ipv6")?, path_param(low, "low")?);
                let change = self.ipv6_delete(ip, low).map_err(NatError::into_api)?;
                Ok((ApiResponse::no_content(), Some(change)))
            }
            ["nat", "ipv4", ip, low, high] if m == Method::PUT => {
                let ip: Ipv4Addr = path_param(ip, "ipv4")?;
                let (low, high): (u16, u16) = (path_param(low, "low")?, path_param(high, "high")?);
                let target: NatTarget = json_body(req)?;
                let change = self
                    .ipv4_create(ip, low, high, target)
                    .map_err(NatError::into_api)?;
                Ok((ApiResponse::no_content(), change))
            }
            ["nat", "ipv6", ip, low, high] if m == Method::PUT => {
                let ip: Ipv6Addr = path_param(ip, "ipv6")?;
                let (low, high): (u16, u16) = (path_param(low, "low")?, path_param(high, "high")?);
                let target: NatTarget = json_body(req)?;
                let change = self
                    .ipv6_create(ip, low, high, target)
                    .map_err(NatError::into_api)?;
                Ok((ApiResponse::no_content(), change))
            }
            _ => Err(ApiError::not_found_route(req)),
        }
    }

    fn identifiers(&self) -> SwitchIdentifiers {
        SwitchIdentifiers {
            asic_backend: "racksim".to_string(),
            model: "racksim-sidecar".to_string(),
            revision: 1,
            serial: format!("RSIM-SIDECAR-{}", self.slot),
            sidecar_id: format!("00000000-0000-4000-8000-00000000000{}", self.slot),
            slot: self.slot,
        }
    }
}

fn path_param<T: std::str::FromStr>(raw: &str, name: &str) -> Result<T, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid path parameter {name}: {raw:?}")))
}

fn json_body<T: DeserializeOwned>(req: &ApiRequest) -> Result<T, ApiError> {
    serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("unable to parse JSON body: {e}")))
}

/// dropshot-style pagination over a list sorted by `key`. The page token is
/// the key of the last item returned; the next page starts after it, so a page
/// boundary stays valid when that item is deleted between calls.
fn paginate<T: Clone, K: Ord + std::fmt::Display + std::str::FromStr>(
    req: &ApiRequest,
    items: &[T],
    key: impl Fn(&T) -> K,
) -> Result<ResultsPage<T>, ApiError> {
    let limit = match req.query("limit") {
        None => DEFAULT_PAGE_LIMIT,
        Some(raw) => match raw.parse::<u32>() {
            Ok(0) | Err(_) => {
                return Err(ApiError::bad_request(format!(
                    "invalid query parameter limit: {raw:?} (expected an integer >= 1)"
                )))
            }
            Ok(n) => n.min(MAX_PAGE_LIMIT),
        },
    } as usize;
    let start = match req.query("page_token") {
        None => 0,
        Some(token) => {
            let after: K = token
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid page token {token:?}")))?;
            items.partition_point(|i| key(i) <= after)
        }
    };
    let page: Vec<T> = items.iter().skip(start).take(limit).cloned().collect();
    let more = start + page.len() < items.len();
    let next_page = if more {
        page.last().map(|i| key(i).to_string())
    } else {
        None
    };
    Ok(ResultsPage {
        items: page,
        next_page,
    })
}

#[cfg(test)]
mod tests {
    use racksim_reconciler::dpd::MacAddr;

    use super::*;

    fn target(n: u8) -> NatTarget {
        NatTarget {
            internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1),
            inner_mac: MacAddr {
                a: [0xa8, 0x40, 0x25, 0xff, 0, n],
            },
            vni: 100,
        }
    }

    fn req(method: Method, path: &str, body: &str) -> ApiRequest {
        ApiRequest::new(method, path, body.to_string())
    }

    fn put(dpd: &mut DpdState, path: &str, t: NatTarget) -> (ApiResponse, Option<NatChange>) {
        dpd.handle(&req(Method::PUT, path, &serde_json::to_string(&t).unwrap()))
    }

    #[test]
    fn create_is_idempotent_and_overlap_is_a_conflict() {
        let mut dpd = DpdState::new(0);
        let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert!(matches!(change, Some(NatChange::Created(_))));
        // The same entry again: success, no change.
        let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
        assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
        // Overlapping range, or the same range with another target: 409.
        for (path, t) in [
            ("/nat/ipv4/198.51.100.1/150/300", target(1)),
            ("/nat/ipv4/198.51.100.1/100/199", target(2)),
        ] {
            let (r, change) = put(&mut dpd, path, t);
            assert_eq!(r.status, StatusCode::CONFLICT, "{path}");
            assert_eq!(r.body.unwrap()["error_code"], "ObjectAlreadyExists");
            assert!(change.is_none());
        }
        // A disjoint range on the same address is fine.
        let (r, _) = put(&mut dpd, "/nat/ipv4/198.51.100.1/200/299", target(2));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(dpd.ipv4_entries().len(), 2);
    }

    #[test]
    fn get_and_delete_find_the_covering_entry() {
        let mut dpd = DpdState::new(0);
        put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
        let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/150", ""));
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.unwrap(), serde_json::to_value(target(1)).unwrap());
        let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/200", ""));
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/199", ""));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert!(matches!(change, Some(NatChange::Deleted(e)) if e.low == 100 && e.high == 199));
        let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/150", ""));
        assert_eq!((r.status, change), (StatusCode::NOT_FOUND, None));
    }

    #[test]
    fn pages_follow_tokens_and_survive_deletion_of_the_last_item() {
        let mut dpd = DpdState::new(0);
        for i in 0..5u16 {
            let path = format!("/nat/ipv4/198.51.100.1/{}/{}", i * 10, i * 10 + 9);
            put(&mut dpd, &path, target(1));
        }
        let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1?limit=2", ""));
        let page: ResultsPage<Ipv4Nat> = serde_json::from_value(r.body.unwrap()).unwrap();
        assert_eq!(
            page.items.iter().map(|e| e.low).collect::<Vec<_>>(),
            [0, 10]
        );
        let token = page.next_page.expect("more pages");
        // The last item of the page goes away; the token still works.
        dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/10", ""));
        let (r, _) = dpd.handle(&req(
            Method::GET,
            &format!("/nat/ipv4/198.51.100.1?limit=2&page_token={token}"),
            "",
        ));
        let page: ResultsPage<Ipv4Nat> = serde_json::from_value(r.body.unwrap()).unwrap();
        assert_eq!(
            page.items.iter().map(|e| e.low).collect::<Vec<_>>(),
            [20, 30]
        );
        let token = page.next_page.expect("one more page");
        let (r, _) = dpd.handle(&req(
            Method::GET,
            &format!("/nat/ipv4/198.51.100.1?limit=2&page_token={token}"),
            "",
        ));
        let page: ResultsPage<Ipv4Nat> = serde_json::from_value(r.body.unwrap()).unwrap();
        assert_eq!(page.items.iter().map(|e| e.low).collect::<Vec<_>>(), [40]);
        assert_eq!(page.next_page, None);
    }

    #[test]
    fn bad_requests_get_a_clear_400_and_change_nothing() {
        let mut dpd = DpdState::new(0);
        for (method, path, body, needle) in [
            (Method::GET, "/nat/ipv4?limit=0", "", "limit"),
            (Method::GET, "/nat/ipv4?page_token=nope", "", "page token"),
            (Method::GET, "/nat/ipv4/not-an-ip", "", "ipv4"),
            (Method::PUT, "/nat/ipv4/198.51.100.1/10/5", "", "JSON"),
            (Method::PUT, "/nat/ipv4/198.51.100.1/10/99999", "{}", "high"),
            (
                Method::PUT,
                "/nat/ipv4/198.51.100.1/1/2",
                "{\"internal_ip\":1}",
                "JSON",
            ),
        ] {
            let (r, change) = dpd.handle(&req(method.clone(), path, body));
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {path}");
            let message = r.body.unwrap()["message"].as_str().unwrap().to_string();
            assert!(message.contains(needle), "{method} {path}: {message}");
            assert!(change.is_none());
        }
        let t = serde_json::to_string(&target(1)).unwrap();
        let (r, _) = dpd.handle(&req(Method::PUT, "/nat/ipv4/198.51.100.1/10/5", &t));
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "low above high");
        assert!(dpd.ipv4_entries().is_empty());
        let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv5", ""));
        assert_eq!(r.status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn reset_empties_the_table_and_identifiers_name_the_slot() {
        let mut dpd = DpdState::new(1);
        put(&mut dpd, "/nat/ipv4/198.51.100.1/0/65535", target(1));
        let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4", ""));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(change, Some(NatChange::Reset { removed: 1 }));
        assert!(dpd.ipv4_entries().is_empty());
        let (r, _) = dpd.handle(&req(Method::GET, "/switch/identifiers", ""));
        assert_eq!(r.body.unwrap()["slot"], 1);
    }

    #[test]
    fn nat_generation_is_what_the_rpw_applied_not_a_change_counter() {
        let gen = |dpd: &mut DpdState| dpd.handle(&req(Method::GET, "/rpw/nat/gen", "")).0;
        let mut dpd = DpdState::new(0);
        assert_eq!(gen(&mut dpd).body.unwrap(), serde_json::json!(0));
        // Changes through the API do not move it.
        put(&mut dpd, "/nat/ipv4/198.51.100.1/0/65535", target(1));
        dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/0", ""));
        assert_eq!(gen(&mut dpd).body.unwrap(), serde_json::json!(0));
        // The NAT RPW sets it after applying a changeset.
        dpd.set_generation(7);
        let r = gen(&mut dpd);
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.unwrap(), serde_json::json!(7));
        // A restarted dpd (a new state) starts again from 0.
        assert_eq!(DpdState::new(0).generation(), 0);
        // The trigger answers `null`.
        let (r, change) = dpd.handle(&req(Method::POST, "/rpw/nat/trigger", ""));
        assert_eq!(
            (r.status, r.body, change),
            (StatusCode::OK, Some(serde_json::Value::Null), None)
        );
    }
}

//! Test support: an in-memory network of fake switch zones.
//!
//! [`FakeConnector`] hands out `tokio::io::duplex` streams whose far end is a
//! hyper server (spawned in the test runtime) answering as a fake dpd, a fake
//! MGS, or a test-supplied handler. No real sockets are involved, so tests can
//! run with paused tokio time: the runtime auto-advances the clock only when
//! every task is idle, which is exactly when a real reconciler would be
//! waiting on a timer.
//!
//! The fake dpd follows the semantics in DOMAIN.md: entries keyed by
//! `(external IP, low port)` with an inclusive range; identical create is a
//! no-op, an overlapping different one is a 409; get/delete find the entry
//! whose range contains the port; lists are paginated dropshot-style (a token
//! after every non-empty page). Every request is logged, so tests can assert
//! on order.
//!
//! The fake sled-agent serves `/v2p` (mappings keyed by `(vni, virtual_ip)`,
//! bodies parsed strictly in the reference wire format, so a MAC sent as
//! dpd's `{"a": [..]}` is a 400) and the reduced `/instances` API.

use std::{
    collections::BTreeMap,
    io,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use serde_json::json;

use crate::{
    dpd::{Ipv4Nat, NatTarget, ResultsPage},
    http::Connector,
    instances::{
        VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest,
        SLED_AGENT_PORT,
    },
    DPD_PORT, MGS_PORT,
};

/// A canned answer.
#[derive(Clone, Debug)]
pub(crate) struct FakeResponse {
    pub status: u16,
    pub body: Bytes,
}

impl FakeResponse {
    pub fn json(status: u16, value: serde_json::Value) -> Self {
        FakeResponse {
            status,
            body: Bytes::from(value.to_string()),
        }
    }

    pub fn text(status: u16, text: &str) -> Self {
        FakeResponse {
            status,
            body: Bytes::from(text.to_string()),
        }
    }

    pub fn empty(status: u16) -> Self {
        FakeResponse {
            status,
            body: Bytes::new(),
        }
    }

    /// A dropshot-style error body.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            json!({"request_id": "fake-request", "error_code": null, "message": message}),
        )
    }
}

type Handler = Arc<dyn Fn(&str, &str, &[u8]) -> FakeResponse + Send + Sync>;

#[derive(Clone)]
enum Endpoint {
    Dpd(FakeDpd),
    Mgs { slot: u16 },
    SledAgent(FakeSledAgent),
    Custom(Handler),
    Hang,
}

#[derive(Clone, Debug, Default)]
struct FakeDpd {
    nat: BTreeMap<Ipv4Addr, BTreeMap<u16, (u16, NatTarget)>>,
    slot: u16,
    /// What `GET /rpw/nat/gen` answers.
    nat_gen: i64,
}

#[derive(Clone, Debug, Default)]
struct FakeSledAgent {
    /// Keyed by `(vni, virtual_ip)`: one mapping per virtual NIC.
    v2p: BTreeMap<(u32, std::net::IpAddr), VirtualNetworkInterfaceHost>,
    /// instance id -> (vmm id, state)
    vmms: BTreeMap<u32, (u64, VmmState)>,
}

/// A rule that overrides the normal answer of one endpoint for one
/// `METHOD path` (path without query).
struct Rule {
    addr: SocketAddr,
    method: String,
    path: String,
    /// `None` = never answer.
    response: Option<FakeResponse>,
}

#[derive(Default)]
struct NetState {
    endpoints: BTreeMap<SocketAddr, Endpoint>,
    log: Vec<(SocketAddr, String)>,
    rules: Vec<Rule>,
}

/// The fake network; clone freely (shared state).
#[derive(Clone, Default)]
pub(crate) struct FakeNet {
    state: Arc<Mutex<NetState>>,
}

/// Connector into a [`FakeNet`].
#[derive(Clone)]
pub(crate) struct FakeConnector {
    net: FakeNet,
}

impl Connector for FakeConnector {
    type Io = tokio::io::DuplexStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        if !self.net.lock().endpoints.contains_key(&addr) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "connection refused",
            ));
        }
        let (client, server) = tokio::io::duplex(64 * 1024);
        let net = self.net.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let net = net.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body.collect().await?.to_bytes();
                    let path = parts
                        .uri
                        .path_and_query()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_default();
                    match net.handle(addr, parts.method.as_str(), &path, &body) {
                        Some(r) => Ok::<_, hyper::Error>(
                            Response::builder()
                                .status(r.status)
                                .header(http::header::CONTENT_TYPE, "application/json")
                                .body(Full::new(r.body))
                                .expect("valid response"),
                        ),
                        None => std::future::pending().await,
                    }
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(server), service)
                .await;
        });
        Ok(client)
    }
}

impl FakeNet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn connector(&self) -> FakeConnector {
        FakeConnector { net: self.clone() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A switch zone at `ip`: dpd on DPD_PORT and MGS on MGS_PORT, both
    /// reporting `slot`.
    pub fn add_switch_zone(&self, ip: Ipv6Addr, slot: u16) {
        let mut state = self.lock();
        state.endpoints.insert(
            SocketAddr::new(ip.into(), DPD_PORT),
            Endpoint::Dpd(FakeDpd {
                slot,
                ..Default::default()
            }),
        );
        state
            .endpoints
            .insert(SocketAddr::new(ip.into(), MGS_PORT), Endpoint::Mgs { slot });
    }

    /// Sets what the dpd in `zone` answers to `GET /rpw/nat/gen`.
    pub fn set_nat_gen(&self, zone: Ipv6Addr, nat_gen: i64) {
        self.with_dpd(zone, |dpd| dpd.nat_gen = nat_gen);
    }

    /// A dpd restart: empty table, generation back to zero.
    pub fn restart_dpd(&self, zone: Ipv6Addr) {
        self.with_dpd(zone, |dpd| {
            dpd.nat.clear();
            dpd.nat_gen = 0;
        });
    }

    fn with_dpd(&self, zone: Ipv6Addr, f: impl FnOnce(&mut FakeDpd)) {
        match self
            .lock()
            .endpoints
            .get_mut(&SocketAddr::new(zone.into(), DPD_PORT))
        {
            Some(Endpoint::Dpd(dpd)) => f(dpd),
            _ => panic!("no fake dpd at {zone}"),
        }
    }

    /// A sled-agent at `[ip]:SLED_AGENT_PORT` with no mappings and no VMMs.
    pub fn add_sled_agent(&self, ip: Ipv6Addr) {
        self.lock().endpoints.insert(
            SocketAddr::new(ip.into(), SLED_AGENT_PORT),
            Endpoint::SledAgent(FakeSledAgent::default()),
        );
    }

    fn with_sled_agent<T>(&self, ip: Ipv6Addr, f: impl FnOnce(&mut FakeSledAgent) -> T) -> T {
        match self
            .lock()
            .endpoints
            .get_mut(&SocketAddr::new(ip.into(), SLED_AGENT_PORT))
        {
            Some(Endpoint::SledAgent(agent)) => f(agent),
            _ => panic!("no fake sled-agent at {ip}"),
        }
    }

    /// The V2P mappings of the sled-agent at `ip`, sorted.
    pub fn v2p(&self, ip: Ipv6Addr) -> Vec<VirtualNetworkInterfaceHost> {
        let mut all: Vec<_> = self.with_sled_agent(ip, |a| a.v2p.values().copied().collect());
        all.sort();
        all
    }

    pub fn insert_v2p(&self, ip: Ipv6Addr, m: VirtualNetworkInterfaceHost) {
        self.with_sled_agent(ip, |a| a.v2p.insert((m.vni, m.virtual_ip), m));
    }

    /// The VMMs of the sled-agent at `ip`, by instance id.
    pub fn vmms(&self, ip: Ipv6Addr) -> Vec<VmmInfo> {
        self.with_sled_agent(ip, |a| {
            a.vmms
                .iter()
                .map(|(&instance_id, &(vmm_id, state))| VmmInfo {
                    instance_id,
                    vmm_id,
                    state,
                })
                .collect()
        })
    }

    /// Takes a whole switch zone off the network (connections refused).
    pub fn remove_switch_zone(&self, ip: Ipv6Addr) {
        let mut state = self.lock();
        state
            .endpoints
            .remove(&SocketAddr::new(ip.into(), DPD_PORT));
        state
            .endpoints
            .remove(&SocketAddr::new(ip.into(), MGS_PORT));
    }

    pub fn set_custom(
        &self,
        addr: SocketAddr,
        handler: impl Fn(&str, &str, &[u8]) -> FakeResponse + Send + Sync + 'static,
    ) {
        self.lock()
            .endpoints
            .insert(addr, Endpoint::Custom(Arc::new(handler)));
    }

    /// An endpoint that accepts connections and never answers.
    pub fn set_hang(&self, addr: SocketAddr) {
        self.lock().endpoints.insert(addr, Endpoint::Hang);
    }

    /// Make `METHOD path` (no query) on `zone:port` answer `response`
    /// (`None`: never answer) instead of the normal behaviour.
    pub fn fail(
        &self,
        zone: Ipv6Addr,
        port: u16,
        method: &str,
        path: &str,
        response: Option<FakeResponse>,
    ) {
        self.lock().rules.push(Rule {
            addr: SocketAddr::new(zone.into(), port),
            method: method.to_string(),
            path: path.to_string(),
            response,
        });
    }

    pub fn clear_failures(&self) {
        self.lock().rules.clear();
    }

    pub fn insert_nat(&self, zone: Ipv6Addr, entry: Ipv4Nat) {
        let mut state = self.lock();
        match state
            .endpoints
            .get_mut(&SocketAddr::new(zone.into(), DPD_PORT))
        {
            Some(Endpoint::Dpd(dpd)) => {
                dpd.nat
                    .entry(entry.external)
                    .or_default()
                    .insert(entry.low, (entry.high, entry.target));
            }
            _ => panic!("no fake dpd at {zone}"),
        }
    }

    /// All NAT entries of the dpd in `zone`, sorted.
    pub fn nat(&self, zone: Ipv6Addr) -> Vec<Ipv4Nat> {
        let state = self.lock();
        match state.endpoints.get(&SocketAddr::new(zone.into(), DPD_PORT)) {
            Some(Endpoint::Dpd(dpd)) => dpd
                .nat
                .iter()
                .flat_map(|(&external, ports)| {
                    ports.iter().map(move |(&low, &(high, target))| Ipv4Nat {
                        external,
                        low,
                        high,
                        target,
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `"METHOD path?query"` of every request made to `zone:port`, in order.
    pub fn requests(&self, zone: Ipv6Addr, port: u16) -> Vec<String> {
        let addr = SocketAddr::new(zone.into(), port);
        self.lock()
            .log
            .iter()
            .filter(|(a, _)| *a == addr)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// `(address, "METHOD path?query")` of every request, in order.
    pub fn all_requests(&self) -> Vec<(SocketAddr, String)> {
        self.lock().log.clone()
    }

    pub fn clear_log(&self) {
        self.lock().log.clear();
    }

    /// Handles one request; `None` means "never answer".
    fn handle(
        &self,
        addr: SocketAddr,
        method: &str,
        path_and_query: &str,
        body: &[u8],
    ) -> Option<FakeResponse> {
        let mut state = self.lock();
        state.log.push((addr, format!("{method} {path_and_query}")));
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, parse_query(q)),
            None => (path_and_query, BTreeMap::new()),
        };
        if let Some(rule) = state
            .rules
            .iter()
            .find(|r| r.addr == addr && r.method == method && r.path == path)
        {
            return rule.response.clone();
        }
        match state.endpoints.get_mut(&addr) {
            None => Some(FakeResponse::error(503, "endpoint went away")),
            Some(Endpoint::Hang) => None,
            Some(Endpoint::Custom(handler)) => {
                let handler = handler.clone();
                drop(state);
                Some(handler(method, path_and_query, body))
            }
            Some(Endpoint::Mgs { slot }) => Some(match (method, path) {
                ("GET", "/local/switch-id") => {
                    FakeResponse::json(200, json!({"type": "switch", "slot": slot}))
                }
                _ => FakeResponse::error(404, "Not Found"),
            }),
            Some(Endpoint::Dpd(dpd)) => Some(dpd.handle(method, path, &query, body)),
            Some(Endpoint::SledAgent(agent)) => Some(agent.handle(method, path, body)),
        }
    }
}

impl FakeSledAgent {
    fn handle(&mut self, method: &str, path: &str, body: &[u8]) -> FakeResponse {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method, segments.as_slice()) {
            ("GET", ["v2p"]) => {
                let all: Vec<_> = self.v2p.values().collect();
                FakeResponse::json(200, serde_json::to_value(all).unwrap())
            }
            ("PUT" | "DELETE", ["v2p"]) => {
                let m: VirtualNetworkInterfaceHost = match serde_json::from_slice(body) {
                    Ok(m) => m,
                    Err(e) => return FakeResponse::error(400, &format!("bad body: {e}")),
                };
                let key = (m.vni, m.virtual_ip);
                if method == "PUT" {
                    self.v2p.insert(key, m);
                    FakeResponse::empty(204)
                } else if self.v2p.remove(&key).is_some() {
                    FakeResponse::empty(204)
                } else {
                    FakeResponse::error(404, "no such mapping")
                }
            }
            ("GET", ["instances"]) => {
                let all: Vec<VmmInfo> = self
                    .vmms
                    .iter()
                    .map(|(&instance_id, &(vmm_id, state))| VmmInfo {
                        instance_id,
                        vmm_id,
                        state,
                    })
                    .collect();
                FakeResponse::json(200, serde_json::to_value(all).unwrap())
            }
            ("PUT", ["instances", id]) => {
                let (Ok(id), Ok(reg)) = (
                    id.parse::<u32>(),
                    serde_json::from_slice::<VmmRegistration>(body),
                ) else {
                    return FakeResponse::error(400, "bad request");
                };
                match self.vmms.get(&id) {
                    Some(&(vmm, _)) if vmm != reg.vmm_id => {
                        FakeResponse::error(409, &format!("instance {id} already has vmm {vmm}"))
                    }
                    Some(_) => FakeResponse::empty(204),
                    None => {
                        self.vmms.insert(id, (reg.vmm_id, VmmState::Starting));
                        FakeResponse::empty(204)
                    }
                }
            }
            ("PUT", ["instances", id, "state"]) => {
                let (Ok(id), Ok(req)) = (
                    id.parse::<u32>(),
                    serde_json::from_slice::<VmmStateRequest>(body),
                ) else {
                    return FakeResponse::error(400, "bad request");
                };
                let Some(vmm) = self.vmms.get_mut(&id) else {
                    return FakeResponse::error(404, &format!("no vmm for instance {id}"));
                };
                match req.state {
                    VmmState::Running => vmm.1 = VmmState::Running,
                    VmmState::Stopped => {
                        self.vmms.remove(&id);
                    }
                    VmmState::Starting => {
                        return FakeResponse::error(400, "cannot request starting")
                    }
                }
                FakeResponse::empty(204)
            }
            _ => FakeResponse::error(404, "Not Found"),
        }
    }
}

impl FakeDpd {
    fn handle(
        &mut self,
        method: &str,
        path: &str,
        query: &BTreeMap<String, String>,
        body: &[u8],
    ) -> FakeResponse {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let limit = query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(100);
        let token = query.get("page_token").map(|t| {
            t.strip_prefix("after=")
                .and_then(|t| t.strip_suffix('&'))
                .unwrap_or_else(|| panic!("fake dpd got a mangled page token {t:?}"))
                .to_string()
        });
        match (method, segments.as_slice()) {
            ("GET", ["rpw", "nat", "gen"]) => FakeResponse::json(200, json!(self.nat_gen)),
            ("GET", ["switch", "identifiers"]) => FakeResponse::json(
                200,
                json!({
                    "asic_backend": "fake",
                    "fab": null,
                    "fuse": null,
                    "model": "fake-sidecar",
                    "revision": 1,
                    "serial": format!("FAKE{}", self.slot),
                    "sidecar_id": "00000000-0000-0000-0000-000000000000",
                    "slot": self.slot,
                }),
            ),
            ("GET", ["nat", "ipv4"]) => {
                let after: Option<Ipv4Addr> =
                    token.map(|t| t.parse().expect("token is an address"));
                let items: Vec<Ipv4Addr> = self
                    .nat
                    .iter()
                    .filter(|(_, ports)| !ports.is_empty())
                    .map(|(&ip, _)| ip)
                    .filter(|ip| after.is_none_or(|a| *ip > a))
                    .take(limit)
                    .collect();
                page(items, |ip| ip.to_string())
            }
            ("GET", ["nat", "ipv4", ip]) => {
                let Ok(ip) = ip.parse::<Ipv4Addr>() else {
                    return FakeResponse::error(400, "bad ip");
                };
                let after: Option<u16> = token.map(|t| t.parse().expect("token is a port"));
                let items: Vec<Ipv4Nat> = self
                    .nat
                    .get(&ip)
                    .into_iter()
                    .flat_map(|ports| ports.iter())
                    .filter(|(low, _)| after.is_none_or(|a| **low > a))
                    .take(limit)
                    .map(|(&low, &(high, target))| Ipv4Nat {
                        external: ip,
                        low,
                        high,
                        target,
                    })
                    .collect();
                page(items, |e| e.low.to_string())
            }
            (m, ["nat", "ipv4", ip, port]) if m == "GET" || m == "DELETE" => {
                let (Ok(ip), Ok(port)) = (ip.parse::<Ipv4Addr>(), port.parse::<u16>()) else {
                    return FakeResponse::error(400, "bad path");
                };
                let found = self
                    .nat
                    .get(&ip)
                    .and_then(|ports| {
                        ports
                            .range(..=port)
                            .next_back()
                            .filter(|(_, (high, _))| *high >= port)
                    })
                    .map(|(&low, &(_, target))| (low, target));
                match (m, found) {
                    (_, None) => FakeResponse::error(404, "no such NAT entry"),
                    ("GET", Some((_, target))) => {
                        FakeResponse::json(200, serde_json::to_value(target).unwrap())
                    }
                    (_, Some((low, _))) => {
                        let ports = self.nat.get_mut(&ip).expect("found above");
                        ports.remove(&low);
                        if ports.is_empty() {
                            self.nat.remove(&ip);
                        }
                        FakeResponse::empty(204)
                    }
                }
            }
            ("PUT", ["nat", "ipv4", ip, low, high]) => {
                let (Ok(ip), Ok(low), Ok(high)) = (
                    ip.parse::<Ipv4Addr>(),
                    low.parse::<u16>(),
                    high.parse::<u16>(),
                ) else {
                    return FakeResponse::error(400, "bad path");
                };
                let Ok(target) = serde_json::from_slice::<NatTarget>(body) else {
                    return FakeResponse::error(400, "bad body");
                };
                let ports = self.nat.entry(ip).or_default();
                if ports.get(&low) == Some(&(high, target)) {
                    return FakeResponse::empty(204);
                }
                if ports.iter().any(|(&l, &(h, _))| l <= high && low <= h) {
                    return FakeResponse::error(409, "overlapping NAT entry");
                }
                ports.insert(low, (high, target));
                FakeResponse::empty(204)
            }
            _ => FakeResponse::error(404, "Not Found"),
        }
    }
}

/// A dropshot-like page: a token after every non-empty page. The token has
/// characters that must be percent-encoded, to catch clients that don't.
fn page<T: serde::Serialize>(items: Vec<T>, key: impl Fn(&T) -> String) -> FakeResponse {
    let next_page = items.last().map(|last| format!("after={}&", key(last)));
    FakeResponse::json(
        200,
        serde_json::to_value(ResultsPage { items, next_page }).unwrap(),
    )
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
            out.push(u8::from_str_radix(hex, 16).expect("valid percent escape"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8")
}

/// A `fd00:1122:3344:<sled>::2` switch-zone address.
pub(crate) fn zone_ip(sled: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, sled, 0, 0, 0, 2)
}

/// A service NAT entry for tests: `ip/first-last` pointing at
/// `fd00:1122:3344:<sled>::1` with a MAC derived from `sled`.
pub(crate) fn service_entry(ip: [u8; 4], first: u16, last: u16, sled: u16) -> crate::nat::NatEntry {
    crate::nat::NatEntry {
        external_ip: std::net::Ipv4Addr::from(ip),
        first_port: first,
        last_port: last,
        target: crate::dpd::NatTarget {
            internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, sled, 0, 0, 0, 1),
            inner_mac: crate::dpd::MacAddr::new([
                0xa8,
                0x40,
                0x25,
                0xff,
                0x00,
                u8::try_from(sled).expect("test sleds are numbered below 256"),
            ]),
            vni: crate::SERVICES_VNI,
        },
    }
}

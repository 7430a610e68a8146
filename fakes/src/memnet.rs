//! An in-memory network of fakes, for unit tests of clients and reconcilers.
//!
//! [`MemNet::connect`] hands out `tokio::io::duplex` streams whose far end
//! is a hyper server (spawned on the caller's runtime) in front of the fake
//! bound to that address — a [`DpdState`], an [`MgsState`], a
//! [`SledAgentState`] — or a test-supplied handler. No sockets are involved,
//! so tests can run with paused tokio time: the runtime auto-advances the
//! clock only when every task is idle, which is exactly when a real
//! reconciler would be waiting on a timer.
//!
//! Every request is logged (`"METHOD path?query"`, as sent), so tests can
//! assert on order, and [`MemNet::fail`] overrides the answer of one route of
//! one endpoint to inject errors or hangs. The fakes answer here exactly as
//! in the simulation and in live mode: they are the same state machines.

use std::{
    collections::BTreeMap,
    io,
    net::{Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use racksim_wire::{
    dpd::{Ipv4Nat, MacAddr, NatTarget},
    sled_agent::{VirtualNetworkInterfaceHost, VmmInfo},
    DPD_PORT, MGS_PORT, SERVICES_VNI, SLED_AGENT_PORT,
};
use serde_json::json;

use crate::{
    dpd::DpdState,
    http::{ApiRequest, ApiResponse, API_VERSION_HEADER},
    mgs::MgsState,
    sled_agent::SledAgentState,
};

/// A canned answer.
#[derive(Clone, Debug)]
pub struct CannedResponse {
    pub status: u16,
    pub body: Bytes,
}

impl CannedResponse {
    pub fn json(status: u16, value: serde_json::Value) -> Self {
        CannedResponse {
            status,
            body: Bytes::from(value.to_string()),
        }
    }

    pub fn text(status: u16, text: &str) -> Self {
        CannedResponse {
            status,
            body: Bytes::from(text.to_string()),
        }
    }

    pub fn empty(status: u16) -> Self {
        CannedResponse {
            status,
            body: Bytes::new(),
        }
    }

    /// A dropshot error body.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(status, json!({"request_id": "memnet", "message": message}))
    }

    fn from_api(r: ApiResponse) -> Self {
        CannedResponse {
            status: r.status.as_u16(),
            body: r.body.map(|b| b.to_bytes("")).unwrap_or_default(),
        }
    }
}

/// A test-supplied server: `(method, path?query, body)` to an answer.
pub type Handler = Arc<dyn Fn(&str, &str, &[u8]) -> CannedResponse + Send + Sync>;

enum Endpoint {
    Dpd(DpdState),
    Mgs(MgsState),
    SledAgent(SledAgentState),
    Custom(Handler),
    Hang,
}

/// Overrides the normal answer of one endpoint for one `METHOD path`.
struct Rule {
    addr: SocketAddr,
    method: String,
    path: String,
    /// `None` = never answer.
    response: Option<CannedResponse>,
}

#[derive(Default)]
struct NetState {
    endpoints: BTreeMap<SocketAddr, Endpoint>,
    log: Vec<(SocketAddr, String)>,
    rules: Vec<Rule>,
}

/// The network; clone freely (shared state).
#[derive(Clone, Default)]
pub struct MemNet {
    state: Arc<Mutex<NetState>>,
}

impl MemNet {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection to `addr`, served by the fake bound there; refused
    /// when nothing is.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<tokio::io::DuplexStream> {
        if !self.lock().endpoints.contains_key(&addr) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "connection refused",
            ));
        }
        let (client, server) = tokio::io::duplex(64 * 1024);
        let net = self.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| net.clone().serve(addr, req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(server), service)
                .await;
        });
        Ok(client)
    }

    /// One request on a connection to `addr`, answered by [`Self::handle`];
    /// an answer of "never" is a response that never comes.
    async fn serve(
        self,
        addr: SocketAddr,
        req: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, hyper::Error> {
        let (parts, body) = req.into_parts();
        let body = body.collect().await?.to_bytes();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let version = parts
            .headers
            .get(API_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match self.handle(addr, &parts.method, &path, version, body) {
            Some(r) => Ok(Response::builder()
                .status(r.status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(r.body))
                .expect("valid response")),
            None => std::future::pending().await,
        }
    }

    /// A switch zone at `ip`: dpd on `DPD_PORT` and MGS on `MGS_PORT`, both
    /// for switch `slot`.
    pub fn add_switch_zone(&self, ip: Ipv6Addr, slot: u16) {
        let mut state = self.lock();
        state
            .endpoints
            .insert(dpd_addr(ip), Endpoint::Dpd(DpdState::new(slot)));
        state.endpoints.insert(
            SocketAddr::new(ip.into(), MGS_PORT),
            Endpoint::Mgs(MgsState::new(slot)),
        );
    }

    /// Takes a whole switch zone off the network (connections refused).
    pub fn remove_switch_zone(&self, ip: Ipv6Addr) {
        let mut state = self.lock();
        state.endpoints.remove(&dpd_addr(ip));
        state
            .endpoints
            .remove(&SocketAddr::new(ip.into(), MGS_PORT));
    }

    /// Runs `f` on the dpd of the switch zone at `zone`.
    pub fn with_dpd<T>(&self, zone: Ipv6Addr, f: impl FnOnce(&mut DpdState) -> T) -> T {
        match self.lock().endpoints.get_mut(&dpd_addr(zone)) {
            Some(Endpoint::Dpd(dpd)) => f(dpd),
            _ => panic!("no fake dpd at {zone}"),
        }
    }

    /// A dpd restart: empty tables, generation back to zero.
    pub fn restart_dpd(&self, zone: Ipv6Addr) {
        self.with_dpd(zone, |dpd| *dpd = DpdState::new(dpd.slot()));
    }

    /// Plants an entry, bypassing the API (and its checks).
    pub fn insert_nat(&self, zone: Ipv6Addr, entry: Ipv4Nat) {
        self.with_dpd(zone, |dpd| dpd.ipv4_plant(entry));
    }

    /// All IPv4 NAT entries of the dpd in `zone`, sorted; none when there
    /// is no dpd there.
    pub fn nat(&self, zone: Ipv6Addr) -> Vec<Ipv4Nat> {
        match self.lock().endpoints.get(&dpd_addr(zone)) {
            Some(Endpoint::Dpd(dpd)) => dpd.ipv4_entries(),
            _ => Vec::new(),
        }
    }

    /// A sled-agent at `[ip]:SLED_AGENT_PORT` with no mappings and no VMMs.
    pub fn add_sled_agent(&self, ip: Ipv6Addr) {
        self.lock().endpoints.insert(
            sled_agent_addr(ip),
            Endpoint::SledAgent(SledAgentState::default()),
        );
    }

    /// Runs `f` on the sled-agent at `ip`.
    pub fn with_sled_agent<T>(&self, ip: Ipv6Addr, f: impl FnOnce(&mut SledAgentState) -> T) -> T {
        match self.lock().endpoints.get_mut(&sled_agent_addr(ip)) {
            Some(Endpoint::SledAgent(agent)) => f(agent),
            _ => panic!("no fake sled-agent at {ip}"),
        }
    }

    /// The V2P mappings of the sled-agent at `ip`, sorted.
    pub fn v2p(&self, ip: Ipv6Addr) -> Vec<VirtualNetworkInterfaceHost> {
        self.with_sled_agent(ip, |a| a.v2p_list())
    }

    /// Plants a mapping, bypassing the API.
    pub fn insert_v2p(&self, ip: Ipv6Addr, m: VirtualNetworkInterfaceHost) {
        self.with_sled_agent(ip, |a| a.v2p_set(m).map(|_| ()))
            .expect("planted mappings are valid");
    }

    /// The VMMs of the sled-agent at `ip`, by propolis id.
    pub fn vmms(&self, ip: Ipv6Addr) -> Vec<VmmInfo> {
        self.with_sled_agent(ip, |a| a.vmm_list())
    }

    /// Binds a test-supplied server to `addr`.
    pub fn set_custom(
        &self,
        addr: SocketAddr,
        handler: impl Fn(&str, &str, &[u8]) -> CannedResponse + Send + Sync + 'static,
    ) {
        self.lock()
            .endpoints
            .insert(addr, Endpoint::Custom(Arc::new(handler)));
    }

    /// An endpoint that accepts connections and never answers.
    pub fn set_hang(&self, addr: SocketAddr) {
        self.lock().endpoints.insert(addr, Endpoint::Hang);
    }

    /// Makes `METHOD path` (no query) on `zone:port` answer `response`
    /// (`None`: never answer) instead of the normal behaviour. A segment
    /// `*` of `path` matches any one segment (`/vmms/*/state`: whatever
    /// VMM id the code under test allocates).
    pub fn fail(
        &self,
        zone: Ipv6Addr,
        port: u16,
        method: &str,
        path: &str,
        response: Option<CannedResponse>,
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
        method: &http::Method,
        path_and_query: &str,
        api_version: Option<String>,
        body: Bytes,
    ) -> Option<CannedResponse> {
        let mut state = self.lock();
        state.log.push((addr, format!("{method} {path_and_query}")));
        let path = path_and_query.split('?').next().unwrap_or_default();
        if let Some(rule) = state
            .rules
            .iter()
            .find(|r| r.addr == addr && r.method == method.as_str() && path_matches(&r.path, path))
        {
            return rule.response.clone();
        }
        let mut req = ApiRequest::new(method.clone(), path_and_query, body.clone());
        req.api_version = api_version;
        match state.endpoints.get_mut(&addr) {
            None => Some(CannedResponse::error(503, "endpoint went away")),
            Some(Endpoint::Hang) => None,
            Some(Endpoint::Custom(handler)) => {
                let handler = handler.clone();
                drop(state);
                Some(handler(method.as_str(), path_and_query, &body))
            }
            Some(Endpoint::Mgs(mgs)) => Some(CannedResponse::from_api(mgs.handle(&req))),
            Some(Endpoint::Dpd(dpd)) => Some(CannedResponse::from_api(dpd.handle(&req).0)),
            Some(Endpoint::SledAgent(agent)) => {
                Some(CannedResponse::from_api(agent.handle(&req).0))
            }
        }
    }
}

/// The target of test NAT entries: sled `sled`'s `::1`, a MAC derived from
/// it, the services VNI.
pub fn service_target(sled: u16) -> NatTarget {
    let sled_byte = u8::try_from(sled).expect("test sleds are numbered below 256");
    NatTarget {
        internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, sled, 0, 0, 0, 1),
        inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, sled_byte]),
        vni: SERVICES_VNI,
    }
}

/// dpd's address in the switch zone at `zone`.
fn dpd_addr(zone: Ipv6Addr) -> SocketAddr {
    SocketAddr::new(zone.into(), DPD_PORT)
}

/// sled-agent's address on the sled at `ip`.
fn sled_agent_addr(ip: Ipv6Addr) -> SocketAddr {
    SocketAddr::new(ip.into(), SLED_AGENT_PORT)
}

/// A `fd00:1122:3344:<sled>::2` switch-zone address.
pub fn zone_ip(sled: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, sled, 0, 0, 0, 2)
}

/// Whether a rule's `pattern` matches `path`: segment by segment, a `*`
/// matching any one.
fn path_matches(pattern: &str, path: &str) -> bool {
    let (mut p, mut q) = (pattern.split('/'), path.split('/'));
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == "*" || a == b => {}
            _ => return false,
        }
    }
}

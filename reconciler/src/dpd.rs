//! Typed client of dendrite's NAT API (dpd 13.0.0).
//!
//! Paths and JSON are exactly those of dpd's published OpenAPI document
//! (`reference/dpd-13.0.0-nat-subset.json`): a reconciler that passes its tests
//! against a fake speaking this format speaks to the real dpd too. Only the
//! operations the reconcilers need are here, plus the few that tests and
//! tools use to inspect a switch (reset, generation, trigger).
//!
//! Listing is paginated by dpd (dropshot's `limit` / `page_token`); the
//! `*_all` helpers follow `next_page` until the server says there is no more,
//! so callers see one consistent `Vec`.

use std::{
    fmt,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    str::FromStr,
};

use serde::{Deserialize, Serialize};

use crate::http::{ClientError, Connector, HttpClient};

pub mod fuse;

/// The version of dpd's API these types and paths are written against
/// (`info.version` of `reference/dpd-13.0.0-nat-subset.json`), sent as the
/// `api-version` header.
pub const API_VERSION: &str = "13.0.0";

/// The largest Geneve VNI: a VNI is a 24-bit value.
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// JSON schemas of the wire types, for servers that publish them (the
/// fakes): named as in the published documents. Off in production builds.
#[cfg(feature = "schemars")]
pub mod schema {
    use schemars::{
        gen::SchemaGenerator,
        schema::{InstanceType, Metadata, NumberValidation, Schema, SchemaObject},
        JsonSchema,
    };

    fn integer(format: &str, description: Option<&str>) -> Schema {
        SchemaObject {
            instance_type: Some(InstanceType::Integer.into()),
            format: Some(format.to_string()),
            number: Some(Box::new(NumberValidation {
                minimum: Some(0.0),
                ..Default::default()
            })),
            metadata: description.map(|d| {
                Box::new(Metadata {
                    description: Some(d.to_string()),
                    ..Default::default()
                })
            }),
            ..Default::default()
        }
        .into()
    }

    /// A Geneve VNI: `{"type":"integer","format":"uint32"}` under the name
    /// `Vni`, as dpd and sled-agent publish it.
    pub struct Vni;

    impl JsonSchema for Vni {
        fn schema_name() -> String {
            "Vni".to_string()
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            integer("uint32", Some("A Geneve Virtual Network Identifier"))
        }
    }

    /// A UUID as a string (dpd's `sidecar_id`).
    pub struct Uuid;

    impl JsonSchema for Uuid {
        fn schema_name() -> String {
            "Uuid".to_string()
        }

        fn is_referenceable() -> bool {
            false
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            SchemaObject {
                instance_type: Some(InstanceType::String.into()),
                format: Some("uuid".to_string()),
                ..Default::default()
            }
            .into()
        }
    }

    /// sled-agent's `MacAddr`: a string `aa:bb:cc:dd:ee:ff`.
    pub struct MacString;

    impl JsonSchema for MacString {
        fn schema_name() -> String {
            "MacAddr".to_string()
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            SchemaObject {
                instance_type: Some(InstanceType::String.into()),
                metadata: Some(Box::new(Metadata {
                    title: Some("A MAC address".to_string()),
                    description: Some(
                        "A Media Access Control address, in EUI-48 format".to_string(),
                    ),
                    ..Default::default()
                })),
                string: Some(Box::new(schemars::schema::StringValidation {
                    max_length: Some(17),
                    min_length: Some(5),
                    pattern: Some("^([0-9a-fA-F]{0,2}:){5}[0-9a-fA-F]{0,2}$".to_string()),
                })),
                ..Default::default()
            }
            .into()
        }
    }
}

/// An EUI-48 MAC address, used for layer-2 addressing; on dpd's wire
/// `{"a":[u8;6]}`. Display as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct MacAddr {
    pub a: [u8; 6],
}

impl MacAddr {
    pub const fn new(a: [u8; 6]) -> Self {
        MacAddr { a }
    }
}

/// A string that is not an EUI-48 address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}: expected six colon-separated hex octets")]
pub struct ParseMacAddrError(pub String);

impl FromStr for MacAddr {
    type Err = ParseMacAddrError;

    /// Parses `aa:bb:cc:dd:ee:ff` (case-insensitive; an octet may be written
    /// with one digit, as the OpenAPI pattern of sled-agent's `MacAddr`
    /// allows).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseMacAddrError(s.to_string());
        let mut a = [0u8; 6];
        let mut parts = s.split(':');
        for octet in &mut a {
            let part = parts.next().ok_or_else(err)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr { a })
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.a;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// `NatTarget { internal_ip, inner_mac, vni }`: where dpd sends traffic that
/// arrives for an external address and port range — the sled hosting the
/// zone (its underlay IPv6), the zone's OPTE port MAC, and the Geneve VNI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct NatTarget {
    pub internal_ip: Ipv6Addr,
    pub inner_mac: MacAddr,
    #[cfg_attr(feature = "schemars", schemars(with = "schema::Vni"))]
    pub vni: u32,
}

/// One IPv4 NAT entry as listed by dpd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Ipv4Nat {
    pub external: Ipv4Addr,
    pub low: u16,
    pub high: u16,
    pub target: NatTarget,
}

/// One IPv6 NAT entry as listed by dpd (same shape under `/nat/ipv6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Ipv6Nat {
    pub external: Ipv6Addr,
    pub low: u16,
    pub high: u16,
    pub target: NatTarget,
}

/// A page of results: `{"items": [...], "next_page": "token" | null}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultsPage<T> {
    pub items: Vec<T>,
    #[serde(default)]
    pub next_page: Option<String>,
}

/// `GET /switch/identifiers`, as dpd 13.0.0 sends it: the required fields,
/// and the ASIC's manufacturing identifiers, which dendrite sends as `null`
/// when it has none (the fake sidecar has none; a client reading a real
/// dpd gets them filled in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SwitchIdentifiers {
    pub asic_backend: String,
    pub model: String,
    pub revision: u32,
    pub serial: String,
    #[cfg_attr(feature = "schemars", schemars(with = "schema::Uuid"))]
    pub sidecar_id: String,
    pub slot: u16,
    /// Fabrication plant identifier.
    #[serde(default)]
    pub fab: Option<char>,
    /// Lot identifier.
    #[serde(default)]
    pub lot: Option<char>,
    /// Lot number (4 characters within the lot).
    #[serde(default)]
    pub lotnum: Option<[char; 4]>,
    /// Wafer number within the lot.
    #[serde(default)]
    pub wafer: Option<u8>,
    /// The die's (x, y) location on the wafer.
    #[serde(default)]
    pub wafer_loc: Option<[i16; 2]>,
    /// The ASIC's fuse data.
    #[serde(default)]
    pub fuse: Option<fuse::FuseData>,
}

/// Client of one dpd.
#[derive(Clone, Debug)]
pub struct DpdClient<C> {
    http: HttpClient<C>,
}

impl<C: Connector> DpdClient<C> {
    /// A client sending dpd's [`API_VERSION`] with every request.
    pub fn new(http: HttpClient<C>) -> Self {
        DpdClient {
            http: http.with_api_version(API_VERSION),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.http.addr()
    }

    /// GET /nat/ipv4?limit=&page_token= (one page)
    pub async fn nat_ipv4_addresses_list(
        &self,
        limit: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<ResultsPage<Ipv4Addr>, ClientError> {
        self.http.get(&paged("/nat/ipv4", limit, page_token)).await
    }

    /// all pages of GET /nat/ipv4
    pub async fn nat_ipv4_addresses_all(
        &self,
        page_size: u32,
    ) -> Result<Vec<Ipv4Addr>, ClientError> {
        self.collect_pages("/nat/ipv4", page_size).await
    }

    /// GET /nat/ipv4/{ip}?limit=&page_token=
    pub async fn nat_ipv4_list(
        &self,
        ip: Ipv4Addr,
        limit: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<ResultsPage<Ipv4Nat>, ClientError> {
        self.http
            .get(&paged(&format!("/nat/ipv4/{ip}"), limit, page_token))
            .await
    }

    /// all pages of GET /nat/ipv4/{ip}
    pub async fn nat_ipv4_list_all(
        &self,
        ip: Ipv4Addr,
        page_size: u32,
    ) -> Result<Vec<Ipv4Nat>, ClientError> {
        self.collect_pages(&format!("/nat/ipv4/{ip}"), page_size)
            .await
    }

    /// GET /nat/ipv4/{ip}/{low}; Ok(None) on 404
    pub async fn nat_ipv4_get(
        &self,
        ip: Ipv4Addr,
        low: u16,
    ) -> Result<Option<NatTarget>, ClientError> {
        match self.http.get(&format!("/nat/ipv4/{ip}/{low}")).await {
            Ok(target) => Ok(Some(target)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// PUT /nat/ipv4/{ip}/{low}/{high} body NatTarget (204)
    pub async fn nat_ipv4_create(
        &self,
        ip: Ipv4Addr,
        low: u16,
        high: u16,
        target: &NatTarget,
    ) -> Result<(), ClientError> {
        self.http
            .put(&format!("/nat/ipv4/{ip}/{low}/{high}"), target)
            .await
    }

    /// DELETE /nat/ipv4/{ip}/{low} (204)
    pub async fn nat_ipv4_delete(&self, ip: Ipv4Addr, low: u16) -> Result<(), ClientError> {
        self.http.delete(&format!("/nat/ipv4/{ip}/{low}")).await
    }

    /// DELETE /nat/ipv4: clear every IPv4 NAT entry.
    pub async fn nat_ipv4_reset(&self) -> Result<(), ClientError> {
        self.http.delete("/nat/ipv4").await
    }

    /// GET /rpw/nat/gen: the NAT generation dpd last pulled from Nexus.
    pub async fn nat_generation(&self) -> Result<i64, ClientError> {
        self.http.get("/rpw/nat/gen").await
    }

    /// POST /rpw/nat/trigger: ask dpd to pull NAT state from Nexus now.
    pub async fn nat_trigger_update(&self) -> Result<(), ClientError> {
        self.http.post("/rpw/nat/trigger").await
    }

    /// GET /switch/identifiers
    pub async fn switch_identifiers(&self) -> Result<SwitchIdentifiers, ClientError> {
        self.http.get("/switch/identifiers").await
    }

    /// Follows `next_page` from the first page until the server returns none.
    ///
    /// A server that hands back the token it was just given would make this
    /// loop forever; that is reported as a protocol error instead.
    async fn collect_pages<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        page_size: u32,
    ) -> Result<Vec<T>, ClientError> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page_path = paged(path, Some(page_size), token.as_deref());
            let page: ResultsPage<T> = self.http.get(&page_path).await?;
            all.extend(page.items);
            match page.next_page {
                None => return Ok(all),
                Some(next) if token.as_deref() == Some(next.as_str()) => {
                    return Err(ClientError::Protocol {
                        addr: self.addr().to_string(),
                        method: "GET".to_string(),
                        path: page_path,
                        message: format!("server repeated page token {next:?}"),
                    });
                }
                Some(next) => token = Some(next),
            }
        }
    }
}

/// `path?limit=..&page_token=..`, omitting absent parameters.
fn paged(path: &str, limit: Option<u32>, page_token: Option<&str>) -> String {
    let mut params = Vec::new();
    if let Some(limit) = limit {
        params.push(format!("limit={limit}"));
    }
    if let Some(token) = page_token {
        params.push(format!("page_token={}", percent_encode(token)));
    }
    if params.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", params.join("&"))
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters. Page tokens
/// are opaque: dropshot's are base64, which may contain `=`, `+` or `/`.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{testing::FakeNet, DPD_PORT};

    fn target() -> NatTarget {
        NatTarget {
            internal_ip: "fd00:1122:3344:101::1".parse().unwrap(),
            inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, 0x01]),
            vni: 100,
        }
    }

    #[test]
    fn nat_target_wire_shape() {
        assert_eq!(
            serde_json::to_value(target()).unwrap(),
            json!({
                "internal_ip": "fd00:1122:3344:101::1",
                "inner_mac": {"a": [168, 64, 37, 255, 0, 1]},
                "vni": 100,
            })
        );
        assert_eq!(target().inner_mac.to_string(), "a8:40:25:ff:00:01");
    }

    #[test]
    fn mac_parses_its_display_form_and_rejects_garbage() {
        let mac = MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0x00, 0x01]);
        assert_eq!("a8:40:25:f0:00:01".parse::<MacAddr>(), Ok(mac));
        assert_eq!("A8:40:25:F0:0:1".parse::<MacAddr>(), Ok(mac));
        assert_eq!(mac.to_string().parse::<MacAddr>(), Ok(mac));
        for bad in [
            "",
            "a8:40:25:f0:00",
            "a8:40:25:f0:00:01:02",
            "a8:40:25:f0::01",
            "a8:40:25:f0:00:001",
            "a8:40:25:f0:00:0g",
            "a8-40-25-f0-00-01",
        ] {
            assert_eq!(
                bad.parse::<MacAddr>(),
                Err(ParseMacAddrError(bad.to_string())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn pages_parse_exactly_as_the_reference() {
        let page: ResultsPage<Ipv4Nat> = serde_json::from_value(json!({
            "items": [{
                "external": "198.51.100.1",
                "low": 0,
                "high": 65535,
                "target": {
                    "internal_ip": "fd00:1122:3344:101::1",
                    "inner_mac": {"a": [168, 64, 37, 255, 0, 1]},
                    "vni": 100
                }
            }],
            "next_page": null
        }))
        .unwrap();
        assert_eq!(
            page,
            ResultsPage {
                items: vec![Ipv4Nat {
                    external: Ipv4Addr::new(198, 51, 100, 1),
                    low: 0,
                    high: 65535,
                    target: target(),
                }],
                next_page: None,
            }
        );
        // `next_page` is optional in the schema (only `items` is required).
        let page: ResultsPage<Ipv4Addr> =
            serde_json::from_value(json!({"items": ["198.51.100.7"]})).unwrap();
        assert_eq!(page.items, vec![Ipv4Addr::new(198, 51, 100, 7)]);
        assert_eq!(page.next_page, None);
        let page: ResultsPage<Ipv4Addr> =
            serde_json::from_value(json!({"items": [], "next_page": "abc="})).unwrap();
        assert_eq!(page.next_page.as_deref(), Some("abc="));
    }

    #[test]
    fn switch_identifiers_ignores_optional_fields() {
        let ids: SwitchIdentifiers = serde_json::from_value(json!({
            "asic_backend": "tofino_asic",
            "fab": null,
            "fuse": null,
            "lot": "A",
            "lotnum": ["1", "2", "3", "4"],
            "model": "913-0000006",
            "revision": 4,
            "serial": "BRM42220036",
            "sidecar_id": "c3a87d6f-0b5a-4bb1-9e8c-6f0c1b7a0d11",
            "slot": 1,
            "wafer": 3,
            "wafer_loc": [1, -2]
        }))
        .unwrap();
        assert_eq!(ids.slot, 1);
        assert_eq!(ids.model, "913-0000006");
    }

    #[test]
    fn paths_and_query_encoding() {
        assert_eq!(paged("/nat/ipv4", None, None), "/nat/ipv4");
        assert_eq!(paged("/nat/ipv4", Some(128), None), "/nat/ipv4?limit=128");
        assert_eq!(
            paged("/nat/ipv4/198.51.100.1", Some(5), Some("a+b/c= &d")),
            "/nat/ipv4/198.51.100.1?limit=5&page_token=a%2Bb%2Fc%3D%20%26d"
        );
    }

    fn dpd(net: &FakeNet, zone: Ipv6Addr) -> DpdClient<crate::testing::FakeConnector> {
        DpdClient::new(HttpClient::new(
            net.connector(),
            SocketAddr::new(zone.into(), DPD_PORT),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn create_get_list_delete_round_trip() {
        let net = FakeNet::new();
        let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
        net.add_switch_zone(zone, 0);
        let client = dpd(&net, zone);
        let ip = Ipv4Addr::new(198, 51, 100, 1);

        assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), None);
        client
            .nat_ipv4_create(ip, 0, 16383, &target())
            .await
            .unwrap();
        // Lookup by any port inside the range finds it.
        assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), Some(target()));
        assert_eq!(client.nat_ipv4_get(ip, 100).await.unwrap(), Some(target()));
        assert_eq!(client.nat_ipv4_get(ip, 16384).await.unwrap(), None);
        assert_eq!(client.nat_ipv4_addresses_all(128).await.unwrap(), vec![ip]);
        assert_eq!(
            client.nat_ipv4_list_all(ip, 128).await.unwrap(),
            vec![Ipv4Nat {
                external: ip,
                low: 0,
                high: 16383,
                target: target()
            }]
        );
        assert_eq!(client.switch_identifiers().await.unwrap().slot, 0);
        client.nat_ipv4_delete(ip, 0).await.unwrap();
        assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), None);
        // Nothing covers port 0 any more: dpd clears nothing and says 204.
        client.nat_ipv4_delete(ip, 0).await.unwrap();

        assert_eq!(
            net.requests(zone, DPD_PORT),
            vec![
                "GET /nat/ipv4/198.51.100.1/0",
                "PUT /nat/ipv4/198.51.100.1/0/16383",
                "GET /nat/ipv4/198.51.100.1/0",
                "GET /nat/ipv4/198.51.100.1/100",
                "GET /nat/ipv4/198.51.100.1/16384",
                "GET /nat/ipv4?limit=128",
                // The fake, like dropshot, returns a token after every
                // non-empty page; the final page is empty.
                "GET /nat/ipv4?limit=128&page_token=198.51.100.1",
                "GET /nat/ipv4/198.51.100.1?limit=128",
                "GET /nat/ipv4/198.51.100.1?limit=128&page_token=0",
                "GET /switch/identifiers",
                "DELETE /nat/ipv4/198.51.100.1/0",
                "GET /nat/ipv4/198.51.100.1/0",
                "DELETE /nat/ipv4/198.51.100.1/0",
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn list_all_follows_pages() {
        let net = FakeNet::new();
        let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
        net.add_switch_zone(zone, 1);
        let ip = Ipv4Addr::new(198, 51, 100, 9);
        for i in 0..7u16 {
            net.insert_nat(
                zone,
                Ipv4Nat {
                    external: ip,
                    low: i * 10,
                    high: i * 10 + 9,
                    target: target(),
                },
            );
        }
        let client = dpd(&net, zone);
        let first = client.nat_ipv4_list(ip, Some(3), None).await.unwrap();
        assert_eq!(first.items.len(), 3);
        let token = first.next_page.expect("a full page has a next page");
        let second = client
            .nat_ipv4_list(ip, Some(3), Some(&token))
            .await
            .unwrap();
        assert_eq!(
            second.items.iter().map(|e| e.low).collect::<Vec<_>>(),
            vec![30, 40, 50]
        );

        let all = client.nat_ipv4_list_all(ip, 3).await.unwrap();
        assert_eq!(
            all.iter().map(|e| e.low).collect::<Vec<_>>(),
            vec![0, 10, 20, 30, 40, 50, 60]
        );
        // 3 + 3 + 1 + an empty last page.
        let pages = net
            .requests(zone, DPD_PORT)
            .into_iter()
            .filter(|r| r.starts_with("GET /nat/ipv4/198.51.100.9?limit=3"))
            .count();
        assert_eq!(pages, 2 + 4);
    }

    #[tokio::test(start_paused = true)]
    async fn every_request_names_dpds_api_version() {
        let net = FakeNet::new();
        let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
        net.add_switch_zone(zone, 0);
        let addr = SocketAddr::new(zone.into(), DPD_PORT);
        // Like every Oxide internal API, dpd refuses a request that does
        // not say which version of the API it is written against.
        let raw = HttpClient::new(net.connector(), addr);
        let err = raw.get::<i64>("/rpw/nat/gen").await.unwrap_err();
        assert_eq!(err.status(), Some(400));
        assert!(err.to_string().contains("api-version"), "{err}");
        let client = dpd(&net, zone);
        assert_eq!(client.http.api_version(), Some("13.0.0"));
        assert_eq!(client.nat_generation().await.unwrap(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_page_token_is_an_error_not_a_loop() {
        let net = FakeNet::new();
        let addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), DPD_PORT);
        net.set_custom(addr, |_m, _p, _b| {
            crate::testing::FakeResponse::json(200, json!({"items": [], "next_page": "same"}))
        });
        let client = DpdClient::new(HttpClient::new(net.connector(), addr));
        match client.nat_ipv4_addresses_all(128).await.unwrap_err() {
            ClientError::Protocol { message, .. } => assert!(message.contains("same"), "{message}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

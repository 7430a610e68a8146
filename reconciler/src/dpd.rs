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
//!
//! The wire types (`NatTarget`, `Ipv4Nat`, `MacAddr`, …) are those of
//! `racksim-wire`, which the fakes serve too; they are re-exported here.

use std::{
    fmt::Write as _,
    net::{Ipv4Addr, SocketAddr},
};

pub use racksim_wire::dpd::{
    fuse, Ipv4Nat, Ipv6Nat, MacAddr, NatTarget, ParseMacAddrError, ResultsPage, SwitchIdentifiers,
    API_VERSION, MAX_VNI,
};

use crate::http::{ClientError, Connector, HttpClient};

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

/// `path?limit=..&page_token=..`, omitting absent parameters. Written into
/// one string: every page of every listing builds one.
fn paged(path: &str, limit: Option<u32>, page_token: Option<&str>) -> String {
    let mut out = String::with_capacity(path.len() + 32);
    out.push_str(path);
    let mut separator = '?';
    if let Some(limit) = limit {
        out.push(separator);
        // Writing to a `String` cannot fail.
        let _ = write!(out, "limit={limit}");
        separator = '&';
    }
    if let Some(token) = page_token {
        out.push(separator);
        out.push_str("page_token=");
        percent_encode_into(&mut out, token);
    }
    out
}

/// Percent-encodes everything but RFC 3986 unreserved characters onto `out`.
/// Page tokens are opaque: dropshot's are base64, which may contain `=`,
/// `+` or `/`.
fn percent_encode_into(out: &mut String, value: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

#[cfg(test)]
mod tests;

//! What upstream serves that the fakes do not.
//!
//! The fakes serve a subset of each real service's API: the endpoints the
//! reconcilers, Nexus and the checks use (the committed `openapi/*.json`).
//! Upstream's whole published documents are committed beside them
//! (`openapi/reference/upstream/`). A request for an operation upstream has
//! and the fake does not serve must not look like a request for a path that
//! does not exist: a client generated from upstream's document would read a
//! bare 404 as "no such resource" and go on. So every server — dropshot in
//! live mode, and the state machines' `handle` routers in the simulation and
//! `memnet` — answers such a request **501 Not Implemented**, with
//! [`ERROR_CODE`] and a message naming upstream's operation. A path that
//! upstream does not have either is dropshot's plain 404.
//!
//! Simplification: the documents are upstream's latest versions (dpd
//! 13.0.0, MGS 3.0.0, sled-agent 48.0.0). An unserved operation answers 501
//! at every `api-version`, including versions older than the one that added
//! it upstream (which would answer 404 there). The served endpoints route by
//! version as upstream does (see `crate::api`).

use std::{borrow::Cow, sync::OnceLock};

use http::Method;
use serde_json::Value;

use crate::http::{ApiError, ApiRequest};

/// `error_code` of the 501 for an upstream operation the fake does not serve.
pub const ERROR_CODE: &str = "NotServedByRacksim";

/// The three services the fakes stand in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    Dpd,
    Mgs,
    SledAgent,
}

impl Service {
    pub const ALL: [Service; 3] = [Service::Dpd, Service::Mgs, Service::SledAgent];

    /// The fake's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Dpd => "dpd",
            Service::Mgs => "MGS",
            Service::SledAgent => "sled-agent",
        }
    }

    /// Upstream's whole published document, as committed.
    pub fn upstream_document(self) -> &'static str {
        match self {
            Service::Dpd => {
                include_str!("../../openapi/reference/upstream/dpd-13.0.0-5db8bd.json")
            }
            Service::Mgs => {
                include_str!("../../openapi/reference/upstream/gateway-3.0.0-dacda2.json")
            }
            Service::SledAgent => {
                include_str!("../../openapi/reference/upstream/sled-agent-48.0.0-808ec1.json")
            }
        }
    }

    /// The fake's own document (what it serves at its latest version), as
    /// committed in `openapi/`. `tests/openapi.rs` holds each equal to the
    /// document generated from the fake's API trait ([`crate::api`]), so
    /// reading the committed one keeps this module below the servers that
    /// use it: the state machines' routers and the dropshot servers alike
    /// take their served operations from here.
    fn fake_document(self) -> &'static str {
        match self {
            Service::Dpd => include_str!("../../openapi/dpd.json"),
            Service::Mgs => include_str!("../../openapi/mgs.json"),
            Service::SledAgent => include_str!("../../openapi/sled-agent.json"),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One operation of a published document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    pub method: Method,
    /// The path template, e.g. `/ports/{port_id}/links`.
    pub path: String,
    pub operation_id: String,
}

impl Operation {
    /// Whether `segments` (decoded, without empty ones) match the template.
    fn matches(&self, method: &Method, segments: &[Cow<'_, str>]) -> bool {
        if self.method != *method {
            return false;
        }
        let template: Vec<&str> = self.path.split('/').filter(|s| !s.is_empty()).collect();
        template.len() == segments.len()
            && template
                .iter()
                .zip(segments)
                .all(|(t, s)| (t.starts_with('{') && t.ends_with('}')) || t == s)
    }

    /// The path template's variables, in order.
    pub fn variables(&self) -> Vec<String> {
        self.path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_string)
            .collect()
    }
}

const METHODS: [(&str, Method); 5] = [
    ("get", Method::GET),
    ("put", Method::PUT),
    ("post", Method::POST),
    ("delete", Method::DELETE),
    ("patch", Method::PATCH),
];

/// Every operation of an OpenAPI document, sorted by path then method.
pub fn operations_of(doc: &Value) -> Vec<Operation> {
    let mut ops = Vec::new();
    let paths = doc["paths"].as_object().expect("documents have paths");
    for (path, item) in paths {
        for (key, method) in &METHODS {
            if let Some(op) = item.get(*key) {
                ops.push(Operation {
                    method: method.clone(),
                    path: path.clone(),
                    operation_id: op["operationId"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    }
    ops.sort_by(|a, b| (&a.path, a.method.as_str()).cmp(&(&b.path, b.method.as_str())));
    ops
}

struct Tables {
    upstream: Vec<Operation>,
    served: Vec<Operation>,
}

fn tables(service: Service) -> &'static Tables {
    static TABLES: [OnceLock<Tables>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    TABLES[service.index()].get_or_init(|| {
        let upstream: Value = serde_json::from_str(service.upstream_document())
            .expect("the committed upstream documents are JSON");
        let served: Value = serde_json::from_str(service.fake_document())
            .expect("the committed documents are JSON");
        Tables {
            upstream: operations_of(&upstream),
            served: operations_of(&served),
        }
    })
}

/// Every operation of upstream's document.
pub fn upstream_operations(service: Service) -> &'static [Operation] {
    &tables(service).upstream
}

/// The operations the fake serves at its latest version (its own document).
pub fn served_operations(service: Service) -> &'static [Operation] {
    &tables(service).served
}

/// Upstream's operations the fake does not serve.
pub fn unserved_operations(service: Service) -> Vec<&'static Operation> {
    let served = served_operations(service);
    upstream_operations(service)
        .iter()
        .filter(|op| {
            !served
                .iter()
                .any(|s| s.method == op.method && s.path == op.path)
        })
        .collect()
}

/// The 501 for an unserved upstream operation.
pub fn unserved_error(service: Service, op: &Operation) -> ApiError {
    ApiError::new(
        http::StatusCode::NOT_IMPLEMENTED,
        Some(ERROR_CODE),
        format!(
            "racksim's fake {} does not serve {} {} (upstream operation {}); \
             see docs/upstream-endpoints.md",
            service.name(),
            op.method,
            op.path,
            op.operation_id
        ),
    )
}

/// What a server answers a request none of its routes took: the 501 for an
/// unserved upstream operation; else dropshot's 405 when the path has
/// other methods (served or upstream's); else dropshot's 404.
///
/// Simplification: the 405 looks at the latest version's operations.
pub fn unrouted(service: Service, req: &ApiRequest) -> ApiError {
    let segments = req.segments();
    if let Some(op) = unserved_operations(service)
        .into_iter()
        .find(|op| op.matches(&req.method, &segments))
    {
        return unserved_error(service, op);
    }
    let other_method = served_operations(service)
        .iter()
        .chain(upstream_operations(service))
        .any(|op| op.method != req.method && op.matches(&op.method, &segments));
    if other_method {
        ApiError::method_not_allowed()
    } else {
        ApiError::not_found_route(req)
    }
}

/// The tables of `docs/upstream-endpoints.md`: per service, what the fake
/// serves and which of upstream's operations it answers with the 501. A
/// test checks the page against this.
pub fn endpoints_markdown() -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for service in Service::ALL {
        let upstream = upstream_operations(service);
        let served = served_operations(service);
        let unserved = unserved_operations(service);
        let in_upstream = |op: &Operation| {
            upstream
                .iter()
                .any(|u| u.method == op.method && u.path == op.path)
        };
        let _ = writeln!(
            out,
            "### {} — serves {} of upstream's {} operations\n",
            service.name(),
            served.iter().filter(|op| in_upstream(op)).count(),
            upstream.len()
        );
        let _ = writeln!(out, "| served | operation |\n|---|---|");
        for op in served {
            let note = if in_upstream(op) {
                ""
            } else {
                " (racksim only)"
            };
            let _ = writeln!(
                out,
                "| `{} {}` | `{}`{note} |",
                op.method, op.path, op.operation_id
            );
        }
        let _ = writeln!(
            out,
            "\nNot served (501 `{ERROR_CODE}`), {} operations:\n",
            unserved.len()
        );
        let mut by_path: Vec<(&str, Vec<&str>)> = Vec::new();
        for op in unserved {
            match by_path.last_mut() {
                Some((p, methods)) if *p == op.path => methods.push(op.method.as_str()),
                _ => by_path.push((&op.path, vec![op.method.as_str()])),
            }
        }
        for (path, methods) in by_path {
            let _ = writeln!(out, "- `{path}` ({})", methods.join(", "));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;

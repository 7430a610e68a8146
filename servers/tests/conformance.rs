//! The fakes' APIs against the published documents of the real services
//! (`openapi/reference/`): every path and method of the reference is served,
//! with the same operation id, parameters (name, location, required, type),
//! request body and responses (status codes; schemas compared by name,
//! type, format, properties, required fields, items and enumerations, with
//! `$ref`s resolved). Deliberate differences are listed in [`ALLOWED`], each
//! with its reason; an allowance that no longer matches a difference fails
//! the test too, so the list stays true.

use std::{collections::BTreeSet, path::PathBuf};

use racksim_servers::{dpd_openapi, mgs_openapi, sled_agent_openapi};
use serde_json::Value;

/// `(document, location, reason)`: a difference at `location` (or below
/// it) is deliberate.
const ALLOWED: &[(&str, &str, &str)] = &[];

fn reference(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../openapi/reference")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

struct Docs<'a> {
    ours: &'a Value,
    theirs: &'a Value,
    diffs: Vec<String>,
}

/// `#/components/schemas/X` → `X`.
fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")?
        .as_str()?
        .strip_prefix("#/components/schemas/")
}

/// A schema with a lone `allOf: [x]` wrapper removed (dropshot and
/// schemars wrap a `$ref` that carries a description or `nullable`).
fn unwrap_all_of(schema: &Value) -> &Value {
    match schema.get("allOf").and_then(Value::as_array) {
        Some(list) if list.len() == 1 => &list[0],
        _ => schema,
    }
}

fn resolve<'v>(doc: &'v Value, schema: &'v Value) -> &'v Value {
    let schema = unwrap_all_of(schema);
    match ref_name(schema) {
        Some(name) => &doc["components"]["schemas"][name],
        None => schema,
    }
}

fn names(v: Option<&Value>) -> BTreeSet<String> {
    match v {
        Some(Value::Object(m)) => m.keys().cloned().collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect(),
        _ => BTreeSet::new(),
    }
}

fn list(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

impl Docs<'_> {
    fn diff(&mut self, at: &str, what: String) {
        self.diffs.push(format!("{at}: {what}"));
    }

    fn schema(&mut self, at: &str, ours: &Value, theirs: &Value, depth: usize) {
        if depth > 16 {
            return;
        }
        let (o, t) = (unwrap_all_of(ours), unwrap_all_of(theirs));
        if let (Some(a), Some(b)) = (ref_name(o), ref_name(t)) {
            if a != b {
                self.diff(at, format!("schema named {a}, reference names it {b}"));
            }
        } else if ref_name(o).is_some() != ref_name(t).is_some() {
            self.diff(
                at,
                format!(
                    "schema {} a named one, the reference's {}",
                    if ref_name(o).is_some() {
                        "is"
                    } else {
                        "is not"
                    },
                    if ref_name(t).is_some() {
                        "is"
                    } else {
                        "is not"
                    },
                ),
            );
        }
        let (o, t) = (resolve(self.ours, ours), resolve(self.theirs, theirs));
        for key in ["type", "format", "nullable"] {
            if o.get(key) != t.get(key) {
                self.diff(
                    at,
                    format!("{key} {:?}, reference {:?}", o.get(key), t.get(key)),
                );
            }
        }
        let (oe, te) = (names(o.get("enum")), names(t.get("enum")));
        if oe != te {
            self.diff(
                at,
                format!("enum [{}], reference [{}]", list(&oe), list(&te)),
            );
        }
        let (or, tr) = (names(o.get("required")), names(t.get("required")));
        if or != tr {
            self.diff(
                at,
                format!("required [{}], reference [{}]", list(&or), list(&tr)),
            );
        }
        let (op, tp) = (names(o.get("properties")), names(t.get("properties")));
        let missing: BTreeSet<_> = tp.difference(&op).cloned().collect();
        let extra: BTreeSet<_> = op.difference(&tp).cloned().collect();
        if !missing.is_empty() {
            self.diff(at, format!("properties: missing {}", list(&missing)));
        }
        if !extra.is_empty() {
            self.diff(at, format!("properties: extra {}", list(&extra)));
        }
        for p in op.intersection(&tp) {
            self.schema(
                &format!("{at}.{p}"),
                &o["properties"][p],
                &t["properties"][p],
                depth + 1,
            );
        }
        match (o.get("items"), t.get("items")) {
            (Some(oi), Some(ti)) => self.schema(&format!("{at}[]"), oi, ti, depth + 1),
            (None, None) => {}
            _ => self.diff(at, "items differ in presence".to_string()),
        }
    }

    fn operation(&mut self, at: &str, ours: &Value, theirs: &Value) {
        if ours["operationId"] != theirs["operationId"] {
            self.diff(
                at,
                format!(
                    "operationId {}, reference {}",
                    ours["operationId"], theirs["operationId"]
                ),
            );
        }
        let params = |op: &Value| -> Vec<(String, Value)> {
            op.get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    (
                        format!(
                            "{} {}",
                            p["in"].as_str().unwrap(),
                            p["name"].as_str().unwrap()
                        ),
                        p.clone(),
                    )
                })
                .collect()
        };
        let (op, tp) = (params(ours), params(theirs));
        let on: BTreeSet<_> = op.iter().map(|(n, _)| n.clone()).collect();
        let tn: BTreeSet<_> = tp.iter().map(|(n, _)| n.clone()).collect();
        if on != tn {
            self.diff(
                at,
                format!("parameters [{}], reference [{}]", list(&on), list(&tn)),
            );
        }
        for (name, o) in &op {
            if let Some((_, t)) = tp.iter().find(|(n, _)| n == name) {
                let here = format!("{at} parameter {name}");
                if o.get("required") != t.get("required") {
                    self.diff(&here, "required differs".to_string());
                }
                self.schema(&here, &o["schema"], &t["schema"], 0);
            }
        }
        match (ours.get("requestBody"), theirs.get("requestBody")) {
            (Some(o), Some(t)) => {
                if o.get("required") != t.get("required") {
                    self.diff(at, "request body: required differs".to_string());
                }
                self.schema(
                    &format!("{at} body"),
                    &o["content"]["application/json"]["schema"],
                    &t["content"]["application/json"]["schema"],
                    0,
                );
            }
            (None, None) => {}
            _ => self.diff(at, "request body differs in presence".to_string()),
        }
        let (or, tr) = (names(ours.get("responses")), names(theirs.get("responses")));
        if or != tr {
            self.diff(
                at,
                format!("responses [{}], reference [{}]", list(&or), list(&tr)),
            );
        }
        for code in or.intersection(&tr).filter(|c| c.starts_with('2')) {
            let o = ours["responses"][code].get("content");
            let t = theirs["responses"][code].get("content");
            match (o, t) {
                (Some(o), Some(t)) => self.schema(
                    &format!("{at} {code}"),
                    &o["application/json"]["schema"],
                    &t["application/json"]["schema"],
                    0,
                ),
                (None, None) => {}
                _ => self.diff(
                    &format!("{at} {code}"),
                    "content differs in presence".to_string(),
                ),
            }
        }
        if ours.get("x-dropshot-pagination") != theirs.get("x-dropshot-pagination") {
            self.diff(at, "pagination differs".to_string());
        }
    }
}

/// Every difference between our document and the reference, for every
/// path and method of the reference.
fn differences(ours: &Value, theirs: &Value) -> Vec<String> {
    let mut docs = Docs {
        ours,
        theirs,
        diffs: Vec::new(),
    };
    if ours["info"]["version"] != theirs["info"]["version"] {
        docs.diff(
            "info",
            format!(
                "version {}, reference {}",
                ours["info"]["version"], theirs["info"]["version"]
            ),
        );
    }
    for (path, methods) in theirs["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            let at = format!("{} {path}", method.to_uppercase());
            match ours["paths"].get(path).and_then(|m| m.get(method)) {
                Some(our_op) => docs.operation(&at, our_op, op),
                None => docs.diff(&at, "not served".to_string()),
            }
        }
    }
    docs.diffs
}

fn check(doc: &str, ours: Value, reference_file: &str) {
    let diffs = differences(&ours, &reference(reference_file));
    let allowed: Vec<_> = ALLOWED.iter().filter(|(d, _, _)| *d == doc).collect();
    let unexpected: Vec<_> = diffs
        .iter()
        .filter(|d| !allowed.iter().any(|(_, at, _)| d.starts_with(at)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the fake {doc} differs from {reference_file}:\n  {}",
        unexpected
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    for (_, at, _) in allowed {
        assert!(
            diffs.iter().any(|d| d.starts_with(at)),
            "allow-list entry for {doc} matches no difference any more: {at}"
        );
    }
}

#[test]
fn dpd_conforms_to_dpd_13() {
    check("dpd", dpd_openapi(), "dpd-13.0.0-nat-subset.json");
}

#[test]
fn mgs_conforms_to_mgs_3() {
    check("mgs", mgs_openapi(), "gateway-local-switch-id-subset.json");
}

#[test]
fn sled_agent_conforms_to_sled_agent_48() {
    check(
        "sled-agent",
        sled_agent_openapi(),
        "sled-agent-v2p-subset.json",
    );
}

/// The comparison finds what it is meant to find.
#[test]
fn the_comparison_catches_differences() {
    let theirs = reference("dpd-13.0.0-nat-subset.json");
    let mut ours = dpd_openapi();
    ours["paths"]["/nat/ipv4/{ipv4}"]["get"]["operationId"] = "nat_ipv4_list_all".into();
    ours["paths"]
        .as_object_mut()
        .unwrap()
        .remove("/rpw/nat/gen");
    ours["components"]["schemas"]["NatTarget"]["required"] = serde_json::json!(["internal_ip"]);
    ours["components"]["schemas"]["MacAddr"]["properties"]["a"]["items"]["format"] =
        "uint16".into();
    let diffs = differences(&ours, &theirs).join("\n");
    for needle in [
        "GET /nat/ipv4/{ipv4}: operationId",
        "GET /rpw/nat/gen: not served",
        "PUT /nat/ipv4/{ipv4}/{low}/{high} body: required [internal_ip]",
        "GET /nat/ipv4/{ipv4}/{low} 200.inner_mac.a[]: format",
    ] {
        assert!(diffs.contains(needle), "{needle} not in\n{diffs}");
    }
}

//! Clients of dpd, MGS and sled-agent generated from upstream's whole
//! published OpenAPI documents (`openapi/reference/upstream/`), as
//! dendrite's `dpd-client` and omicron's `gateway-client` and
//! `sled-agent-client` generate theirs (progenitor 0.14, positional
//! interface). This crate exists for its tests: they drive live mode's
//! fakes with what upstream's own code would send.

/// What the generated code names `progenitor::progenitor_client`: the
/// runtime, without the `progenitor` facade crate (see `Cargo.toml`).
mod progenitor {
    pub use progenitor_client;
}

/// dendrite's dpd 13.0.0.
pub mod dpd {
    use crate::progenitor;
    progenitor_macro::generate_api!(
        spec = "../openapi/reference/upstream/dpd-13.0.0-5db8bd.json",
        interface = Positional,
        derives = [PartialEq],
    );
}

/// omicron's management gateway (MGS) 3.0.0.
pub mod mgs {
    use crate::progenitor;
    progenitor_macro::generate_api!(
        spec = "../openapi/reference/upstream/gateway-3.0.0-dacda2.json",
        interface = Positional,
    );
}

/// omicron's sled-agent 48.0.0.
pub mod sled_agent {
    use crate::progenitor;
    progenitor_macro::generate_api!(
        spec = "../openapi/reference/upstream/sled-agent-48.0.0-808ec1.json",
        interface = Positional,
        derives = [PartialEq],
    );
}

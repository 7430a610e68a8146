//! # racksim-wire: upstream's wire formats, as racksim speaks them
//!
//! The serde types and constants of the APIs that racksim's clients call
//! and its fakes serve, one module per service:
//!
//! * [`dpd`] — dendrite's NAT API and `/switch/identifiers` (dpd 13.0.0);
//! * [`mgs`] — the management gateway's `/local/switch-id` and a sled's
//!   power state (MGS 3.0.0), and the switch slot they name;
//! * [`sled_agent`] — sled-agent's V2P mappings (sled-agent 48.0.0) and
//!   racksim's reduced instance API;
//! * [`nexus`] — the instance NAT changeset Nexus serves to dpd's NAT RPW.
//!
//! Each type is named and shaped as upstream's published OpenAPI document
//! has it. Those documents are the reference: the subsets racksim speaks
//! are committed in `openapi/reference/`, upstream's whole documents in
//! `openapi/reference/upstream/`, and the fakes' own documents
//! (`openapi/*.json`, generated from these types) are checked against them.
//!
//! ## Why a crate of its own
//!
//! Two sides speak these formats: the reconciler crate, whose clients send
//! and read them (it re-exports every type where its clients live, so
//! `racksim_reconciler::dpd::NatTarget` is this crate's
//! [`dpd::NatTarget`]), and `racksim-fakes`, whose servers answer them.
//! Both depend on this crate and neither on the other, so the reconciler's
//! unit tests run its clients against the fakes with one build of each and
//! hand the fakes' values to the reconciler as they are.
//!
//! ## Schemas
//!
//! The optional `schemars` feature derives the JSON schemas dropshot needs
//! to serve and publish these types, named as upstream names them (see
//! `schema`: `Vni`, dpd's `MacAddr` object, sled-agent's `MacAddr` string).
//! Only the servers enable it; a production build of the reconciler leaves
//! it off.
//!
//! Plain data: no I/O, no clients, no servers.

/// `as_str`, `Display` and `from_name` (the inverse of `as_str`) of a
/// fieldless enum, from one table of its variants' names:
/// `enum_names!(SwitchSlot { Switch0 => "switch0", … })`. The name a value
/// displays and parses as is then written in one place; each type's
/// `FromStr` keeps its own error. (Defined before the modules so that they
/// may use it by name.)
#[macro_export]
macro_rules! enum_names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }

            /// The value [`Self::as_str`] names `name`, if any.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod dpd;
pub mod mgs;
pub mod nexus;
#[cfg(feature = "schemars")]
pub mod schema;
pub mod sled_agent;

/// The header every request to an Oxide internal API names its version in
/// (dropshot's `ClientSpecifiesVersionInHeader`).
pub const API_VERSION_HEADER: &str = "api-version";

/// Port of dendrite (`dpd`) inside a switch zone.
pub const DPD_PORT: u16 = 12224;
/// Port of the management gateway (MGS) inside a switch zone.
pub const MGS_PORT: u16 = 12225;
/// Port of sled-agent on a sled's underlay address.
pub const SLED_AGENT_PORT: u16 = 12345;

/// The VNI of rack services (boundary NTP, Nexus, external DNS).
pub const SERVICES_VNI: u32 = 100;

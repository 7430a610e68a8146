//! The `[rack]` table: a rack by preset name, or declared sled by sled.
//!
//! ```toml
//! rack = "full"                    # a preset: madrid, standard or full
//!
//! # or declare one:
//! [rack]
//! name = "two-ntp"                 # optional; names the rack in traces
//! sleds = 8                        # sled0..sled7, or a list of names
//! scrimlets = { switch0 = "sled0", switch1 = "sled1" }
//! uplinked = ["switch0", "switch1"]   # optional; default: both
//! internal_dns = ["sled2", "sled3", "sled4"]
//!
//! [[rack.zone]]
//! kind = "boundary-ntp"            # boundary-ntp | nexus | external-dns
//! sled = "sled2"
//! external_ip = "198.51.100.1"
//! first_port = 0                   # optional; default 0
//! last_port = 16383                # optional; default 65535
//! ```
//!
//! Names are resolved here, with the span of the offending name; what makes
//! a rack a rack (two scrimlets, no overlapping external ranges, an NTP and
//! a Nexus zone, ...) is [`RackSpec::validate`]'s, whose error is located at
//! the part of the table it is about.

use std::{collections::BTreeMap, fmt, net::Ipv4Addr, ops::Range};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::rack::{RackBuilder, RackPart, RackSpec, ZoneKind};
use serde::{
    de::{self, value::MapAccessDeserializer, value::SeqAccessDeserializer},
    Deserialize, Deserializer,
};
use toml::Spanned;

use super::error::{Locator, ScenarioError};

/// `rack = "NAME"` or a `[rack]` table.
pub(super) enum RawRack {
    Preset(String),
    Table(Box<RawRackTable>),
}

impl<'de> Deserialize<'de> for RawRack {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawRack;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rack preset name (madrid, standard, full) or a [rack] table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawRack, E> {
                Ok(RawRack::Preset(v.to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawRack, A::Error> {
                // The table's own fields keep their spans: the map access is
                // still toml's. (serde-untagged's map wrapper would say
                // this by itself, but its errors lose the span of an
                // unknown key in the table, pointing at `[rack]` instead.)
                RawRackTable::deserialize(MapAccessDeserializer::new(map))
                    .map(|t| RawRack::Table(Box::new(t)))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRackTable {
    name: Option<String>,
    sleds: Spanned<RawSleds>,
    scrimlets: Spanned<BTreeMap<Spanned<String>, Spanned<String>>>,
    uplinked: Option<Spanned<Vec<Spanned<String>>>>,
    internal_dns: Spanned<Vec<Spanned<String>>>,
    #[serde(default, rename = "zone")]
    zones: Vec<RawZone>,
}

/// A sled count or a list of names.
enum RawSleds {
    Count(u64),
    Names(Vec<String>),
}

impl<'de> Deserialize<'de> for RawSleds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawSleds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of sleds or a list of sled names")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawSleds, E> {
                u64::try_from(v)
                    .map(RawSleds::Count)
                    .map_err(|_| E::custom("the number of sleds cannot be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawSleds, E> {
                Ok(RawSleds::Count(v))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<RawSleds, A::Error> {
                Vec::<String>::deserialize(SeqAccessDeserializer::new(seq)).map(RawSleds::Names)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZone {
    kind: Spanned<String>,
    sled: Spanned<String>,
    external_ip: Spanned<String>,
    first_port: Option<Spanned<u16>>,
    last_port: Option<Spanned<u16>>,
}

/// Most sleds a rack holds.
pub const MAX_SLEDS: u64 = 32;

/// The rack a scenario runs on, and its name.
pub(super) fn rack(raw: &Spanned<RawRack>, loc: &Locator) -> Result<RackSpec, ScenarioError> {
    let err = |span: Range<usize>, message: String, hint: Option<String>| {
        loc.error(Some(span), message, hint)
    };
    let table = match raw.get_ref() {
        RawRack::Preset(name) => {
            return RackSpec::by_name(name).ok_or_else(|| {
                err(
                    raw.span(),
                    format!("unknown rack {name:?}"),
                    Some(format!(
                        "known racks: {}; or declare one in a [rack] table",
                        RackSpec::NAMES.join(", ")
                    )),
                )
            })
        }
        RawRack::Table(t) => t,
    };

    let names: Vec<String> = match table.sleds.get_ref() {
        RawSleds::Count(n) if *n == 0 || *n > MAX_SLEDS => {
            return Err(err(
                table.sleds.span(),
                format!("a rack has 1 to {MAX_SLEDS} sleds, not {n}"),
                None,
            ))
        }
        RawSleds::Count(n) => (0..*n).map(|i| format!("sled{i}")).collect(),
        RawSleds::Names(names) => {
            if names.is_empty() || names.len() as u64 > MAX_SLEDS {
                return Err(err(
                    table.sleds.span(),
                    format!("a rack has 1 to {MAX_SLEDS} sleds, not {}", names.len()),
                    None,
                ));
            }
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(err(
                        table.sleds.span(),
                        format!("sled {n:?} is listed twice"),
                        None,
                    ));
                }
                // A replacement scrimlet is named after its index; a name of
                // that form elsewhere would be ambiguous in traces.
                let numbered = n.strip_prefix("sled").and_then(|d| d.parse::<usize>().ok());
                if numbered.is_some_and(|k| k != i) {
                    return Err(err(
                        table.sleds.span(),
                        format!("sled {n:?} is at position {i}"),
                        Some(format!(
                            "names of the form sledN must match their position (sled{i} here); \
                             replacement scrimlets take the next numbers"
                        )),
                    ));
                }
            }
            names.clone()
        }
    };
    let sled = |s: &Spanned<String>| -> Result<usize, ScenarioError> {
        names.iter().position(|n| n == s.get_ref()).ok_or_else(|| {
            err(
                s.span(),
                format!("unknown sled {:?}", s.get_ref()),
                Some(format!("sleds of this rack: {}", names.join(", "))),
            )
        })
    };
    let switch = |s: &Spanned<String>| -> Result<SwitchSlot, ScenarioError> {
        s.get_ref()
            .parse::<SwitchSlot>()
            .map_err(|e| err(s.span(), e, None))
    };

    let mut b = RackBuilder::new(table.name.as_deref().unwrap_or("custom"));
    for n in &names {
        b = b.named_sled(n);
    }
    if table.scrimlets.get_ref().len() != 2 {
        return Err(err(
            table.scrimlets.span(),
            format!(
                "a rack has exactly 2 scrimlets, one per switch; this table names {}",
                table.scrimlets.get_ref().len()
            ),
            Some("scrimlets = { switch0 = \"sledA\", switch1 = \"sledB\" }".into()),
        ));
    }
    let mut scrimlet_sleds = Vec::new();
    for (sw, sl) in table.scrimlets.get_ref() {
        let (slot, index) = (switch(sw)?, sled(sl)?);
        if scrimlet_sleds.contains(&index) {
            return Err(err(
                sl.span(),
                format!("{} is cabled to both switches", sl.get_ref()),
                Some("each switch has its own scrimlet".into()),
            ));
        }
        scrimlet_sleds.push(index);
        b = b.make_scrimlet(index, slot);
    }
    if let Some(up) = &table.uplinked {
        let mut uplinked = Vec::new();
        for s in up.get_ref() {
            uplinked.push(switch(s)?);
        }
        for slot in SwitchSlot::ALL {
            if !uplinked.contains(&slot) {
                b = b.without_uplink(slot);
            }
        }
    }
    for d in table.internal_dns.get_ref() {
        b = b.internal_dns_on(sled(d)?);
    }
    for z in &table.zones {
        let kind = [
            ZoneKind::BoundaryNtp,
            ZoneKind::Nexus,
            ZoneKind::ExternalDns,
        ]
        .into_iter()
        .find(|k| k.as_str() == z.kind.get_ref())
        .ok_or_else(|| {
            err(
                z.kind.span(),
                format!("unknown zone kind {:?}", z.kind.get_ref()),
                Some("zone kinds: boundary-ntp, nexus, external-dns".into()),
            )
        })?;
        let ip: Ipv4Addr = z.external_ip.get_ref().parse().map_err(|_| {
            err(
                z.external_ip.span(),
                format!("invalid IPv4 address {:?}", z.external_ip.get_ref()),
                None,
            )
        })?;
        b = b.zone(
            kind,
            sled(&z.sled)?,
            ip,
            z.first_port.as_ref().map(|p| *p.get_ref()).unwrap_or(0),
            z.last_port
                .as_ref()
                .map(|p| *p.get_ref())
                .unwrap_or(u16::MAX),
        );
    }
    let rack = b.build();
    rack.validate().map_err(|e| {
        let span = match e.part {
            RackPart::Sleds => table.sleds.span(),
            RackPart::Scrimlets => table.scrimlets.span(),
            RackPart::Uplinked => table
                .uplinked
                .as_ref()
                .map(|u| u.span())
                .unwrap_or(raw.span()),
            RackPart::InternalDns => table.internal_dns.span(),
            RackPart::Zone(i) => {
                let z = &table.zones[i];
                z.first_port
                    .as_ref()
                    .map(|p| p.span())
                    .unwrap_or(z.external_ip.span())
            }
            RackPart::ZoneSled(i) => table.zones[i].sled.span(),
            RackPart::Whole => raw.span(),
        };
        err(span, e.message, e.hint)
    })?;
    Ok(rack)
}

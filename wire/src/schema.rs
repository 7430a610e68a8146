//! JSON schemas of the wire types that need a hand-written one, named as
//! the published documents name them: a VNI is an integer schema called
//! `Vni`, dpd's `sidecar_id` a UUID string, and sled-agent's `MacAddr` a
//! string (while dpd's `MacAddr` is the object [`crate::dpd::MacAddr`]
//! derives). Only with the `schemars` feature: the servers that publish
//! the documents need these, the clients do not.

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
                description: Some("A Media Access Control address, in EUI-48 format".to_string()),
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

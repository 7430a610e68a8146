//! MGS's types read and written as the reference document has them, and
//! the switch slot's names and indices.

use serde_json::json;

use super::*;

#[test]
fn sp_identifier_wire_shape() {
    let id: SpIdentifier = serde_json::from_value(json!({"type": "switch", "slot": 1})).unwrap();
    assert_eq!(
        id,
        SpIdentifier {
            typ: SpType::Switch,
            slot: 1
        }
    );
    assert_eq!(id.switch_slot(), Some(SwitchSlot::Switch1));
    assert_eq!(
        serde_json::to_value(SpIdentifier {
            typ: SpType::Sled,
            slot: 3
        })
        .unwrap(),
        json!({"type": "sled", "slot": 3})
    );
    assert_eq!(
        SpIdentifier {
            typ: SpType::Sled,
            slot: 0
        }
        .switch_slot(),
        None
    );
    assert_eq!(
        SpIdentifier {
            typ: SpType::Switch,
            slot: 2
        }
        .switch_slot(),
        None
    );
}

#[test]
fn slot_names_and_indices() {
    assert_eq!(SwitchSlot::ALL, [SwitchSlot::Switch0, SwitchSlot::Switch1]);
    for (i, slot) in SwitchSlot::ALL.into_iter().enumerate() {
        let i = u16::try_from(i).unwrap();
        assert_eq!(slot.index(), i);
        assert_eq!(SwitchSlot::from_index(i), Some(slot));
        assert_eq!(slot.to_string(), format!("switch{i}"));
        assert_eq!(
            serde_json::to_string(&slot).unwrap(),
            format!("\"switch{i}\"")
        );
        assert_eq!(
            serde_json::from_str::<SwitchSlot>(&format!("\"switch{i}\"")).unwrap(),
            slot
        );
        assert_eq!(format!("switch{i}").parse::<SwitchSlot>().unwrap(), slot);
    }
    assert_eq!(SwitchSlot::from_index(2), None);
    assert!("Switch0".parse::<SwitchSlot>().is_err());
    assert!(serde_json::from_str::<SwitchSlot>("\"Switch0\"").is_err());
    assert!(SwitchSlot::Switch0 < SwitchSlot::Switch1);
}

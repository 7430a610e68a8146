use super::*;

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

#[tokio::test]
async fn static_resolver_answers_its_list() {
    let addrs = vec![Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED];
    assert_eq!(
        StaticResolver(addrs.clone()).switch_zones().await.unwrap(),
        addrs
    );
    assert_eq!(DiscoveryError("dns down".into()).to_string(), "dns down");
}

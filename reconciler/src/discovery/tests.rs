use super::*;

#[tokio::test]
async fn static_resolver_answers_its_list() {
    let addrs = vec![Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED];
    assert_eq!(
        StaticResolver(addrs.clone()).switch_zones().await.unwrap(),
        addrs
    );
    assert_eq!(DiscoveryError("dns down".into()).to_string(), "dns down");
}

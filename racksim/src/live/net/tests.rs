use std::time::Instant;

use super::*;

async fn listener() -> (tokio::net::TcpListener, SocketAddr) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    (l, addr)
}

fn connector(links: &Links, from: &str) -> LinkConnector {
    LinkConnector {
        from: from.to_string(),
        links: links.clone(),
    }
}

/// A connection across a partition is held — either way, also for a
/// one-way partition — and made once the link heals.
#[tokio::test]
async fn a_partition_holds_connections_until_it_heals() {
    let (_l, addr) = listener().await;
    let links = Links::default();
    links.serves("switch0", addr);
    let sled = vec!["sled0".to_string()];
    let switch = vec!["switch0".to_string()];
    links.partition(&switch, &sled, false);
    let c = connector(&links, "sled0");
    let held = tokio::time::timeout(Duration::from_millis(200), c.connect(addr)).await;
    assert!(held.is_err(), "connected across a one-way partition");
    // Another host is not affected.
    assert!(connector(&links, "sled1").connect(addr).await.is_ok());
    let pending = tokio::spawn(async move { c.connect(addr).await.map(|_| ()) });
    links.partition(&switch, &sled, true);
    tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("connected once healed")
        .unwrap()
        .unwrap();
}

/// Underlay addresses reach the loopback port serving them; a link's
/// latency delays the connection.
#[tokio::test]
async fn underlay_addresses_map_and_latency_delays() {
    let (_l, addr) = listener().await;
    let links = Links::default();
    links.serves("switch0", addr);
    let underlay = SocketAddr::new(
        "fd00:1122:3344:101::2".parse::<Ipv6Addr>().unwrap().into(),
        12224,
    );
    links.maps(underlay, addr);
    let c = connector(&links, "sled0");
    let io = c.connect(underlay).await.unwrap();
    assert_eq!(io.inner.peer_addr().unwrap(), addr);
    links.set_latency(
        &["switch0".to_string()],
        &["sled0".to_string()],
        Duration::from_millis(150),
    );
    let t = Instant::now();
    c.connect(underlay).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t.elapsed()
    );
}

/// Hidden switch zones are not discovered; a replaced one is found at its
/// new address.
#[tokio::test]
async fn discovery_follows_hiding_and_replacement() {
    let r = FixedResolver::default();
    let a: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    let b: Ipv6Addr = "fd00:1122:3344:102::2".parse().unwrap();
    r.register(SwitchSlot::Switch0, a);
    r.register(SwitchSlot::Switch1, b);
    assert_eq!(r.switch_zones().await.unwrap(), vec![a, b]);
    r.hide(SwitchSlot::Switch0, true);
    assert_eq!(r.switch_zones().await.unwrap(), vec![b]);
    r.hide(SwitchSlot::Switch0, false);
    let c: Ipv6Addr = "fd00:1122:3344:105::2".parse().unwrap();
    r.register(SwitchSlot::Switch1, c);
    assert_eq!(r.switch_zones().await.unwrap(), vec![a, c]);
}

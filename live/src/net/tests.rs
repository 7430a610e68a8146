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
/// one-way partition — and made once the link heals, at the first of
/// Linux's SYN retransmission instants after the heal (1 s here).
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
    let t = Instant::now();
    let pending = tokio::spawn(async move { c.connect(addr).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    links.partition(&switch, &sled, true);
    tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("connected once healed")
        .unwrap()
        .unwrap();
    // Healed at 0.1 s; the SYN went again at 1 s.
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
}

/// A connection made before a cut is held, not broken: a reply across the
/// cut waits for the heal and then arrives (a short cut delays a reply),
/// and a request written into the cut is sent once it heals.
#[tokio::test]
async fn a_connection_made_before_a_cut_is_held_until_the_heal() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4];
                while s.read_exact(&mut buf).await.is_ok() {
                    let _ = s.write_all(&buf).await;
                }
            });
        }
    });
    let links = Links::default();
    links.serves("switch0", addr);
    let (sled, switch) = (vec!["sled0".to_string()], vec!["switch0".to_string()]);
    let mut io = connector(&links, "sled0").connect(addr).await.unwrap();

    // The reply's way is cut: the echo waits.
    links.partition(&switch, &sled, false);
    io.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    let held = tokio::time::timeout(Duration::from_millis(300), io.read_exact(&mut buf)).await;
    assert!(held.is_err(), "a reply crossed the cut");
    links.partition(&switch, &sled, true);
    tokio::time::timeout(Duration::from_secs(5), io.read_exact(&mut buf))
        .await
        .expect("the reply arrives once healed")
        .unwrap();
    assert_eq!(&buf, b"ping");

    // The request's way is cut: the write waits, then goes.
    links.partition(&sled, &switch, false);
    let held = tokio::time::timeout(Duration::from_millis(300), io.write_all(b"pong")).await;
    assert!(held.is_err(), "a request crossed the cut");
    links.partition(&sled, &switch, true);
    io.write_all(b"pong").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), io.read_exact(&mut buf))
        .await
        .expect("the echo of the held request")
        .unwrap();
    assert_eq!(&buf, b"pong");
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

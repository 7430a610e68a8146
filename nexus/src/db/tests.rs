use std::net::Ipv4Addr;

use crate::instances::{InstanceState, StoreError};

use super::{instance_record, Db, IpPool};

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(203, 0, 113, last)
}

/// A database with `pool` and instances 1..=n declared.
fn db(pool: &str, n: u32) -> Db {
    let mut db = Db::default().with_ip_pool(Some(IpPool::parse(pool).unwrap()));
    for id in 1..=n {
        db.declare(id, &format!("web{id}"));
    }
    db
}

fn allocated(db: &mut Db, id: u32) -> Ipv4Addr {
    let rec = db.allocate_external_ip(id).unwrap();
    assert_eq!(rec.external_ips.len(), 1);
    let e = rec.external_ips[0];
    assert_eq!(
        (e.first_port, e.last_port),
        (0, 65535),
        "an ephemeral IP takes every port"
    );
    assert_eq!(
        db.fetch(id).unwrap().external_ips,
        rec.external_ips,
        "written"
    );
    e.ip
}

#[test]
fn pools_parse_as_a_range_or_one_address_and_display_as_written() {
    let p = IpPool::parse("203.0.113.20-203.0.113.21").unwrap();
    assert_eq!((p.first, p.last, p.len()), (ip(20), ip(21), 2));
    assert_eq!(p.to_string(), "203.0.113.20-203.0.113.21");
    assert_eq!(p.addresses().collect::<Vec<_>>(), vec![ip(20), ip(21)]);
    let one = IpPool::parse(" 203.0.113.20 ").unwrap();
    assert_eq!(
        (one.len(), one.to_string()),
        (1, "203.0.113.20".to_string())
    );
    assert!(p.contains(ip(21)) && !p.contains(ip(22)) && !p.contains(ip(19)));
    for bad in [
        "203.0.113.21-203.0.113.20",
        "203.0.113.20-",
        "x",
        "fd00::1",
        "203.0.113.20-203.0.113.21-203.0.113.22",
    ] {
        assert!(IpPool::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_pool_hands_out_its_lowest_free_address_and_a_released_one_again() {
    let mut db = db("203.0.113.20-203.0.113.22", 4);
    // Declared without an address: the create allocates it.
    assert!(db.fetch(1).unwrap().external_ips.is_empty());
    assert_eq!(allocated(&mut db, 1), ip(20));
    assert_eq!(allocated(&mut db, 2), ip(21));
    // A retried create keeps the address it got.
    assert_eq!(allocated(&mut db, 2), ip(21));
    // Instance 1's delete gives .20 back: the lowest free is .20 again,
    // not .22.
    std::sync::Arc::make_mut(db.instances.get_mut(&1).unwrap()).state = InstanceState::Deleted;
    assert_eq!(db.release_external_ips(1).unwrap(), vec![ip(20)]);
    assert!(
        db.release_external_ips(1).unwrap().is_empty(),
        "released once"
    );
    assert_eq!(db.holder_of(ip(20)), None);
    assert_eq!(allocated(&mut db, 3), ip(20));
    assert_eq!(db.holder_of(ip(20)), Some(3));
    // The deleted record remembers what it had.
    assert_eq!(db.fetch(1).unwrap().external_ips[0].ip, ip(20));
    assert_eq!(allocated(&mut db, 4), ip(22));
}

#[test]
fn an_exhausted_pool_refuses_the_create_with_a_clear_error() {
    let mut db = db("203.0.113.20", 2);
    assert_eq!(allocated(&mut db, 1), ip(20));
    let e = db.allocate_external_ip(2).unwrap_err();
    assert_eq!(
        e,
        StoreError::PoolExhausted {
            pool: "203.0.113.20".into()
        }
    );
    assert_eq!(e.to_string(), "no free external IP in pool 203.0.113.20");
    assert!(
        db.fetch(2).unwrap().external_ips.is_empty(),
        "nothing written"
    );
    // Once 1 is released, 2 gets its address.
    db.release_external_ips(1).unwrap();
    assert_eq!(allocated(&mut db, 2), ip(20));
}

#[test]
fn without_a_pool_every_instance_has_its_fixed_address_from_the_start() {
    let mut db = Db::default();
    db.declare(3, "web3");
    let fixed = instance_record(3, "web3").external_ips;
    assert_eq!(fixed[0].ip, ip(13));
    assert_eq!(db.fetch(3).unwrap().external_ips, fixed);
    assert_eq!(db.allocate_external_ip(3).unwrap().external_ips, fixed);
    assert!(db.release_external_ips(3).unwrap().is_empty());
    assert!(matches!(
        db.allocate_external_ip(9),
        Err(StoreError::NotFound(9))
    ));
}

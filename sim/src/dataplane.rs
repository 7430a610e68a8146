//! The simulated data path: the packets that cross it, reduced to what NAT
//! decides. It is the simulation's own (no fake of `racksim-fakes` carries
//! traffic), and it is how a run sees NAT work or fail from outside.
//!
//! Inbound traffic from the outside world arrives at a switch's uplink
//! addressed to an external IP and port. The switch looks the pair up in its
//! NAT table and, if an entry covers it, encapsulates the packet (Geneve) to
//! the entry's `internal_ip` with its VNI and MAC; without an entry the packet
//! is dropped. The sled's OPTE delivers it only to a zone whose external
//! address, VNI and MAC all match, so a stale entry loses traffic too.
//!
//! One trip, hop by hop (every packet is JSON in one UDP datagram):
//!
//! ```text
//! boundary NTP (hosts::sled::ntp)  --NtpQuery-->  upstream NTP (hosts::upstream)
//! upstream  --Inbound-->  switch uplink, UPLINK_PORT (hosts::switch_zone: NAT lookup)
//! switch    --Geneve-->   sled OPTE, GENEVE_PORT (hosts::sled::opte: zone, VNI, MAC)
//! ```
//!
//! A reply that reaches boundary NTP synchronises the rack's time, which
//! Nexus waits for; a switch that starts or stops dropping traffic, and
//! every packet OPTE drops, is a trace line of kind `dataplane`.

use std::net::Ipv4Addr;

use racksim_reconciler::{discovery::SwitchSlot, dpd::MacAddr};
use serde::{Deserialize, Serialize};

/// What the outside world sends to a switch uplink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbound {
    pub dst_ip: Ipv4Addr,
    pub dst_port: u16,
    pub payload: String,
}

/// What a switch sends to a sled after NAT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geneve {
    pub via: SwitchSlot,
    pub vni: u32,
    pub inner_mac: MacAddr,
    pub inner: Inbound,
}

/// An NTP query from boundary NTP: where the reply must be addressed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtpQuery {
    pub reply_ip: Ipv4Addr,
    pub reply_port: u16,
}

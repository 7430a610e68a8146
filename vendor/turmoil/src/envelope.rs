use std::{fmt::Display, net::SocketAddr};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::linux_tcp::Rtx;
use crate::net::tcp::stream::BidiFlowControl;

#[derive(Debug)]
pub(crate) struct Envelope {
    pub(crate) src: SocketAddr,
    pub(crate) dst: SocketAddr,
    pub(crate) message: Protocol,
    /// racksim patch ([`crate::Builder::linux_tcp`]): the retransmission
    /// state of a segment the sender retransmits if it is lost.
    pub(crate) rtx: Option<Rtx>,
}

impl Envelope {
    pub(crate) fn new(src: SocketAddr, dst: SocketAddr, message: Protocol) -> Self {
        Envelope {
            src,
            dst,
            message,
            rtx: None,
        }
    }
}

/// Supported network protocols.
#[derive(Debug)]
pub enum Protocol {
    Tcp(Segment),
    Udp(Datagram),
}

/// UDP datagram.
#[derive(Clone, Debug)]
pub struct Datagram(pub Bytes);

/// This is a simplification of real TCP.
///
/// We implement just enough to ensure fidelity and provide knobs for real world
/// scenarios, but we skip a ton of complexity (e.g. checksums, flow control,
/// etc) because said complexity isn't useful in tests.
#[derive(Debug)]
pub enum Segment {
    Syn(Syn),
    /// racksim patch ([`crate::Builder::linux_tcp`]): the listener's answer
    /// to a SYN, crossing the network.
    SynAck,
    /// racksim patch ([`crate::Builder::linux_tcp`]): the handshake's last
    /// segment; the connection is established on the listener's side when
    /// it (or the first data) arrives.
    Ack,
    /// racksim patch ([`crate::Builder::linux_tcp`]): a keepalive probe; a
    /// peer that knows the connection answers [`Segment::Ack`], one that
    /// does not answers RST.
    Probe,
    Data(u64, Bytes),
    Fin(u64),
    Rst,
}

#[derive(Debug)]
pub struct Syn {
    /// As published: the in-memory channel the listener answers through.
    pub(crate) ack: Option<oneshot::Sender<()>>,
    /// racksim patch ([`crate::Builder::linux_tcp`]): the connection's flow
    /// control, which the listener's side shares (the answer itself is a
    /// [`Segment::SynAck`] on the network).
    pub(crate) flow: Option<BidiFlowControl>,
}

impl Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Protocol::Tcp(segment) => Display::fmt(segment, f),
            Protocol::Udp(datagram) => Display::fmt(&datagram, f),
        }
    }
}

impl Display for Datagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        hex("UDP", &self.0, f)
    }
}

impl Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Syn(_) => write!(f, "TCP SYN"),
            Segment::SynAck => write!(f, "TCP SYN-ACK"),
            Segment::Ack => write!(f, "TCP ACK"),
            Segment::Probe => write!(f, "TCP keepalive probe"),
            Segment::Data(_, data) => hex("TCP", data, f),
            Segment::Fin(_) => write!(f, "TCP FIN"),
            Segment::Rst => write!(f, "TCP RST"),
        }
    }
}

pub(crate) fn hex(
    protocol: &str,
    bytes: &Bytes,
    f: &mut std::fmt::Formatter<'_>,
) -> std::fmt::Result {
    write!(f, "{protocol} [")?;

    for (i, &b) in bytes.iter().enumerate() {
        if i < bytes.len() - 1 {
            write!(f, "{b:#2X}, ")?;
        } else {
            write!(f, "{b:#2X}")?;
        }
    }

    write!(f, "]")
}

//! Test support: the fakes of `racksim-fakes` on an in-memory network.
//!
//! The fakes (dpd, MGS, sled-agent) are those of the simulation and of live
//! mode — one state machine each — reached through
//! [`racksim_fakes::memnet::MemNet`]. This module only adapts them to this
//! crate's unit tests: [`FakeConnector`] implements this crate's
//! [`Connector`] on the network's duplex streams. The fakes speak the wire
//! types of `racksim-wire`, which are this crate's own (re-exported), so
//! their values come and go as they are; `racksim-fakes` does not depend on
//! this crate, and these tests build it once.

use std::{io, net::SocketAddr};

use racksim_fakes::memnet::MemNet;
pub use racksim_fakes::memnet::{zone_ip, CannedResponse as FakeResponse};

use crate::http::Connector;

/// The fake network; clone freely (shared state).
#[derive(Clone, Default)]
pub struct FakeNet {
    net: MemNet,
}

/// Connector into a [`FakeNet`].
#[derive(Clone)]
pub struct FakeConnector {
    net: MemNet,
}

impl Connector for FakeConnector {
    type Io = tokio::io::DuplexStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        self.net.connect(addr)
    }
}

impl std::ops::Deref for FakeNet {
    type Target = MemNet;

    fn deref(&self) -> &MemNet {
        &self.net
    }
}

impl FakeNet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn connector(&self) -> FakeConnector {
        FakeConnector {
            net: self.net.clone(),
        }
    }

    /// Sets what the dpd in `zone` answers to `GET /rpw/nat/gen`.
    pub fn set_nat_gen(&self, zone: std::net::Ipv6Addr, nat_gen: i64) {
        self.net.with_dpd(zone, |d| d.set_generation(nat_gen));
    }
}

/// A fake net with one switch zone, at `zone_ip(1)`, whose MGS names
/// switch slot `slot`; and that zone's address.
pub fn one_switch_zone(slot: u16) -> (FakeNet, std::net::Ipv6Addr) {
    let net = FakeNet::new();
    let zone = zone_ip(1);
    net.add_switch_zone(zone, slot);
    (net, zone)
}

/// A service NAT entry for tests: `ip/first-last` pointing at
/// `fd00:1122:3344:<sled>::1` with a MAC derived from `sled`.
pub fn service_entry(ip: [u8; 4], first: u16, last: u16, sled: u16) -> crate::nat::NatEntry {
    crate::nat::NatEntry {
        external_ip: std::net::Ipv4Addr::from(ip),
        first_port: first,
        last_port: last,
        target: racksim_fakes::memnet::service_target(sled),
    }
}

/// A pass that completed with no failures: `unchanged` entries left alone,
/// `removed` removed, `created` created.
pub fn complete(
    unchanged: usize,
    removed: usize,
    created: usize,
) -> crate::nat::NatReconcileOutcome {
    crate::nat::NatReconcileOutcome::Complete {
        unchanged,
        removed,
        remove_failures: vec![],
        created,
        create_failures: vec![],
    }
}

/// The `tracing` events at `level` or above emitted on this thread while
/// [installed](Captured::install), as `"LEVEL message"`.
///
/// Why not a scoped subscriber (`tracing::subscriber::set_default`): tracing
/// caches each callsite's interest once per process, computed by whichever
/// thread reaches the callsite first. With at most one dispatcher
/// registered, tracing-core asks only that thread's default, and a test
/// thread with no subscriber answers "never" — the event is then dropped
/// on every thread, the capturing one included, and a test that counts log
/// lines fails now and then under load. So one global subscriber
/// (`Router`) answers "sometimes" for every callsite and routes events to
/// the capture installed on the emitting thread, if any.
#[derive(Clone)]
pub struct Captured {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    level: tracing::Level,
}

thread_local! {
    /// The capture installed on this thread.
    static CAPTURE: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// While alive, this thread's events go to its [`Captured`].
pub struct CaptureGuard(());

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}

impl Captured {
    pub fn at(level: tracing::Level) -> Self {
        Captured {
            lines: Default::default(),
            level,
        }
    }

    /// Capture this thread's events until the guard drops.
    pub fn install(&self) -> CaptureGuard {
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            tracing::subscriber::set_global_default(Router)
                .expect("no other global subscriber in this crate's tests");
        });
        // A callsite first reached by another thread while the global
        // subscriber was being set may still hold "never": ask again.
        tracing::callsite::rebuild_interest_cache();
        CAPTURE.with(|c| *c.borrow_mut() = Some(self.clone()));
        CaptureGuard(())
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// The process's one subscriber in this crate's tests: every callsite is
/// of interest, and an event is recorded by the emitting thread's capture.
struct Router;

impl tracing::Subscriber for Router {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // Ask `enabled` every time: most threads capture nothing.
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        CAPTURE.with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|captured| *meta.level() <= captured.level)
        })
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let Some(captured) = CAPTURE.with(|c| c.borrow().clone()) else {
            return;
        };
        let mut message = Message(String::new());
        event.record(&mut message);
        captured
            .lines
            .lock()
            .unwrap()
            .push(format!("{} {}", event.metadata().level(), message.0));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

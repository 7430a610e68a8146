//! Failures of the testbed itself, and how a run ends on one.
//!
//! A run judges a strategy only if the testbed around it worked. When a
//! fake's server stops, a host task cannot start (a socket it could not
//! bind), or a host's software panics, what follows in the trace is an
//! artefact: a dead dpd makes `legacy` "fail as expected" for reasons that
//! have nothing to do with legacy. So such a failure ends the run at once
//! with [`Verdict::TestbedError`](crate::Verdict::TestbedError), which no
//! expectation accepts, and which every summary counts on its own.
//!
//! Three ways in:
//! * a host's code reports one with [`World::testbed_error`](crate::world::World::testbed_error)
//!   (it is also a trace line of kind `testbed-error`);
//! * a host's software panics: turmoil (built with `--cfg tokio_unstable`)
//!   shuts the runtime down and the panic reaches the driver, which catches
//!   it; the panic hook installed here noted which host was running;
//! * a host's top-level future returns an error (turmoil's step fails).
//!
//! [`Sabotage`] breaks the testbed on purpose, so tests can prove that each
//! of these ends in a testbed error rather than in a verdict about the
//! strategy.

use std::{cell::RefCell, net::IpAddr, sync::Once, time::Duration};

/// A failure of the testbed, as the run records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestbedFailure {
    pub at: Duration,
    /// The host's name (`?` when unknown).
    pub host: String,
    pub error: String,
}

/// A deliberate failure of the testbed, for tests (a field of
/// [`RunConfig`](crate::RunConfig); `None` in every real run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// The fake server on `port` of `host` stops with an error at `at`, as
    /// a server whose listener failed would.
    StopServer {
        host: String,
        port: u16,
        at: Duration,
    },
    /// The task serving `port` on `host` panics at `at`.
    Panic {
        host: String,
        port: u16,
        at: Duration,
    },
}

impl Sabotage {
    /// The server on `port` of `host` stops with an error at `at`.
    pub fn stop_server(host: &str, port: u16, at: Duration) -> Self {
        let host = host.to_string();
        Sabotage::StopServer { host, port, at }
    }

    /// The task serving `port` on `host` panics at `at`.
    pub fn panic(host: &str, port: u16, at: Duration) -> Self {
        let host = host.to_string();
        Sabotage::Panic { host, port, at }
    }

    /// When it strikes.
    pub fn at(&self) -> Duration {
        match self {
            Sabotage::StopServer { at, .. } | Sabotage::Panic { at, .. } => *at,
        }
    }

    /// The `(host, port)` whose server it breaks.
    pub fn target(&self) -> (&str, u16) {
        match self {
            Sabotage::StopServer { host, port, .. } | Sabotage::Panic { host, port, .. } => {
                (host, *port)
            }
        }
    }

    /// Wait until the sabotage is due, then strike: an error for the
    /// server to stop with, or a panic. Runs on the host's simulated clock.
    pub(crate) async fn strike(&self) -> std::io::Error {
        let now = turmoil::sim_elapsed().unwrap_or_default();
        tokio::time::sleep(self.at().saturating_sub(now)).await;
        match self {
            Sabotage::StopServer { .. } => {
                std::io::Error::other("sabotaged: the listener failed (a test broke it on purpose)")
            }
            Sabotage::Panic { host, port, .. } => {
                panic!(
                    "sabotaged: the server on {host}:{port} panicked (a test broke it on purpose)"
                )
            }
        }
    }
}

/// The first panic on a run's thread: where and when it happened inside a
/// simulated host, and its message.
#[derive(Clone, Debug, Default)]
pub(crate) struct Panicked {
    pub host: Option<IpAddr>,
    pub at: Option<Duration>,
    pub message: Option<String>,
}

thread_local! {
    /// The first panic on this thread since the run began (a task's panic
    /// is followed by the runtime's own "a spawned task panicked" panic;
    /// the first one is the cause). Every host of a run runs on the run's
    /// thread, so this is the run's own.
    static PANICKED: RefCell<Option<Panicked>> = const { RefCell::new(None) };
}

/// Install (once per process) a panic hook that notes which simulated host
/// was running when a panic began, then hands over to the previous hook
/// (which prints the message as usual). By the time the driver catches the
/// unwinding panic, turmoil no longer says which host it was.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|p| {
                p.borrow_mut().get_or_insert_with(|| Panicked {
                    host: turmoil::current_host(),
                    at: turmoil::sim_elapsed(),
                    message: Some(panic_message(info.payload())),
                });
            });
            previous(info);
        }));
    });
}

/// Forget any panic noted on this thread (a run starts clean).
pub(crate) fn clear_panic() {
    PANICKED.with(|p| p.borrow_mut().take());
}

/// The first panic noted on this thread, if any.
pub(crate) fn take_panic() -> Panicked {
    PANICKED.with(|p| p.borrow_mut().take()).unwrap_or_default()
}

/// The message of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

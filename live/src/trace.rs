//! The live trace: what the fakes, the reconcilers and the control API
//! did, stamped with the wall clock, kept for `GET /trace` and printed as
//! it happens.

use std::{
    fmt,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use racksim_fakes::{dpd::NatChange, sled_agent::SledAgentChange};
use racksim_reconciler::dpd::NatTarget;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One line of the live trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LiveLine {
    /// Wall-clock time, UTC, `HH:MM:SS.mmm`.
    pub at: String,
    pub host: String,
    pub text: String,
}

impl fmt::Display for LiveLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {:<12}  {}", self.at, self.host, self.text)
    }
}

/// The trace so far; printed as it grows when `echo`.
#[derive(Clone)]
pub struct LiveTrace {
    lines: Arc<Mutex<Vec<LiveLine>>>,
    echo: Arc<std::sync::atomic::AtomicBool>,
}

impl LiveTrace {
    /// An empty trace; `echo` prints each line on stdout as it happens.
    pub fn new(echo: bool) -> Self {
        LiveTrace {
            lines: Arc::default(),
            echo: Arc::new(echo.into()),
        }
    }

    /// Print each line from now on.
    pub fn set_echo(&self) {
        self.echo.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn record(&self, host: &str, text: impl Into<String>) {
        let line = LiveLine {
            at: wall_clock(SystemTime::now()),
            host: host.to_string(),
            text: text.into(),
        };
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if self.echo.load(std::sync::atomic::Ordering::SeqCst) {
            println!("{line}");
        }
        lines.push(line);
    }

    pub fn lines(&self) -> Vec<LiveLine> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A `tracing` subscriber that writes the reconcilers' activations
    /// (they log through `tracing`) into this trace, as `racksim serve`
    /// shows them. Install it for the thread that runs the rack before
    /// starting it (`tracing::subscriber::set_default`); without it, the
    /// trace holds the fakes', the control plane's and the control API's
    /// lines only.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        use tracing_subscriber::layer::SubscriberExt;
        tracing_subscriber::registry().with(logging::LiveLayer(self.clone()))
    }
}

/// `HH:MM:SS.mmm` (UTC) of `t`.
fn wall_clock(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        d.subsec_millis()
    )
}

/// `198.51.100.1/16384-32767 -> fd00:1122:3344:101::1 (a8:40:25:ff:00:01, vni 100)`
fn fmt_nat(ip: impl fmt::Display, low: u16, high: u16, t: &NatTarget) -> String {
    format!(
        "{ip}/{low}-{high} -> {} ({}, vni {})",
        t.internal_ip, t.inner_mac, t.vni
    )
}

pub(super) fn nat_line(change: &NatChange) -> String {
    let (table, sign, entry) = match change {
        NatChange::Created(e) => ("NAT", '+', fmt_nat(e.external, e.low, e.high, &e.target)),
        NatChange::Deleted(e) => ("NAT", '-', fmt_nat(e.external, e.low, e.high, &e.target)),
        NatChange::Created6(e) => ("NAT6", '+', fmt_nat(e.external, e.low, e.high, &e.target)),
        NatChange::Deleted6(e) => ("NAT6", '-', fmt_nat(e.external, e.low, e.high, &e.target)),
        NatChange::Reset { removed } => {
            return format!("dpd: NAT table reset ({removed} entries removed)")
        }
    };
    format!("dpd: {table} {sign} {entry}")
}

pub(super) fn sled_agent_line(change: &SledAgentChange) -> String {
    match change {
        SledAgentChange::V2pSet(m) => format!("sled-agent: V2P + {m}"),
        SledAgentChange::V2pRemoved(m) => format!("sled-agent: V2P - {m}"),
        SledAgentChange::VmmRegistered { instance, vmm } => {
            format!("sled-agent: VMM {vmm} of instance {instance} registered")
        }
        SledAgentChange::VmmState {
            instance,
            vmm,
            state,
        } => {
            format!("sled-agent: VMM {vmm} of instance {instance} {state:?}")
        }
        SledAgentChange::VmmDestroyed { instance, vmm } => {
            format!("sled-agent: VMM {vmm} of instance {instance} destroyed")
        }
    }
}

/// The reconciler's `tracing` events as live trace lines: the message of
/// each `INFO` event of the reconciler crate, on the host named by the
/// enclosing `host` span.
pub mod logging {
    use std::fmt;

    use tracing::{
        field::{Field, Visit},
        span, Event, Subscriber,
    };
    use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

    use super::LiveTrace;

    struct Host(String);

    #[derive(Default)]
    struct Message {
        message: Option<String>,
        host: Option<String>,
    }

    impl Visit for Message {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            match field.name() {
                "message" => self.message = Some(format!("{value:?}")),
                "host" => self.host = Some(format!("{value:?}")),
                _ => {}
            }
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            match field.name() {
                "message" => self.message = Some(value.to_string()),
                "host" => self.host = Some(value.to_string()),
                _ => {}
            }
        }
    }

    /// Records the reconciler's events in a [`LiveTrace`].
    pub struct LiveLayer(pub LiveTrace);

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for LiveLayer {
        fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
            let mut m = Message::default();
            attrs.record(&mut m);
            if let (Some(host), Some(span)) = (m.host, ctx.span(id)) {
                span.extensions_mut().insert(Host(host));
            }
        }

        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            let meta = event.metadata();
            if !racksim_sim::logging::traced(meta.target(), meta.level()) {
                return;
            }
            let mut m = Message::default();
            event.record(&mut m);
            let host = ctx
                .event_scope(event)
                .and_then(|scope| {
                    scope
                        .from_root()
                        .find_map(|s| s.extensions().get::<Host>().map(|h| h.0.clone()))
                })
                .unwrap_or_else(|| "live".to_string());
            if let Some(message) = m.message {
                self.0.record(&host, message);
            }
        }
    }
}

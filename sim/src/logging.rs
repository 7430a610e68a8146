//! The reconciler's `tracing` events, as trace lines.
//!
//! The reconciler crate logs the way a Rust service does: `tracing` events
//! at its decision points (an activation ends, a task goes inert, the legacy
//! path gives up waiting, a status changes), with structured fields (`task`,
//! `activation`, `reason`, ...). A run installs a subscriber of its own —
//! thread-local (`tracing::subscriber::set_default`), never global, since a
//! sweep runs simulations on several threads at once — whose
//! [`TraceLayer`] turns each event at `INFO` or above from the reconciler
//! (and Nexus's instance code) into a [`TraceLine`] of kind
//! [`Kind::Reconciler`]:
//!
//! * stamped with the simulated time of the host that emitted it;
//! * on that host, by name: turmoil says which host's software is running
//!   (`turmoil::current_host`, part of racksim's patch; its per-host `node`
//!   span says the same, but following spans costs a span per host turn),
//!   and the world knows the address's name;
//! * with the event's fields, and its message as the text (addresses
//!   replaced by names, as everywhere in the trace); inside a `zone` span
//!   (a zone start in sled-agent), the legacy path's lines read
//!   `legacy ZONE: ...`.
//!
//! Why a thread-local subscriber is safe here: `tracing` caches each
//! callsite's interest once per process, computed by whichever thread
//! first reaches it (with at most one dispatcher registered, from that
//! thread's own default). A thread with no subscriber would cache "never"
//! and silence the callsite for every run. In racksim every thread that
//! runs reconciler code is a run's, with a subscriber built as this one
//! (same filter, same `RUST_LOG`), so whichever thread registers a
//! callsite computes the interest every other would. (The reconciler's
//! own unit tests, where most threads log into nothing, route through one
//! global subscriber instead: `reconciler/src/testing.rs`.)
//!
//! Nothing in a line depends on wall-clock time, thread or span ids, so the
//! trace stays byte-identical for a seed. `DEBUG` events (each NAT create
//! or remove, plans, backoff delays, repeats) do not reach the trace; with
//! `RUST_LOG` set, everything the filter admits is also printed to stderr
//! (stdout never changes).
//!
//! `RUST_LOG` is a list of `target=level` directives (or a bare level, or
//! a bare target for all its levels), as [`stderr_filter`] reads it:
//! `tracing-subscriber`'s `Targets`, not its `EnvFilter`. The span and
//! field-value filters only `EnvFilter` has need a regex engine, which was
//! about 45 CPU-seconds of a fresh build (docs/performance.md) for a
//! debugging aid; a directive this form cannot read is an error that names
//! it (`racksim` exits 2), where `EnvFilter` dropped it with a warning.

use std::{collections::BTreeMap, fmt, net::IpAddr};

use tracing::{
    field::{Field, Visit},
    span, Event, Level, Subscriber,
};
use tracing_subscriber::{
    filter::{FilterFn, Targets},
    layer::{Context, SubscriberExt},
    registry::LookupSpan,
    Layer,
};

use crate::{
    trace::{Kind, TraceLine},
    world::World,
};

/// The crates whose events are trace lines: the reconciler crate and
/// Nexus's (whose instance code logs the same way), by target prefix.
const TRACED: [&str; 2] = ["racksim_reconciler", "racksim_nexus"];

/// Whether an event of `target` at `level` is a trace line (the simulation's
/// and live mode's alike).
pub fn traced(target: &str, level: &Level) -> bool {
    *level <= Level::INFO && TRACED.iter().any(|crate_| target.starts_with(crate_))
}

/// The stderr log's filter, from `RUST_LOG`: `None` when it is unset
/// (no stderr log at all), an error naming the directive it cannot read.
///
/// Directives are comma-separated; empty ones (a trailing comma) are
/// skipped, and a `RUST_LOG` with none (empty, or commas alone) is as good
/// as unset (`Targets` would read an empty directive as every target at
/// `TRACE`).
pub fn stderr_filter() -> Result<Option<Targets>, String> {
    let Some(value) = std::env::var_os("RUST_LOG") else {
        return Ok(None);
    };
    let value = value
        .into_string()
        .map_err(|v| format!("RUST_LOG: not UTF-8: {v:?}"))?;
    let directives: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    // Nothing but separators (`""`, `","`): joined, it would be the empty
    // directive, every target at `TRACE`.
    if directives.is_empty() {
        return Ok(None);
    }
    // Each on its own first, so that the error names the one at fault.
    for directive in &directives {
        directive.parse::<Targets>().map_err(|e| {
            format!(
                "RUST_LOG: cannot read the directive `{directive}`: {e} \
                 (racksim reads `target=level`, a bare level or a bare target)"
            )
        })?;
    }
    let filter = directives
        .join(",")
        .parse()
        .map_err(|e| format!("RUST_LOG: {e}"))?;
    Ok(Some(filter))
}

/// Install the run's subscriber on this thread until the guard drops.
///
/// A `RUST_LOG` that [`stderr_filter`] cannot read is reported once per
/// run on stderr and no stderr log is written: the `racksim` binary
/// refuses it before any run, so only a library caller meets this.
pub fn install(world: &World) -> tracing::subscriber::DefaultGuard {
    let trace = TraceLayer {
        world: world.clone(),
    }
    .with_filter(FilterFn::new(|meta| {
        if meta.is_span() {
            return meta.name() == "zone";
        }
        traced(meta.target(), meta.level())
    }));
    // Debugging aid only: stderr, and only when asked for. Without it the
    // subscriber is the trace layer alone: an absent (`None`) layer in the
    // stack would declare an interest in every callsite, so every span
    // (turmoil's per-host `node` span, once per host turn) and every
    // `DEBUG` event would be built and offered to the filters only to be
    // dropped, which measured about 6% of a fuzz run.
    let filter = stderr_filter().unwrap_or_else(|e| {
        eprintln!("{e}; no stderr log");
        None
    });
    match filter {
        None => tracing::subscriber::set_default(tracing_subscriber::registry().with(trace)),
        Some(filter) => {
            let stderr = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                // Wall-clock stamps would mislead: the run is in simulated
                // time, so each line is stamped with it, as trace lines are.
                .with_timer(SimulatedTime)
                .with_filter(filter);
            tracing::subscriber::set_default(
                tracing_subscriber::registry().with(trace).with(stderr),
            )
        }
    }
}

/// The stderr log's stamp: the simulated time of the run this thread
/// steps (`turmoil::log_clock`), written as trace lines write theirs, so
/// `RUST_LOG=turmoil=trace` lines of the network (deliveries, drops,
/// retransmissions), which run between host turns, are stamped too. Only
/// stderr reads it; a trace line's time is its host's.
struct SimulatedTime;

impl tracing_subscriber::fmt::time::FormatTime for SimulatedTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> fmt::Result {
        match turmoil::log_clock() {
            Some(at) => write!(w, "{}", crate::trace::fmt_time(at)),
            None => write!(w, "--:--:--.------"),
        }
    }
}

/// Fields of a span this layer cares about (`zone`'s `zone`), kept in the
/// span's extensions.
#[derive(Default)]
struct SpanFields(BTreeMap<&'static str, String>);

/// Collects an event's or span's fields as strings; `message` apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: BTreeMap<&'static str, String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = Some(text);
        } else {
            self.fields.insert(field.name(), text);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            self.fields.insert(field.name(), value.to_string());
        }
    }
}

/// Turns the reconciler's events into trace lines (see the module docs).
pub struct TraceLayer {
    world: World,
}

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut visitor = Fields::default();
        attrs.record(&mut visitor);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(visitor.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        let zone = ctx.event_scope(event).and_then(|scope| {
            scope.filter(|span| span.name() == "zone").find_map(|span| {
                span.extensions()
                    .get::<SpanFields>()?
                    .0
                    .get("zone")
                    .cloned()
            })
        });
        // Outside a host (the driver, a unit test) there is no simulated
        // time to stamp it with: not a trace line.
        let (Some(IpAddr::V6(addr)), Some(at)) = (turmoil::current_host(), turmoil::sim_elapsed())
        else {
            return;
        };
        let host = self.world.name_of(addr);
        let message = visitor.message.unwrap_or_default();
        let text = match (visitor.fields.get("task").map(String::as_str), &zone) {
            (Some("legacy"), Some(zone)) => format!("legacy {zone}: {message}"),
            _ => message,
        };
        let mut line = TraceLine::new(at, &host, Kind::Reconciler, self.world.name_addrs(&text))
            .field("level", event.metadata().level().as_str().to_lowercase());
        for (key, value) in visitor.fields {
            line = line.field(key, self.world.name_addrs(&value));
        }
        if let Some(zone) = zone {
            line = line.field("zone", zone);
        }
        self.world.record(line);
    }
}

//! `racksim serve`: live mode, the scenario's rack on loopback in real
//! time until Ctrl-C (the work is `racksim::live`).

use clap::Args;
use racksim::catalogue;

use super::Status;

#[derive(Args)]
pub struct ServeArgs {
    /// A catalogue name or a path to a scenario file (its rack and its
    /// declared instances are used).
    #[arg(default_value = racksim::live::DEFAULT_SCENARIO)]
    scenario: String,
    /// `scrimlet-local` (default; the design after #9727), `sled-task`,
    /// `scrimlet-local-with-zone-start` (what ships at omicron b848b6df:
    /// the scrimlet reconcilers and each zone's start through the
    /// zone-start NAT path) or `legacy` (the zone-start path and
    /// Nexus's inventory-driven tracker).
    #[arg(long)]
    strategy: Option<String>,
    /// How Nexus starts instances: `saga` (default), `naive` or
    /// `inline`.
    #[arg(long)]
    start: Option<String>,
    /// Whose reconcilers run on the sleds: `racksim` (default: the
    /// strategy's own) or `none` (the rack's fakes and control plane only,
    /// for testing a reconciler of your own against the printed
    /// addresses; the strategy still chooses the control plane's era).
    #[arg(long)]
    reconcilers: Option<String>,
    /// Where the control API listens.
    #[arg(long, default_value = "127.0.0.1:12280")]
    bind: std::net::SocketAddr,
}

pub fn serve(args: ServeArgs) -> Result<Status, String> {
    let ServeArgs {
        scenario,
        strategy,
        start,
        reconcilers,
        bind,
    } = args;
    check_bind(bind)?;
    catalogue::resolve(&scenario)
        .and_then(|s| {
            racksim::live::command(
                &s,
                strategy.as_deref(),
                start.as_deref(),
                reconcilers.as_deref(),
                bind,
            )
        })
        .map(Status::from)
}

/// Whether the control API can listen on `bind`, checked before the rack
/// starts, so that a port in use is refused with why and what to do.
fn check_bind(bind: std::net::SocketAddr) -> Result<(), String> {
    let why = match std::net::TcpListener::bind(bind) {
        Ok(_) => return Ok(()),
        Err(e) => match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "the address is in use (another racksim serve, or another program, listens on it)"
                    .to_string()
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "no interface of this machine has that address".to_string()
            }
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need privileges)".to_string()
            }
            _ => e.to_string(),
        },
    };
    Err(format!(
        "error: --bind {bind}: cannot listen for the control API: {why}\n  \
         = hint: choose another address or port with --bind, e.g. --bind 127.0.0.1:{}, \
         or --bind 127.0.0.1:0 for any free port",
        bind.port().wrapping_add(1).max(1024)
    ))
}

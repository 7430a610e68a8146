//! The faults a fake's server can be made to show, and what a faulted
//! request is answered: decided here once, for the simulation's servers
//! and for live mode's dropshot servers (`racksim-servers`).

use crate::http::ApiError;

/// A fault a server can be made to show, as the simulation's plan actions
/// `dpd-errors` and `dpd-hang` do. The simulation (on simulated time) and
/// `racksim_servers::Shared` (on tokio time) decide when a fault applies; what the faulted
/// server answers is decided here, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every request is answered with a 500.
    Errors,
    /// Every request is held until the window ends, then answered with a
    /// 503 (a client with a shorter timeout sees a timeout).
    Hang,
}

impl Fault {
    /// The answer of `service` showing this fault (after the hold, for a
    /// hang).
    pub fn error(self, service: &str) -> ApiError {
        match self {
            Fault::Errors => ApiError::new(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                Some("Internal"),
                format!("injected fault: {service} is answering errors"),
            ),
            Fault::Hang => ApiError::unavailable(format!("injected fault: {service} was hung")),
        }
    }
}

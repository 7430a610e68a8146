//! The context a fake's dropshot server holds: [`Shared`], the fake's
//! state machine shared between its server and whoever else looks at it
//! (live mode's control API, a test), with the [`Observer`] told of every
//! change and the [`Fault`] the server is made to show.
//!
//! A fault is decided here once for every server: what a faulted request
//! meets (a 500, or a hold then a 503) and how a hold ends when the service
//! goes down.

use std::sync::{Arc, Mutex, MutexGuard};

use dropshot::HttpError;

use racksim_fakes::{fault::Fault, http::ApiError};

use crate::http_error;

/// Something told of every change a server makes to its state.
pub type Observer<C> = Arc<dyn Fn(&C) + Send + Sync>;

/// A fake's state shared between its server and whoever else looks at it
/// (a control API, a test), the observer of its changes, and the fault it
/// shows, if any.
pub struct Shared<S, C> {
    state: Arc<Mutex<S>>,
    observer: Option<Observer<C>>,
    fault: Arc<Mutex<Option<(Fault, tokio::time::Instant)>>>,
    /// The service's background task's timer (dpd: its NAT RPW's, which
    /// `POST /rpw/nat/trigger` makes due).
    trigger: Arc<racksim_fakes::dpd::NatRpwTimer>,
    /// Whether the service is down: a fault then holds no request (those
    /// it holds end), so that the service's server can close.
    down: Arc<tokio::sync::watch::Sender<bool>>,
}

impl<S, C> Clone for Shared<S, C> {
    fn clone(&self) -> Self {
        Shared {
            state: self.state.clone(),
            observer: self.observer.clone(),
            fault: self.fault.clone(),
            trigger: self.trigger.clone(),
            down: self.down.clone(),
        }
    }
}

impl<S, C> Shared<S, C> {
    pub fn new(state: S) -> Self {
        Shared {
            state: Arc::new(Mutex::new(state)),
            observer: None,
            fault: Arc::default(),
            trigger: Arc::default(),
            down: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// The service goes down: the requests its fault holds end now (with
    /// the fault's error), and so does any that arrives while its server
    /// closes.
    pub fn interrupt(&self) {
        self.down.send_replace(true);
    }

    /// The service is up again: its fault holds requests again.
    pub fn resume(&self) {
        self.down.send_replace(false);
    }

    /// The NAT RPW's timer, which `POST /rpw/nat/trigger` makes due (see
    /// [`racksim_fakes::dpd::NatRpwTimer`] for dendrite's schedule).
    pub fn trigger(&self) -> Arc<racksim_fakes::dpd::NatRpwTimer> {
        self.trigger.clone()
    }

    /// Every request meets `fault` for the next `window`.
    pub fn inject(&self, fault: Fault, window: std::time::Duration) {
        let until = tokio::time::Instant::now() + window;
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = Some((fault, until));
    }

    /// What a request to `service` meets before the state machine:
    /// nothing, or the fault injected for now.
    pub async fn meet_fault(&self, service: &str) -> Result<(), HttpError> {
        let fault = *self.fault.lock().unwrap_or_else(|e| e.into_inner());
        match fault {
            Some((fault, until)) if tokio::time::Instant::now() < until => {
                if fault == Fault::Hang {
                    let mut down = self.down.subscribe();
                    // Cancel-safe: a sleep holds nothing but its deadline;
                    // `until_down` only observes a watch channel.
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {}
                        () = until_down(&mut down) => {}
                    }
                }
                Err(http_error(fault.error(service)))
            }
            _ => Ok(()),
        }
    }

    pub fn with_observer(self, observer: Observer<C>) -> Self {
        Shared {
            observer: Some(observer),
            ..self
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state and reports each change it made, in order.
    pub fn apply<T>(&self, f: impl FnOnce(&mut S) -> (T, Vec<C>)) -> T {
        let (out, changes) = f(&mut self.lock());
        if let Some(observer) = &self.observer {
            for change in &changes {
                observer(change);
            }
        }
        out
    }

    /// Runs `f` on the state and reports the change it made, if any; an
    /// error of `f` (a refused request) becomes the server's answer.
    pub fn change(
        &self,
        f: impl FnOnce(&mut S) -> Result<Option<C>, ApiError>,
    ) -> Result<(), HttpError> {
        // The state is unlocked before the observer hears of the change.
        let change = f(&mut self.lock()).map_err(http_error)?;
        if let (Some(change), Some(observer)) = (change, &self.observer) {
            observer(&change);
        }
        Ok(())
    }

    /// A reading request to `service`, whole: it meets the fault, then
    /// answers what `f` reads from the state; an error of `f` (a refused
    /// request) becomes the server's answer.
    pub async fn read<T>(
        &self,
        service: &str,
        f: impl FnOnce(&S) -> Result<T, ApiError>,
    ) -> Result<T, HttpError> {
        self.meet_fault(service).await?;
        f(&self.lock()).map_err(http_error)
    }

    /// An updating request to `service`, whole: it meets the fault, then
    /// [`Shared::change`] runs `f`.
    pub async fn update(
        &self,
        service: &str,
        f: impl FnOnce(&mut S) -> Result<Option<C>, ApiError>,
    ) -> Result<(), HttpError> {
        self.meet_fault(service).await?;
        self.change(f)
    }
}

/// Resolves once the service is down (at once if it is).
async fn until_down(down: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = down.wait_for(|d| *d).await;
}

//! Fake dendrite (`dpd`): the state machine of `racksim-fakes`, which the
//! switch zone host serves on its simulated port
//! ([`crate::hosts::switch_zone`]) and live mode serves with dropshot.

pub use racksim_fakes::dpd::{DpdState, NatChange, NatError, NatRpwTimer, MAX_PAGE_ITEMS};

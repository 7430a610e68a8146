//! Fake management gateway: the state machine of `racksim-fakes`.

pub use racksim_fakes::mgs::MgsState;

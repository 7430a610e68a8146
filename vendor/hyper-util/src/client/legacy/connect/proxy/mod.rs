//! Proxy helpers
mod socks;
mod tunnel;

pub use self::socks::{SocksV4, SocksV5};
pub use self::tunnel::Tunnel;

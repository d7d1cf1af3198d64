//! The Postgres wire protocol: accepting connections ([`connection`], [`accept_backoff`],
//! [`file_limit`]), whole frames ([`frame`]), login ([`auth`], [`login_throttle`],
//! [`failed_logins`]), the simple and extended query handlers ([`handler`]), portals,
//! parameters and descriptions, results encoded as the client asked ([`encoding`]), `COPY`.

pub mod accept_backoff;
pub mod auth;
pub mod client_parse;
pub mod connection;
pub mod copy;
pub mod cursor_portals;
pub mod describe;
pub mod encoding;
pub mod failed_logins;
pub mod file_limit;
pub mod frame;
pub mod handler;
pub mod login_throttle;
pub mod parameters;
pub mod portal_execute;
pub mod result_columns;
pub mod result_formats;
pub mod result_stream;

//! The Postgres wire protocol: accepting connections ([`connection`], [`accept_backoff`],
//! [`file_limit`]), whole frames ([`frame`]), login ([`auth`], [`login_throttle`],
//! [`failed_logins`]), the simple and extended query handlers ([`handler`]), portals,
//! parameters and descriptions, results encoded as the client asked ([`encoding`]), `COPY`, and
//! `COPY (SUBSCRIBE ...)` streamed as it comes ([`copy_subscribe`]).

pub mod accept_backoff;
pub mod auth;
pub(crate) mod client_parse;
pub mod connection;
pub(crate) mod copy;
pub(crate) mod copy_subscribe;
pub(crate) mod cursor_portals;
pub(crate) mod describe;
pub(crate) mod encoding;
pub(crate) mod failed_logins;
pub mod file_limit;
pub(crate) mod frame;
pub mod handler;
pub(crate) mod login_throttle;
pub(crate) mod parameters;
pub(crate) mod portal_execute;
pub(crate) mod result_columns;
pub(crate) mod result_formats;
pub(crate) mod result_stream;

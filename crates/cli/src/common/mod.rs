//! What every `nd` tool shares: options and the size plan ([`args`]), the settings both ends
//! must agree on ([`settings`](mod@settings)), loopback runs as two pinned processes ([`process`]),
//! connection setup and waiting for completions ([`endpoint`]), and the result table and JSON
//! ([`report`]).

mod args;
mod endpoint;
mod process;
mod report;
mod settings;
mod v1;

#[cfg(test)]
pub(crate) use args::parse_endpoint;
pub(crate) use args::{listed_providers, Defaults, LocalArgs, PeerArgs, Plan, Role, SizeArgs};
pub(crate) use endpoint::{check, err, finish, Endpoint, EndpointConfig};
pub(crate) use report::{Col, Laps, Report, Row, BW_COLS, LAT_COLS};
pub(crate) use settings::{exchange_tcp_settings, settings};
pub(crate) use v1::{Api, ApiArg};

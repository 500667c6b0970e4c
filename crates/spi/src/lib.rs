//! The netdirect provider interface (SPI).
//!
//! This crate defines what a NetworkDirect v2 provider implements ([`traits`]), the ND vocabulary
//! both sides share ([`Status`], [`Error`], flags and structures), and a [`kit`] of building blocks
//! the software providers reuse. Applications use the `netdirect` crate, which sits on top of
//! this one; providers (`netdirect-tcp`, `netdirect-shm`) implement it.
//!
//! Rule ids in these docs (`G6`, `R-QP-7`, `D9`, ...) and section numbers (`§2.10`) refer to the
//! repository's `docs/ND-RULES.md`, the ND rules this project follows, written from Microsoft's
//! NetworkDirect SPI reference and its tests.

#![warn(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

mod error;
pub mod kit;
pub mod limits;
mod status;
pub mod traits;
mod types;

pub use error::{fail, Error, Result};
pub use status::Status;
pub use types::*;

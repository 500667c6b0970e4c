//! The error type every netdirect call returns.

use crate::Status;
use core::fmt;

/// A failed ND call: carries the exact ND status the SPI documents for that failure.
///
/// Every status other than `ND_SUCCESS` is carried as an `Error`, including the success-severity
/// codes `ND_PENDING` (see [`Error::is_pending`]) and `ND_TIMEOUT`, so that nothing the SPI can
/// return is lost in translation. `Display` prints the ND name, the hex value and a meaning.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    status: Status,
}

impl Error {
    /// `ND_PENDING` as an error: the asynchronous request has not finished yet.
    pub const PENDING: Self = Self::new(Status::PENDING);
    /// `ND_CANCELED`.
    pub const CANCELED: Self = Self::new(Status::CANCELED);

    /// Wrap `status`. Nothing in this crate wraps `ND_SUCCESS` (a success is `Ok`); if you do,
    /// you get an error that says `ND_SUCCESS`, not a panic.
    pub const fn new(status: Status) -> Self {
        Self { status }
    }

    /// The exact ND status.
    pub const fn status(self) -> Status {
        self.status
    }

    /// True for `ND_PENDING`: the request is still in progress.
    pub const fn is_pending(self) -> bool {
        self.status.0 == Status::PENDING.0
    }

    /// `ND_INVALID_PARAMETER_n` (1-based, counting `iid` as 1, as the ND documentation numbers them).
    pub const fn invalid_parameter(n: u32) -> Self {
        Self::new(Status::invalid_parameter(n))
    }

    /// Turn a raw status into a result: `ND_SUCCESS` is `Ok(())`, anything else an `Error`.
    pub const fn check(status: Status) -> Result<(), Self> {
        if status.0 == 0 {
            Ok(())
        } else {
            Err(Self { status })
        }
    }
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        Self::new(status)
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        e.status
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?})", self.status)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.status, f)
    }
}

impl std::error::Error for Error {}

/// The result of an ND call.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Shorthand for `Err(Error::new(status))`.
pub fn fail<T>(status: Status) -> Result<T> {
    Err(Error::new(status))
}

//! The error type every netdirect call returns.

use crate::Status;
use core::fmt;
use core::num::NonZeroU32;

/// A failed ND call: carries the exact ND status the SPI documents for that failure.
///
/// Every status other than `ND_SUCCESS` is carried as an `Error`, including the success-severity
/// codes `ND_PENDING` (see [`Error::is_pending`]) and `ND_TIMEOUT`, so that nothing the SPI can
/// return is lost in translation. `Display` prints the ND name, the hex value and a meaning.
///
/// An `ND_BUFFER_OVERFLOW` from a call that fills a caller's buffer also says how large the
/// buffer must be ([`Error::required_size`]), as ND's in/out size parameters do. Two errors
/// compare (and hash) by their status alone.
#[derive(Clone, Copy)]
pub struct Error {
    status: Status,
    /// The buffer size the call needs, for a too-small buffer, plus one; 1 when there is none.
    /// Nonzero so that a `Result` of an `Error` keeps its tag in this field's spare value:
    /// `Result<()>` stays one register wide, as it was when an `Error` was its status alone
    /// (`Option<NonZeroU32>` here took every value, and the wider `Result` cost an RDMA Write
    /// round 87 instructions, 3 %: `bench/callgrind`, `post_poll::shm_write/8`).
    required_plus_one: NonZeroU32,
}

// The layout the comment above relies on.
const _: () = assert!(size_of::<Result<(), Error>>() == 8);
const _: () = assert!(size_of::<Result<u32, Error>>() == 8);

/// `required_plus_one` of an error that names no size.
const NO_SIZE: NonZeroU32 = NonZeroU32::MIN;

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status
    }
}

impl Eq for Error {}

impl core::hash::Hash for Error {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.status.hash(state);
    }
}

impl Error {
    /// `ND_PENDING` as an error: the asynchronous request has not finished yet.
    pub const PENDING: Self = Self::new(Status::PENDING);
    /// `ND_CANCELED`.
    pub const CANCELED: Self = Self::new(Status::CANCELED);

    /// Wrap `status`. Nothing in this crate wraps `ND_SUCCESS` (a success is `Ok`); if you do,
    /// you get an error that says `ND_SUCCESS`, not a panic.
    pub const fn new(status: Status) -> Self {
        Self {
            status,
            required_plus_one: NO_SIZE,
        }
    }

    /// `ND_BUFFER_OVERFLOW` for a buffer that must hold `required` bytes (what ND writes back
    /// through the call's size parameter, e.g. `GetPrivateData`'s `pcbPrivateData`), at most
    /// `u32::MAX - 1`.
    pub const fn buffer_overflow(required: usize) -> Self {
        let n = if required > u32::MAX as usize {
            u32::MAX
        } else {
            required as u32
        };
        Self {
            status: Status::BUFFER_OVERFLOW,
            // Saturating: sizes beyond what ND's 32-bit size parameters can say are said as
            // one short of their maximum (the field's 1 means "no size").
            required_plus_one: NO_SIZE.saturating_add(n),
        }
    }

    /// For an `ND_BUFFER_OVERFLOW` made by [`Error::buffer_overflow`]: the size, in bytes, of
    /// the buffer the call needs. `None` for every other error.
    pub const fn required_size(self) -> Option<usize> {
        match self.required_plus_one.get() - 1 {
            0 => None,
            n => Some(n as usize),
        }
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
            Err(Self::new(status))
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

/// The ND name, the hex value and the meaning, and for a too-small buffer the size needed:
/// `Error { status: ND_INVALID_PARAMETER (0xC000000D): ... }`, so that what `fn main() ->
/// Result<()>` prints on failure says what went wrong.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("status", &format_args!("{}", self.status));
        if let Some(n) = self.required_size() {
            d.field("required_size", &n);
        }
        d.finish()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_overflow_names_the_size_needed_and_compares_by_status() {
        let e = Error::buffer_overflow(40);
        assert_eq!(e.status(), Status::BUFFER_OVERFLOW);
        assert_eq!(e.required_size(), Some(40));
        assert_eq!(e, Error::new(Status::BUFFER_OVERFLOW));
        assert_eq!(Error::new(Status::BUFFER_OVERFLOW).required_size(), None);
        assert_eq!(Error::CANCELED.required_size(), None);
        assert_eq!(
            format!("{e:?}"),
            format!(
                "Error {{ status: ND_BUFFER_OVERFLOW (0x80000005): {}, required_size: 40 }}",
                Status::BUFFER_OVERFLOW.meaning()
            )
        );
        // ND's size parameters are ULONGs; the largest size said is one short of their
        // maximum (the field keeps a value for "no size").
        for big in [usize::MAX, u32::MAX as usize, u32::MAX as usize - 1] {
            assert_eq!(
                Error::buffer_overflow(big).required_size(),
                Some(u32::MAX as usize - 1)
            );
        }
        assert_eq!(
            Error::buffer_overflow(u32::MAX as usize - 2).required_size(),
            Some(u32::MAX as usize - 2)
        );
        // A size of 0 is no size (no buffer is too small for it).
        assert_eq!(Error::buffer_overflow(0).required_size(), None);
    }

    /// `Debug` names the status, its value and its meaning (what `fn main() -> Result<()>`
    /// prints), not only the name.
    #[test]
    fn debug_says_name_value_and_meaning() {
        let e = Error::new(Status::INVALID_PARAMETER);
        let meaning = Status::INVALID_PARAMETER.meaning();
        assert!(!meaning.is_empty());
        assert_eq!(
            format!("{e:?}"),
            format!("Error {{ status: ND_INVALID_PARAMETER (0xC000000D): {meaning} }}")
        );
        // An unnamed status still shows its value.
        let odd = format!("{:?}", Error::new(Status(0x1234_5678_u32 as i32)));
        assert_eq!(odd, "Error { status: status 0x12345678 }");
        // Pretty form keeps the same fields.
        assert!(format!("{:#?}", Error::buffer_overflow(7)).contains("required_size: 7"));
    }
}

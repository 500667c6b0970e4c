//! `NTSTATUS`, the status type of every NDK function and callback (nd-v1-ndk §2.9 in the
//! project's research notes; the values are the Windows NTSTATUS values of the same names).
//!
//! Every ND v2 status is numerically the NTSTATUS of the same name (`ND_CANCELED` is
//! `STATUS_CANCELLED`, `ND_REMOTE_ERROR` is `STATUS_REMOTE_RESOURCES`), so completions pass
//! through unchanged. What differs is spelling per API, which [`NtStatus::from_nd`] and the
//! call sites translate: NDK reports a short buffer as `STATUS_BUFFER_TOO_SMALL` (an error)
//! where v2 says `ND_BUFFER_OVERFLOW` (a warning), and folds v2's numbered
//! `ND_INVALID_PARAMETER_n` into `STATUS_INVALID_PARAMETER`.

use core::fmt;

use crate::Status;

/// An NTSTATUS value: negative is an error, `0x8xxx_xxxx` a warning, the rest success.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct NtStatus(pub i32);

macro_rules! ntstatuses {
    ($( $(#[$doc:meta])* $name:ident = $value:literal; )*) => {
        impl NtStatus {
            $( $(#[$doc])* pub const $name: Self = Self($value as u32 as i32); )*

            /// The symbolic name (`"STATUS_CANCELLED"`), or `None` for a value not listed.
            pub fn name(self) -> Option<&'static str> {
                match self.0 as u32 { $( $value => Some(concat!("STATUS_", stringify!($name))), )* _ => None }
            }
        }
    };
}

ntstatuses! {
    /// The request succeeded.
    SUCCESS = 0x0000_0000;
    /// The request is pending: its completion callback is called later, exactly once.
    PENDING = 0x0000_0103;
    /// A CQ overran (the CQ notification callback's status).
    BUFFER_OVERFLOW = 0x8000_0005;
    /// A queue is full.
    NO_MORE_ENTRIES = 0x8000_001A;
    /// The request failed.
    UNSUCCESSFUL = 0xC000_0001;
    /// A memory access was refused (bad token, rights or bounds).
    ACCESS_VIOLATION = 0xC000_0005;
    /// An object handle is not valid (an object used after its close).
    INVALID_HANDLE = 0xC000_0008;
    /// A parameter is invalid.
    INVALID_PARAMETER = 0xC000_000D;
    /// The request is not valid for the object (for example invalidating an unbound window).
    INVALID_DEVICE_REQUEST = 0xC000_0010;
    /// The buffer is too small; the required size was reported.
    BUFFER_TOO_SMALL = 0xC000_0023;
    /// Parameters that cannot go together.
    INVALID_PARAMETER_MIX = 0xC000_0030;
    /// The local address is in use.
    SHARING_VIOLATION = 0xC000_0043;
    /// Not enough resources.
    INSUFFICIENT_RESOURCES = 0xC000_009A;
    /// The peer did not answer in time.
    IO_TIMEOUT = 0xC000_00B5;
    /// Not supported by this provider.
    NOT_SUPPORTED = 0xC000_00BB;
    /// A fatal provider error.
    INTERNAL_ERROR = 0xC000_00E5;
    /// The request was cancelled (flushed, or its object closed).
    CANCELLED = 0xC000_0120;
    /// The object is not in a state that allows the request.
    INVALID_DEVICE_STATE = 0xC000_0184;
    /// An access beyond the remote region, or the peer refused it.
    REMOTE_RESOURCES = 0xC000_013D;
    /// The address is not one of this adapter's.
    INVALID_ADDRESS = 0xC000_0141;
    /// Port 0 found no free port in 49152–65535.
    TOO_MANY_ADDRESSES = 0xC000_0209;
    /// The connection's 4-tuple exists already.
    ADDRESS_ALREADY_EXISTS = 0xC000_020A;
    /// The peer refused the connection (or nobody listens).
    CONNECTION_REFUSED = 0xC000_0236;
    /// No connection for this request.
    CONNECTION_INVALID = 0xC000_023A;
    /// The queue pair is connected already.
    CONNECTION_ACTIVE = 0xC000_023B;
    /// No route to the network.
    NETWORK_UNREACHABLE = 0xC000_023C;
    /// No route to the host.
    HOST_UNREACHABLE = 0xC000_023D;
    /// The connection was aborted.
    CONNECTION_ABORTED = 0xC000_0241;
    /// Beyond an implementation limit.
    IMPLEMENTATION_LIMIT = 0xC000_042B;
    /// NDIS: the requested NDKPI version is not supported.
    NDIS_BAD_VERSION = 0xC001_0004;
    /// NDIS: NDK is not enabled on the adapter.
    NDIS_ADAPTER_NOT_READY = 0xC001_0011;
}

impl NtStatus {
    /// `NT_SUCCESS`: success or informational (not a warning or an error).
    pub fn is_success(self) -> bool {
        self.0 >= 0
    }

    /// The NDK spelling of an ND v2 status (same value, except the numbered
    /// `ND_INVALID_PARAMETER_1`..`_12`, which NDK reports as `STATUS_INVALID_PARAMETER`).
    pub fn from_nd(s: Status) -> Self {
        match s.0 as u32 {
            0xC000_00EF..=0xC000_00FA => Self::INVALID_PARAMETER,
            v => Self(v as i32),
        }
    }

    /// `Ok(())` for success, else `Err(self)`.
    pub fn ok(self) -> Result<(), Self> {
        if self == Self::SUCCESS {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl From<Status> for NtStatus {
    fn from(s: Status) -> Self {
        Self::from_nd(s)
    }
}

impl From<crate::Error> for NtStatus {
    fn from(e: crate::Error) -> Self {
        Self::from_nd(e.status())
    }
}

impl fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({:#010X})", self.0 as u32),
            None => write!(f, "NTSTATUS {:#010X}", self.0 as u32),
        }
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for NtStatus {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_the_ntstatus_values() {
        assert_eq!(NtStatus::PENDING.0, 0x103);
        assert_eq!(NtStatus::SHARING_VIOLATION.0 as u32, 0xC000_0043);
        assert_eq!(NtStatus::INVALID_ADDRESS.0 as u32, 0xC000_0141);
        assert_eq!(NtStatus::TOO_MANY_ADDRESSES.0 as u32, 0xC000_0209);
        assert_eq!(NtStatus::INSUFFICIENT_RESOURCES.0 as u32, 0xC000_009A);
        assert_eq!(NtStatus::from_nd(Status::CANCELED), NtStatus::CANCELLED);
        assert_eq!(
            NtStatus::from_nd(Status::REMOTE_ERROR),
            NtStatus::REMOTE_RESOURCES
        );
        assert_eq!(
            NtStatus::from_nd(Status(0xC000_00F1_u32 as i32)),
            NtStatus::INVALID_PARAMETER
        );
        assert_eq!(
            NtStatus::CANCELLED.name(),
            Some("STATUS_CANCELLED"),
            "{:?}",
            NtStatus::CANCELLED
        );
        assert!(NtStatus::PENDING.is_success() && !NtStatus::BUFFER_OVERFLOW.is_success());
    }
}

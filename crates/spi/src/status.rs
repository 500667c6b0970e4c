//! ND status codes (`ndstatus.mc`), with the exact HRESULT values of `docs/ND-RULES.md` §1.1.
//!
//! A [`Status`] is an HRESULT: negative values are failures (`FAILED(hr)`), non-negative values
//! succeed. Note the severity quirk the ND tests rely on: [`Status::BUFFER_OVERFLOW`],
//! [`Status::DEVICE_BUSY`] and [`Status::NO_MORE_ENTRIES`] are *warnings*, yet their top bit is set,
//! so they count as failures; [`Status::TIMEOUT`] and [`Status::PENDING`] are *success* codes.

use core::fmt;

/// An ND status code (an HRESULT / NTSTATUS value).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Status(pub i32);

macro_rules! statuses {
    ($( $(#[$doc:meta])* $name:ident = $value:literal, $nd:literal, $meaning:literal; )*) => {
        impl Status {
            $( $(#[$doc])* pub const $name: Self = Self($value as u32 as i32); )*

            /// Every status this crate knows, in `ndstatus.mc` order followed by the extra NTSTATUS values.
            pub const ALL: &'static [Status] = &[$(Self::$name),*];

            /// The symbolic name (`"ND_CANCELED"`), or `None` for a value this crate does not know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 as u32 { $( $value => Some($nd), )* _ => None }
            }

            /// A plain-English meaning, as the ND documentation states it.
            pub fn meaning(self) -> &'static str {
                match self.0 as u32 { $( $value => $meaning, )* _ => "unknown status" }
            }
        }
    };
}

statuses! {
    /// The operation completed successfully.
    SUCCESS = 0x0000_0000, "ND_SUCCESS", "the operation completed successfully";
    /// A success code: the wait or connection attempt timed out and may be retried.
    TIMEOUT = 0x0000_0102, "ND_TIMEOUT", "the operation timed out; it may be retried";
    /// A success code: the request was started and completes later.
    PENDING = 0x0000_0103, "ND_PENDING", "the request is pending and completes later";
    /// Warning (counts as failure): the buffer is too small; the required size was reported.
    BUFFER_OVERFLOW = 0x8000_0005, "ND_BUFFER_OVERFLOW", "the buffer is too small; the required size was reported";
    /// Warning (counts as failure): the object is in use, e.g. a memory window is still bound.
    DEVICE_BUSY = 0x8000_0011, "ND_DEVICE_BUSY", "the object is busy (for example a memory window is still bound)";
    /// Warning (counts as failure): a queue is full.
    NO_MORE_ENTRIES = 0x8000_001A, "ND_NO_MORE_ENTRIES", "the queue is full";
    /// The operation failed.
    UNSUCCESSFUL = 0xC000_0001, "ND_UNSUCCESSFUL", "the operation failed";
    /// Invalid memory was referenced, or a remote access was refused.
    ACCESS_VIOLATION = 0xC000_0005, "ND_ACCESS_VIOLATION", "invalid memory was referenced or remote access was refused";
    /// The handle or object is not valid.
    INVALID_HANDLE = 0xC000_0008, "ND_INVALID_HANDLE", "the handle is not valid";
    /// A parameter is invalid.
    INVALID_PARAMETER = 0xC000_000D, "ND_INVALID_PARAMETER", "a parameter is invalid";
    /// The request is malformed (v1 name: ND_INVALIDATION_ERROR).
    INVALID_DEVICE_REQUEST = 0xC000_0010, "ND_INVALID_DEVICE_REQUEST", "the request is malformed (for example invalidating an unbound window)";
    /// Not enough memory.
    NO_MEMORY = 0xC000_0017, "ND_NO_MEMORY", "not enough memory";
    /// The combination of parameters is invalid.
    INVALID_PARAMETER_MIX = 0xC000_0030, "ND_INVALID_PARAMETER_MIX", "the combination of parameters is invalid";
    /// More data than fits: too many SGEs, or an incoming Send larger than the Receive (v1 name: ND_LOCAL_LENGTH).
    DATA_OVERRUN = 0xC000_003C, "ND_DATA_OVERRUN", "more data than fits (too many SGEs, or a message larger than the receive buffer)";
    /// The address is already in use.
    SHARING_VIOLATION = 0xC000_0043, "ND_SHARING_VIOLATION", "the address is already in use";
    /// Not enough resources.
    INSUFFICIENT_RESOURCES = 0xC000_009A, "ND_INSUFFICIENT_RESOURCES", "not enough resources";
    /// The subsystem is not ready (the helper library was not started).
    DEVICE_NOT_READY = 0xC000_00A3, "ND_DEVICE_NOT_READY", "not initialized";
    /// The connection or the remote queue pair failed to respond in time.
    IO_TIMEOUT = 0xC000_00B5, "ND_IO_TIMEOUT", "the peer did not respond in time";
    /// The operation is not supported.
    NOT_SUPPORTED = 0xC000_00BB, "ND_NOT_SUPPORTED", "the operation is not supported";
    /// An internal error; the object is unusable.
    INTERNAL_ERROR = 0xC000_00E5, "ND_INTERNAL_ERROR", "internal error; the object is unusable";
    /// Parameter 1 is invalid (counting `iid` as parameter 1).
    INVALID_PARAMETER_1 = 0xC000_00EF, "ND_INVALID_PARAMETER_1", "parameter 1 is invalid";
    /// Parameter 2 is invalid.
    INVALID_PARAMETER_2 = 0xC000_00F0, "ND_INVALID_PARAMETER_2", "parameter 2 is invalid";
    /// Parameter 3 is invalid.
    INVALID_PARAMETER_3 = 0xC000_00F1, "ND_INVALID_PARAMETER_3", "parameter 3 is invalid";
    /// Parameter 4 is invalid.
    INVALID_PARAMETER_4 = 0xC000_00F2, "ND_INVALID_PARAMETER_4", "parameter 4 is invalid";
    /// Parameter 5 is invalid.
    INVALID_PARAMETER_5 = 0xC000_00F3, "ND_INVALID_PARAMETER_5", "parameter 5 is invalid";
    /// Parameter 6 is invalid.
    INVALID_PARAMETER_6 = 0xC000_00F4, "ND_INVALID_PARAMETER_6", "parameter 6 is invalid";
    /// Parameter 7 is invalid.
    INVALID_PARAMETER_7 = 0xC000_00F5, "ND_INVALID_PARAMETER_7", "parameter 7 is invalid";
    /// Parameter 8 is invalid.
    INVALID_PARAMETER_8 = 0xC000_00F6, "ND_INVALID_PARAMETER_8", "parameter 8 is invalid";
    /// Parameter 9 is invalid.
    INVALID_PARAMETER_9 = 0xC000_00F7, "ND_INVALID_PARAMETER_9", "parameter 9 is invalid";
    /// Parameter 10 is invalid.
    INVALID_PARAMETER_10 = 0xC000_00F8, "ND_INVALID_PARAMETER_10", "parameter 10 is invalid";
    /// The request was canceled or flushed.
    CANCELED = 0xC000_0120, "ND_CANCELED", "the request was canceled or flushed";
    /// The request caused an error at the remote queue pair.
    REMOTE_ERROR = 0xC000_013D, "ND_REMOTE_ERROR", "the request caused an error at the remote peer";
    /// The address is not valid for this provider or adapter.
    INVALID_ADDRESS = 0xC000_0141, "ND_INVALID_ADDRESS", "the address is not valid for this adapter";
    /// The object is in the wrong state for this call.
    INVALID_DEVICE_STATE = 0xC000_0184, "ND_INVALID_DEVICE_STATE", "the object is in the wrong state for this call";
    /// A buffer size is invalid (zero-length registration, oversize private data).
    INVALID_BUFFER_SIZE = 0xC000_0206, "ND_INVALID_BUFFER_SIZE", "a buffer size is invalid";
    /// No port is free in the ephemeral range 49152–65535.
    TOO_MANY_ADDRESSES = 0xC000_0209, "ND_TOO_MANY_ADDRESSES", "no free port in the ephemeral range";
    /// The connection 4-tuple already exists.
    ADDRESS_ALREADY_EXISTS = 0xC000_020A, "ND_ADDRESS_ALREADY_EXISTS", "the connection already exists";
    /// The peer refused or rejected the connection, or nobody listens there.
    CONNECTION_REFUSED = 0xC000_0236, "ND_CONNECTION_REFUSED", "the peer refused the connection";
    /// The object is not connected (or not connecting).
    CONNECTION_INVALID = 0xC000_023A, "ND_CONNECTION_INVALID", "not connected";
    /// The queue pair is already connected.
    CONNECTION_ACTIVE = 0xC000_023B, "ND_CONNECTION_ACTIVE", "already connected";
    /// The network is unreachable.
    NETWORK_UNREACHABLE = 0xC000_023C, "ND_NETWORK_UNREACHABLE", "the network is unreachable";
    /// The host is unreachable.
    HOST_UNREACHABLE = 0xC000_023D, "ND_HOST_UNREACHABLE", "the host is unreachable";
    /// The connection was aborted by the peer.
    CONNECTION_ABORTED = 0xC000_0241, "ND_CONNECTION_ABORTED", "the connection was aborted";
    /// The adapter was removed; only cleanup works.
    DEVICE_REMOVED = 0xC000_02B6, "ND_DEVICE_REMOVED", "the adapter was removed";
    /// NTSTATUS that ND tests expect: Bind on an already bound listener or connected connector (`docs/ND-RULES.md` D13).
    ADDRESS_ALREADY_ASSOCIATED = 0xC000_0238, "STATUS_ADDRESS_ALREADY_ASSOCIATED", "the object is already bound to an address";
    /// NTSTATUS that ND tests expect: Connect to 0.0.0.0 (D13).
    BAD_NETWORK_NAME = 0xC000_00CC, "STATUS_BAD_NETWORK_NAME", "the destination address is not a usable address";
    /// NTSTATUS that ND tests accept: a Send whose peer's receive buffer was too small (D5).
    DATA_ERROR = 0xC000_003E, "STATUS_DATA_ERROR", "the peer could not accept the data";
    /// NTSTATUS that ND tests accept for a canceled NotifyDisconnect after a local Disconnect.
    CONNECTION_DISCONNECTED = 0xC000_020C, "STATUS_CONNECTION_DISCONNECTED", "the connection was disconnected";
}

impl Status {
    /// v1 alias of [`Status::DATA_OVERRUN`].
    pub const LOCAL_LENGTH: Self = Self::DATA_OVERRUN;
    /// v1 alias of [`Status::INVALID_DEVICE_REQUEST`].
    pub const INVALIDATION_ERROR: Self = Self::INVALID_DEVICE_REQUEST;

    /// `SUCCEEDED(hr)`: the value is non-negative (includes `ND_TIMEOUT` and `ND_PENDING`).
    pub const fn is_success(self) -> bool {
        self.0 >= 0
    }

    /// `FAILED(hr)`: the top bit is set (includes the warning codes such as `ND_BUFFER_OVERFLOW`).
    pub const fn is_failure(self) -> bool {
        self.0 < 0
    }

    /// The raw value as the unsigned 32-bit number the documentation prints.
    pub const fn as_u32(self) -> u32 {
        self.0 as u32
    }

    /// `ND_INVALID_PARAMETER_n` for a 1-based parameter position `n` (1..=10), counting `iid` as 1
    /// as the ND documentation does (`docs/ND-RULES.md` G11).
    pub const fn invalid_parameter(n: u32) -> Self {
        match n {
            1..=10 => Self(0xC000_00EF_u32.wrapping_add(n - 1) as i32),
            _ => Self::INVALID_PARAMETER,
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "Status({:#010X})", self.as_u32()),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({:#010X}): {}", self.as_u32(), self.meaning()),
            None => write!(f, "status {:#010X}", self.as_u32()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values() {
        assert_eq!(Status::PENDING.0, 0x103);
        assert_eq!(Status::CANCELED.as_u32(), 0xC000_0120);
        assert_eq!(Status::BUFFER_OVERFLOW.as_u32(), 0x8000_0005);
        assert_eq!(Status::INVALID_PARAMETER_10.as_u32(), 0xC000_00F8);
        assert_eq!(Status::invalid_parameter(5), Status::INVALID_PARAMETER_5);
        assert_eq!(Status::invalid_parameter(0), Status::INVALID_PARAMETER);
        assert_eq!(Status::ADDRESS_ALREADY_ASSOCIATED.as_u32(), 0xC000_0238);
        assert_eq!(Status::BAD_NETWORK_NAME.as_u32(), 0xC000_00CC);
        assert_eq!(Status::DATA_ERROR.as_u32(), 0xC000_003E);
        assert_eq!(Status::CONNECTION_DISCONNECTED.as_u32(), 0xC000_020C);
        // 44 symbols in ndstatus.mc plus the four NTSTATUS extras.
        assert_eq!(Status::ALL.len(), 48);
    }

    #[test]
    fn severity_quirks() {
        assert!(Status::TIMEOUT.is_success() && Status::PENDING.is_success());
        assert!(Status::BUFFER_OVERFLOW.is_failure() && Status::NO_MORE_ENTRIES.is_failure());
    }

    #[test]
    fn display_names_and_meaning() {
        let s = Status::CANCELED.to_string();
        assert_eq!(
            s,
            "ND_CANCELED (0xC0000120): the request was canceled or flushed"
        );
        assert_eq!(format!("{:?}", Status(0x1234)), "Status(0x00001234)");
        let mut seen = std::collections::HashSet::new();
        for s in Status::ALL {
            assert!(seen.insert(s.0), "duplicate value {s:?}");
            assert!(s.name().is_some());
        }
    }
}

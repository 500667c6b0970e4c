//! The C types of the ABI, with the Windows widths on LP64 (docs/PORTING.md, "Types"):
//! `ULONG`/`DWORD`/`HRESULT`/`BOOL` are 32-bit, `SIZE_T`/`ULONG_PTR`/`HANDLE` 64-bit.
//!
//! `ND2_RESULT`, `ND2_SGE` and `ND2_ADAPTER_INFO` are the `netdirect` types themselves
//! ([`nd::NdResult`], [`nd::Sge`], [`nd::AdapterInfo`] are `#[repr(C)]` with the C layout;
//! asserted below), so results and SGEs cross the ABI without conversion.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use nd::Status;

/// `HRESULT`.
pub type HRESULT = i32;
/// `BOOL` (any non-zero is TRUE).
pub type BOOL = i32;
/// `HANDLE`: a value from the handle table ([`crate::win32::handles`]).
pub type HANDLE = *mut c_void;

/// `TRUE`.
pub const TRUE: BOOL = 1;
/// `FALSE`.
pub const FALSE: BOOL = 0;
/// `S_OK`.
pub const S_OK: HRESULT = 0;
/// `E_NOINTERFACE`: a `QueryInterface` or `Create*` for an interface the object does not have.
pub const E_NOINTERFACE: HRESULT = 0x8000_4002_u32 as i32;
/// `E_POINTER`: a null out-pointer where COM requires one.
pub const E_POINTER: HRESULT = 0x8000_4003_u32 as i32;
/// `STATUS_PENDING` / `ND_PENDING`, what `OVERLAPPED.Internal` holds while a request runs.
pub const STATUS_PENDING: usize = Status::PENDING.0 as u32 as usize;

/// `GUID` / `IID`: 16 bytes, align 4, compared by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GUID {
    /// `Data1`.
    pub data1: u32,
    /// `Data2`.
    pub data2: u16,
    /// `Data3`.
    pub data3: u16,
    /// `Data4`.
    pub data4: [u8; 8],
}

/// `OVERLAPPED`: 32 bytes. The provider writes `Internal` (the status, zero-extended) and
/// `InternalHigh` (bytes), never anything past `hEvent`: programs embed it in larger objects.
#[repr(C)]
#[derive(Debug)]
pub struct OVERLAPPED {
    /// The request's status: `STATUS_PENDING` while it runs.
    pub internal: usize,
    /// Bytes transferred.
    pub internal_high: usize,
    /// `Offset`/`OffsetHigh`, or `Pointer`: the caller's.
    pub offset: u64,
    /// The event to signal; bit 0 set: do not queue a completion packet.
    pub h_event: HANDLE,
}

/// `OVERLAPPED_ENTRY`, what `GetQueuedCompletionStatusEx` fills.
#[repr(C)]
#[derive(Debug)]
pub struct OVERLAPPED_ENTRY {
    /// `lpCompletionKey`.
    pub completion_key: usize,
    /// `lpOverlapped`.
    pub overlapped: *mut OVERLAPPED,
    /// `Internal`.
    pub internal: usize,
    /// `dwNumberOfBytesTransferred`.
    pub bytes: u32,
}

/// `SOCKET_ADDRESS`: one entry of a [`SOCKET_ADDRESS_LIST`].
#[repr(C)]
#[derive(Debug)]
pub struct SOCKET_ADDRESS {
    /// `lpSockaddr`: points into the same buffer, after the array.
    pub sockaddr: *mut c_void,
    /// `iSockaddrLength`.
    pub length: i32,
}

/// `SOCKET_ADDRESS_LIST`: a count, then the array at offset 8.
#[repr(C)]
#[derive(Debug)]
pub struct SOCKET_ADDRESS_LIST {
    /// `iAddressCount`.
    pub count: i32,
    /// `Address[]`, of `count` entries.
    pub address: [SOCKET_ADDRESS; 1],
}

/// `FILETIME`: 100 ns units in two halves.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FILETIME {
    /// `dwLowDateTime`.
    pub low: u32,
    /// `dwHighDateTime`.
    pub high: u32,
}

impl FILETIME {
    /// `units` of 100 ns.
    pub const fn from_units(units: u64) -> Self {
        Self {
            low: units as u32,
            high: (units >> 32) as u32,
        }
    }
}

/// `ND2_ADAPTER_INFO`'s size: what `Query` needs and reports.
pub const ADAPTER_INFO_SIZE: usize = size_of::<nd::AdapterInfo>();

// The layouts the C headers declare (docs/ND-RULES.md §1.10); tests/abi checks the same facts
// from C and C++.
const _: () = {
    assert!(size_of::<GUID>() == 16);
    assert!(size_of::<OVERLAPPED>() == 32);
    assert!(offset_of!(OVERLAPPED, internal_high) == 8);
    assert!(offset_of!(OVERLAPPED, h_event) == 24);
    assert!(size_of::<OVERLAPPED_ENTRY>() == 32);
    assert!(offset_of!(OVERLAPPED_ENTRY, bytes) == 24);
    assert!(size_of::<SOCKET_ADDRESS>() == 16);
    assert!(offset_of!(SOCKET_ADDRESS_LIST, address) == 8);
    assert!(size_of::<SOCKET_ADDRESS_LIST>() == 24);
    assert!(size_of::<nd::NdResult>() == 32);
    assert!(offset_of!(nd::NdResult, bytes_transferred) == 4);
    assert!(offset_of!(nd::NdResult, qp_context) == 8);
    assert!(offset_of!(nd::NdResult, request_context) == 16);
    assert!(offset_of!(nd::NdResult, request_type) == 24);
    assert!(size_of::<nd::Sge>() == 16);
    assert!(offset_of!(nd::Sge, buffer_length) == 8);
    assert!(offset_of!(nd::Sge, memory_region_token) == 12);
    assert!(ADAPTER_INFO_SIZE == 96);
    assert!(offset_of!(nd::AdapterInfo, adapter_id) == 8);
    assert!(offset_of!(nd::AdapterInfo, max_registration_size) == 16);
    assert!(offset_of!(nd::AdapterInfo, max_initiator_sge) == 32);
    assert!(offset_of!(nd::AdapterInfo, max_transfer_length) == 44);
    assert!(offset_of!(nd::AdapterInfo, max_completion_queue_depth) == 72);
    assert!(offset_of!(nd::AdapterInfo, adapter_flags) == 92);
    assert!(size_of::<FILETIME>() == 8);
};

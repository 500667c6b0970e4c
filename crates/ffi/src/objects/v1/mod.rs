//! The ND v1 objects (`INDProvider` ... `INDEndpoint`, the "HPC Pack 2008 SDK interface" of
//! `ndspi.h`), over `netdirect::v1`: one module per interface family, each vtable in the
//! header's slot order (nd-v1 §1.4; docs/ND-RULES.md §2.13).
//!
//! v1 has one overlapped file per adapter (`INDAdapter::GetFileHandle`): every overlapped
//! request of the adapter and of the objects it creates completes through it, as the v2
//! objects complete through the file they were created with ([`crate::request`]).

pub mod adapter;
pub mod connector;
pub mod cq;
pub mod endpoint;

use crate::abi::{HRESULT, OVERLAPPED};
use crate::com::{Com, UnknownSlots};
use crate::objects::HasRequests;

/// The two `INDOverlapped` slots, after `IUnknown`'s. v1's `GetOverlappedResult` reports a
/// byte count too.
#[repr(C)]
pub struct V1OverlappedSlots<T: HasRequests> {
    /// `CancelOverlappedRequests()`.
    pub cancel_overlapped_requests: unsafe extern "C" fn(*mut Com<T>) -> HRESULT,
    /// `GetOverlappedResult(OVERLAPPED*, SIZE_T* pNumberOfBytesTransferred, BOOL wait)`.
    pub get_overlapped_result:
        unsafe extern "C" fn(*mut Com<T>, *mut OVERLAPPED, *mut usize, i32) -> HRESULT,
}

/// The `IUnknown` + `INDOverlapped` prefix of the v1 adapter, CQ, connector and listener.
#[repr(C)]
pub struct V1Prefix<T: HasRequests> {
    /// Slots 0–2.
    pub unknown: UnknownSlots<T>,
    /// Slots 3–4.
    pub overlapped: V1OverlappedSlots<T>,
}

impl<T: HasRequests> V1Prefix<T> {
    /// The generic implementations.
    pub const NEW: Self = Self {
        unknown: UnknownSlots::NEW,
        overlapped: V1OverlappedSlots {
            cancel_overlapped_requests: cancel::<T>,
            get_overlapped_result: result::<T>,
        },
    };
}

unsafe extern "C" fn cancel<T: HasRequests>(this: *mut Com<T>) -> HRESULT {
    crate::boundary::hresult(|| {
        // SAFETY: dispatch.
        let obj = unsafe { &Com::this(this).obj };
        crate::boundary::status_of(&obj.cancel())
    })
}

unsafe extern "C" fn result<T: HasRequests>(
    this: *mut Com<T>,
    ov: *mut OVERLAPPED,
    bytes: *mut usize,
    wait: i32,
) -> HRESULT {
    crate::boundary::hresult(|| {
        // SAFETY: dispatch.
        let obj = unsafe { &Com::this(this).obj };
        // SAFETY: `ov` is the caller's OVERLAPPED (null is refused inside).
        let s = unsafe { obj.requests().result(ov, wait != 0) };
        if !bytes.is_null() {
            // SAFETY: the caller's optional SIZE_T. No v1 overlapped request transfers bytes.
            unsafe { *bytes = 0 };
        }
        s.0
    })
}

/// The `Interface` and [`HasRequests`] of a v1 object derived from `INDOverlapped`, as
/// `overlapped_object!` makes them for v2: IIDs `IUnknown`, `INDOverlapped` and its own.
macro_rules! v1_overlapped_object {
    ($obj:ident, $field:ident, $slots:ident, $table:ident, $iid:ident) => {
        impl crate::com::Interface for $obj {
            type Slots = $slots;
            fn table() -> &'static crate::com::Table<$slots> {
                &$table
            }
            const IIDS: &'static [&'static crate::abi::GUID] = &[
                &crate::iid::IID_IUnknown,
                &crate::iid::IID_INDOverlapped,
                &crate::iid::$iid,
            ];
            fn on_final_release(&self) {
                let _ = self.$field.cancel_overlapped_requests();
                self.requests.detach_all();
            }
        }

        impl crate::objects::HasRequests for $obj {
            fn requests(&self) -> &crate::request::Requests {
                &self.requests
            }
            fn cancel(&self) -> nd::Result<()> {
                self.$field.cancel_overlapped_requests()
            }
        }
    };
}
pub(crate) use v1_overlapped_object;

/// A `SIZE_T` length in, as the `u32` the shared helpers take (saturated: a larger buffer is
/// as good as 4 GiB for an address or private data), and the `u32` they write back out.
///
/// # Safety
/// `pcb` is null or valid for reads and writes of a `SIZE_T`.
pub unsafe fn with_u32_len(pcb: *mut usize, f: impl FnOnce(*mut u32) -> HRESULT) -> HRESULT {
    if pcb.is_null() {
        return f(std::ptr::null_mut());
    }
    // SAFETY: the caller's SIZE_T.
    let mut n = u32::try_from(unsafe { *pcb }).unwrap_or(u32::MAX);
    let hr = f(&mut n);
    // SAFETY: as above.
    unsafe { *pcb = n as usize };
    hr
}

/// Bytes from C: null is allowed only with length 0, else `ND_INVALID_PARAMETER_{param}`.
///
/// # Safety
/// `p` is null or readable for `len` bytes during the call.
pub unsafe fn bytes<'a>(p: *const u8, len: usize, param: u32) -> Result<&'a [u8], HRESULT> {
    match (p.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(nd::Status::invalid_parameter(param).0),
        // SAFETY: the caller's contract.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(p, n) }),
    }
}

// Each vtable has exactly the slots `ndspi.h` declares (nd-v1 §1.4): INDOverlapped 5,
// INDCompletionQueue 8, INDMemoryWindow 3, INDEndpoint 13, INDConnector 15, INDListen 6,
// INDAdapter 14, INDProvider 5. tests/abi checks the same from C and C++.
const _: () = {
    use std::mem::size_of;
    const SLOT: usize = size_of::<usize>();
    assert!(size_of::<V1Prefix<cq::V1CqObj>>() == 5 * SLOT);
    assert!(size_of::<cq::V1CqSlots>() == 8 * SLOT);
    assert!(size_of::<endpoint::V1MwSlots>() == 3 * SLOT);
    assert!(size_of::<endpoint::V1EndpointSlots>() == 13 * SLOT);
    assert!(size_of::<connector::V1ConnectorSlots>() == 15 * SLOT);
    assert!(size_of::<connector::V1ListenSlots>() == 6 * SLOT);
    assert!(size_of::<adapter::V1AdapterSlots>() == 14 * SLOT);
    assert!(size_of::<adapter::V1ProviderSlots>() == 5 * SLOT);
    // ND_SGE, ND_RESULT, ND_MW_DESCRIPTOR, ND_ADAPTER_INFO1 are the Rust types, used in place.
    assert!(size_of::<nd::v1::Sge1>() == 3 * SLOT);
    assert!(size_of::<nd::v1::NdResult1>() == 2 * SLOT);
    assert!(size_of::<nd::v1::MwDescriptor>() == 20);
};

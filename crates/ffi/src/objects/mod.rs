//! The ND v2 objects (and, in [`v1`], the v1 ones): one module per interface, each a [`crate::com::Interface`] with its
//! vtable in `ndspi.h`'s slot order (docs/ND-RULES.md §2.1).

pub mod adapter;
pub mod connector;
pub mod cq;
pub mod listener;
pub mod memory;
pub mod provider;
pub mod qp;
pub mod srq;
pub mod v1;

use std::ffi::c_void;

use crate::abi::{GUID, HRESULT, OVERLAPPED};
use crate::com::{Com, Interface, UnknownSlots};

/// The two `IND2Overlapped` slots, after `IUnknown`'s.
#[repr(C)]
pub struct OverlappedSlots<T: Interface> {
    /// `CancelOverlappedRequests()`.
    pub cancel_overlapped_requests: unsafe extern "C" fn(*mut Com<T>) -> HRESULT,
    /// `GetOverlappedResult(OVERLAPPED*, BOOL wait)`.
    pub get_overlapped_result: unsafe extern "C" fn(*mut Com<T>, *mut OVERLAPPED, i32) -> HRESULT,
}

/// The `Interface` and [`HasRequests`] of an object derived from `IND2Overlapped`: the IIDs
/// `IUnknown`, `IND2Overlapped` and its own; its requests in `self.requests`; its Rust object
/// in `self.$field`, whose `CancelOverlappedRequests` the final `Release` calls before it
/// detaches what is left.
macro_rules! overlapped_object {
    ($obj:ident, $field:ident, $slots:ident, $table:ident, $iid:ident) => {
        impl crate::com::Interface for $obj {
            type Slots = $slots;
            fn table() -> &'static crate::com::Table<$slots> {
                &$table
            }
            const IIDS: &'static [&'static crate::abi::GUID] = &[
                &crate::iid::IID_IUnknown,
                &crate::iid::IID_IND2Overlapped,
                &crate::iid::$iid,
            ];
            fn on_final_release(&self) {
                // Pending requests complete ND_CANCELED while the application's memory is
                // still valid (it is in its Release call); anything left can no longer
                // write it.
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
pub(crate) use overlapped_object;

/// An object with overlapped requests (`IND2Overlapped`): its request table.
pub trait HasRequests: Interface {
    /// The object's overlapped requests.
    fn requests(&self) -> &crate::request::Requests;
    /// `CancelOverlappedRequests` on the Rust object.
    fn cancel(&self) -> nd::Result<()>;
}

impl<T: HasRequests> OverlappedSlots<T> {
    /// The generic implementations.
    pub const NEW: Self = Self {
        cancel_overlapped_requests: cancel_overlapped_requests::<T>,
        get_overlapped_result: get_overlapped_result::<T>,
    };
}

unsafe extern "C" fn cancel_overlapped_requests<T: HasRequests>(this: *mut Com<T>) -> HRESULT {
    crate::boundary::hresult(|| {
        // SAFETY: dispatch.
        let obj = unsafe { &Com::this(this).obj };
        crate::boundary::status_of(&obj.cancel())
    })
}

unsafe extern "C" fn get_overlapped_result<T: HasRequests>(
    this: *mut Com<T>,
    ov: *mut OVERLAPPED,
    wait: i32,
) -> HRESULT {
    crate::boundary::hresult(|| {
        // SAFETY: dispatch.
        let obj = unsafe { &Com::this(this).obj };
        // SAFETY: `ov` is the caller's OVERLAPPED (null is refused inside).
        unsafe { obj.requests().result(ov, wait != 0) }.0
    })
}

/// The `IUnknown` + `IND2Overlapped` prefix of CQ, SRQ, MR, connector and listener vtables.
#[repr(C)]
pub struct OverlappedPrefix<T: HasRequests> {
    /// Slots 0–2.
    pub unknown: UnknownSlots<T>,
    /// Slots 3–4.
    pub overlapped: OverlappedSlots<T>,
}

impl<T: HasRequests> OverlappedPrefix<T> {
    /// The generic implementations.
    pub const NEW: Self = Self {
        unknown: UnknownSlots::NEW,
        overlapped: OverlappedSlots::NEW,
    };
}

/// A `Create*` method's `iid` and `pp` checks: `pp` null → `ND_INVALID_PARAMETER_{pp_param}`,
/// an IID the object does not answer → `E_NOINTERFACE` (with `*pp` null).
///
/// # Safety
/// `iid` is null or 16 readable bytes; `pp` is null or writable.
pub unsafe fn check_create<T: Interface>(
    iid: *const GUID,
    pp: *mut *mut c_void,
    pp_param: u32,
) -> Result<(), HRESULT> {
    if pp.is_null() {
        return Err(nd::Status::invalid_parameter(pp_param).0);
    }
    // SAFETY: `pp` checked; `iid` per the caller.
    unsafe {
        crate::com::put(pp, std::ptr::null_mut());
        if crate::iid::is_one_of(iid, T::IIDS) {
            Ok(())
        } else if iid.is_null() {
            Err(nd::Status::invalid_parameter(1).0)
        } else {
            Err(crate::abi::E_NOINTERFACE)
        }
    }
}

/// SGEs from C: a null array is allowed only with `n == 0` (`ND2_SGE` is `nd::Sge`, so the
/// caller's array is used in place).
///
/// # Safety
/// `sge` is null or valid for reads of `n` elements during the call.
pub unsafe fn sges<'a>(sge: *const nd::Sge, n: u32, param: u32) -> Result<&'a [nd::Sge], HRESULT> {
    if n == 0 {
        return Ok(&[]);
    }
    if sge.is_null() {
        return Err(nd::Status::invalid_parameter(param).0);
    }
    // SAFETY: the caller's contract: `n` readable elements.
    Ok(unsafe { std::slice::from_raw_parts(sge, n as usize) })
}

// Each vtable has exactly the slots `ndspi.h` declares for its interface (docs/ND-RULES.md
// §2.1): IUnknown 3, IND2Overlapped 5, then the interface's own. tests/abi checks the same
// counts and every slot's position from C and C++.
const _: () = {
    use std::mem::size_of;
    const SLOT: usize = size_of::<usize>();
    assert!(size_of::<OverlappedPrefix<cq::CqObj>>() == 5 * SLOT);
    assert!(size_of::<provider::ProviderSlots>() == 6 * SLOT);
    assert!(size_of::<adapter::AdapterSlots>() == 14 * SLOT);
    assert!(size_of::<cq::CqSlots>() == 9 * SLOT);
    assert!(size_of::<srq::SrqSlots>() == 9 * SLOT);
    assert!(size_of::<memory::MrSlots>() == 9 * SLOT);
    assert!(size_of::<memory::MwSlots>() == 4 * SLOT);
    assert!(size_of::<qp::QpSlots>() == 10 * SLOT);
    assert!(size_of::<connector::ConnectorSlots>() == 16 * SLOT);
    assert!(size_of::<listener::ListenerSlots>() == 9 * SLOT);
};

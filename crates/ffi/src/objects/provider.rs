//! `IND2Provider` (IND2Provider, Microsoft's NetworkDirect SPI reference), and the two entry
//! points a provider module exports, so this library can be loaded as one
//! (`DllGetClassObject`, `DllCanUnloadNow`; docs/ND-RULES.md §6.2).

use std::ffi::c_void;

use nd::Status;

use crate::abi::{GUID, HRESULT, SOCKET_ADDRESS_LIST};
use crate::boundary::{hresult, status_of};
use crate::com::{put, Com, Interface, Table, UnknownSlots};
use crate::iid::*;
use crate::sockaddr;

/// A provider (`tcp` or `shm`).
#[derive(Debug)]
pub struct ProviderObj {
    /// The Rust provider.
    pub provider: nd::Provider,
}

type This = *mut Com<ProviderObj>;

/// `IND2Provider`'s vtable.
#[repr(C)]
pub struct ProviderSlots {
    unknown: UnknownSlots<ProviderObj>,
    query_address_list: unsafe extern "C" fn(This, *mut SOCKET_ADDRESS_LIST, *mut u32) -> HRESULT,
    resolve_address: unsafe extern "C" fn(This, *const u8, u32, *mut u64) -> HRESULT,
    open_adapter: unsafe extern "C" fn(This, *const GUID, u64, *mut *mut c_void) -> HRESULT,
}

static TABLE: Table<ProviderSlots> = Table::new(ProviderSlots {
    unknown: UnknownSlots::NEW,
    query_address_list,
    resolve_address,
    open_adapter,
});

impl Interface for ProviderObj {
    type Slots = ProviderSlots;
    fn table() -> &'static Table<ProviderSlots> {
        &TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_IND2Provider];
}

fn obj<'a>(this: This) -> &'a ProviderObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

unsafe extern "C" fn query_address_list(
    this: This,
    list: *mut SOCKET_ADDRESS_LIST,
    pcb: *mut u32,
) -> HRESULT {
    // SAFETY: the caller's pointers.
    hresult(|| unsafe {
        super::adapter::query_list(obj(this).provider.query_address_list(), list, pcb)
    })
}

unsafe extern "C" fn resolve_address(
    this: This,
    addr: *const u8,
    len: u32,
    id: *mut u64,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's sockaddr.
        let a = match unsafe { sockaddr::read(addr, len as usize) } {
            Ok(a) => a,
            Err(bad) => return bad.status(1).0,
        };
        if id.is_null() {
            return Status::invalid_parameter(3).0;
        }
        match obj(this).provider.resolve_address(a) {
            // SAFETY: checked non-null.
            Ok(v) => unsafe {
                *id = v;
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn open_adapter(
    this: This,
    iid: *const GUID,
    id: u64,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's IID and out-pointer.
        if let Err(hr) = unsafe { super::check_create::<super::adapter::AdapterObj>(iid, pp, 3) } {
            return hr;
        }
        let r = obj(this).provider.open_adapter(id);
        match r {
            // SAFETY: `pp` checked by `check_create`.
            Ok(a) => unsafe {
                put(pp, super::adapter::new(a));
                Status::SUCCESS.0
            },
            Err(_) => status_of(&r),
        }
    })
}

/// `DllGetClassObject(clsid, IID_IND2Provider, pp)`: the provider `ND_PROVIDER` selects (the
/// default when unset), whatever `clsid` says (the built-in providers have no registered
/// class IDs); with `IID_INDProvider`, the same provider's ND v1 face. Other IIDs:
/// `E_NOINTERFACE`.
#[no_mangle]
pub unsafe extern "C" fn DllGetClassObject(
    clsid: *const GUID,
    iid: *const GUID,
    pp: *mut *mut c_void,
) -> HRESULT {
    let _ = clsid;
    hresult(|| {
        // SAFETY: the caller's IID (null is handled by `check_create` below).
        if unsafe { is_one_of(iid, &[&IID_INDProvider]) } && !pp.is_null() {
            // An ND v1 consumer: the same provider, v1's interface.
            return match nd::Provider::from_env() {
                // SAFETY: `pp` checked non-null.
                Ok(provider) => unsafe {
                    put(
                        pp,
                        Com::into_raw(super::v1::adapter::V1ProviderObj {
                            provider: nd::v1::Provider::from_v2(provider),
                        }),
                    );
                    Status::SUCCESS.0
                },
                Err(e) => e.status().0,
            };
        }
        // SAFETY: the caller's IID and out-pointer.
        if let Err(hr) = unsafe { super::check_create::<ProviderObj>(iid, pp, 3) } {
            return hr;
        }
        match nd::Provider::from_env() {
            // SAFETY: `pp` checked by `check_create`.
            Ok(provider) => unsafe {
                put(pp, Com::into_raw(ProviderObj { provider }));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

/// `DllCanUnloadNow`: `S_FALSE`, always (the providers are built in).
#[no_mangle]
pub extern "C" fn DllCanUnloadNow() -> HRESULT {
    1
}

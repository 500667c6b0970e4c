//! The `ndsupport.h` helpers (docs/ND-RULES.md §3), under their own names.
//!
//! Provider discovery is the `netdirect` crate's: the built-in `tcp` and `shm`, selected and
//! ordered by `ND_PROVIDER`. Each serves ND v1 (`netdirect::v1`) as well as v2, on the same
//! addresses: `NdOpenV1Adapter` (and `NdOpenAdapter` with `IID_INDAdapter`) opens a v1
//! adapter wherever a v2 one would open.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::Mutex;

use nd::Status;

use crate::abi::{GUID, HRESULT, SOCKET_ADDRESS_LIST};
use crate::boundary::hresult;
use crate::com::put;
use crate::iid::{IID_IND2Adapter, IID_INDAdapter, IID_IUnknown};
use crate::objects::adapter;
use crate::sockaddr::{self, AF_INET, AF_INET6, V4_LEN, V6_LEN};

/// `ND_QUERY_EXCLUDE_NDv1_ADDRESSES`.
const EXCLUDE_V1: u32 = 0x2;
/// `ND_QUERY_EXCLUDE_NDv2_ADDRESSES`.
const EXCLUDE_V2: u32 = 0x4;

/// `NdStartup`'s reference count.
static STARTED: Mutex<u32> = Mutex::new(0);

fn started() -> bool {
    *STARTED.lock().unwrap_or_else(|e| e.into_inner()) > 0
}

/// `NdStartup`: reference-counted; always succeeds.
#[no_mangle]
pub extern "C" fn NdStartup() -> HRESULT {
    hresult(|| {
        *STARTED.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Status::SUCCESS.0
    })
}

/// `NdCleanup`: `ND_DEVICE_NOT_READY` without a matching `NdStartup`.
#[no_mangle]
pub extern "C" fn NdCleanup() -> HRESULT {
    hresult(|| {
        let mut n = STARTED.lock().unwrap_or_else(|e| e.into_inner());
        if *n == 0 {
            return Status::DEVICE_NOT_READY.0;
        }
        *n -= 1;
        Status::SUCCESS.0
    })
}

/// `NdFlushProviders`: nothing to unload (the providers are built in).
#[no_mangle]
pub extern "C" fn NdFlushProviders() {}

/// `NdQueryAddressList`: every address a provider serves. The built-in providers serve v1
/// and v2 on the same addresses, so each is listed once unless both
/// `ND_QUERY_EXCLUDE_NDv1_ADDRESSES` and `ND_QUERY_EXCLUDE_NDv2_ADDRESSES` are given (then
/// none is). With no address, `*pcb = 0`
/// and `ND_SUCCESS`; a short or null buffer, `ND_BUFFER_OVERFLOW` with the size; on success
/// `*pcb` is left as it was, as Microsoft's helper library does (docs/ND-RULES.md D22).
#[no_mangle]
pub unsafe extern "C" fn NdQueryAddressList(
    flags: u32,
    list: *mut SOCKET_ADDRESS_LIST,
    pcb: *mut usize,
) -> HRESULT {
    hresult(|| {
        if !started() {
            return Status::DEVICE_NOT_READY.0;
        }
        if pcb.is_null() {
            return Status::invalid_parameter(3).0;
        }
        let addrs = if flags & EXCLUDE_V1 != 0 && flags & EXCLUDE_V2 != 0 {
            Vec::new()
        } else {
            match nd::support::query_address_list() {
                Ok(a) => a,
                Err(e) => return e.status().0,
            }
        };
        // SAFETY: `pcb` checked; `list` has `*pcb` bytes when non-null (caller).
        unsafe {
            if addrs.is_empty() {
                *pcb = 0;
                return Status::SUCCESS.0;
            }
            let need = adapter::address_list_size(&addrs);
            if list.is_null() || *pcb < need {
                *pcb = need;
                return Status::BUFFER_OVERFLOW.0;
            }
            adapter::fill_address_list(&addrs, list);
        }
        Status::SUCCESS.0
    })
}

/// The address validation `NdCheckAddress` and `NdOpenAdapter` do: null →
/// `ND_INVALID_PARAMETER_{n}`, shorter than a `sockaddr` or than its family's →
/// `ND_INVALID_PARAMETER_{n+1}`, another family → `ND_INVALID_ADDRESS`.
unsafe fn checked(addr: *const u8, len: usize, n: u32) -> Result<SocketAddr, HRESULT> {
    if !addr.is_null() && len < V4_LEN {
        return Err(Status::invalid_parameter(n + 1).0);
    }
    // SAFETY: the caller's `len` bytes.
    unsafe { sockaddr::read(addr, len) }.map_err(|b| b.status(n).0)
}

/// `NdResolveAddress`: the local address (port 0) the system would use to reach `remote`,
/// if a provider serves it. Routing errors: `ND_NETWORK_UNREACHABLE`, `ND_INVALID_ADDRESS`;
/// a short `local` buffer: `ND_BUFFER_OVERFLOW` with the size needed in `*pcb_local`.
#[no_mangle]
pub unsafe extern "C" fn NdResolveAddress(
    remote: *const u8,
    cb_remote: usize,
    local: *mut u8,
    pcb_local: *mut usize,
) -> HRESULT {
    hresult(|| {
        if !started() {
            return Status::DEVICE_NOT_READY.0;
        }
        // SAFETY: the caller's sockaddr.
        let remote = match unsafe { checked(remote, cb_remote, 1) } {
            Ok(a) => a,
            Err(hr) => return hr,
        };
        if pcb_local.is_null() {
            return Status::invalid_parameter(4).0;
        }
        let found = match nd::support::resolve_address(remote) {
            Ok(a) => a,
            Err(e) => return e.status().0,
        };
        let (bytes, len) = sockaddr::encode(&found);
        // SAFETY: `pcb_local` checked; `local` has `*pcb_local` bytes when non-null.
        unsafe {
            if local.is_null() || *pcb_local < len {
                *pcb_local = len;
                return Status::BUFFER_OVERFLOW.0;
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), local, len);
            *pcb_local = len;
        }
        Status::SUCCESS.0
    })
}

/// `NdCheckAddress`: `ND_SUCCESS` if a provider serves the address's IP.
#[no_mangle]
pub unsafe extern "C" fn NdCheckAddress(addr: *const u8, len: usize) -> HRESULT {
    hresult(|| {
        if !started() {
            return Status::DEVICE_NOT_READY.0;
        }
        // SAFETY: the caller's sockaddr.
        match unsafe { checked(addr, len, 1) } {
            Ok(a) => crate::boundary::status_of(&nd::support::check_address(a)),
            Err(hr) => hr,
        }
    })
}

/// `NdOpenAdapter(iid, addr, len, pp)`: the first provider that serves the address opens its
/// adapter. `IID_INDAdapter` asks for a v1 adapter (as `NdOpenV1Adapter`).
#[no_mangle]
pub unsafe extern "C" fn NdOpenAdapter(
    iid: *const GUID,
    addr: *const u8,
    len: usize,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        if !started() {
            return Status::DEVICE_NOT_READY.0;
        }
        if iid.is_null() {
            return Status::invalid_parameter(1).0;
        }
        if pp.is_null() {
            return Status::invalid_parameter(4).0;
        }
        // SAFETY: `pp` checked.
        unsafe { put(pp, std::ptr::null_mut()) };
        // SAFETY: the caller's sockaddr.
        let a = match unsafe { checked(addr, len, 2) } {
            Ok(a) => a,
            Err(hr) => return hr,
        };
        // SAFETY: `iid` checked non-null; 16 readable bytes (caller).
        if unsafe { crate::iid::is_one_of(iid, &[&IID_INDAdapter]) } {
            // SAFETY: `pp` checked.
            return unsafe { open_v1(a, pp) };
        }
        // SAFETY: as above.
        if !unsafe { crate::iid::is_one_of(iid, &[&IID_IND2Adapter, &IID_IUnknown]) } {
            return crate::abi::E_NOINTERFACE;
        }
        match nd::support::open_adapter(a) {
            // SAFETY: `pp` checked.
            Ok(ad) => unsafe {
                put(pp, adapter::new(ad));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

/// The v1 adapter of the first provider (in `ND_PROVIDER`'s order) that serves `a`, into
/// `*pp`; `ND_INVALID_ADDRESS` when none does.
///
/// # Safety
/// `pp` is writable.
unsafe fn open_v1(a: SocketAddr, pp: *mut *mut c_void) -> HRESULT {
    let providers = match nd::Provider::catalog() {
        Ok(p) => p,
        Err(e) => return e.status().0,
    };
    let mut last = Status::INVALID_ADDRESS;
    for p in providers {
        match crate::objects::v1::adapter::open(&nd::v1::Provider::from_v2(p), a) {
            Ok(ad) => {
                // SAFETY: the caller's contract.
                unsafe { put(pp, ad) };
                return Status::SUCCESS.0;
            }
            Err(e) => last = e.status(),
        }
    }
    last.0
}

/// `NdOpenV1Adapter`: `NdOpenAdapter(IID_INDAdapter, ...)`.
#[no_mangle]
pub unsafe extern "C" fn NdOpenV1Adapter(
    addr: *const u8,
    len: usize,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(3).0;
        }
        // SAFETY: `pp` checked.
        unsafe { put(pp, std::ptr::null_mut()) };
        // SAFETY: the caller's sockaddr.
        match unsafe { checked(addr, len, 1) } {
            // SAFETY: `pp` checked.
            Ok(a) => unsafe { open_v1(a, pp) },
            Err(hr) => hr,
        }
    })
}

// The two families the validation accepts.
const _: () = assert!(AF_INET == 2 && AF_INET6 == 10 && V6_LEN == 28);

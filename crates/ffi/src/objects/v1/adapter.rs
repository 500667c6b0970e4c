//! `INDProvider` and `INDAdapter` (nd-v1 §1.4.8, §1.4.9): adapters opened by IP address, with
//! one overlapped file each (`GetFileHandle`) through which the adapter's requests and its
//! objects' complete.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::Arc;

use nd::v1::{AdapterInfo1, MrHandle, NdResult1};
use nd::{Status, ND_VERSION_1};

use super::connector::{V1ConnectorObj, V1ListenObj};
use super::cq::V1CqObj;
use super::endpoint::V1MwObj;
use super::{with_u32_len, V1Prefix};
use crate::abi::{GUID, HANDLE, HRESULT, OVERLAPPED, SOCKET_ADDRESS_LIST};
use crate::boundary::hresult;
use crate::com::{put, Com, Interface, Table, UnknownSlots};
use crate::iid::*;
use crate::request::Requests;
use crate::sockaddr;
use crate::win32::file::OvFile;
use crate::win32::handles::{self, Object};

/// An open v1 adapter.
pub struct V1AdapterObj {
    /// The Rust v1 adapter.
    pub adapter: nd::v1::Adapter,
    /// Its one overlapped file, and the handle `GetFileHandle` returns for it.
    file: Arc<OvFile>,
    handle: usize,
    requests: Requests,
}

type This = *mut Com<V1AdapterObj>;
type Ov = *mut OVERLAPPED;
type Pp = *mut *mut c_void;

/// `INDAdapter`'s vtable.
#[repr(C)]
pub struct V1AdapterSlots {
    prefix: V1Prefix<V1AdapterObj>,
    get_file_handle: unsafe extern "C" fn(This) -> HANDLE,
    query: unsafe extern "C" fn(This, u32, *mut AdapterInfo1, *mut usize) -> HRESULT,
    control: unsafe extern "C" fn(
        This,
        u32,
        *const c_void,
        usize,
        *mut c_void,
        usize,
        *mut usize,
        Ov,
    ) -> HRESULT,
    create_completion_queue: unsafe extern "C" fn(This, usize, Pp) -> HRESULT,
    register_memory: unsafe extern "C" fn(This, *const c_void, usize, Ov, *mut usize) -> HRESULT,
    deregister_memory: unsafe extern "C" fn(This, usize, Ov) -> HRESULT,
    create_memory_window: unsafe extern "C" fn(This, *mut NdResult1, Pp) -> HRESULT,
    create_connector: unsafe extern "C" fn(This, Pp) -> HRESULT,
    listen: unsafe extern "C" fn(This, usize, i32, u16, *mut u16, Pp) -> HRESULT,
}

static TABLE: Table<V1AdapterSlots> = Table::new(V1AdapterSlots {
    prefix: V1Prefix::NEW,
    get_file_handle,
    query,
    control,
    create_completion_queue,
    register_memory,
    deregister_memory,
    create_memory_window,
    create_connector,
    listen,
});

super::v1_overlapped_object!(V1AdapterObj, adapter, V1AdapterSlots, TABLE, IID_INDAdapter);

/// `adapter` as a new COM object with its overlapped file, its progress engine on unless
/// `ND_PROGRESS` says otherwise (as for v2 adapters: programs expect what hardware does).
pub fn new(adapter: nd::v1::Adapter) -> *mut c_void {
    if std::env::var_os(nd::spi::kit::progress::VAR).is_none() {
        let _ = adapter.as_v2().set_progress_mode(nd::ProgressMode::Thread);
    }
    let file = Arc::new(OvFile::new(adapter.as_v2().as_spi().clone()));
    let handle = handles::insert(Object::File(file.clone())) as usize;
    let requests = Requests::new(Some(file.clone()));
    Com::into_raw(V1AdapterObj {
        adapter,
        file,
        handle,
        requests,
    })
}

fn obj<'a>(this: This) -> &'a V1AdapterObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

impl V1AdapterObj {
    /// The request table of an object of this adapter: its requests complete through the
    /// adapter's file.
    fn child_requests(&self) -> Requests {
        Requests::new(Some(self.file.clone()))
    }
}

impl Drop for V1AdapterObj {
    fn drop(&mut self) {
        // The handle goes with the adapter (the objects' requests keep the file itself),
        // unless the application closed it already (v1 allows that: nothing breaks).
        handles::remove_file(self.handle as HANDLE, &self.file);
    }
}

unsafe extern "C" fn get_file_handle(this: This) -> HANDLE {
    crate::boundary::guard(usize::MAX as HANDLE, || obj(this).handle as HANDLE)
}

unsafe extern "C" fn query(
    this: This,
    version: u32,
    info: *mut AdapterInfo1,
    pcb: *mut usize,
) -> HRESULT {
    hresult(|| {
        if version != ND_VERSION_1 {
            return Status::NOT_SUPPORTED.0;
        }
        if pcb.is_null() {
            return Status::invalid_parameter(3).0;
        }
        let size = size_of::<AdapterInfo1>();
        // SAFETY: checked non-null; `info` has `*pcb` bytes when non-null (caller).
        unsafe {
            if info.is_null() || *pcb < size {
                *pcb = size;
                return Status::BUFFER_OVERFLOW.0;
            }
            match obj(this).adapter.query(version) {
                Ok(q) => info.write_unaligned(q),
                Err(e) => return e.status().0,
            }
            *pcb = size;
        }
        Status::SUCCESS.0
    })
}

unsafe extern "C" fn control(
    _this: This,
    _code: u32,
    _in: *const c_void,
    _in_len: usize,
    _out: *mut c_void,
    _out_len: usize,
    returned: *mut usize,
    _ov: Ov,
) -> HRESULT {
    hresult(|| {
        if !returned.is_null() {
            // SAFETY: the caller's optional SIZE_T.
            unsafe { *returned = 0 };
        }
        Status::NOT_SUPPORTED.0
    })
}

unsafe extern "C" fn create_completion_queue(this: This, n: usize, pp: Pp) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let o = obj(this);
        match o.adapter.create_completion_queue(n) {
            // SAFETY: checked non-null.
            Ok(cq) => unsafe {
                put(pp, Com::into_raw(V1CqObj::new(cq, o.child_requests())));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn register_memory(
    this: This,
    buf: *const c_void,
    len: usize,
    ov: Ov,
    ph: *mut usize,
) -> HRESULT {
    hresult(|| {
        if ov.is_null() {
            return Status::invalid_parameter(3).0;
        }
        if ph.is_null() {
            return Status::invalid_parameter(4).0;
        }
        let o = obj(this);
        // SAFETY: the caller registers memory it keeps until DeregisterMemory completes
        // (the v1 contract).
        match unsafe { o.adapter.register_memory(buf.cast(), len) } {
            Ok((h, made)) => {
                // The handle is known at once; v1 allows writing it any time before the
                // request completes.
                // SAFETY: checked non-null.
                unsafe { *ph = h.to_raw() as usize };
                // SAFETY: the caller's OVERLAPPED.
                unsafe { o.requests.submit(ov, 3, Ok(made)) }.0
            }
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn deregister_memory(this: This, h: usize, ov: Ov) -> HRESULT {
    hresult(|| {
        let Some(h) = MrHandle::from_raw(h as u64) else {
            return Status::invalid_parameter(1).0;
        };
        if ov.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let o = obj(this);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 2, o.adapter.deregister_memory(h)) }.0
    })
}

unsafe extern "C" fn create_memory_window(this: This, r: *mut NdResult1, pp: Pp) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(2).0;
        }
        // SAFETY: v1's contract for `pInvalidateResult` (INDAdapter::CreateMemoryWindow): the
        // caller's ND_RESULT (or NULL) stays valid while the window lives; the COM object
        // holds the window, so its last Release ends the writes.
        match unsafe { obj(this).adapter.create_memory_window(r) } {
            // SAFETY: checked non-null.
            Ok(mw) => unsafe {
                put(pp, Com::into_raw(V1MwObj { mw }));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn create_connector(this: This, pp: Pp) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(1).0;
        }
        let o = obj(this);
        match o.adapter.create_connector() {
            // SAFETY: checked non-null.
            Ok(c) => unsafe {
                put(
                    pp,
                    Com::into_raw(V1ConnectorObj::new(c, o.child_requests())),
                );
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn listen(
    this: This,
    backlog: usize,
    protocol: i32,
    port: u16,
    assigned: *mut u16,
    pp: Pp,
) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(5).0;
        }
        let o = obj(this);
        // SAFETY: the caller's optional USHORT.
        let assigned = unsafe { assigned.as_mut() };
        match o.adapter.listen(backlog, protocol, port, assigned) {
            // SAFETY: checked non-null.
            Ok(l) => unsafe {
                put(pp, Com::into_raw(V1ListenObj::new(l, o.child_requests())));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

// ---- INDProvider ----

/// A v1 provider.
pub struct V1ProviderObj {
    /// The Rust v1 provider.
    pub provider: nd::v1::Provider,
}

type PThis = *mut Com<V1ProviderObj>;

/// `INDProvider`'s vtable.
#[repr(C)]
pub struct V1ProviderSlots {
    unknown: UnknownSlots<V1ProviderObj>,
    query_address_list:
        unsafe extern "C" fn(PThis, *mut SOCKET_ADDRESS_LIST, *mut usize) -> HRESULT,
    open_adapter: unsafe extern "C" fn(PThis, *const u8, usize, Pp) -> HRESULT,
}

static PROVIDER_TABLE: Table<V1ProviderSlots> = Table::new(V1ProviderSlots {
    unknown: UnknownSlots::NEW,
    query_address_list: provider_query_address_list,
    open_adapter: provider_open_adapter,
});

impl Interface for V1ProviderObj {
    type Slots = V1ProviderSlots;
    fn table() -> &'static Table<V1ProviderSlots> {
        &PROVIDER_TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_INDProvider];
}

unsafe extern "C" fn provider_query_address_list(
    this: PThis,
    list: *mut SOCKET_ADDRESS_LIST,
    pcb: *mut usize,
) -> HRESULT {
    hresult(|| {
        // SAFETY: vtable dispatch.
        let p = unsafe { &Com::this(this).obj };
        // SAFETY: the caller's buffer and SIZE_T.
        unsafe {
            with_u32_len(pcb, |n| {
                crate::objects::adapter::query_list(p.provider.query_address_list(), list, n)
            })
        }
    })
}

/// Open the v1 adapter serving `addr` on `provider`.
pub fn open(provider: &nd::v1::Provider, addr: SocketAddr) -> nd::Result<*mut c_void> {
    provider.open_adapter(addr).map(new)
}

unsafe extern "C" fn provider_open_adapter(
    this: PThis,
    addr: *const u8,
    len: usize,
    pp: Pp,
) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(3).0;
        }
        // SAFETY: checked non-null.
        unsafe { put(pp, std::ptr::null_mut()) };
        // SAFETY: the caller's sockaddr.
        let a = match unsafe { sockaddr::read(addr, len) } {
            Ok(a) => a,
            Err(_) => return Status::INVALID_ADDRESS.0,
        };
        // SAFETY: vtable dispatch.
        let p = unsafe { &Com::this(this).obj };
        match open(&p.provider, a) {
            // SAFETY: checked non-null.
            Ok(ad) => unsafe {
                put(pp, ad);
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

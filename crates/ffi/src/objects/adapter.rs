//! `IND2Adapter` (IND2Adapter, Microsoft's NetworkDirect SPI reference): creates every other
//! object. Slots 3–13 in `ndspi.h` order.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::Arc;

use nd::Status;

use super::{check_create, connector, cq, listener, memory, qp, srq};
use crate::abi::{GUID, HANDLE, HRESULT, SOCKET_ADDRESS, SOCKET_ADDRESS_LIST};
use crate::boundary::hresult;
use crate::com::{put, Com, Interface, Table, UnknownSlots};
use crate::iid::*;
use crate::request::Requests;
use crate::sockaddr;
use crate::win32::file::OvFile;
use crate::win32::handles::{self, Object};

/// An open adapter.
#[derive(Debug)]
pub struct AdapterObj {
    /// The Rust adapter.
    pub adapter: nd::Adapter,
}

type This = *mut Com<AdapterObj>;

/// `IND2Adapter`'s vtable.
#[repr(C)]
pub struct AdapterSlots {
    unknown: UnknownSlots<AdapterObj>,
    create_overlapped_file: unsafe extern "C" fn(This, *mut HANDLE) -> HRESULT,
    query: unsafe extern "C" fn(This, *mut nd::AdapterInfo, *mut u32) -> HRESULT,
    query_address_list: unsafe extern "C" fn(This, *mut SOCKET_ADDRESS_LIST, *mut u32) -> HRESULT,
    create_completion_queue: unsafe extern "C" fn(
        This,
        *const GUID,
        HANDLE,
        u32,
        u16,
        usize,
        *mut *mut c_void,
    ) -> HRESULT,
    create_memory_region:
        unsafe extern "C" fn(This, *const GUID, HANDLE, *mut *mut c_void) -> HRESULT,
    create_memory_window: unsafe extern "C" fn(This, *const GUID, *mut *mut c_void) -> HRESULT,
    create_shared_receive_queue: unsafe extern "C" fn(
        This,
        *const GUID,
        HANDLE,
        u32,
        u32,
        u32,
        u16,
        usize,
        *mut *mut c_void,
    ) -> HRESULT,
    create_queue_pair: unsafe extern "C" fn(
        This,
        *const GUID,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HRESULT,
    create_queue_pair_with_srq: unsafe extern "C" fn(
        This,
        *const GUID,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        u32,
        u32,
        u32,
        *mut *mut c_void,
    ) -> HRESULT,
    create_connector: unsafe extern "C" fn(This, *const GUID, HANDLE, *mut *mut c_void) -> HRESULT,
    create_listener: unsafe extern "C" fn(This, *const GUID, HANDLE, *mut *mut c_void) -> HRESULT,
}

static TABLE: Table<AdapterSlots> = Table::new(AdapterSlots {
    unknown: UnknownSlots::NEW,
    create_overlapped_file,
    query,
    query_address_list,
    create_completion_queue,
    create_memory_region,
    create_memory_window,
    create_shared_receive_queue,
    create_queue_pair,
    create_queue_pair_with_srq,
    create_connector,
    create_listener,
});

impl Interface for AdapterObj {
    type Slots = AdapterSlots;
    fn table() -> &'static Table<AdapterSlots> {
        &TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_IND2Adapter];
}

/// `adapter` as a new COM object, in the mode `ND_PROGRESS` chose when it opened (the engine
/// on unless it says `manual`): code written for ND expects what RDMA hardware does, a
/// target's memory written and read by its peers, connections accepted and requests completed
/// while the program computes or sleeps (docs/ARCHITECTURE.md, "Who drives the I/O").
pub fn new(adapter: nd::Adapter) -> *mut c_void {
    Com::into_raw(AdapterObj { adapter })
}

fn obj<'a>(this: This) -> &'a AdapterObj {
    // SAFETY: vtable dispatch: `this` is a live adapter object.
    unsafe { &Com::this(this).obj }
}

/// The requests table of an object created with `file`: `NULL` is allowed (completions then
/// reach only the `OVERLAPPED` and its event); a handle that is not an overlapped file of this
/// adapter is `ND_INVALID_HANDLE`.
pub fn requests_for(adapter: &nd::Adapter, file: HANDLE) -> Result<Requests, HRESULT> {
    if file.is_null() {
        return Ok(Requests::new(None));
    }
    match handles::file(file) {
        Some(f) if std::ptr::addr_eq(Arc::as_ptr(&f.adapter), Arc::as_ptr(adapter.as_spi())) => {
            Ok(Requests::new(Some(f)))
        }
        _ => Err(Status::INVALID_HANDLE.0),
    }
}

unsafe extern "C" fn create_overlapped_file(this: This, ph: *mut HANDLE) -> HRESULT {
    hresult(|| {
        if ph.is_null() {
            return Status::invalid_parameter(1).0;
        }
        let f = Arc::new(OvFile::new(obj(this).adapter.as_spi().clone()));
        // SAFETY: checked non-null; the caller's HANDLE.
        unsafe { *ph = handles::insert(Object::File(f)) };
        Status::SUCCESS.0
    })
}

unsafe extern "C" fn query(this: This, info: *mut nd::AdapterInfo, pcb: *mut u32) -> HRESULT {
    hresult(|| {
        if pcb.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let size = crate::abi::ADAPTER_INFO_SIZE;
        // SAFETY: checked non-null; the caller's ULONG.
        let room = unsafe { *pcb } as usize;
        if info.is_null() || room < size {
            // SAFETY: as above. The buffer is left as it was.
            unsafe { *pcb = size as u32 };
            return Status::BUFFER_OVERFLOW.0;
        }
        let q = obj(this).adapter.query();
        // SAFETY: `info` has room for `size` bytes (the caller said `*pcb`); it is written
        // whole, so its prior contents (InfoVersion in) need not be a valid Rust value.
        unsafe {
            info.write(q);
            *pcb = size as u32;
        }
        Status::SUCCESS.0
    })
}

/// `SOCKET_ADDRESS_LIST`'s size for `addrs`: the count, the array, then the sockaddrs packed
/// after it (docs/ND-RULES.md §1.10).
pub fn address_list_size(addrs: &[SocketAddr]) -> usize {
    8 + 16 * addrs.len() + addrs.iter().map(|a| sockaddr::encode(a).1).sum::<usize>()
}

/// Fill the caller's `SOCKET_ADDRESS_LIST` with `addrs` (it has room: checked by the caller
/// against [`address_list_size`]).
///
/// # Safety
/// `list` is valid for writes of `address_list_size(addrs)` bytes, 8-aligned.
pub unsafe fn fill_address_list(addrs: &[SocketAddr], list: *mut SOCKET_ADDRESS_LIST) {
    let base = list.cast::<u8>();
    let mut at = 8 + 16 * addrs.len();
    // SAFETY: every write is inside the size the caller checked.
    unsafe {
        (*list).count = addrs.len() as i32;
        let entries = base.add(8).cast::<SOCKET_ADDRESS>();
        for (i, a) in addrs.iter().enumerate() {
            let (bytes, len) = sockaddr::encode(a);
            let dst = base.add(at);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len);
            entries.add(i).write(SOCKET_ADDRESS {
                sockaddr: dst.cast(),
                length: len as i32,
            });
            at += len;
        }
    }
}

/// `QueryAddressList` of an adapter or provider: `ND_BUFFER_OVERFLOW` with the size needed,
/// or the list and the size used.
///
/// # Safety
/// `pcb` null or a readable, writable ULONG; `list` null or writable for `*pcb` bytes.
pub unsafe fn query_list(
    addrs: nd::Result<Vec<SocketAddr>>,
    list: *mut SOCKET_ADDRESS_LIST,
    pcb: *mut u32,
) -> HRESULT {
    if pcb.is_null() {
        return Status::invalid_parameter(2).0;
    }
    let addrs = match addrs {
        Ok(a) => a,
        Err(e) => return e.status().0,
    };
    let need = address_list_size(&addrs);
    // SAFETY: the caller's ULONG, checked non-null.
    unsafe {
        if list.is_null() || (*pcb as usize) < need {
            *pcb = need as u32;
            return Status::BUFFER_OVERFLOW.0;
        }
        fill_address_list(&addrs, list);
        *pcb = need as u32;
    }
    Status::SUCCESS.0
}

unsafe extern "C" fn query_address_list(
    this: This,
    list: *mut SOCKET_ADDRESS_LIST,
    pcb: *mut u32,
) -> HRESULT {
    // SAFETY: the caller's pointers, as `query_list` requires.
    hresult(|| unsafe { query_list(obj(this).adapter.query_address_list(), list, pcb) })
}

/// The common shape of the `Create*` methods: check `iid` and `pp`, make the object, store it.
fn create<T: Interface>(
    iid: *const GUID,
    pp: *mut *mut c_void,
    pp_param: u32,
    make: impl FnOnce() -> Result<T, HRESULT>,
) -> HRESULT {
    // SAFETY: `iid` and `pp` are the caller's (null handled inside).
    if let Err(hr) = unsafe { check_create::<T>(iid, pp, pp_param) } {
        return hr;
    }
    match make() {
        // SAFETY: `pp` checked non-null by `check_create`.
        Ok(o) => unsafe {
            put(pp, Com::into_raw(o));
            Status::SUCCESS.0
        },
        Err(hr) => hr,
    }
}

fn err(e: nd::Error) -> HRESULT {
    e.status().0
}

/// [`create`] for an object whose requests complete through the overlapped file `file`
/// (`requests_for`): `make` gets the adapter and the object's request table.
fn create_in_file<T: Interface>(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    pp: *mut *mut c_void,
    pp_param: u32,
    make: impl FnOnce(&nd::Adapter, Requests) -> Result<T, HRESULT>,
) -> HRESULT {
    hresult(|| {
        create(iid, pp, pp_param, || {
            let a = &obj(this).adapter;
            make(a, requests_for(a, file)?)
        })
    })
}

unsafe extern "C" fn create_completion_queue(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    depth: u32,
    group: u16,
    affinity: usize,
    pp: *mut *mut c_void,
) -> HRESULT {
    create_in_file(this, iid, file, pp, 6, |a, requests| {
        let cq = a
            .create_completion_queue(depth, group, affinity)
            .map_err(err)?;
        Ok(cq::CqObj::new(cq, a.clone(), requests))
    })
}

unsafe extern "C" fn create_memory_region(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    pp: *mut *mut c_void,
) -> HRESULT {
    create_in_file(this, iid, file, pp, 3, |a, requests| {
        let mr = a.create_memory_region().map_err(err)?;
        Ok(memory::MrObj::new(mr, a.clone(), requests))
    })
}

unsafe extern "C" fn create_memory_window(
    this: This,
    iid: *const GUID,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        create(iid, pp, 2, || {
            let a = &obj(this).adapter;
            let mw = a.create_memory_window().map_err(err)?;
            Ok(memory::MwObj {
                mw,
                _adapter: a.clone(),
            })
        })
    })
}

unsafe extern "C" fn create_shared_receive_queue(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    depth: u32,
    max_sge: u32,
    threshold: u32,
    group: u16,
    affinity: usize,
    pp: *mut *mut c_void,
) -> HRESULT {
    create_in_file(this, iid, file, pp, 8, |a, requests| {
        let s = a
            .create_shared_receive_queue(depth, max_sge, threshold, group, affinity)
            .map_err(err)?;
        Ok(srq::SrqObj::new(s, a.clone(), requests))
    })
}

/// The completion queue passed as parameter `n`, or `ND_INVALID_PARAMETER_n`.
fn cq_arg<'a>(p: *mut c_void, n: u32) -> Result<&'a nd::CompletionQueue, HRESULT> {
    // SAFETY: the caller's IUnknown pointer, which it holds a reference on.
    match unsafe { Com::<cq::CqObj>::from_unknown(p) } {
        Some(c) => Ok(&c.obj.cq),
        None => Err(Status::invalid_parameter(n).0),
    }
}

unsafe extern "C" fn create_queue_pair(
    this: This,
    iid: *const GUID,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    context: *mut c_void,
    receive_depth: u32,
    initiator_depth: u32,
    receive_sge: u32,
    initiator_sge: u32,
    inline: u32,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        create(iid, pp, 11, || {
            let a = &obj(this).adapter;
            let rcq = cq_arg(receive_cq, 2)?;
            let icq = cq_arg(initiator_cq, 3)?;
            let q = a
                .create_queue_pair(
                    rcq,
                    icq,
                    context as u64,
                    receive_depth,
                    initiator_depth,
                    receive_sge,
                    initiator_sge,
                    inline,
                )
                .map_err(err)?;
            Ok(qp::QpObj {
                qp: q,
                _adapter: a.clone(),
            })
        })
    })
}

unsafe extern "C" fn create_queue_pair_with_srq(
    this: This,
    iid: *const GUID,
    receive_cq: *mut c_void,
    initiator_cq: *mut c_void,
    srq_p: *mut c_void,
    context: *mut c_void,
    initiator_depth: u32,
    initiator_sge: u32,
    inline: u32,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        create(iid, pp, 10, || {
            let a = &obj(this).adapter;
            let rcq = cq_arg(receive_cq, 2)?;
            let icq = cq_arg(initiator_cq, 3)?;
            // SAFETY: the caller's IUnknown pointer.
            let s = match unsafe { Com::<srq::SrqObj>::from_unknown(srq_p) } {
                Some(s) => &s.obj.srq,
                None => return Err(Status::invalid_parameter(4).0),
            };
            let q = a
                .create_queue_pair_with_srq(
                    rcq,
                    icq,
                    s,
                    context as u64,
                    initiator_depth,
                    initiator_sge,
                    inline,
                )
                .map_err(err)?;
            Ok(qp::QpObj {
                qp: q,
                _adapter: a.clone(),
            })
        })
    })
}

unsafe extern "C" fn create_connector(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    pp: *mut *mut c_void,
) -> HRESULT {
    create_in_file(this, iid, file, pp, 3, |a, requests| {
        let c = a.create_connector().map_err(err)?;
        Ok(connector::ConnectorObj::new(c, a.clone(), requests))
    })
}

unsafe extern "C" fn create_listener(
    this: This,
    iid: *const GUID,
    file: HANDLE,
    pp: *mut *mut c_void,
) -> HRESULT {
    create_in_file(this, iid, file, pp, 3, |a, requests| {
        let l = a.create_listener().map_err(err)?;
        Ok(listener::ListenerObj::new(l, a.clone(), requests))
    })
}

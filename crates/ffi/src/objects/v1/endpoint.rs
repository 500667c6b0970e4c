//! `INDEndpoint` and `INDMemoryWindow` (nd-v1 §1.4.4, §1.4.5): the posts, each with the
//! caller's `ND_RESULT` as its identity.

use std::ffi::c_void;

use nd::v1::{MrHandle, MwDescriptor, NdResult1, Sge1};
use nd::{OpFlags, Status};

use crate::abi::{GUID, HRESULT};
use crate::boundary::{guard, hresult, status_of};
use crate::com::{Com, Interface, Table, UnknownSlots};
use crate::iid::*;

/// A v1 endpoint.
pub struct V1EndpointObj {
    /// The Rust v1 endpoint.
    pub ep: nd::v1::Endpoint,
}

/// A v1 memory window (its IID is v2's too).
pub struct V1MwObj {
    /// The Rust v1 window.
    pub mw: nd::v1::MemoryWindow,
}

type This = *mut Com<V1EndpointObj>;
type R = *mut NdResult1;

/// `INDMemoryWindow`'s vtable: `IUnknown` only.
#[repr(C)]
pub struct V1MwSlots {
    unknown: UnknownSlots<V1MwObj>,
}

static MW_TABLE: Table<V1MwSlots> = Table::new(V1MwSlots {
    unknown: UnknownSlots::NEW,
});

impl Interface for V1MwObj {
    type Slots = V1MwSlots;
    fn table() -> &'static Table<V1MwSlots> {
        &MW_TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_INDMemoryWindow];
}

/// `INDEndpoint`'s vtable.
#[repr(C)]
pub struct V1EndpointSlots {
    unknown: UnknownSlots<V1EndpointObj>,
    flush: unsafe extern "C" fn(This) -> HRESULT,
    start_request_batch: unsafe extern "C" fn(This),
    submit_request_batch: unsafe extern "C" fn(This),
    send: unsafe extern "C" fn(This, R, *const Sge1, usize, u32) -> HRESULT,
    send_and_invalidate:
        unsafe extern "C" fn(This, R, *const Sge1, usize, *const MwDescriptor, u32) -> HRESULT,
    receive: unsafe extern "C" fn(This, R, *const Sge1, usize) -> HRESULT,
    bind: unsafe extern "C" fn(
        This,
        R,
        usize,
        *mut c_void,
        *const c_void,
        usize,
        u32,
        *mut MwDescriptor,
    ) -> HRESULT,
    invalidate: unsafe extern "C" fn(This, R, *mut c_void, u32) -> HRESULT,
    read:
        unsafe extern "C" fn(This, R, *const Sge1, usize, *const MwDescriptor, u64, u32) -> HRESULT,
    write:
        unsafe extern "C" fn(This, R, *const Sge1, usize, *const MwDescriptor, u64, u32) -> HRESULT,
}

static TABLE: Table<V1EndpointSlots> = Table::new(V1EndpointSlots {
    unknown: UnknownSlots::NEW,
    flush,
    start_request_batch,
    submit_request_batch,
    send,
    send_and_invalidate,
    receive,
    bind,
    invalidate,
    read,
    write,
});

impl Interface for V1EndpointObj {
    type Slots = V1EndpointSlots;
    fn table() -> &'static Table<V1EndpointSlots> {
        &TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_INDEndpoint];
}

fn obj<'a>(this: This) -> &'a V1EndpointObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

/// The v1 endpoint passed as parameter `n`, or `ND_INVALID_PARAMETER_n`.
///
/// # Safety
/// `p` is null or an interface pointer the caller holds a reference on.
pub unsafe fn ep_arg<'a>(p: *mut c_void, n: u32) -> Result<&'a nd::v1::Endpoint, HRESULT> {
    // SAFETY: the caller's contract.
    match unsafe { Com::<V1EndpointObj>::from_unknown(p) } {
        Some(e) => Ok(&e.obj.ep),
        None => Err(Status::invalid_parameter(n).0),
    }
}

/// The v1 window passed as parameter `n`, or `ND_INVALID_PARAMETER_n`.
///
/// # Safety
/// As [`ep_arg`].
unsafe fn mw_arg<'a>(p: *mut c_void, n: u32) -> Result<&'a nd::v1::MemoryWindow, HRESULT> {
    // SAFETY: the caller's contract.
    match unsafe { Com::<V1MwObj>::from_unknown(p) } {
        Some(m) => Ok(&m.obj.mw),
        None => Err(Status::invalid_parameter(n).0),
    }
}

/// The caller's SGL (`ND_SGE` is [`Sge1`]: used in place); null only with `n == 0`.
///
/// # Safety
/// `p` is null or readable for `n` elements during the call.
unsafe fn sgl<'a>(p: *const Sge1, n: usize, param: u32) -> Result<&'a [Sge1], HRESULT> {
    match (p.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(Status::invalid_parameter(param).0),
        // SAFETY: the caller's contract.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(p, n) }),
    }
}

/// The caller's descriptor (packed, read unaligned), or `ND_INVALID_PARAMETER_{param}`.
///
/// # Safety
/// `p` is null or readable for 20 bytes.
unsafe fn desc(p: *const MwDescriptor, param: u32) -> Result<MwDescriptor, HRESULT> {
    if p.is_null() {
        return Err(Status::invalid_parameter(param).0);
    }
    // SAFETY: the caller's 20 bytes.
    Ok(unsafe { p.read_unaligned() })
}

fn flags(f: u32) -> OpFlags {
    // Unknown bits are kept: the Rust posts refuse them with the right parameter number.
    OpFlags::from_bits_retain(f)
}

unsafe extern "C" fn flush(this: This) -> HRESULT {
    hresult(|| status_of(&obj(this).ep.flush()))
}

unsafe extern "C" fn start_request_batch(this: This) {
    guard((), || obj(this).ep.start_request_batch());
}

unsafe extern "C" fn submit_request_batch(this: This) {
    guard((), || obj(this).ep.submit_request_batch());
}

unsafe extern "C" fn send(this: This, r: R, p: *const Sge1, n: usize, f: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's SGL.
        let s = match unsafe { sgl(p, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's contract on the memory and the ND_RESULT (ndspi.h, v1).
        status_of(&unsafe { obj(this).ep.send(r, s, flags(f)) })
    })
}

unsafe extern "C" fn send_and_invalidate(
    this: This,
    r: R,
    p: *const Sge1,
    n: usize,
    d: *const MwDescriptor,
    f: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's SGL and descriptor.
        let (s, d) = match unsafe { sgl(p, n, 2).and_then(|s| Ok((s, desc(d, 4)?))) } {
            Ok(v) => v,
            Err(hr) => return hr,
        };
        // SAFETY: as `send`.
        status_of(&unsafe { obj(this).ep.send_and_invalidate(r, s, &d, flags(f)) })
    })
}

unsafe extern "C" fn receive(this: This, r: R, p: *const Sge1, n: usize) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's SGL.
        let s = match unsafe { sgl(p, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        // SAFETY: as `send`.
        status_of(&unsafe { obj(this).ep.receive(r, s) })
    })
}

unsafe extern "C" fn bind(
    this: This,
    r: R,
    mr: usize,
    mw: *mut c_void,
    buf: *const c_void,
    len: usize,
    f: u32,
    out: *mut MwDescriptor,
) -> HRESULT {
    hresult(|| {
        let Some(mr) = MrHandle::from_raw(mr as u64) else {
            return Status::invalid_parameter(2).0;
        };
        // SAFETY: the caller's window pointer.
        let mw = match unsafe { mw_arg(mw, 3) } {
            Ok(m) => m,
            Err(hr) => return hr,
        };
        if out.is_null() {
            return Status::invalid_parameter(7).0;
        }
        // SAFETY: the ND_RESULT per the caller's contract.
        match unsafe { obj(this).ep.bind(r, mr, mw, buf.cast(), len, flags(f)) } {
            Ok(d) => {
                // SAFETY: checked non-null; 20 writable bytes (the caller's descriptor).
                unsafe { out.write_unaligned(d) };
                Status::SUCCESS.0
            }
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn invalidate(this: This, r: R, mw: *mut c_void, f: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's window pointer.
        let mw = match unsafe { mw_arg(mw, 2) } {
            Ok(m) => m,
            Err(hr) => return hr,
        };
        // SAFETY: the ND_RESULT per the caller's contract.
        status_of(&unsafe { obj(this).ep.invalidate(r, mw, flags(f)) })
    })
}

/// `Read` (`write == false`) or `Write`.
///
/// # Safety
/// The caller's pointers, per `ndspi.h`.
unsafe fn rdma(
    this: This,
    write: bool,
    r: R,
    p: *const Sge1,
    n: usize,
    d: *const MwDescriptor,
    offset: u64,
    f: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's SGL and descriptor.
        let (s, d) = match unsafe { sgl(p, n, 2).and_then(|s| Ok((s, desc(d, 4)?))) } {
            Ok(v) => v,
            Err(hr) => return hr,
        };
        let ep = &obj(this).ep;
        // SAFETY: as `send`.
        let res = unsafe {
            if write {
                ep.write(r, s, &d, offset, flags(f))
            } else {
                ep.read(r, s, &d, offset, flags(f))
            }
        };
        status_of(&res)
    })
}

unsafe extern "C" fn read(
    this: This,
    r: R,
    p: *const Sge1,
    n: usize,
    d: *const MwDescriptor,
    offset: u64,
    f: u32,
) -> HRESULT {
    // SAFETY: forwarded.
    unsafe { rdma(this, false, r, p, n, d, offset, f) }
}

unsafe extern "C" fn write(
    this: This,
    r: R,
    p: *const Sge1,
    n: usize,
    d: *const MwDescriptor,
    offset: u64,
    f: u32,
) -> HRESULT {
    // SAFETY: forwarded.
    unsafe { rdma(this, true, r, p, n, d, offset, f) }
}

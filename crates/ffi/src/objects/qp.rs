//! `IND2QueuePair` (IND2QueuePair, Microsoft's NetworkDirect SPI reference): the data path.
//! Each post goes straight to the Rust queue pair with the caller's SGE array in place.

use std::ffi::c_void;

use nd::{OpFlags, Status};

use super::memory::{MrObj, MwObj};
use super::sges;
use crate::abi::{GUID, HRESULT};
use crate::boundary::{hresult, status_of};
use crate::com::{Com, Interface, Table, UnknownSlots};
use crate::iid::*;

/// A queue pair.
#[derive(Debug)]
pub struct QpObj {
    /// The Rust queue pair.
    pub qp: nd::QueuePair,
    /// Held so the adapter outlives its queue pairs whatever the release order.
    pub(crate) _adapter: nd::Adapter,
}

type This = *mut Com<QpObj>;
type Post = unsafe extern "C" fn(This, *mut c_void, *const nd::Sge, u32, u64, u32, u32) -> HRESULT;

/// `IND2QueuePair`'s vtable.
#[repr(C)]
pub struct QpSlots {
    unknown: UnknownSlots<QpObj>,
    flush: unsafe extern "C" fn(This) -> HRESULT,
    send: unsafe extern "C" fn(This, *mut c_void, *const nd::Sge, u32, u32) -> HRESULT,
    receive: unsafe extern "C" fn(This, *mut c_void, *const nd::Sge, u32) -> HRESULT,
    bind: unsafe extern "C" fn(
        This,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *const u8,
        usize,
        u32,
    ) -> HRESULT,
    invalidate: unsafe extern "C" fn(This, *mut c_void, *mut c_void, u32) -> HRESULT,
    read: Post,
    write: Post,
}

static TABLE: Table<QpSlots> = Table::new(QpSlots {
    unknown: UnknownSlots::NEW,
    flush,
    send,
    receive,
    bind,
    invalidate,
    read,
    write,
});

impl Interface for QpObj {
    type Slots = QpSlots;
    fn table() -> &'static Table<QpSlots> {
        &TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_IND2QueuePair];
}

fn qp<'a>(this: This) -> &'a nd::QueuePair {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj.qp }
}

/// The queue pair passed as `IUnknown*` parameter `n` (to `Connect`, `Accept`).
///
/// # Safety
/// `p` is null or an interface pointer the application holds a reference on.
pub unsafe fn qp_arg<'a>(p: *mut c_void, n: u32) -> Result<&'a QpObj, HRESULT> {
    // SAFETY: the caller's contract.
    unsafe { Com::<QpObj>::from_unknown(p) }
        .map(|c| &c.obj)
        .ok_or(Status::invalid_parameter(n).0)
}

unsafe extern "C" fn flush(this: This) -> HRESULT {
    hresult(|| status_of(&qp(this).flush()))
}

unsafe extern "C" fn send(
    this: This,
    ctx: *mut c_void,
    sge: *const nd::Sge,
    n: u32,
    flags: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's array of `n` SGEs, read during the call.
        let sge = match unsafe { sges(sge, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        // SAFETY: ND's contract, taken on by the C caller: the memory is not written until
        // the Send completes (or, INLINE, is readable during the call).
        status_of(&unsafe { qp(this).send(ctx as u64, sge, OpFlags::from_bits_retain(flags)) })
    })
}

unsafe extern "C" fn receive(this: This, ctx: *mut c_void, sge: *const nd::Sge, n: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: as in `send`.
        let sge = match unsafe { sges(sge, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        // SAFETY: ND's contract: the memory is not accessed until the Receive completes.
        status_of(&unsafe { qp(this).receive(ctx as u64, sge) })
    })
}

unsafe extern "C" fn bind(
    this: This,
    ctx: *mut c_void,
    region: *mut c_void,
    window: *mut c_void,
    buffer: *const u8,
    len: usize,
    flags: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's IUnknown pointers, which it holds references on.
        let (mr, mw) = unsafe {
            (
                Com::<MrObj>::from_unknown(region),
                Com::<MwObj>::from_unknown(window),
            )
        };
        let (Some(mr), Some(mw)) = (mr, mw) else {
            return Status::invalid_parameter(if mr.is_none() { 2 } else { 3 }).0;
        };
        status_of(&qp(this).bind(
            ctx as u64,
            &mr.obj.mr,
            &mw.obj.mw,
            buffer,
            len,
            OpFlags::from_bits_retain(flags),
        ))
    })
}

unsafe extern "C" fn invalidate(
    this: This,
    ctx: *mut c_void,
    window: *mut c_void,
    flags: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's IUnknown pointer.
        let Some(mw) = (unsafe { Com::<MwObj>::from_unknown(window) }) else {
            return Status::invalid_parameter(2).0;
        };
        status_of(&qp(this).invalidate(ctx as u64, &mw.obj.mw, OpFlags::from_bits_retain(flags)))
    })
}

/// Read or Write: the same arguments, the same checks.
#[inline]
fn one_sided(
    this: This,
    ctx: *mut c_void,
    sge: *const nd::Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
    write: bool,
) -> HRESULT {
    hresult(|| {
        // SAFETY: as in `send`.
        let sge = match unsafe { sges(sge, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        let (q, flags) = (qp(this), OpFlags::from_bits_retain(flags));
        // SAFETY: ND's contract, taken on by the C caller: a Read's sink is not accessed
        // until the Read completes, a Write's source not written until the Write completes.
        status_of(&unsafe {
            if write {
                q.write(ctx as u64, sge, addr, token, flags)
            } else {
                q.read(ctx as u64, sge, addr, token, flags)
            }
        })
    })
}

unsafe extern "C" fn read(
    this: This,
    ctx: *mut c_void,
    sge: *const nd::Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HRESULT {
    one_sided(this, ctx, sge, n, addr, token, flags, false)
}

unsafe extern "C" fn write(
    this: This,
    ctx: *mut c_void,
    sge: *const nd::Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HRESULT {
    one_sided(this, ctx, sge, n, addr, token, flags, true)
}

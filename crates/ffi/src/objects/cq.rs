//! `IND2CompletionQueue` (IND2CompletionQueue, Microsoft's NetworkDirect SPI reference).

use std::mem::MaybeUninit;

use nd::{NdResult, NotifyType, Status};

use super::OverlappedPrefix;
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{guard, hresult, status_of};
use crate::com::{Com, Table};
use crate::request::Requests;

/// A completion queue.
#[derive(Debug)]
pub struct CqObj {
    /// The Rust completion queue.
    pub cq: nd::CompletionQueue,
    /// Keeps the adapter alive while the object lives, whatever the release order.
    _adapter: nd::Adapter,
    requests: Requests,
}

impl CqObj {
    pub(crate) fn new(cq: nd::CompletionQueue, adapter: nd::Adapter, requests: Requests) -> Self {
        Self {
            cq,
            _adapter: adapter,
            requests,
        }
    }
}

type This = *mut Com<CqObj>;

/// `IND2CompletionQueue`'s vtable.
#[repr(C)]
pub struct CqSlots {
    prefix: OverlappedPrefix<CqObj>,
    get_notify_affinity: unsafe extern "C" fn(This, *mut u16, *mut usize) -> HRESULT,
    resize: unsafe extern "C" fn(This, u32) -> HRESULT,
    notify: unsafe extern "C" fn(This, u32, *mut OVERLAPPED) -> HRESULT,
    get_results: unsafe extern "C" fn(This, *mut NdResult, u32) -> u32,
}

static TABLE: Table<CqSlots> = Table::new(CqSlots {
    prefix: OverlappedPrefix::NEW,
    get_notify_affinity,
    resize,
    notify,
    get_results,
});

super::overlapped_object!(CqObj, cq, CqSlots, TABLE, IID_IND2CompletionQueue);

fn obj<'a>(this: This) -> &'a CqObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

/// `GetNotifyAffinity` of a CQ or SRQ.
///
/// # Safety
/// The two out-pointers are null (refused) or writable.
pub unsafe fn affinity_out(
    r: nd::Result<(u16, usize)>,
    group: *mut u16,
    mask: *mut usize,
) -> HRESULT {
    // A null out-pointer is ND_INVALID_PARAMETER, the status the method documents.
    if group.is_null() || mask.is_null() {
        return Status::INVALID_PARAMETER.0;
    }
    match r {
        // SAFETY: both checked non-null; the caller's.
        Ok((g, m)) => unsafe {
            *group = g;
            *mask = m;
            Status::SUCCESS.0
        },
        Err(e) => e.status().0,
    }
}

unsafe extern "C" fn get_notify_affinity(this: This, group: *mut u16, mask: *mut usize) -> HRESULT {
    // SAFETY: the caller's pointers.
    hresult(|| unsafe { affinity_out(obj(this).cq.get_notify_affinity(), group, mask) })
}

unsafe extern "C" fn resize(this: This, depth: u32) -> HRESULT {
    hresult(|| status_of(&obj(this).cq.resize(depth)))
}

unsafe extern "C" fn notify(this: This, ty: u32, ov: *mut OVERLAPPED) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        let Some(ty) = NotifyType::from_raw(ty) else {
            return Status::invalid_parameter(1).0;
        };
        // SAFETY: the caller's OVERLAPPED (null is refused).
        unsafe { o.requests.submit(ov, 2, o.cq.notify(ty)) }.0
    })
}

/// Results taken from the provider per call: the C array is filled from a buffer of this many
/// on the stack (a C array's prior contents need not be valid Rust values).
const CHUNK: usize = 16;

unsafe extern "C" fn get_results(this: This, out: *mut NdResult, n: u32) -> u32 {
    guard(0, || {
        if out.is_null() || n == 0 {
            return 0;
        }
        let cq = &obj(this).cq;
        let mut buf = [const { MaybeUninit::<NdResult>::uninit() }; CHUNK];
        let mut done = 0usize;
        let n = n as usize;
        while done < n {
            let want = (n - done).min(CHUNK);
            // Only the entries asked for are initialised: a polling loop asks for one or a
            // few, and pays for no more.
            for e in &mut buf[..want] {
                e.write(NdResult::EMPTY);
            }
            // SAFETY: the first `want` entries were just initialised.
            let slice = unsafe { &mut *(&raw mut buf[..want] as *mut [NdResult]) };
            let got = cq.get_results(slice);
            // SAFETY: the caller's array has `n` entries; `done + got <= n`.
            unsafe {
                std::ptr::copy_nonoverlapping(buf.as_ptr().cast::<NdResult>(), out.add(done), got)
            };
            done += got;
            if got < want {
                break;
            }
        }
        done as u32
    })
}

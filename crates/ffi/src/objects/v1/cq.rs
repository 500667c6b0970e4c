//! `INDCompletionQueue` (nd-v1 §1.4.3): `GetResults` hands back the callers' own
//! `ND_RESULT` pointers.

use nd::v1::NdResult1;
use nd::Status;

use super::V1Prefix;
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{guard, hresult, status_of};
use crate::com::{Com, Table};
use crate::request::Requests;

/// A v1 completion queue.
pub struct V1CqObj {
    /// The Rust v1 completion queue.
    pub cq: nd::v1::CompletionQueue,
    requests: Requests,
}

impl V1CqObj {
    pub(crate) fn new(cq: nd::v1::CompletionQueue, requests: Requests) -> Self {
        Self { cq, requests }
    }
}

type This = *mut Com<V1CqObj>;

/// `INDCompletionQueue`'s vtable.
#[repr(C)]
pub struct V1CqSlots {
    prefix: V1Prefix<V1CqObj>,
    resize: unsafe extern "C" fn(This, usize) -> HRESULT,
    notify: unsafe extern "C" fn(This, u32, *mut OVERLAPPED) -> HRESULT,
    get_results: unsafe extern "C" fn(This, *mut *mut NdResult1, usize) -> usize,
}

static TABLE: Table<V1CqSlots> = Table::new(V1CqSlots {
    prefix: V1Prefix::NEW,
    resize,
    notify,
    get_results,
});

super::v1_overlapped_object!(V1CqObj, cq, V1CqSlots, TABLE, IID_INDCompletionQueue);

fn obj<'a>(this: This) -> &'a V1CqObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

/// The v1 completion queue passed as parameter `n`, or `ND_INVALID_PARAMETER_n`.
///
/// # Safety
/// `p` is null or an interface pointer the caller holds a reference on.
pub unsafe fn cq_arg<'a>(
    p: *mut std::ffi::c_void,
    n: u32,
) -> Result<&'a nd::v1::CompletionQueue, HRESULT> {
    // SAFETY: the caller's contract.
    match unsafe { Com::<V1CqObj>::from_unknown(p) } {
        Some(c) => Ok(&c.obj.cq),
        None => Err(Status::invalid_parameter(n).0),
    }
}

unsafe extern "C" fn resize(this: This, n: usize) -> HRESULT {
    hresult(|| status_of(&obj(this).cq.resize(n)))
}

unsafe extern "C" fn notify(this: This, ty: u32, ov: *mut OVERLAPPED) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        if ov.is_null() {
            return Status::invalid_parameter(2).0;
        }
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 2, o.cq.notify(ty)) }.0
    })
}

unsafe extern "C" fn get_results(this: This, out: *mut *mut NdResult1, n: usize) -> usize {
    guard(0, || {
        if out.is_null() || n == 0 {
            return 0;
        }
        // SAFETY: the caller's array of `n` pointers; any bit pattern is a valid raw pointer,
        // and it is only written.
        let slots = unsafe { std::slice::from_raw_parts_mut(out, n) };
        obj(this).cq.get_results(slots)
    })
}

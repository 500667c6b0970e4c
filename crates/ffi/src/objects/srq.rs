//! `IND2SharedReceiveQueue` (IND2SharedReceiveQueue, Microsoft's NetworkDirect SPI
//! reference).

use std::ffi::c_void;

use super::{sges, OverlappedPrefix};
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{hresult, status_of};
use crate::com::{Com, Table};
use crate::request::Requests;

/// A shared receive queue.
#[derive(Debug)]
pub struct SrqObj {
    /// The Rust shared receive queue.
    pub srq: nd::SharedReceiveQueue,
    /// Keeps the adapter alive while the object lives, whatever the release order.
    _adapter: nd::Adapter,
    requests: Requests,
}

impl SrqObj {
    pub(crate) fn new(
        srq: nd::SharedReceiveQueue,
        adapter: nd::Adapter,
        requests: Requests,
    ) -> Self {
        Self {
            srq,
            _adapter: adapter,
            requests,
        }
    }
}

type This = *mut Com<SrqObj>;

/// `IND2SharedReceiveQueue`'s vtable.
#[repr(C)]
pub struct SrqSlots {
    prefix: OverlappedPrefix<SrqObj>,
    get_notify_affinity: unsafe extern "C" fn(This, *mut u16, *mut usize) -> HRESULT,
    modify: unsafe extern "C" fn(This, u32, u32) -> HRESULT,
    notify: unsafe extern "C" fn(This, *mut OVERLAPPED) -> HRESULT,
    receive: unsafe extern "C" fn(This, *mut c_void, *const nd::Sge, u32) -> HRESULT,
}

static TABLE: Table<SrqSlots> = Table::new(SrqSlots {
    prefix: OverlappedPrefix::NEW,
    get_notify_affinity,
    modify,
    notify,
    receive,
});

super::overlapped_object!(SrqObj, srq, SrqSlots, TABLE, IID_IND2SharedReceiveQueue);

fn obj<'a>(this: This) -> &'a SrqObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

unsafe extern "C" fn get_notify_affinity(this: This, group: *mut u16, mask: *mut usize) -> HRESULT {
    // SAFETY: the caller's pointers.
    hresult(|| unsafe { super::cq::affinity_out(obj(this).srq.get_notify_affinity(), group, mask) })
}

unsafe extern "C" fn modify(this: This, depth: u32, threshold: u32) -> HRESULT {
    hresult(|| status_of(&obj(this).srq.modify(depth, threshold)))
}

unsafe extern "C" fn notify(this: This, ov: *mut OVERLAPPED) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 1, o.srq.notify()) }.0
    })
}

unsafe extern "C" fn receive(
    this: This,
    context: *mut c_void,
    sge: *const nd::Sge,
    n: u32,
) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's array of `n` SGEs.
        let sge = match unsafe { sges(sge, n, 2) } {
            Ok(s) => s,
            Err(hr) => return hr,
        };
        // SAFETY: ND's contract, which the C caller takes on: the memory the SGEs name is not
        // accessed until the Receive completes.
        status_of(&unsafe { obj(this).srq.receive(context as u64, sge) })
    })
}

//! The MR, MW, SRQ, QP, shared endpoint, connector and listener functions of `ndkpi.h`.

use std::ffi::c_void;

use nd::ndk::{
    NdkConnector, NdkListener, NdkMr, NdkMw, NdkOpFlags, NdkQp, NdkSge, NdkSharedEndpoint, NdkSrq,
    NtStatus, ObjectType,
};
use nd::MrFlags;

use super::objects::{closure_ctx, get, Ctx, Header, Obj};
use super::{address_in, address_out, request_cb, DisconnectEventFn, RequestFn, INTERNAL, INVALID};
use crate::boundary::guard;

/// The user-space `MDL` of `ndkpi.h`: a chain of buffers.
#[repr(C)]
pub(super) struct Mdl {
    next: *mut Self,
    va: *mut u8,
    byte_count: usize,
}

unsafe fn typed<'a, T>(p: *mut Obj<T>, ty: ObjectType) -> Option<&'a T> {
    // SAFETY: forwarded contract.
    unsafe { get(p.cast(), ty) }
}

/// The SGE list of a post (`n` may be 0 with a null list).
unsafe fn sgl<'a>(p: *const NdkSge, n: u32) -> Option<&'a [NdkSge]> {
    if n == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: `n` SGEs at `p` (caller).
    Some(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// Private data of a call (`len` may be 0 with a null pointer).
unsafe fn data<'a>(p: *const u8, len: u32) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: `len` bytes at `p` (caller).
    Some(unsafe { std::slice::from_raw_parts(p, len as usize) })
}

fn disconnect_cb(
    f: Option<DisconnectEventFn>,
    ctx: *mut c_void,
) -> Option<nd::ndk::DisconnectEvent> {
    let f = f?;
    let ctx = Ctx(ctx);
    Some(Box::new(move || {
        // SAFETY: the consumer's callback with its context.
        unsafe { f(closure_ctx(&ctx)) }
    }))
}

// ---- MR, MW ------------------------------------------------------------------------------

pub(super) unsafe extern "C" fn register_mr(
    m: *mut Obj<NdkMr>,
    mdl: *const Mdl,
    len: usize,
    flags: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(m), Some(first)) = (unsafe { typed(m, ObjectType::Mr) }, unsafe { mdl.as_ref() })
        else {
            return INVALID;
        };
        // The chain must be virtually contiguous and cover `len` bytes.
        let mut covered = first.byte_count;
        let mut next = first.next;
        // SAFETY: each link is null or a valid MDL (caller).
        while let Some(l) = unsafe { next.as_ref() } {
            if l.va as usize != first.va as usize + covered {
                return INVALID;
            }
            covered += l.byte_count;
            next = l.next;
        }
        if len > covered {
            return INVALID;
        }
        // SAFETY: the consumer keeps the memory registered until deregistration completes,
        // as NDK requires of an MDL's pages.
        unsafe {
            m.register_mr(
                first.va,
                len,
                MrFlags::from_bits_retain(flags),
                request_cb(rc, rctx),
            )
        }
        .0
    })
}

pub(super) unsafe extern "C" fn deregister_mr(
    m: *mut Obj<NdkMr>,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || match unsafe { typed(m, ObjectType::Mr) } {
        Some(m) => m.deregister_mr(request_cb(rc, rctx)).0,
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn initialize_fast_register_mr(
    _m: *mut Obj<NdkMr>,
    _pages: u32,
    _remote: u8,
    _rc: Option<RequestFn>,
    _rctx: *mut c_void,
) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

pub(super) unsafe extern "C" fn mr_remote_token(m: *mut Obj<NdkMr>) -> u32 {
    guard(0, || {
        unsafe { typed(m, ObjectType::Mr) }.map_or(0, NdkMr::get_remote_token)
    })
}

pub(super) unsafe extern "C" fn mr_local_token(m: *mut Obj<NdkMr>) -> u32 {
    guard(0, || {
        unsafe { typed(m, ObjectType::Mr) }.map_or(0, NdkMr::get_local_token)
    })
}

pub(super) unsafe extern "C" fn mw_remote_token(m: *mut Obj<NdkMw>) -> u32 {
    guard(0, || {
        unsafe { typed(m, ObjectType::Mw) }.map_or(0, NdkMw::get_remote_token)
    })
}

// ---- SRQ -----------------------------------------------------------------------------------

pub(super) unsafe extern "C" fn modify_srq(
    s: *mut Obj<NdkSrq>,
    depth: u32,
    threshold: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || match unsafe { typed(s, ObjectType::Srq) } {
        Some(s) => s.modify_srq(depth, threshold, request_cb(rc, rctx)).0,
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn srq_receive(
    s: *mut Obj<NdkSrq>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(s), Some(l)) = (unsafe { typed(s, ObjectType::Srq) }, unsafe { sgl(l, n) })
        else {
            return INVALID;
        };
        // SAFETY: the consumer leaves the memory alone until the receive completes (NDK).
        unsafe { s.srq_receive(ctx as u64, l) }.0
    })
}

// ---- QP --------------------------------------------------------------------------------------

unsafe fn qp<'a>(q: *mut Obj<NdkQp>) -> Option<&'a NdkQp> {
    // SAFETY: forwarded contract.
    unsafe { typed(q, ObjectType::Qp) }
}

pub(super) unsafe extern "C" fn flush(q: *mut Obj<NdkQp>) {
    guard((), || {
        // SAFETY: the caller's pointer.
        if let Some(q) = unsafe { qp(q) } {
            q.flush();
        }
    });
}

pub(super) unsafe extern "C" fn send(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
    flags: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(q), Some(l)) = (unsafe { qp(q) }, unsafe { sgl(l, n) }) else {
            return INVALID;
        };
        // SAFETY: NDK's post contract: the memory stays put until the completion.
        unsafe { q.send(ctx as u64, l, NdkOpFlags(flags)) }.0
    })
}

pub(super) unsafe extern "C" fn send_and_invalidate(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
    flags: u32,
    token: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(q), Some(l)) = (unsafe { qp(q) }, unsafe { sgl(l, n) }) else {
            return INVALID;
        };
        // SAFETY: as for `send`.
        unsafe { q.send_and_invalidate(ctx as u64, l, NdkOpFlags(flags), token) }.0
    })
}

pub(super) unsafe extern "C" fn receive(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(q), Some(l)) = (unsafe { qp(q) }, unsafe { sgl(l, n) }) else {
            return INVALID;
        };
        // SAFETY: as for `send`.
        unsafe { q.receive(ctx as u64, l) }.0
    })
}

pub(super) unsafe extern "C" fn bind(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    mr: *mut Obj<NdkMr>,
    mw: *mut Obj<NdkMw>,
    va: *const u8,
    len: usize,
    flags: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(q), Some(r), Some(w)) = (
            unsafe { qp(q) },
            unsafe { typed(mr, ObjectType::Mr) },
            unsafe { typed(mw, ObjectType::Mw) },
        ) else {
            return INVALID;
        };
        q.bind(ctx as u64, r, w, va, len, NdkOpFlags(flags)).0
    })
}

pub(super) unsafe extern "C" fn fast_register(
    _q: *mut Obj<NdkQp>,
    _ctx: *mut c_void,
    _mr: *mut c_void,
    _pages: u32,
    _array: *const u64,
    _fbo: u32,
    _len: usize,
    _base: *mut c_void,
    _flags: u32,
) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

pub(super) unsafe extern "C" fn invalidate(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    target: *mut Header,
    flags: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let Some(q) = (unsafe { qp(q) }) else {
            return INVALID;
        };
        // SAFETY: as above.
        if let Some(w) = unsafe { get::<NdkMw>(target, ObjectType::Mw) } {
            return q.invalidate(ctx as u64, w, NdkOpFlags(flags)).0;
        }
        // A fast-registered MR is the only other target, and there are none.
        INVALID
    })
}

pub(super) unsafe extern "C" fn read(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> i32 {
    // SAFETY: the caller's pointers; the list's memory as for `send`.
    unsafe {
        one_sided(q, l, n, |q, l| {
            q.read(ctx as u64, l, addr, token, NdkOpFlags(flags))
        })
    }
}

pub(super) unsafe extern "C" fn write(
    q: *mut Obj<NdkQp>,
    ctx: *mut c_void,
    l: *const NdkSge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> i32 {
    // SAFETY: the caller's pointers; the list's memory as for `send`.
    unsafe {
        one_sided(q, l, n, |q, l| {
            q.write(ctx as u64, l, addr, token, NdkOpFlags(flags))
        })
    }
}

/// Read's and Write's shared frame: the queue pair and the SGE list checked, then `post`.
///
/// # Safety
/// `q` and `l`/`n` as the NDK caller passes them; `post` is called with them checked and is
/// given the caller's contract for the memory the list names (as `send`).
unsafe fn one_sided(
    q: *mut Obj<NdkQp>,
    l: *const NdkSge,
    n: u32,
    post: impl FnOnce(&NdkQp, &[NdkSge]) -> NtStatus,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(q), Some(l)) = (unsafe { qp(q) }, unsafe { sgl(l, n) }) else {
            return INVALID;
        };
        post(q, l).0
    })
}

// ---- shared endpoint, connector, listener ---------------------------------------------------

pub(super) unsafe extern "C" fn endpoint_local_address(
    e: *mut Obj<NdkSharedEndpoint>,
    out: *mut u8,
    len: *mut u32,
) -> i32 {
    guard(INTERNAL, || {
        match unsafe { typed(e, ObjectType::SharedEndpoint) } {
            // SAFETY: the caller's buffers.
            Some(e) => unsafe { address_out(Ok(e.get_local_address()), out, len) },
            None => INVALID,
        }
    })
}

unsafe fn connector<'a>(c: *mut Obj<NdkConnector>) -> Option<&'a NdkConnector> {
    // SAFETY: forwarded contract.
    unsafe { typed(c, ObjectType::Connector) }
}

pub(super) unsafe extern "C" fn connect(
    c: *mut Obj<NdkConnector>,
    q: *mut Obj<NdkQp>,
    src: *const u8,
    src_len: u32,
    dst: *const u8,
    dst_len: u32,
    ird: u32,
    ord: u32,
    pdata: *const u8,
    pdata_len: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(c), Some(q), Some(d)) = (unsafe { connector(c) }, unsafe { qp(q) }, unsafe {
            data(pdata, pdata_len)
        }) else {
            return INVALID;
        };
        // SAFETY: as above.
        let (src, dst) = match unsafe { (address_in(src, src_len), address_in(dst, dst_len)) } {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return e.0,
        };
        c.connect(q, src, dst, ird, ord, d, request_cb(rc, rctx)).0
    })
}

pub(super) unsafe extern "C" fn connect_with_shared_endpoint(
    c: *mut Obj<NdkConnector>,
    q: *mut Obj<NdkQp>,
    e: *mut Obj<NdkSharedEndpoint>,
    dst: *const u8,
    dst_len: u32,
    ird: u32,
    ord: u32,
    pdata: *const u8,
    pdata_len: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(c), Some(q), Some(d)) = (unsafe { connector(c) }, unsafe { qp(q) }, unsafe {
            data(pdata, pdata_len)
        }) else {
            return INVALID;
        };
        // SAFETY: as above.
        let Some(e) = (unsafe { typed(e, ObjectType::SharedEndpoint) }) else {
            return INVALID;
        };
        // SAFETY: as above.
        let dst = match unsafe { address_in(dst, dst_len) } {
            Ok(d) => d,
            Err(s) => return s.0,
        };
        c.connect_with_shared_endpoint(q, e, dst, ird, ord, d, request_cb(rc, rctx))
            .0
    })
}

pub(super) unsafe extern "C" fn complete_connect(
    c: *mut Obj<NdkConnector>,
    dcb: Option<DisconnectEventFn>,
    dctx: *mut c_void,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || match unsafe { connector(c) } {
        Some(c) => {
            c.complete_connect(disconnect_cb(dcb, dctx), request_cb(rc, rctx))
                .0
        }
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn accept(
    c: *mut Obj<NdkConnector>,
    q: *mut Obj<NdkQp>,
    ird: u32,
    ord: u32,
    pdata: *const u8,
    pdata_len: u32,
    dcb: Option<DisconnectEventFn>,
    dctx: *mut c_void,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(c), Some(q), Some(d)) = (unsafe { connector(c) }, unsafe { qp(q) }, unsafe {
            data(pdata, pdata_len)
        }) else {
            return INVALID;
        };
        c.accept(
            q,
            ird,
            ord,
            d,
            disconnect_cb(dcb, dctx),
            request_cb(rc, rctx),
        )
        .0
    })
}

pub(super) unsafe extern "C" fn reject(
    c: *mut Obj<NdkConnector>,
    pdata: *const u8,
    len: u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(c), Some(d)) = (unsafe { connector(c) }, unsafe { data(pdata, len) }) else {
            return INVALID;
        };
        c.reject(d).0
    })
}

pub(super) unsafe extern "C" fn get_connection_data(
    c: *mut Obj<NdkConnector>,
    ird: *mut u32,
    ord: *mut u32,
    pdata: *mut u8,
    len: *mut u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(c), Some(len)) = (unsafe { connector(c) }, unsafe { len.as_mut() }) else {
            return INVALID;
        };
        let buf = if pdata.is_null() {
            None
        } else {
            // SAFETY: `*len` bytes at `pdata` (caller).
            Some(unsafe { std::slice::from_raw_parts_mut(pdata, *len as usize) })
        };
        // SAFETY: null or valid (caller).
        c.get_connection_data(unsafe { ird.as_mut() }, unsafe { ord.as_mut() }, buf, len)
            .0
    })
}

pub(super) unsafe extern "C" fn connector_local_address(
    c: *mut Obj<NdkConnector>,
    out: *mut u8,
    len: *mut u32,
) -> i32 {
    guard(INTERNAL, || match unsafe { connector(c) } {
        // SAFETY: the caller's buffers.
        Some(c) => unsafe { address_out(c.get_local_address(), out, len) },
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn connector_peer_address(
    c: *mut Obj<NdkConnector>,
    out: *mut u8,
    len: *mut u32,
) -> i32 {
    guard(INTERNAL, || match unsafe { connector(c) } {
        // SAFETY: the caller's buffers.
        Some(c) => unsafe { address_out(c.get_peer_address(), out, len) },
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn disconnect(
    c: *mut Obj<NdkConnector>,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || match unsafe { connector(c) } {
        Some(c) => c.disconnect(request_cb(rc, rctx)).0,
        None => INVALID,
    })
}

unsafe fn listener<'a>(l: *mut Obj<NdkListener>) -> Option<&'a NdkListener> {
    // SAFETY: forwarded contract.
    unsafe { typed(l, ObjectType::Listener) }
}

pub(super) unsafe extern "C" fn listen(
    l: *mut Obj<NdkListener>,
    address: *const u8,
    len: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let Some(l) = (unsafe { listener(l) }) else {
            return INVALID;
        };
        // SAFETY: as above.
        match unsafe { address_in(address, len) } {
            Ok(a) => l.listen(a, request_cb(rc, rctx)).0,
            Err(s) => s.0,
        }
    })
}

pub(super) unsafe extern "C" fn listener_local_address(
    l: *mut Obj<NdkListener>,
    out: *mut u8,
    len: *mut u32,
) -> i32 {
    guard(INTERNAL, || match unsafe { listener(l) } {
        // SAFETY: the caller's buffers.
        Some(l) => unsafe { address_out(l.get_local_address(), out, len) },
        None => INVALID,
    })
}

pub(super) unsafe extern "C" fn control_connect_events(l: *mut Obj<NdkListener>, pause: u8) {
    guard((), || {
        // SAFETY: the caller's pointer.
        if let Some(l) = unsafe { listener(l) } {
            l.control_connect_events(pause != 0);
        }
    });
}

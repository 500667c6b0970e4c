//! `include/ndkpi.h`: NDK's C objects and dispatch tables over `netdirect::ndk`.
//!
//! Each object is an [`Obj`]: the `NDK_OBJECT_HEADER`, the dispatch pointer, then the Rust
//! object. The consumer's pointer is the object's address, so the provider finds its state
//! from the pointer alone (the header's type is checked first) and never reads `Dispatch`
//! back, which NDK lets the consumer overwrite. Creates complete inline (the create
//! callback is never called); a close frees the object when it completes (inline, or after
//! its close callback has returned). C callbacks and their contexts become the Rust
//! closures `netdirect::ndk` takes, so they run where its callbacks run: on the adapter's
//! callback thread.

mod conn;
mod objects;

use std::ffi::c_void;
use std::net::SocketAddr;

use nd::ndk::{
    self, CompletionMode, NdkAdapter, NdkAdapterInfo, NdkConnector, NdkCq, NdkListener, NdkMr,
    NdkMw, NdkPd, NdkQp, NdkResult, NdkResultEx, NdkSharedEndpoint, NdkSrq, NdkVersion, NtStatus,
    ObjectType, OpenParams,
};

use crate::boundary::guard;
use crate::sockaddr;

use objects::{closure_ctx, free_after_close, get, new_obj, Ctx};
pub use objects::{Header, Obj};

/// `NDK_FN_REQUEST_COMPLETION`.
pub type RequestFn = unsafe extern "C" fn(*mut c_void, i32);
/// `NDK_FN_CREATE_COMPLETION` (never called: creates complete inline).
pub type CreateFn = unsafe extern "C" fn(*mut c_void, i32, *mut Header);
/// `NDK_FN_CLOSE_COMPLETION`.
pub type CloseFn = unsafe extern "C" fn(*mut c_void);
/// `NDK_FN_CONNECT_EVENT_CALLBACK`.
pub type ConnectEventFn = unsafe extern "C" fn(*mut c_void, *mut Obj<NdkConnector>);
/// `NDK_FN_DISCONNECT_EVENT_CALLBACK`.
pub type DisconnectEventFn = unsafe extern "C" fn(*mut c_void);
/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` and `NDK_FN_SRQ_NOTIFICATION_CALLBACK`.
pub type NotifyFn = unsafe extern "C" fn(*mut c_void, i32);

/// `GROUP_AFFINITY`.
#[repr(C)]
pub struct GroupAffinity {
    mask: usize,
    group: u16,
    reserved: [u16; 3],
}

const INTERNAL: i32 = NtStatus::INTERNAL_ERROR.0;
const INVALID: i32 = NtStatus::INVALID_PARAMETER.0;

/// The closure form of a C request completion.
fn request_cb(f: Option<RequestFn>, ctx: *mut c_void) -> impl FnOnce(NtStatus) + Send + 'static {
    let ctx = Ctx(ctx);
    move |s: NtStatus| {
        if let Some(f) = f {
            // SAFETY: the consumer's callback with its own context, as NDK calls it.
            unsafe { f(closure_ctx(&ctx), s.0) }
        }
    }
}

/// The closure form of a C notification callback.
fn notify_cb(f: Option<NotifyFn>, ctx: *mut c_void) -> impl Fn(NtStatus) + Send + Sync + 'static {
    let ctx = Ctx(ctx);
    move |s: NtStatus| {
        if let Some(f) = f {
            // SAFETY: as in `request_cb`.
            unsafe { f(closure_ctx(&ctx), s.0) }
        }
    }
}

/// Store a new object at `out` (`STATUS_INVALID_PARAMETER` if `out` is null).
unsafe fn hand_out<T>(out: *mut *mut Obj<T>, made: Result<*mut Obj<T>, NtStatus>) -> i32 {
    match made {
        Ok(p) => {
            // SAFETY: `out` is valid for a write (caller), checked non-null by the callers.
            unsafe { *out = p };
            NtStatus::SUCCESS.0
        }
        Err(s) => s.0,
    }
}

fn affinity(a: *const GroupAffinity) -> Option<(u16, usize)> {
    // SAFETY: null or a valid GROUP_AFFINITY (caller).
    unsafe { a.as_ref() }.map(|a| (a.group, a.mask))
}

/// Write `addr` NDK's way: `STATUS_BUFFER_TOO_SMALL` and the size needed in `*len` when the
/// buffer is absent or short.
unsafe fn address_out(addr: Result<SocketAddr, NtStatus>, out: *mut u8, len: *mut u32) -> i32 {
    if len.is_null() {
        return INVALID;
    }
    let addr = match addr {
        Ok(a) => a,
        Err(s) => return s.0,
    };
    let (bytes, n) = sockaddr::encode(&addr);
    // SAFETY: `len` is valid (caller), checked non-null above.
    let room = unsafe { *len } as usize;
    // SAFETY: as above.
    unsafe { *len = n as u32 };
    if out.is_null() || room < n {
        return NtStatus::BUFFER_TOO_SMALL.0;
    }
    // SAFETY: `out` has room for `room >= n` bytes (caller).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, n) };
    NtStatus::SUCCESS.0
}

/// A sockaddr argument; `STATUS_INVALID_ADDRESS` for a malformed one.
unsafe fn address_in(p: *const u8, len: u32) -> Result<SocketAddr, NtStatus> {
    // SAFETY: `p` is null or valid for `len` bytes (caller).
    unsafe { sockaddr::read(p, len as usize) }.map_err(|b| match b {
        sockaddr::Bad::Family => NtStatus::INVALID_ADDRESS,
        _ => NtStatus::INVALID_PARAMETER,
    })
}

/// `NdkOpenAdapter` (include/ndkpi.h).
#[no_mangle]
pub unsafe extern "C" fn NdkOpenAdapter(
    address: *const u8,
    len: u32,
    version: NdkVersion,
    out: *mut *mut Obj<NdkAdapter>,
) -> i32 {
    guard(INTERNAL, || {
        if out.is_null() {
            return INVALID;
        }
        if let Err(s) = ndk::negotiate(version) {
            return s.0;
        }
        // SAFETY: forwarded contract.
        let addr = match unsafe { address_in(address, len) } {
            Ok(a) => a,
            Err(s) => return s.0,
        };
        let v2 = match nd::support::open_adapter(addr) {
            Ok(a) => a,
            Err(e) => return NtStatus::from(e).0,
        };
        let mode: CompletionMode = OpenParams::default().completion;
        let made = NdkAdapter::from_adapter(v2, mode)
            .map(|a| new_obj(ObjectType::Adapter, &objects::ADAPTER_DISPATCH, a));
        // SAFETY: `out` checked non-null above.
        unsafe { hand_out(out, made) }
    })
}

/// `NdkCloseAdapter` (include/ndkpi.h): blocks until every callback has returned.
#[no_mangle]
pub unsafe extern "C" fn NdkCloseAdapter(adapter: *mut Obj<NdkAdapter>) {
    guard((), || {
        // SAFETY: an adapter from `NdkOpenAdapter` (type-checked), not used after this call.
        if unsafe { get::<NdkAdapter>(adapter.cast(), ObjectType::Adapter) }.is_none() {
            return;
        }
        // SAFETY: as above: the Box `NdkOpenAdapter` made.
        let obj = unsafe { Box::from_raw(adapter) };
        obj.rust.clone().close();
    });
}

unsafe extern "C" fn query_extension(
    _obj: *mut Header,
    _iid: *const c_void,
    _version: NdkVersion,
    _out: *mut c_void,
) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

unsafe extern "C" fn close_object(obj: *mut Header, cb: Option<CloseFn>, ctx: *mut c_void) -> i32 {
    guard(INTERNAL, || {
        if obj.is_null() {
            return INVALID;
        }
        // SAFETY: a live object of this library (caller); its type says which.
        let ty = unsafe { (*obj).object_type() };
        // SAFETY: each arm's type matches the header's.
        unsafe {
            match ty {
                Some(ObjectType::Cq) => free_after_close::<NdkCq>(obj, cb, ctx, |o, c| o.close(c)),
                Some(ObjectType::Pd) => free_after_close::<NdkPd>(obj, cb, ctx, |o, c| o.close(c)),
                Some(ObjectType::Mr) => free_after_close::<NdkMr>(obj, cb, ctx, |o, c| o.close(c)),
                Some(ObjectType::Mw) => free_after_close::<NdkMw>(obj, cb, ctx, |o, c| o.close(c)),
                Some(ObjectType::Srq) => {
                    free_after_close::<NdkSrq>(obj, cb, ctx, |o, c| o.close(c))
                }
                Some(ObjectType::Qp) => free_after_close::<NdkQp>(obj, cb, ctx, |o, c| o.close(c)),
                Some(ObjectType::SharedEndpoint) => {
                    free_after_close::<NdkSharedEndpoint>(obj, cb, ctx, |o, c| o.close(c))
                }
                Some(ObjectType::Connector) => {
                    free_after_close::<NdkConnector>(obj, cb, ctx, |o, c| o.close(c))
                }
                Some(ObjectType::Listener) => {
                    free_after_close::<NdkListener>(obj, cb, ctx, |o, c| o.close(c))
                }
                _ => INVALID,
            }
        }
    })
}

// ---- adapter ---------------------------------------------------------------------------

unsafe fn adapter<'a>(p: *mut Obj<NdkAdapter>) -> Option<&'a NdkAdapter> {
    // SAFETY: forwarded contract.
    unsafe { get(p.cast(), ObjectType::Adapter) }
}

/// The frame of the adapter's plain `Create*` functions: the adapter and `out` checked
/// (`STATUS_INVALID_PARAMETER`), the object `make` makes written to `*out`, its status
/// returned; a panic is `STATUS_INTERNAL_ERROR`.
///
/// # Safety
/// `a` is null or an adapter object; `out` is null or valid for a write.
unsafe fn create_on<T>(
    a: *mut Obj<NdkAdapter>,
    out: *mut *mut Obj<T>,
    make: impl FnOnce(&NdkAdapter) -> Result<*mut Obj<T>, NtStatus>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let Some(a) = (unsafe { adapter(a) }) else {
            return INVALID;
        };
        if out.is_null() {
            return INVALID;
        }
        // SAFETY: checked non-null.
        unsafe { hand_out(out, make(a)) }
    })
}

unsafe extern "C" fn query_adapter_info(
    a: *mut Obj<NdkAdapter>,
    info: *mut NdkAdapterInfo,
    size: *mut u32,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(a), Some(size)) = (unsafe { adapter(a) }, unsafe { size.as_mut() }) else {
            return INVALID;
        };
        // SAFETY: null or valid for a write of the struct (caller).
        a.query_adapter_info_sized(unsafe { info.as_mut() }, size).0
    })
}

unsafe extern "C" fn create_cq(
    a: *mut Obj<NdkAdapter>,
    depth: u32,
    notify: Option<NotifyFn>,
    notify_ctx: *mut c_void,
    aff: *const GroupAffinity,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkCq>,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        create_on(a, out, |a| {
            a.create_cq(depth, notify_cb(notify, notify_ctx), affinity(aff))
                .map(|cq| new_obj(ObjectType::Cq, &objects::CQ_DISPATCH, cq))
        })
    }
}

unsafe extern "C" fn create_pd(
    a: *mut Obj<NdkAdapter>,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkPd>,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        create_on(a, out, |a| {
            a.create_pd()
                .map(|pd| new_obj(ObjectType::Pd, &objects::PD_DISPATCH, pd))
        })
    }
}

unsafe extern "C" fn create_shared_endpoint(
    a: *mut Obj<NdkAdapter>,
    address: *const u8,
    len: u32,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkSharedEndpoint>,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        create_on(a, out, |a| {
            // `address_in` under the block above: the address is the caller's (forwarded).
            address_in(address, len)
                .and_then(|addr| a.create_shared_endpoint(addr))
                .map(|e| {
                    new_obj(
                        ObjectType::SharedEndpoint,
                        &objects::SHARED_ENDPOINT_DISPATCH,
                        e,
                    )
                })
        })
    }
}

unsafe extern "C" fn create_connector(
    a: *mut Obj<NdkAdapter>,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkConnector>,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        create_on(a, out, |a| {
            a.create_connector()
                .map(|c| new_obj(ObjectType::Connector, &objects::CONNECTOR_DISPATCH, c))
        })
    }
}

unsafe extern "C" fn create_listener(
    a: *mut Obj<NdkAdapter>,
    event: Option<ConnectEventFn>,
    event_ctx: *mut c_void,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkListener>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let Some(a) = (unsafe { adapter(a) }) else {
            return INVALID;
        };
        let (Some(event), false) = (event, out.is_null()) else {
            return INVALID;
        };
        let ctx = Ctx(event_ctx);
        let on_connect = move |c: NdkConnector| {
            let p = new_obj(ObjectType::Connector, &objects::CONNECTOR_DISPATCH, c);
            // SAFETY: the consumer's callback; it now owns the connector.
            unsafe { event(closure_ctx(&ctx), p) }
        };
        let made = a
            .create_listener(on_connect)
            .map(|l| new_obj(ObjectType::Listener, &objects::LISTENER_DISPATCH, l));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn build_lam(
    _a: *mut Obj<NdkAdapter>,
    _mdl: *mut c_void,
    _len: usize,
    _rc: Option<RequestFn>,
    _rctx: *mut c_void,
    _lam: *mut c_void,
    _lam_size: *mut u32,
    _fbo: *mut u32,
) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

unsafe extern "C" fn release_lam(_a: *mut Obj<NdkAdapter>, _lam: *mut c_void) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

// ---- CQ -----------------------------------------------------------------------------------

unsafe fn cq<'a>(p: *mut Obj<NdkCq>) -> Option<&'a NdkCq> {
    // SAFETY: forwarded contract.
    unsafe { get(p.cast(), ObjectType::Cq) }
}

unsafe extern "C" fn resize_cq(
    c: *mut Obj<NdkCq>,
    depth: u32,
    rc: Option<RequestFn>,
    rctx: *mut c_void,
) -> i32 {
    guard(INTERNAL, || match unsafe { cq(c) } {
        Some(c) => c.resize_cq(depth, request_cb(rc, rctx)).0,
        None => INVALID,
    })
}

unsafe extern "C" fn arm_cq(c: *mut Obj<NdkCq>, ty: u32) {
    guard((), || {
        // SAFETY: the caller's pointer.
        if let (Some(c), Some(t)) = (unsafe { cq(c) }, nd::NotifyType::from_raw(ty)) {
            c.arm_cq(t);
        }
    });
}

unsafe extern "C" fn get_cq_results(c: *mut Obj<NdkCq>, out: *mut NdkResult, n: u32) -> u32 {
    guard(0, || {
        // SAFETY: the caller's pointer.
        let Some(c) = (unsafe { cq(c) }) else {
            return 0;
        };
        if out.is_null() {
            return 0;
        }
        let mut buf = [NdkResult::EMPTY; 16];
        let mut done = 0usize;
        while done < n as usize {
            let want = (n as usize - done).min(buf.len());
            let got = c.get_cq_results(&mut buf[..want]);
            for (i, r) in buf[..got].iter().enumerate() {
                // SAFETY: `out` has room for `n` results (caller); written, never read.
                unsafe { out.add(done + i).write(*r) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        done as u32
    })
}

unsafe extern "C" fn get_cq_results_ex(c: *mut Obj<NdkCq>, out: *mut NdkResultEx, n: u32) -> u32 {
    guard(0, || {
        // SAFETY: the caller's pointer.
        let Some(c) = (unsafe { cq(c) }) else {
            return 0;
        };
        if out.is_null() {
            return 0;
        }
        let mut buf = [NdkResultEx::EMPTY; 16];
        let mut done = 0usize;
        while done < n as usize {
            let want = (n as usize - done).min(buf.len());
            let got = c.get_cq_results_ex(&mut buf[..want]);
            for (i, r) in buf[..got].iter().enumerate() {
                // SAFETY: as in `get_cq_results`.
                unsafe { out.add(done + i).write(*r) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        done as u32
    })
}

unsafe extern "C" fn control_cq_interrupt_moderation(_c: *mut Obj<NdkCq>, _i: u32, _n: u32) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

// ---- PD -----------------------------------------------------------------------------------

unsafe fn pd<'a>(p: *mut Obj<NdkPd>) -> Option<&'a NdkPd> {
    // SAFETY: forwarded contract.
    unsafe { get(p.cast(), ObjectType::Pd) }
}

unsafe extern "C" fn create_mr(
    p: *mut Obj<NdkPd>,
    fast_register: u8,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkMr>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let (Some(p), false) = (unsafe { pd(p) }, out.is_null()) else {
            return INVALID;
        };
        let made = p
            .create_mr(fast_register != 0)
            .map(|m| new_obj(ObjectType::Mr, &objects::MR_DISPATCH, m));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn create_mw(
    p: *mut Obj<NdkPd>,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkMw>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let (Some(p), false) = (unsafe { pd(p) }, out.is_null()) else {
            return INVALID;
        };
        let made = p
            .create_mw()
            .map(|m| new_obj(ObjectType::Mw, &objects::MW_DISPATCH, m));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn create_srq(
    p: *mut Obj<NdkPd>,
    depth: u32,
    max_sge: u32,
    threshold: u32,
    notify: Option<NotifyFn>,
    notify_ctx: *mut c_void,
    aff: *const GroupAffinity,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkSrq>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointer.
        let (Some(p), false) = (unsafe { pd(p) }, out.is_null()) else {
            return INVALID;
        };
        let n: Option<std::sync::Arc<dyn Fn(NtStatus) + Send + Sync>> =
            notify.map(|f| std::sync::Arc::new(notify_cb(Some(f), notify_ctx)) as _);
        let made = p
            .create_srq(depth, max_sge, threshold, n, affinity(aff))
            .map(|s| new_obj(ObjectType::Srq, &objects::SRQ_DISPATCH, s));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn create_qp(
    p: *mut Obj<NdkPd>,
    rcq: *mut Obj<NdkCq>,
    icq: *mut Obj<NdkCq>,
    qp_context: *mut c_void,
    rq_depth: u32,
    iq_depth: u32,
    rq_sge: u32,
    iq_sge: u32,
    inline: u32,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkQp>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(p), Some(r), Some(i)) =
            (unsafe { pd(p) }, unsafe { cq(rcq) }, unsafe { cq(icq) })
        else {
            return INVALID;
        };
        if out.is_null() {
            return INVALID;
        }
        let made = p
            .create_qp(
                r,
                i,
                qp_context as u64,
                rq_depth,
                iq_depth,
                rq_sge,
                iq_sge,
                inline,
            )
            .map(|q| new_obj(ObjectType::Qp, &objects::QP_DISPATCH, q));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn create_qp_with_srq(
    p: *mut Obj<NdkPd>,
    rcq: *mut Obj<NdkCq>,
    icq: *mut Obj<NdkCq>,
    srq: *mut Obj<NdkSrq>,
    qp_context: *mut c_void,
    iq_depth: u32,
    iq_sge: u32,
    inline: u32,
    _cc: Option<CreateFn>,
    _cctx: *mut c_void,
    out: *mut *mut Obj<NdkQp>,
) -> i32 {
    guard(INTERNAL, || {
        // SAFETY: the caller's pointers.
        let (Some(p), Some(r), Some(i)) =
            (unsafe { pd(p) }, unsafe { cq(rcq) }, unsafe { cq(icq) })
        else {
            return INVALID;
        };
        // SAFETY: as above.
        let Some(s) = (unsafe { get::<NdkSrq>(srq.cast(), ObjectType::Srq) }) else {
            return INVALID;
        };
        if out.is_null() {
            return INVALID;
        }
        let made = p
            .create_qp_with_srq(r, i, s, qp_context as u64, iq_depth, iq_sge, inline)
            .map(|q| new_obj(ObjectType::Qp, &objects::QP_DISPATCH, q));
        // SAFETY: checked non-null.
        unsafe { hand_out(out, made) }
    })
}

unsafe extern "C" fn get_privileged_token(_p: *mut Obj<NdkPd>, _token: *mut u32) -> i32 {
    NtStatus::NOT_SUPPORTED.0
}

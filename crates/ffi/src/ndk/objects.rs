//! NDK objects as C sees them, and the dispatch tables in `ndkpi.h`'s slot order.

use std::ffi::c_void;

use nd::ndk::{NtStatus, ObjectType, NDK_VERSION};

use super::conn;
use super::CloseFn;

/// `NDK_OBJECT_HEADER`.
#[repr(C)]
pub struct Header {
    major: u16,
    minor: u16,
    ty: u32,
    /// `NdkReserved`: the consumer's; zeroed and never touched.
    reserved: [*mut c_void; 4],
}

impl Header {
    /// The object's type, `None` for a value that names none.
    pub fn object_type(&self) -> Option<ObjectType> {
        Some(match self.ty {
            1 => ObjectType::Adapter,
            2 => ObjectType::Qp,
            3 => ObjectType::Cq,
            4 => ObjectType::Mr,
            5 => ObjectType::Mw,
            6 => ObjectType::Pd,
            7 => ObjectType::SharedEndpoint,
            8 => ObjectType::Connector,
            9 => ObjectType::Listener,
            10 => ObjectType::Srq,
            _ => return None,
        })
    }
}

/// An NDK object: the header, the dispatch pointer (the consumer's to overwrite), the Rust
/// object. C's `NDK_xxx*` is the address of this.
#[repr(C)]
pub struct Obj<T> {
    header: Header,
    dispatch: *const c_void,
    pub(crate) rust: T,
}

/// A dispatch table: the functions in slot order.
pub(super) struct Table<const N: usize>([*const (); N]);

// SAFETY: function addresses, never written.
unsafe impl<const N: usize> Sync for Table<N> {}

/// A new object of type `ty`, owned by the consumer until its close completes.
pub(super) fn new_obj<T, const N: usize>(
    ty: ObjectType,
    dispatch: &'static Table<N>,
    rust: T,
) -> *mut Obj<T> {
    Box::into_raw(Box::new(Obj {
        header: Header {
            major: NDK_VERSION.major,
            minor: NDK_VERSION.minor,
            ty: ty as u32,
            reserved: [std::ptr::null_mut(); 4],
        },
        dispatch: dispatch.0.as_ptr().cast(),
        rust,
    }))
}

/// The Rust object behind `p` if it is a live object of type `ty`.
///
/// # Safety
/// `p` is null or an object this library handed out and whose close has not completed.
pub(super) unsafe fn get<'a, T>(p: *mut Header, ty: ObjectType) -> Option<&'a T> {
    // SAFETY: null or a live object (caller).
    let h = unsafe { p.as_ref() }?;
    if h.object_type() != Some(ty) {
        return None;
    }
    // SAFETY: the header says the object is an `Obj<T>` for this `ty` (each type is made with
    // its one Rust type by `new_obj`).
    Some(unsafe { &(*p.cast::<Obj<T>>()).rust })
}

/// A consumer's context pointer, carried to a callback thread (NDK passes it back untouched).
#[derive(Clone, Copy)]
pub(super) struct Ctx(pub(super) *mut c_void);

// SAFETY: an opaque value of the consumer's, only handed back to its own callbacks.
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

/// The pointer in `c` (through a reference, so closures capture the whole `Ctx`).
pub(super) fn closure_ctx(c: &Ctx) -> *mut c_void {
    c.0
}

struct Owned<T>(*mut Obj<T>);

// SAFETY: the object is freed once, by whichever thread completes its close.
unsafe impl<T> Send for Owned<T> {}

/// Close the `T` at `obj` with `close`; free it when the close completes (inline, or after the
/// consumer's close callback returned).
///
/// # Safety
/// `obj` is a live `Obj<T>` (its header's type checked by the caller), not used afterwards.
pub(super) unsafe fn free_after_close<T: Clone + 'static>(
    obj: *mut Header,
    cb: Option<CloseFn>,
    ctx: *mut c_void,
    close: impl FnOnce(&T, Box<dyn FnOnce() + Send>) -> NtStatus,
) -> i32 {
    let o = obj.cast::<Obj<T>>();
    // A handle of our own: the object may be freed (by the completion) before `close` returns.
    // SAFETY: live (caller).
    let handle = unsafe { (*o).rust.clone() };
    let owned = Owned(o);
    let ctx = Ctx(ctx);
    let done = move || {
        let owned = owned;
        if let Some(f) = cb {
            // SAFETY: the consumer's close completion with its context.
            unsafe { f(closure_ctx(&ctx)) };
        }
        // SAFETY: made by `new_obj`; its close has completed, so nobody uses it.
        drop(unsafe { Box::from_raw(owned.0) });
    };
    let s = close(&handle, Box::new(done));
    if s == NtStatus::SUCCESS {
        // Closed inline: no callback, so free it here.
        // SAFETY: as above.
        drop(unsafe { Box::from_raw(o) });
    }
    s.0
}

macro_rules! table {
    ($name:ident, $n:literal, [$($f:expr),* $(,)?]) => {
        pub(super) static $name: Table<$n> = Table([$($f as *const ()),*]);
    };
}

use super::*;

table!(
    ADAPTER_DISPATCH,
    9,
    [
        query_extension,
        query_adapter_info,
        create_cq,
        create_pd,
        create_shared_endpoint,
        create_connector,
        create_listener,
        build_lam,
        release_lam,
    ]
);
table!(
    CQ_DISPATCH,
    7,
    [
        close_object,
        query_extension,
        resize_cq,
        arm_cq,
        get_cq_results,
        control_cq_interrupt_moderation,
        get_cq_results_ex,
    ]
);
table!(
    PD_DISPATCH,
    8,
    [
        close_object,
        query_extension,
        create_mr,
        create_mw,
        create_srq,
        create_qp,
        create_qp_with_srq,
        get_privileged_token,
    ]
);
table!(
    MR_DISPATCH,
    7,
    [
        close_object,
        query_extension,
        conn::register_mr,
        conn::deregister_mr,
        conn::initialize_fast_register_mr,
        conn::mr_remote_token,
        conn::mr_local_token,
    ]
);
table!(
    MW_DISPATCH,
    3,
    [close_object, query_extension, conn::mw_remote_token]
);
table!(
    SRQ_DISPATCH,
    4,
    [
        close_object,
        query_extension,
        conn::modify_srq,
        conn::srq_receive
    ]
);
table!(
    QP_DISPATCH,
    11,
    [
        close_object,
        query_extension,
        conn::flush,
        conn::send,
        conn::receive,
        conn::bind,
        conn::fast_register,
        conn::invalidate,
        conn::read,
        conn::write,
        conn::send_and_invalidate,
    ]
);
table!(
    SHARED_ENDPOINT_DISPATCH,
    3,
    [close_object, query_extension, conn::endpoint_local_address]
);
table!(
    CONNECTOR_DISPATCH,
    11,
    [
        close_object,
        query_extension,
        conn::connect,
        conn::connect_with_shared_endpoint,
        conn::complete_connect,
        conn::accept,
        conn::reject,
        conn::get_connection_data,
        conn::connector_local_address,
        conn::connector_peer_address,
        conn::disconnect,
    ]
);
table!(
    LISTENER_DISPATCH,
    5,
    [
        close_object,
        query_extension,
        conn::listen,
        conn::listener_local_address,
        conn::control_connect_events,
    ]
);

//! COM objects in Rust: an object is a [`Com<T>`], whose first word points at its interface's
//! vtable, followed by the COM reference count and the Rust state.
//!
//! The vtable layout is what a C++ compiler (Itanium ABI) and the C `lpVtbl` form both read:
//! the function pointers in declaration order at the vtable's address point. Two words precede
//! it, offset-to-top 0 and a null type-info, so a stray `dynamic_cast` on an interface
//! pointer fails on a null pointer instead of reading arbitrary memory ([`Table`]).
//!
//! The COM count is the application's alone (`Release` returns 0 when the application drops
//! its last reference, docs/ND-RULES.md R-CONN-4); what objects need of each other is held by
//! the Rust objects inside (a queue pair keeps its completion queues, every object its
//! adapter), so releasing in any order is safe (G10).
//!
//! An object passed back in as `IUnknown*` (a queue pair to `Connect`, a region to `Bind`) is
//! recognised by its vtable pointer: one load, exact, and nothing else of a foreign object is
//! read (G12).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{E_NOINTERFACE, E_POINTER, GUID, HRESULT, S_OK};
use crate::boundary::guard;
use crate::iid;

/// A vtable as it sits in memory: the two words the Itanium ABI puts before the address point,
/// then the slots.
#[repr(C)]
pub struct Table<V> {
    offset_to_top: isize,
    type_info: *const c_void,
    /// The slots; objects point here.
    pub slots: V,
}

// SAFETY: a table is immutable data (function pointers and a null pointer).
unsafe impl<V> Sync for Table<V> {}

impl<V> Table<V> {
    /// A table of `slots`.
    pub const fn new(slots: V) -> Self {
        Self {
            offset_to_top: 0,
            type_info: std::ptr::null(),
            slots,
        }
    }
}

/// The three `IUnknown` slots every vtable starts with.
#[repr(C)]
pub struct UnknownSlots<T: Interface> {
    /// `QueryInterface(REFIID, void**)`.
    pub query_interface:
        unsafe extern "C" fn(*mut Com<T>, *const GUID, *mut *mut c_void) -> HRESULT,
    /// `AddRef() -> ULONG`.
    pub add_ref: unsafe extern "C" fn(*mut Com<T>) -> u32,
    /// `Release() -> ULONG`.
    pub release: unsafe extern "C" fn(*mut Com<T>) -> u32,
}

impl<T: Interface> UnknownSlots<T> {
    /// The generic implementations.
    pub const NEW: Self = Self {
        query_interface: query_interface::<T>,
        add_ref: add_ref::<T>,
        release: release::<T>,
    };
}

/// One ND interface implemented in Rust.
pub trait Interface: Sized + Send + Sync + 'static {
    /// The vtable struct (slots in `ndspi.h` order).
    type Slots: 'static;
    /// The one table every object of this type points at.
    fn table() -> &'static Table<Self::Slots>;
    /// The IIDs `QueryInterface` answers with this object: `IID_IUnknown`, the interface's own
    /// and its bases'.
    const IIDS: &'static [&'static GUID];
    /// Called once when the application's last reference goes, before the object is freed:
    /// pending overlapped requests are cancelled and detached here, so no completion writes
    /// into an `OVERLAPPED` after the application may have freed it.
    fn on_final_release(&self) {}
}

/// A COM object: the vtable pointer, the reference count, the state.
#[repr(C)]
pub struct Com<T: Interface> {
    slots: *const T::Slots,
    refs: AtomicU32,
    /// The Rust state.
    pub obj: T,
}

impl<T: Interface> Com<T> {
    /// A new object with one reference, as a raw interface pointer for the application.
    pub fn into_raw(obj: T) -> *mut c_void {
        let com = Box::new(Self {
            slots: &T::table().slots,
            refs: AtomicU32::new(1),
            obj,
        });
        Box::into_raw(com).cast()
    }

    /// The object behind an interface pointer, if it is one of ours of type `T`.
    ///
    /// # Safety
    /// `p` is null or an interface pointer the application holds a reference on (its first
    /// word is readable).
    pub unsafe fn from_unknown<'a>(p: *mut c_void) -> Option<&'a Self> {
        if p.is_null() {
            return None;
        }
        // SAFETY: the first word of any COM object is its vtable pointer (caller).
        let slots = unsafe { *p.cast::<*const T::Slots>() };
        // SAFETY: the pointer is ours (same vtable), so it is a live `Com<T>` the application
        // holds a reference on for the duration of its call.
        (std::ptr::eq(slots, &T::table().slots)).then(|| unsafe { &*p.cast::<Self>() })
    }

    /// The object a method was called on.
    ///
    /// # Safety
    /// `this` is a live object of this type (the vtable dispatch guarantees the type).
    pub unsafe fn this<'a>(this: *mut Self) -> &'a Self {
        // SAFETY: the caller's contract.
        unsafe { &*this }
    }

    fn add(&self) -> u32 {
        self.refs.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Write `value` to the out-pointer `pp` (which must not be null).
///
/// # Safety
/// `pp` is valid for writing a pointer.
pub unsafe fn put(pp: *mut *mut c_void, value: *mut c_void) {
    // SAFETY: the caller's contract.
    unsafe { *pp = value };
}

unsafe extern "C" fn query_interface<T: Interface>(
    this: *mut Com<T>,
    iid: *const GUID,
    pp: *mut *mut c_void,
) -> HRESULT {
    guard(crate::boundary::PANICKED, || {
        if pp.is_null() {
            return E_POINTER;
        }
        // SAFETY: `iid` is the caller's IID pointer (null is handled).
        if unsafe { iid::is_one_of(iid, T::IIDS) } {
            // SAFETY: `this` is live (dispatch); `pp` checked above.
            unsafe {
                Com::this(this).add();
                put(pp, this.cast());
            }
            S_OK
        } else {
            // SAFETY: `pp` checked above.
            unsafe { put(pp, std::ptr::null_mut()) };
            E_NOINTERFACE
        }
    })
}

unsafe extern "C" fn add_ref<T: Interface>(this: *mut Com<T>) -> u32 {
    // SAFETY: dispatch: `this` is live.
    guard(0, || unsafe { Com::this(this) }.add())
}

unsafe extern "C" fn release<T: Interface>(this: *mut Com<T>) -> u32 {
    guard(0, || {
        // SAFETY: dispatch: `this` is live until the count reaches 0 here.
        let com = unsafe { Com::this(this) };
        let left = com.refs.fetch_sub(1, Ordering::Release) - 1;
        if left == 0 {
            std::sync::atomic::fence(Ordering::Acquire);
            com.obj.on_final_release();
            // SAFETY: the last reference: made by `Box::into_raw` in `into_raw`, freed once.
            drop(unsafe { Box::from_raw(this) });
        }
        left
    })
}

//! `IND2MemoryRegion` and `IND2MemoryWindow` (Microsoft's NetworkDirect SPI reference).

use nd::{MrFlags, Status};

use super::OverlappedPrefix;
use crate::abi::{GUID, HRESULT, OVERLAPPED};
use crate::boundary::{guard, hresult};
use crate::com::{Com, Interface, Table, UnknownSlots};
use crate::iid::*;
use crate::request::Requests;

/// A memory region.
#[derive(Debug)]
pub struct MrObj {
    /// The Rust region.
    pub mr: nd::MemoryRegion,
    /// Keeps the adapter alive while the object lives, whatever the release order.
    _adapter: nd::Adapter,
    requests: Requests,
}

impl MrObj {
    pub(crate) fn new(mr: nd::MemoryRegion, adapter: nd::Adapter, requests: Requests) -> Self {
        Self {
            mr,
            _adapter: adapter,
            requests,
        }
    }
}

type Mr = *mut Com<MrObj>;

/// `IND2MemoryRegion`'s vtable.
#[repr(C)]
pub struct MrSlots {
    prefix: OverlappedPrefix<MrObj>,
    register: unsafe extern "C" fn(Mr, *const u8, usize, u32, *mut OVERLAPPED) -> HRESULT,
    deregister: unsafe extern "C" fn(Mr, *mut OVERLAPPED) -> HRESULT,
    get_local_token: unsafe extern "C" fn(Mr) -> u32,
    get_remote_token: unsafe extern "C" fn(Mr) -> u32,
}

static MR_TABLE: Table<MrSlots> = Table::new(MrSlots {
    prefix: OverlappedPrefix::NEW,
    register,
    deregister,
    get_local_token,
    get_remote_token: mr_remote_token,
});

super::overlapped_object!(MrObj, mr, MrSlots, MR_TABLE, IID_IND2MemoryRegion);

fn mr<'a>(this: Mr) -> &'a MrObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

unsafe extern "C" fn register(
    this: Mr,
    buffer: *const u8,
    len: usize,
    flags: u32,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    hresult(|| {
        let o = mr(this);
        if ov.is_null() {
            return Status::invalid_parameter(4).0;
        }
        // SAFETY: ND's contract, which the C caller takes on: the memory stays allocated
        // until Deregister has completed, and the provider checks every access against the
        // registration. Null and zero lengths are refused inside with their statuses.
        let made = unsafe {
            o.mr.register(buffer.cast_mut(), len, MrFlags::from_bits_retain(flags))
        };
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 4, made) }.0
    })
}

unsafe extern "C" fn deregister(this: Mr, ov: *mut OVERLAPPED) -> HRESULT {
    hresult(|| {
        let o = mr(this);
        if ov.is_null() {
            return Status::invalid_parameter(1).0;
        }
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 1, o.mr.deregister()) }.0
    })
}

unsafe extern "C" fn get_local_token(this: Mr) -> u32 {
    guard(0, || mr(this).mr.get_local_token())
}

unsafe extern "C" fn mr_remote_token(this: Mr) -> u32 {
    guard(0, || mr(this).mr.get_remote_token())
}

/// A memory window.
#[derive(Debug)]
pub struct MwObj {
    /// The Rust window.
    pub mw: nd::MemoryWindow,
    pub(crate) _adapter: nd::Adapter,
}

type Mw = *mut Com<MwObj>;

/// `IND2MemoryWindow`'s vtable.
#[repr(C)]
pub struct MwSlots {
    unknown: UnknownSlots<MwObj>,
    get_remote_token: unsafe extern "C" fn(Mw) -> u32,
}

static MW_TABLE: Table<MwSlots> = Table::new(MwSlots {
    unknown: UnknownSlots::NEW,
    get_remote_token: mw_remote_token,
});

impl Interface for MwObj {
    type Slots = MwSlots;
    fn table() -> &'static Table<MwSlots> {
        &MW_TABLE
    }
    const IIDS: &'static [&'static GUID] = &[&IID_IUnknown, &IID_IND2MemoryWindow];
}

unsafe extern "C" fn mw_remote_token(this: Mw) -> u32 {
    // SAFETY: vtable dispatch.
    guard(0, || unsafe { &Com::this(this).obj }.mw.get_remote_token())
}

//! `IND2Listener` (IND2Listener, Microsoft's NetworkDirect SPI reference).

use std::ffi::c_void;

use nd::Status;

use super::connector::ConnectorObj;
use super::OverlappedPrefix;
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{hresult, status_of};
use crate::com::{Com, Table};
use crate::request::Requests;
use crate::sockaddr;

/// A listener.
#[derive(Debug)]
pub struct ListenerObj {
    /// The Rust listener.
    pub listener: nd::Listener,
    /// Keeps the adapter alive while the object lives, whatever the release order.
    _adapter: nd::Adapter,
    requests: Requests,
}

impl ListenerObj {
    pub(crate) fn new(listener: nd::Listener, adapter: nd::Adapter, requests: Requests) -> Self {
        Self {
            listener,
            _adapter: adapter,
            requests,
        }
    }
}

type This = *mut Com<ListenerObj>;

/// `IND2Listener`'s vtable.
#[repr(C)]
pub struct ListenerSlots {
    prefix: OverlappedPrefix<ListenerObj>,
    bind: unsafe extern "C" fn(This, *const u8, u32) -> HRESULT,
    listen: unsafe extern "C" fn(This, u32) -> HRESULT,
    get_local_address: unsafe extern "C" fn(This, *mut u8, *mut u32) -> HRESULT,
    get_connection_request: unsafe extern "C" fn(This, *mut c_void, *mut OVERLAPPED) -> HRESULT,
}

static TABLE: Table<ListenerSlots> = Table::new(ListenerSlots {
    prefix: OverlappedPrefix::NEW,
    bind,
    listen,
    get_local_address,
    get_connection_request,
});

super::overlapped_object!(
    ListenerObj,
    listener,
    ListenerSlots,
    TABLE,
    IID_IND2Listener
);

fn obj<'a>(this: This) -> &'a ListenerObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

unsafe extern "C" fn bind(this: This, addr: *const u8, len: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's sockaddr of `len` bytes.
        match unsafe { sockaddr::read(addr, len as usize) } {
            Ok(a) => status_of(&obj(this).listener.bind(a)),
            Err(bad) => bad.status(1).0,
        }
    })
}

unsafe extern "C" fn listen(this: This, backlog: u32) -> HRESULT {
    hresult(|| status_of(&obj(this).listener.listen(backlog)))
}

unsafe extern "C" fn get_local_address(this: This, out: *mut u8, pcb: *mut u32) -> HRESULT {
    // SAFETY: the caller's buffer and size.
    hresult(
        || unsafe { sockaddr::write_out(obj(this).listener.get_local_address(), out, pcb, 2) }.0,
    )
}

unsafe extern "C" fn get_connection_request(
    this: This,
    connector: *mut c_void,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's IUnknown pointer.
        let Some(c) = (unsafe { Com::<ConnectorObj>::from_unknown(connector) }) else {
            return Status::invalid_parameter(1).0;
        };
        if ov.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let made = o.listener.get_connection_request(&c.obj.conn);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 2, made) }.0
    })
}

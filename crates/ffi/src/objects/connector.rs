//! `IND2Connector` (IND2Connector, Microsoft's NetworkDirect SPI reference): connection
//! management on the active and the passive side.

use std::ffi::c_void;

use nd::Status;

use super::qp::qp_arg;
use super::OverlappedPrefix;
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{hresult, status_of};
use crate::com::{Com, Table};
use crate::request::Requests;
use crate::sockaddr;

/// A connector.
#[derive(Debug)]
pub struct ConnectorObj {
    /// The Rust connector.
    pub conn: nd::Connector,
    /// Keeps the adapter alive while the object lives, whatever the release order.
    _adapter: nd::Adapter,
    requests: Requests,
}

impl ConnectorObj {
    pub(crate) fn new(conn: nd::Connector, adapter: nd::Adapter, requests: Requests) -> Self {
        Self {
            conn,
            _adapter: adapter,
            requests,
        }
    }
}

type This = *mut Com<ConnectorObj>;
type Ov = *mut OVERLAPPED;

/// `IND2Connector`'s vtable.
#[repr(C)]
pub struct ConnectorSlots {
    prefix: OverlappedPrefix<ConnectorObj>,
    bind: unsafe extern "C" fn(This, *const u8, u32) -> HRESULT,
    connect: unsafe extern "C" fn(
        This,
        *mut c_void,
        *const u8,
        u32,
        u32,
        u32,
        *const u8,
        u32,
        Ov,
    ) -> HRESULT,
    complete_connect: unsafe extern "C" fn(This, Ov) -> HRESULT,
    accept: unsafe extern "C" fn(This, *mut c_void, u32, u32, *const u8, u32, Ov) -> HRESULT,
    reject: unsafe extern "C" fn(This, *const u8, u32) -> HRESULT,
    get_read_limits: unsafe extern "C" fn(This, *mut u32, *mut u32) -> HRESULT,
    get_private_data: unsafe extern "C" fn(This, *mut u8, *mut u32) -> HRESULT,
    get_local_address: unsafe extern "C" fn(This, *mut u8, *mut u32) -> HRESULT,
    get_peer_address: unsafe extern "C" fn(This, *mut u8, *mut u32) -> HRESULT,
    notify_disconnect: unsafe extern "C" fn(This, Ov) -> HRESULT,
    disconnect: unsafe extern "C" fn(This, Ov) -> HRESULT,
}

static TABLE: Table<ConnectorSlots> = Table::new(ConnectorSlots {
    prefix: OverlappedPrefix::NEW,
    bind,
    connect,
    complete_connect,
    accept,
    reject,
    get_read_limits,
    get_private_data,
    get_local_address,
    get_peer_address,
    notify_disconnect,
    disconnect,
});

super::overlapped_object!(ConnectorObj, conn, ConnectorSlots, TABLE, IID_IND2Connector);

fn obj<'a>(this: This) -> &'a ConnectorObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

/// Private data from C: null is allowed only with length 0.
///
/// # Safety
/// `p` is null or readable for `len` bytes during the call.
pub unsafe fn private_data<'a>(p: *const u8, len: u32, param: u32) -> Result<&'a [u8], HRESULT> {
    match (p.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(Status::invalid_parameter(param).0),
        // SAFETY: the caller's contract.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(p, n as usize) }),
    }
}

unsafe extern "C" fn bind(this: This, addr: *const u8, len: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's sockaddr of `len` bytes.
        match unsafe { sockaddr::read(addr, len as usize) } {
            Ok(a) => status_of(&obj(this).conn.bind(a)),
            Err(bad) => bad.status(1).0,
        }
    })
}

unsafe extern "C" fn connect(
    this: This,
    qp: *mut c_void,
    dest: *const u8,
    dest_len: u32,
    inbound: u32,
    outbound: u32,
    pd: *const u8,
    pd_len: u32,
    ov: Ov,
) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's IUnknown pointer.
        let q = match unsafe { qp_arg(qp, 1) } {
            Ok(q) => q,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's sockaddr.
        let dest = match unsafe { sockaddr::read(dest, dest_len as usize) } {
            Ok(a) => a,
            Err(bad) => return bad.status(2).0,
        };
        // SAFETY: the caller's private data.
        let pd = match unsafe { private_data(pd, pd_len, 6) } {
            Ok(p) => p,
            Err(hr) => return hr,
        };
        if ov.is_null() {
            return Status::invalid_parameter(8).0;
        }
        let made = o.conn.connect(&q.qp, dest, inbound, outbound, pd);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 8, made) }.0
    })
}

unsafe extern "C" fn complete_connect(this: This, ov: Ov) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        if ov.is_null() {
            return Status::invalid_parameter(1).0;
        }
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 1, o.conn.complete_connect()) }.0
    })
}

unsafe extern "C" fn accept(
    this: This,
    qp: *mut c_void,
    inbound: u32,
    outbound: u32,
    pd: *const u8,
    pd_len: u32,
    ov: Ov,
) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's IUnknown pointer.
        let q = match unsafe { qp_arg(qp, 1) } {
            Ok(q) => q,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's private data.
        let pd = match unsafe { private_data(pd, pd_len, 4) } {
            Ok(p) => p,
            Err(hr) => return hr,
        };
        if ov.is_null() {
            return Status::invalid_parameter(6).0;
        }
        let made = o.conn.accept(&q.qp, inbound, outbound, pd);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 6, made) }.0
    })
}

unsafe extern "C" fn reject(this: This, pd: *const u8, pd_len: u32) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's private data.
        match unsafe { private_data(pd, pd_len, 1) } {
            Ok(p) => status_of(&obj(this).conn.reject(p)),
            Err(hr) => hr,
        }
    })
}

unsafe extern "C" fn get_read_limits(this: This, inbound: *mut u32, outbound: *mut u32) -> HRESULT {
    hresult(|| match obj(this).conn.get_read_limits() {
        Ok(l) => {
            // SAFETY: both are optional out-pointers: written when non-null.
            unsafe {
                if !inbound.is_null() {
                    *inbound = l.inbound;
                }
                if !outbound.is_null() {
                    *outbound = l.outbound;
                }
            }
            Status::SUCCESS.0
        }
        Err(e) => e.status().0,
    })
}

unsafe extern "C" fn get_private_data(this: This, out: *mut u8, pcb: *mut u32) -> HRESULT {
    hresult(|| {
        if pcb.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let pd = match obj(this).conn.private_data() {
            Ok(p) => p,
            Err(e) => return e.status().0,
        };
        // SAFETY: `pcb` checked; `out` (when non-null) has `*pcb` bytes (caller).
        unsafe {
            let room = if out.is_null() { 0 } else { *pcb as usize };
            let n = room.min(pd.len());
            if n > 0 {
                std::ptr::copy_nonoverlapping(pd.as_ptr(), out, n);
            }
            *pcb = pd.len() as u32;
            if room < pd.len() {
                // The prefix that fits was copied, as the method documents.
                return Status::BUFFER_OVERFLOW.0;
            }
        }
        Status::SUCCESS.0
    })
}

unsafe extern "C" fn get_local_address(this: This, out: *mut u8, pcb: *mut u32) -> HRESULT {
    // SAFETY: the caller's buffer and size.
    hresult(|| unsafe { sockaddr::write_out(obj(this).conn.get_local_address(), out, pcb, 2) }.0)
}

unsafe extern "C" fn get_peer_address(this: This, out: *mut u8, pcb: *mut u32) -> HRESULT {
    // SAFETY: the caller's buffer and size.
    hresult(|| unsafe { sockaddr::write_out(obj(this).conn.get_peer_address(), out, pcb, 2) }.0)
}

unsafe extern "C" fn notify_disconnect(this: This, ov: Ov) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        if ov.is_null() {
            return Status::invalid_parameter(1).0;
        }
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 1, o.conn.notify_disconnect()) }.0
    })
}

unsafe extern "C" fn disconnect(this: This, ov: Ov) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        if ov.is_null() {
            return Status::invalid_parameter(1).0;
        }
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 1, o.conn.disconnect()) }.0
    })
}

//! `INDConnector` and `INDListen` (nd-v1 §1.4.6, §1.4.7): connection management; endpoints
//! come from connectors.

use std::ffi::c_void;

use nd::Status;

use super::endpoint::{ep_arg, V1EndpointObj};
use super::{bytes, with_u32_len, V1Prefix};
use crate::abi::{HRESULT, OVERLAPPED};
use crate::boundary::{hresult, status_of};
use crate::com::{put, Com, Table};
use crate::request::Requests;
use crate::sockaddr;

/// A v1 connector.
pub struct V1ConnectorObj {
    /// The Rust v1 connector.
    pub conn: nd::v1::Connector,
    requests: Requests,
}

impl V1ConnectorObj {
    pub(crate) fn new(conn: nd::v1::Connector, requests: Requests) -> Self {
        Self { conn, requests }
    }
}

/// A v1 listener.
pub struct V1ListenObj {
    /// The Rust v1 listener.
    pub listen: nd::v1::Listen,
    requests: Requests,
}

impl V1ListenObj {
    pub(crate) fn new(listen: nd::v1::Listen, requests: Requests) -> Self {
        Self { listen, requests }
    }
}

type This = *mut Com<V1ConnectorObj>;
type Ov = *mut OVERLAPPED;

/// `INDConnector`'s vtable.
#[repr(C)]
pub struct V1ConnectorSlots {
    prefix: V1Prefix<V1ConnectorObj>,
    create_endpoint: unsafe extern "C" fn(
        This,
        *mut c_void,
        *mut c_void,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        *mut usize,
        *mut *mut c_void,
    ) -> HRESULT,
    connect: unsafe extern "C" fn(
        This,
        *mut c_void,
        *const u8,
        usize,
        i32,
        u16,
        *const u8,
        usize,
        Ov,
    ) -> HRESULT,
    complete_connect: unsafe extern "C" fn(This, Ov) -> HRESULT,
    accept: unsafe extern "C" fn(This, *mut c_void, *const u8, usize, Ov) -> HRESULT,
    reject: unsafe extern "C" fn(This, *const u8, usize) -> HRESULT,
    get_connection_data:
        unsafe extern "C" fn(This, *mut usize, *mut usize, *mut u8, *mut usize) -> HRESULT,
    get_local_address: unsafe extern "C" fn(This, *mut u8, *mut usize) -> HRESULT,
    get_peer_address: unsafe extern "C" fn(This, *mut u8, *mut usize) -> HRESULT,
    notify_disconnect: unsafe extern "C" fn(This, Ov) -> HRESULT,
    disconnect: unsafe extern "C" fn(This, Ov) -> HRESULT,
}

static TABLE: Table<V1ConnectorSlots> = Table::new(V1ConnectorSlots {
    prefix: V1Prefix::NEW,
    create_endpoint,
    connect,
    complete_connect,
    accept,
    reject,
    get_connection_data,
    get_local_address,
    get_peer_address,
    notify_disconnect,
    disconnect,
});

super::v1_overlapped_object!(
    V1ConnectorObj,
    conn,
    V1ConnectorSlots,
    TABLE,
    IID_INDConnector
);

type LThis = *mut Com<V1ListenObj>;

/// `INDListen`'s vtable.
#[repr(C)]
pub struct V1ListenSlots {
    prefix: V1Prefix<V1ListenObj>,
    get_connection_request: unsafe extern "C" fn(LThis, *mut c_void, Ov) -> HRESULT,
}

static LISTEN_TABLE: Table<V1ListenSlots> = Table::new(V1ListenSlots {
    prefix: V1Prefix::NEW,
    get_connection_request,
});

super::v1_overlapped_object!(
    V1ListenObj,
    listen,
    V1ListenSlots,
    LISTEN_TABLE,
    IID_INDListen
);

fn obj<'a>(this: This) -> &'a V1ConnectorObj {
    // SAFETY: vtable dispatch.
    unsafe { &Com::this(this).obj }
}

unsafe extern "C" fn create_endpoint(
    this: This,
    in_cq: *mut c_void,
    out_cq: *mut c_void,
    n_in: usize,
    n_out: usize,
    sge_in: usize,
    sge_out: usize,
    irl: usize,
    orl: usize,
    max_inline: *mut usize,
    pp: *mut *mut c_void,
) -> HRESULT {
    hresult(|| {
        if pp.is_null() {
            return Status::invalid_parameter(10).0;
        }
        // SAFETY: checked non-null.
        unsafe { put(pp, std::ptr::null_mut()) };
        // SAFETY: the caller's interface pointers.
        let (icq, ocq) = match unsafe {
            super::cq::cq_arg(in_cq, 1).and_then(|i| Ok((i, super::cq::cq_arg(out_cq, 2)?)))
        } {
            Ok(v) => v,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's optional SIZE_T.
        let inline = unsafe { max_inline.as_mut() };
        match obj(this)
            .conn
            .create_endpoint(icq, ocq, n_in, n_out, sge_in, sge_out, irl, orl, inline)
        {
            // SAFETY: checked non-null.
            Ok(ep) => unsafe {
                put(pp, Com::into_raw(V1EndpointObj { ep }));
                Status::SUCCESS.0
            },
            Err(e) => e.status().0,
        }
    })
}

unsafe extern "C" fn connect(
    this: This,
    ep: *mut c_void,
    addr: *const u8,
    addr_len: usize,
    protocol: i32,
    local_port: u16,
    pd: *const u8,
    pd_len: usize,
    ov: Ov,
) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's interface pointer.
        let ep = match unsafe { ep_arg(ep, 1) } {
            Ok(e) => e,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's sockaddr. A bad one is ND_INVALID_ADDRESS in v1.
        let dest = match unsafe { sockaddr::read(addr, addr_len) } {
            Ok(a) => a,
            Err(_) => return Status::INVALID_ADDRESS.0,
        };
        // SAFETY: the caller's private data.
        let pd = match unsafe { bytes(pd, pd_len, 6) } {
            Ok(p) => p,
            Err(hr) => return hr,
        };
        if ov.is_null() {
            return Status::invalid_parameter(8).0;
        }
        let made = o.conn.connect(ep, dest, protocol, local_port, pd);
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
    ep: *mut c_void,
    pd: *const u8,
    pd_len: usize,
    ov: Ov,
) -> HRESULT {
    hresult(|| {
        let o = obj(this);
        // SAFETY: the caller's interface pointer.
        let ep = match unsafe { ep_arg(ep, 1) } {
            Ok(e) => e,
            Err(hr) => return hr,
        };
        // SAFETY: the caller's private data.
        let pd = match unsafe { bytes(pd, pd_len, 2) } {
            Ok(p) => p,
            Err(hr) => return hr,
        };
        if ov.is_null() {
            return Status::invalid_parameter(4).0;
        }
        let made = o.conn.accept(ep, pd);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 4, made) }.0
    })
}

unsafe extern "C" fn reject(this: This, pd: *const u8, pd_len: usize) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's private data.
        match unsafe { bytes(pd, pd_len, 1) } {
            Ok(p) => status_of(&obj(this).conn.reject(p)),
            Err(hr) => hr,
        }
    })
}

unsafe extern "C" fn get_connection_data(
    this: This,
    irl: *mut usize,
    orl: *mut usize,
    out: *mut u8,
    pcb: *mut usize,
) -> HRESULT {
    hresult(|| {
        if pcb.is_null() {
            return Status::invalid_parameter(4).0;
        }
        // SAFETY: `pcb` checked; `out`, when non-null, has `*pcb` bytes (caller).
        let room = if out.is_null() { 0 } else { unsafe { *pcb } };
        let buf: &mut [u8] = if room == 0 {
            &mut []
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts_mut(out, room) }
        };
        // SAFETY: the two optional SIZE_Ts.
        let (i, o) = unsafe { (irl.as_mut(), orl.as_mut()) };
        match obj(this).conn.get_connection_data(i, o, buf) {
            Ok(n) => {
                // SAFETY: checked non-null.
                unsafe { *pcb = n };
                Status::SUCCESS.0
            }
            Err(e) => {
                if let Some(n) = e.required_size() {
                    // SAFETY: checked non-null.
                    unsafe { *pcb = n };
                }
                e.status().0
            }
        }
    })
}

unsafe extern "C" fn get_local_address(this: This, out: *mut u8, pcb: *mut usize) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's buffer and SIZE_T.
        unsafe {
            with_u32_len(pcb, |p| {
                sockaddr::write_out(obj(this).conn.get_local_address(), out, p, 2).0
            })
        }
    })
}

unsafe extern "C" fn get_peer_address(this: This, out: *mut u8, pcb: *mut usize) -> HRESULT {
    hresult(|| {
        // SAFETY: the caller's buffer and SIZE_T.
        unsafe {
            with_u32_len(pcb, |p| {
                sockaddr::write_out(obj(this).conn.get_peer_address(), out, p, 2).0
            })
        }
    })
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

unsafe extern "C" fn get_connection_request(this: LThis, conn: *mut c_void, ov: Ov) -> HRESULT {
    hresult(|| {
        // SAFETY: vtable dispatch.
        let o = unsafe { &Com::this(this).obj };
        // SAFETY: the caller's interface pointer.
        let c = match unsafe { Com::<V1ConnectorObj>::from_unknown(conn) } {
            Some(c) => &c.obj.conn,
            None => return Status::invalid_parameter(1).0,
        };
        if ov.is_null() {
            return Status::invalid_parameter(2).0;
        }
        let made = o.listen.get_connection_request(c);
        // SAFETY: the caller's OVERLAPPED.
        unsafe { o.requests.submit(ov, 2, made) }.0
    })
}

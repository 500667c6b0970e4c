//! `INDAdapter`: one open adapter, its file handle, its limits, and the objects it creates
//! (completion queues, registrations by handle, windows, connectors, listeners).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::{AdapterInfo1, CompletionQueue, Connector, Listen, MemoryWindow, MrHandle, NdResult1};
use crate::{Error, MemoryRegion, MrFlags, Overlapped, Result, Status, ND_VERSION_1};

/// An open v1 adapter (`INDAdapter`). Clones share it; every object it creates keeps it
/// alive.
///
/// ```
/// use netdirect::v1;
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = v1::Provider::open("tcp")?.open_adapter("127.0.0.1:0".parse().unwrap())?;
/// let info = adapter.query(1)?;
/// assert!(info.max_cq_entries >= 64);
/// // Listen on a port the provider picks; it comes back in network byte order.
/// let mut port = 0u16;
/// let listen = adapter.listen(0, v1::PROTOCOL_TCP, 0, Some(&mut port))?;
/// assert!(u16::from_be(port) >= 49152);
/// # drop(listen);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Adapter {
    pub(crate) state: Arc<State>,
}

pub(crate) struct State {
    pub(crate) v2: crate::Adapter,
    pub(crate) ip: IpAddr,
    pub(crate) info1: AdapterInfo1,
    /// `RegisterMemory`'s regions by handle, until `DeregisterMemory`.
    regions: Mutex<HashMap<MrHandle, MemoryRegion>>,
    serial: AtomicU32,
}

impl fmt::Debug for Adapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("v1::Adapter")
            .field("provider", &self.state.v2.provider_name())
            .field("ip", &self.state.ip)
            .finish()
    }
}

impl Adapter {
    pub(crate) fn new(v2: crate::Adapter, ip: IpAddr) -> Self {
        let info1 = AdapterInfo1::from_v2(&v2.query());
        Self {
            state: Arc::new(State {
                v2,
                ip,
                info1,
                regions: Mutex::new(HashMap::new()),
                serial: AtomicU32::new(1),
            }),
        }
    }

    /// The v1 face of an open v2 adapter, as if opened with `ip` (the address its listeners
    /// listen on and its connectors connect from).
    pub fn from_v2(adapter: crate::Adapter, ip: IpAddr) -> Self {
        Self::new(adapter, ip)
    }

    /// The v2 adapter underneath (for the provider name, progress mode, and so on).
    pub fn as_v2(&self) -> &crate::Adapter {
        &self.state.v2
    }

    /// The address the adapter was opened with (port 0).
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.state.ip, 0)
    }

    /// `GetFileHandle`: the adapter's one overlapped descriptor, through which every request
    /// of the adapter and of its objects completes (readable when one did; see
    /// [`crate::Adapter::fd`]). The same for every call.
    pub fn get_file_handle(&self) -> BorrowedFd<'_> {
        self.state.v2.fd()
    }

    /// `Query` with `VersionRequested` 1: `ND_ADAPTER_INFO1`. Any other version:
    /// `ND_NOT_SUPPORTED`.
    pub fn query(&self, version_requested: u32) -> Result<AdapterInfo1> {
        if version_requested != ND_VERSION_1 {
            return Err(Error::new(Status::NOT_SUPPORTED));
        }
        Ok(self.state.info1)
    }

    /// `Control`: a vendor escape; these providers have none (`ND_NOT_SUPPORTED`).
    pub fn control(
        &self,
        _io_control_code: u32,
        _input: &[u8],
        _output: &mut [u8],
    ) -> Result<usize> {
        Err(Error::new(Status::NOT_SUPPORTED))
    }

    /// `CreateCompletionQueue`: `n_entries` 1..=`MaxCqEntries`, else `ND_INVALID_PARAMETER`.
    pub fn create_completion_queue(&self, n_entries: usize) -> Result<CompletionQueue> {
        let depth = u32::try_from(n_entries).map_err(|_| Error::new(Status::INVALID_PARAMETER))?;
        let cq = self
            .state
            .v2
            .create_completion_queue(depth, 0, 0)
            .map_err(|e| {
                if e.status() == Status::invalid_parameter(3) {
                    Error::new(Status::INVALID_PARAMETER)
                } else {
                    e
                }
            })?;
        Ok(CompletionQueue::new(cq, self.clone()))
    }

    /// `RegisterMemory`: register `len` bytes at `buffer` for local and remote access (v1 has
    /// no access flags). The handle is usable once the request completes `ND_SUCCESS`.
    /// `ND_INVALID_PARAMETER` for a NULL buffer or more than `MaxRegistrationSize`,
    /// `ND_INVALID_BUFFER_SIZE` for 0 bytes.
    ///
    /// # Safety
    /// As [`MemoryRegion::register`]: the memory stays allocated and is left alone while
    /// requests or the peer (through windows bound over it) may access it, until
    /// `deregister_memory` has completed.
    pub unsafe fn register_memory(
        &self,
        buffer: *const u8,
        len: usize,
    ) -> Result<(MrHandle, Overlapped)> {
        let mr = self.state.v2.create_memory_region()?;
        let flags =
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE;
        // SAFETY: forwarded contract.
        let ov = unsafe { mr.register(buffer.cast_mut(), len, flags)? };
        let serial = self.state.serial.fetch_add(1, Ordering::Relaxed);
        let h = MrHandle::new(serial, mr.get_local_token());
        self.regions().insert(h, mr);
        Ok((h, ov))
    }

    /// `DeregisterMemory`: `ND_DEVICE_BUSY` while a window is bound over the registration
    /// (the handle stays valid), `ND_INVALID_PARAMETER_1` for a handle this adapter did not
    /// make. The request completes once nothing in flight uses the memory.
    pub fn deregister_memory(&self, mr: MrHandle) -> Result<Overlapped> {
        let region = self.region(mr).ok_or(Error::invalid_parameter(1))?;
        let ov = region.deregister()?;
        self.regions().remove(&mr);
        Ok(ov)
    }

    /// `CreateMemoryWindow`. `invalidate_result` is the caller's `ND_RESULT` for the peer's
    /// invalidation of the window: each SendAndInvalidate of the peer that invalidates it
    /// writes `ND_SUCCESS` there (see [`MemoryWindow`]); null asks for no report.
    ///
    /// # Safety
    /// `invalidate_result` is null, or valid for writes of an [`NdResult1`] (from any thread,
    /// at any time) until the last clone of the returned window is dropped, as v1 requires
    /// of the `ND_RESULT` for as long as the window lives.
    pub unsafe fn create_memory_window(
        &self,
        invalidate_result: *mut NdResult1,
    ) -> Result<MemoryWindow> {
        let mw = self.state.v2.create_memory_window()?;
        // SAFETY: this function's contract.
        Ok(unsafe { MemoryWindow::new(mw, self.clone(), invalidate_result) })
    }

    /// `CreateConnector`.
    pub fn create_connector(&self) -> Result<Connector> {
        let c = self.state.v2.create_connector()?;
        Ok(Connector::new(c, self.clone()))
    }

    /// `Listen`: create a listener and start it, in one call, on the adapter's own address.
    ///
    /// `port` is in network byte order; 0 picks a free port in 49152–65535 and writes it,
    /// in network byte order, to `assigned_port` (written for a given port too). `backlog`:
    /// requests waiting for `GetConnectionRequest`, 0 for no limit; values beyond the
    /// provider's range are clamped silently.
    ///
    /// # Errors
    /// * `ND_INVALID_PARAMETER_2`: `protocol` is not one the provider serves ([`super::PROTOCOL_TCP`]);
    /// * `ND_INVALID_PARAMETER_MIX`: `port` 0 with no `assigned_port`;
    /// * `ND_ADDRESS_ALREADY_EXISTS`: the port is in use on this adapter;
    /// * `ND_TOO_MANY_ADDRESSES`: port 0 and no free port left in the ephemeral range;
    /// * `ND_INSUFFICIENT_RESOURCES`: no socket or other resource for the listener.
    pub fn listen(
        &self,
        backlog: usize,
        protocol: i32,
        port: u16,
        assigned_port: Option<&mut u16>,
    ) -> Result<Listen> {
        if protocol != super::PROTOCOL_TCP {
            return Err(Error::invalid_parameter(2));
        }
        if port == 0 && assigned_port.is_none() {
            return Err(Error::new(Status::INVALID_PARAMETER_MIX));
        }
        let l = self.state.v2.create_listener()?;
        let at = SocketAddr::new(self.state.ip, u16::from_be(port));
        l.bind(at).map_err(|e| {
            if e.status() == Status::SHARING_VIOLATION {
                Error::new(Status::ADDRESS_ALREADY_EXISTS)
            } else {
                e
            }
        })?;
        l.listen(u32::try_from(backlog).unwrap_or(u32::MAX))?;
        if let Some(out) = assigned_port {
            *out = l.get_local_address()?.port().to_be();
        }
        Ok(Listen::new(l, self.clone()))
    }

    /// `CancelOverlappedRequests` of the adapter itself: its pending registrations
    /// (`RegisterMemory`, `DeregisterMemory`) complete `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        let regions: Vec<MemoryRegion> = self.regions().values().cloned().collect();
        for r in regions {
            r.cancel_overlapped_requests()?;
        }
        Ok(())
    }

    /// `GetOverlappedResult`: the request's status, and v1's byte count (0: no adapter
    /// request transfers bytes).
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<usize> {
        ov.get_overlapped_result(wait).map(|()| 0)
    }

    pub(crate) fn region(&self, mr: MrHandle) -> Option<MemoryRegion> {
        self.regions().get(&mr).cloned()
    }

    fn regions(&self) -> std::sync::MutexGuard<'_, HashMap<MrHandle, MemoryRegion>> {
        self.state.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}

//! `--api v1`: the same measurement through `netdirect::v1` (the MS-MPI-era SPI). The
//! connection is set up with v1's calls (`INDAdapter::Listen`, `INDConnector::Connect`, ...)
//! and every post and completion of the run goes through a v1 endpoint and completion queue;
//! the tools' loops are unchanged, as [`super::Endpoint`] hands them v2-shaped completions.
//!
//! The wire is the same, so a v1 end and a v2 end (`--api` given on one side only) connect
//! and run together. Remote memory is exposed v1's way, through a memory window bound over
//! the buffer (`INDEndpoint::Bind`), whose token travels in the tools' usual buffer info.

use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};

use netdirect::v1::{self, MrHandle, MwDescriptor, NdResult1, Sge1, PROTOCOL_TCP};
use netdirect::{NdResult, OpFlags, Provider, RequestType, Sge};

use super::endpoint::err;

/// Which programming model a tool runs through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Api {
    /// ND v2 (`IND2*`).
    #[default]
    V2,
    /// ND v1 (`IND*`, MS-MPI's SPI), over the same provider and wire.
    V1,
    /// NDK (`netdirect::ndk`, the kernel NDKPI model): `nd pingpong` and `nd rping` only
    /// (their own loops, `crate::ndk_pingpong` and `crate::ndk_rping`).
    Ndk,
}

/// The `--api` option of the tools that take it.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ApiArg {
    /// Run through ND v2 (default), ND v1 (`netdirect::v1`, the MS-MPI SPI) or, for
    /// `pingpong` and `rping`, NDK (`netdirect::ndk`, both ends); either end may use either of
    /// v1 and v2: the wire is the same.
    #[arg(long, value_enum, default_value_t = Api::V2)]
    pub(crate) api: Api,
}

/// A request's `ND_RESULT` with what the tool posted it as, in one place: the result is the
/// first field, so the pointer `GetResults` hands back is the slot's (as MS-MPI embeds its
/// `ND_RESULT`s in its own request structures).
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    result: NdResult1,
    ctx: u64,
    ty: RequestType,
}

/// [`Slot`]s used round robin. A queue's requests complete in order and at most its depth are
/// outstanding, so a slot is free again by the time the ring comes back to it.
struct Ring {
    base: *mut Slot,
    len: usize,
    next: Cell<usize>,
}

impl Ring {
    fn new(len: usize) -> Self {
        let empty = Slot {
            result: NdResult1::PENDING,
            ctx: 0,
            ty: RequestType::Send,
        };
        let b: Box<[Slot]> = vec![empty; len].into_boxed_slice();
        Self {
            base: Box::into_raw(b).cast(),
            len,
            next: Cell::new(0),
        }
    }

    /// The next slot, marked for a request of `ctx` and `ty`; its index and `ND_RESULT`.
    #[inline(always)]
    fn take(&self, ctx: u64, ty: RequestType) -> (usize, *mut NdResult1) {
        let i = self.next.get();
        // SAFETY: `i` is below the ring's length; no request owns a slot the ring comes
        // back to (see the type), so nothing else writes it.
        unsafe {
            let s = self.base.add(i);
            (*s).ctx = ctx;
            (*s).ty = ty;
            (i, s.cast())
        }
    }

    /// Move past slot `i` (its post succeeded).
    #[inline(always)]
    fn advance(&self, i: usize) {
        let n = i + 1;
        self.next.set(if n == self.len { 0 } else { n });
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` of a boxed slice of this length; the endpoint's
        // connection has ended, so no request names a slot.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.base, self.len)) });
    }
}

/// The completion of the request whose `ND_RESULT` is `p`, as the tool posted it.
#[inline(always)]
fn completion(p: *mut NdResult1) -> NdResult {
    // SAFETY: every request of the endpoint is posted with the `ND_RESULT` of a ring's slot
    // (its first field), which `GetResults` wrote and handed back; nothing writes it now.
    let s = unsafe { p.cast::<Slot>().read() };
    NdResult {
        status: s.result.status,
        bytes_transferred: s.result.bytes_transferred as u32,
        qp_context: 0,
        request_context: s.ctx,
        request_type: s.ty,
    }
}

/// The v1 objects of an endpoint.
pub(crate) struct V1 {
    pub(crate) adapter: v1::Adapter,
    pub(crate) cq: v1::CompletionQueue,
    pub(crate) connector: v1::Connector,
    pub(crate) ep: v1::Endpoint,
    mr: MrHandle,
    recv: Ring,
    send: Ring,
    /// The window over the whole buffer, once bound for the peer.
    window: Cell<Option<MwDescriptor>>,
    windows: std::cell::RefCell<Vec<v1::MemoryWindow>>,
}

impl V1 {
    /// Open the adapter for `local` (v1: by IP), a CQ of `2 * depth`, a connector, an
    /// endpoint of `depth` each way with `read_limits`, and register `len` bytes at `buf`.
    pub(crate) fn open(
        provider: &Provider,
        local: IpAddr,
        depth: u32,
        read_limits: (u32, u32),
        buf: &netdirect::Buffer,
    ) -> Result<Self, String> {
        let adapter = v1::Provider::from_v2(provider.clone())
            .open_adapter(SocketAddr::new(local, 0))
            .map_err(err("v1 open adapter"))?;
        let cq = adapter
            .create_completion_queue(depth as usize * 2)
            .map_err(err("v1 create CQ"))?;
        let connector = adapter
            .create_connector()
            .map_err(err("v1 create connector"))?;
        let d = depth as usize;
        let ep = connector
            .create_endpoint(
                &cq,
                &cq,
                d,
                d,
                1,
                1,
                read_limits.0 as usize,
                read_limits.1 as usize,
                None,
            )
            .map_err(err("v1 create endpoint"))?;
        // SAFETY: the buffer outlives the endpoint (both are the endpoint's; the connection
        // ends before either goes).
        let (mr, ov) = unsafe { adapter.register_memory(buf.as_ptr(), buf.len()) }
            .map_err(err("v1 register"))?;
        ov.wait().map_err(err("v1 register"))?;
        Ok(Self {
            adapter,
            cq,
            connector,
            ep,
            mr,
            recv: Ring::new(d + 1),
            send: Ring::new(d + 2),
            window: Cell::new(None),
            windows: std::cell::RefCell::new(Vec::new()),
        })
    }

    /// Serve side: `Listen` on `addr` (v1: on the adapter's own address, the port in network
    /// byte order, 0 for one the provider picks); the listener and the address it listens on.
    pub(crate) fn listen(&self, addr: SocketAddr) -> Result<(v1::Listen, SocketAddr), String> {
        let mut port = 0u16;
        let listen = self
            .adapter
            .listen(1, PROTOCOL_TCP, addr.port().to_be(), Some(&mut port))
            .map_err(err("v1 listen"))?;
        Ok((listen, SocketAddr::new(addr.ip(), u16::from_be(port))))
    }

    /// The peer's private data (GetConnectionData, sized by a probe).
    pub(crate) fn private_data(&self) -> Vec<u8> {
        let need = match self.connector.get_connection_data(None, None, &mut []) {
            Ok(n) => n,
            Err(e) => e.required_size().unwrap_or(0),
        };
        let mut pd = vec![0u8; need];
        match self.connector.get_connection_data(None, None, &mut pd) {
            Ok(n) => pd.truncate(n),
            Err(_) => pd.clear(),
        }
        pd
    }

    /// Run `f` with the v1 SGEs of `sge` (the tools' posts have none or one; two at most),
    /// made on the stack without a buffer to fill.
    #[inline(always)]
    fn with_sges<R>(
        &self,
        sge: &[Sge],
        inline: bool,
        f: impl FnOnce(&[Sge1]) -> netdirect::Result<R>,
    ) -> netdirect::Result<R> {
        let mr = (!inline).then_some(self.mr);
        let conv = |s: &Sge| Sge1::new(s.buffer, s.buffer_length as usize, mr);
        match sge {
            [] => f(&[]),
            [a] => f(&[conv(a)]),
            [a, b] => f(&[conv(a), conv(b)]),
            _ => Err(netdirect::Error::new(netdirect::Status::DATA_OVERRUN)),
        }
    }

    /// A Send (v2's `INLINE` is v1's NULL `hMr`).
    ///
    /// # Safety
    /// As `IND2QueuePair::Send`.
    #[inline(always)]
    pub(crate) unsafe fn send(
        &self,
        ctx: u64,
        sge: &[Sge],
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        let (i, r) = self.send.take(ctx, RequestType::Send);
        self.with_sges(sge, flags.contains(OpFlags::INLINE), |s| {
            // SAFETY: forwarded contract; the slot stays the ring's until reaped.
            unsafe { self.ep.send(r, s, flags - OpFlags::INLINE) }
        })?;
        self.send.advance(i);
        Ok(())
    }

    /// A Receive.
    ///
    /// # Safety
    /// As `IND2QueuePair::Receive`.
    #[inline(always)]
    pub(crate) unsafe fn receive(&self, ctx: u64, sge: &[Sge]) -> netdirect::Result<()> {
        let (i, r) = self.recv.take(ctx, RequestType::Receive);
        // SAFETY: forwarded contract.
        self.with_sges(sge, false, |s| unsafe { self.ep.receive(r, s) })?;
        self.recv.advance(i);
        Ok(())
    }

    /// A Write (`write`) or Read to `remote` under `token`, through a descriptor at offset 0.
    ///
    /// # Safety
    /// As `IND2QueuePair::Write`/`Read`.
    #[inline]
    pub(crate) unsafe fn rdma(
        &self,
        write: bool,
        ctx: u64,
        sge: &[Sge],
        remote: u64,
        token: u32,
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        let d = MwDescriptor::new(remote, u64::MAX - remote, token);
        let ty = if write {
            RequestType::Write
        } else {
            RequestType::Read
        };
        let (i, r) = self.send.take(ctx, ty);
        let f = flags - OpFlags::INLINE;
        self.with_sges(sge, flags.contains(OpFlags::INLINE), |s| {
            // SAFETY: forwarded contract.
            unsafe {
                if write {
                    self.ep.write(r, s, &d, 0, f)
                } else {
                    self.ep.read(r, s, &d, 0, f)
                }
            }
        })?;
        self.send.advance(i);
        Ok(())
    }

    /// Up to `out.len()` completions, as v2 results (the request context and type the tool
    /// posted with).
    #[inline(always)]
    pub(crate) fn get_results(&self, out: &mut [NdResult]) -> usize {
        if let [one] = out {
            let mut p = [std::ptr::null_mut()];
            if self.cq.get_results(&mut p) == 0 {
                return 0;
            }
            *one = completion(p[0]);
            return 1;
        }
        let mut ptrs = [std::ptr::null_mut(); 32];
        let want = out.len().min(ptrs.len());
        let n = self.cq.get_results(&mut ptrs[..want]);
        for (o, &p) in out.iter_mut().zip(&ptrs[..n]) {
            *o = completion(p);
        }
        n
    }

    /// The token a peer Writes and Reads the buffer with: a window bound over all of it (once,
    /// `SILENT_SUCCESS`: no completion unless it fails), as v1 exposes memory.
    pub(crate) fn remote_token(&self, buf: &netdirect::Buffer) -> Result<u32, String> {
        if let Some(d) = self.window.get() {
            return Ok(d.token());
        }
        // SAFETY: a null ND_RESULT is never written.
        let mw = unsafe { self.adapter.create_memory_window(std::ptr::null_mut()) }
            .map_err(err("v1 create window"))?;
        let (i, r) = self.send.take(u64::MAX - 1, RequestType::Bind);
        let flags = OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE | OpFlags::SILENT_SUCCESS;
        // SAFETY: the slot is the ring's until reaped (a failure reports there).
        let d = unsafe {
            self.ep
                .bind(r, self.mr, &mw, buf.as_ptr(), buf.len(), flags)
        }
        .map_err(err("v1 bind"))?;
        self.send.advance(i);
        self.window.set(Some(d));
        self.windows.borrow_mut().push(mw);
        Ok(d.token())
    }
}

/// Offer `settings` in a v1 Connect of `v` to `dest` and complete it; `Err` carries the status
/// of a failed Connect.
pub(crate) fn connect(v: &V1, dest: SocketAddr, settings: &[u8]) -> netdirect::Result<()> {
    v.connector
        .connect(&v.ep, dest, PROTOCOL_TCP, 0, settings)?
        .wait()
}

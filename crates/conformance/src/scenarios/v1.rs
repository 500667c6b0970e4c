//! ND v1 scenarios (`netdirect::v1`, the MS-MPI-era SPI): connection flow, data, windows
//! through `ND_MW_DESCRIPTOR`s, SendAndInvalidate, teardown, and v1↔v2 interoperation. Each
//! is a server role and a client role in two processes, as the v2 scenarios.
//!
//! A v1 request's identity is the caller's `ND_RESULT`: each side keeps an array of them
//! ([`Slots`]) and checks that `GetResults` hands back exactly the pointers it posted with.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Instant;

use netdirect::v1::{self, MrHandle, MwDescriptor, NdResult1, Sge1};
use netdirect::{Buffer, Status};

use super::{Flow, Scenario};
use crate::check::{fail, show, wait_ok, Check, Context, WAIT};
use crate::side::Ctx;
use crate::{ensure, ensure_eq};

/// Every v1 scenario (run by `tests/v1.rs`; `nd-peer` finds them by name as the others).
pub const V1_SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "v1-connect",
        summary: "v1 connection flow with private data both ways (GetConnectionData limits, \
                  probe and short buffer), addresses, Query/Control/GetFileHandle/Resize, \
                  registered and inline Sends, NotifyDisconnect, and Disconnect completing \
                  the outstanding Receives ND_CANCELED on both sides",
        flow: Flow::Normal,
        server: super::v1_connection::connect_server,
        client: super::v1_connection::connect_client,
    },
    Scenario {
        name: "v1-reject",
        summary: "the passive side Rejects with private data (too much: ND_BUFFER_OVERFLOW): \
                  the v1 Connect completes ND_CONNECTION_REFUSED and sees it",
        flow: Flow::Normal,
        server: super::v1_connection::reject_server,
        client: super::v1_connection::reject_client,
    },
    Scenario {
        name: "v1-active-reject",
        summary: "the active side Rejects instead of CompleteConnect: the passive Accept \
                  completes ND_CONNECTION_REFUSED",
        flow: Flow::Normal,
        server: super::v1_connection::active_reject_server,
        client: super::v1_connection::active_reject_client,
    },
    Scenario {
        name: "v1-flush",
        summary: "Flush completes every outstanding Receive ND_CANCELED and disconnects: \
                  the peer's NotifyDisconnect completes",
        flow: Flow::Normal,
        server: super::v1_connection::flush_server,
        client: super::v1_connection::flush_client,
    },
    Scenario {
        name: "v1-batch",
        summary: "StartRequestBatch, four Sends (the last solicited), SubmitRequestBatch: \
                  GetResults returns the callers' ND_RESULT pointers in order, one at a time",
        flow: Flow::Normal,
        server: super::v1_data::batch_server,
        client: super::v1_data::batch_client,
    },
    Scenario {
        name: "v1-rdma",
        summary: "RegisterMemory, CreateMemoryWindow, Bind → ND_MW_DESCRIPTOR; the peer \
                  Reads and Writes through it at offsets (and a zero-byte Read); \
                  DeregisterMemory is ND_DEVICE_BUSY while bound; Invalidate; Deregister",
        flow: Flow::Normal,
        server: super::v1_data::rdma_server,
        client: super::v1_data::rdma_client,
    },
    Scenario {
        name: "v1-rdma-out-of-bounds",
        summary: "a Write past the end of the peer's window completes ND_ACCESS_VIOLATION",
        flow: Flow::Normal,
        server: super::v1_data::window_server,
        client: super::v1_data::out_of_bounds_client,
    },
    Scenario {
        name: "v1-rdma-bad-token",
        summary: "a Read through a descriptor with a wrong token completes \
                  ND_ACCESS_VIOLATION",
        flow: Flow::Normal,
        server: super::v1_data::window_server,
        client: super::v1_data::bad_token_client,
    },
    Scenario {
        name: "v1-send-invalidate",
        summary: "SendAndInvalidate invalidates the peer's window: its Receive completes, a \
                  later Write through the old descriptor fails ND_ACCESS_VIOLATION, and the \
                  window binds again",
        flow: Flow::Normal,
        server: super::v1_data::send_invalidate_server,
        client: super::v1_data::send_invalidate_client,
    },
    Scenario {
        name: "v1-send-invalidate-foreign",
        summary: "SendAndInvalidate naming a window not bound through the connection ends \
                  the connection: neither side's Receive completes ND_SUCCESS",
        flow: Flow::Normal,
        server: super::v1_data::foreign_invalidate_server,
        client: super::v1_data::foreign_invalidate_client,
    },
    Scenario {
        name: "v1-interop-v1-server",
        summary: "a v1 endpoint (server) and a v2 queue pair (client) exchange Sends, and \
                  each Writes and Reads the other's memory",
        flow: Flow::Normal,
        server: super::v1_interop::v1_server,
        client: super::v1_interop::v2_client,
    },
    Scenario {
        name: "v1-interop-v2-server",
        summary: "a v2 queue pair (server) and a v1 endpoint (client) exchange Sends, and \
                  each Writes and Reads the other's memory",
        flow: Flow::Normal,
        server: super::v1_interop::v2_server,
        client: super::v1_interop::v1_client,
    },
];

/// Caller-owned `ND_RESULT`s, at fixed addresses for the role's life.
#[derive(Debug)]
pub(super) struct Slots {
    base: *mut NdResult1,
    len: usize,
}

impl Slots {
    pub(super) fn new(len: usize) -> Self {
        let b: Box<[NdResult1]> = vec![NdResult1::PENDING; len].into_boxed_slice();
        Self {
            base: Box::into_raw(b).cast(),
            len,
        }
    }

    /// The `ND_RESULT` of slot `i`, to post with.
    pub(super) fn at(&self, i: usize) -> *mut NdResult1 {
        assert!(i < self.len, "slot {i} of {}", self.len);
        // SAFETY: in bounds of the allocation.
        unsafe { self.base.add(i) }
    }

    /// The slot a returned pointer names.
    pub(super) fn index_of(&self, p: *mut NdResult1) -> Option<usize> {
        (0..self.len).find(|&i| self.at(i) == p)
    }

    /// Slot `i`'s contents (only once `GetResults` returned it: nothing writes it then).
    pub(super) fn get(&self, i: usize) -> NdResult1 {
        // SAFETY: valid, aligned, initialised; read only after its request was reaped.
        unsafe { self.at(i).read() }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` of a boxed slice of `len` in `new`. Roles end their
        // connections before they return, so no request still names a slot.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.base, self.len)) });
    }
}

/// One v1 end: adapter, inbound and outbound queues, connector, a registered buffer, the
/// result slots; the endpoint once made.
#[derive(Debug)]
pub(super) struct V1Side {
    pub(super) adapter: v1::Adapter,
    pub(super) icq: v1::CompletionQueue,
    pub(super) ocq: v1::CompletionQueue,
    pub(super) connector: v1::Connector,
    pub(super) buf: Buffer,
    pub(super) mr: MrHandle,
    pub(super) slots: Slots,
    pub(super) ep: Option<v1::Endpoint>,
}

/// Bytes of a side's buffer.
pub(super) const BUF: usize = 64 * 1024;

impl V1Side {
    /// Open the adapter for the run's IP the v1 way and build a side on it.
    pub(super) fn open(ctx: &Ctx) -> Check<Self> {
        let provider = v1::Provider::from_v2(ctx.provider.clone());
        let listed = provider
            .query_address_list()
            .ctx("INDProvider::QueryAddressList")?;
        ensure!(
            listed.iter().any(|a| a.ip() == ctx.addr.ip()),
            "QueryAddressList {listed:?} lacks {}",
            ctx.addr.ip()
        );
        let adapter = provider
            .open_adapter(SocketAddr::new(ctx.addr.ip(), 0))
            .ctx("INDProvider::OpenAdapter")?;
        if ctx.export_fd {
            let _ = adapter.get_file_handle();
        }
        let icq = adapter
            .create_completion_queue(32)
            .ctx("CreateCompletionQueue (inbound)")?;
        let ocq = adapter
            .create_completion_queue(32)
            .ctx("CreateCompletionQueue (outbound)")?;
        let buf = Buffer::new(BUF).ctx("allocate")?;
        // SAFETY: `buf` lives in the side, past every request (roles disconnect first).
        let (mr, ov) =
            unsafe { adapter.register_memory(buf.as_ptr(), BUF) }.ctx("RegisterMemory")?;
        wait_ok(&ov, "RegisterMemory")?;
        // v1's GetOverlappedResult has a byte count: 0 for a registration.
        ensure_eq!(
            adapter
                .get_overlapped_result(&ov, false)
                .ctx("GetOverlappedResult")?,
            0,
            "RegisterMemory's byte count"
        );
        let connector = adapter.create_connector().ctx("CreateConnector")?;
        Ok(Self {
            adapter,
            icq,
            ocq,
            connector,
            buf,
            mr,
            slots: Slots::new(64),
            ep: None,
        })
    }

    /// CreateEndpoint with 16 requests and 4 SGEs each way and the given read limits.
    pub(super) fn make_endpoint(&mut self, irl: usize, orl: usize) -> Check<v1::Endpoint> {
        let ep = self
            .connector
            .create_endpoint(&self.icq, &self.ocq, 16, 16, 4, 4, irl, orl, None)
            .ctx("CreateEndpoint")?;
        self.ep = Some(ep.clone());
        Ok(ep)
    }

    pub(super) fn ep(&self) -> &v1::Endpoint {
        self.ep.as_ref().expect("endpoint made")
    }

    /// A registered SGE over `r` of the buffer.
    pub(super) fn sge(&self, r: Range<usize>) -> Sge1 {
        assert!(r.end <= BUF);
        // SAFETY: in bounds (checked).
        Sge1::new(
            unsafe { self.buf.as_ptr().add(r.start) },
            r.len(),
            Some(self.mr),
        )
    }

    /// Post a Receive into `r` with slot `slot`.
    pub(super) fn recv(&self, slot: usize, r: Range<usize>) -> netdirect::Result<()> {
        // SAFETY: the range is read only after its completion is reaped; the slot likewise.
        unsafe { self.ep().receive(self.slots.at(slot), &[self.sge(r)]) }
    }

    /// Post a Send of `r` (registered) with slot `slot`.
    pub(super) fn send(&self, slot: usize, r: Range<usize>) -> netdirect::Result<()> {
        // SAFETY: the range is not written until the Send completes.
        unsafe {
            self.ep().send(
                self.slots.at(slot),
                &[self.sge(r)],
                netdirect::OpFlags::empty(),
            )
        }
    }

    /// Copy `bytes` to offset `at` of the buffer.
    pub(super) fn put(&self, at: usize, bytes: &[u8]) {
        // SAFETY: roles call this only for ranges no outstanding request or window write covers.
        unsafe { self.buf.as_mut_slice()[at..at + bytes.len()].copy_from_slice(bytes) }
    }

    /// `len` bytes at `at` of the buffer.
    pub(super) fn get(&self, at: usize, len: usize) -> Vec<u8> {
        // SAFETY: as `put`: nothing writes the range meanwhile.
        unsafe { self.buf.as_slice()[at..at + len].to_vec() }
    }
}

/// Wait for `n` results on `cq`: the slots they name, in completion order, each with its
/// status; polls, then sleeps on `Notify(ANY)`, at most [`WAIT`].
pub(super) fn reap(
    side: &V1Side,
    cq: &v1::CompletionQueue,
    n: usize,
    what: &str,
) -> Check<Vec<(usize, NdResult1)>> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::with_capacity(n);
    let mut ptrs = vec![std::ptr::null_mut(); n];
    while out.len() < n {
        let want = n - out.len();
        let got = cq.get_results(&mut ptrs[..want]);
        for &p in &ptrs[..got] {
            let Some(i) = side.slots.index_of(p) else {
                return fail(format!(
                    "{what}: GetResults returned {p:?}, not one of ours"
                ));
            };
            out.push((i, side.slots.get(i)));
        }
        if out.len() == n {
            break;
        }
        let ov = cq.notify(1).ctx("INDCompletionQueue::Notify")?;
        let left = deadline.saturating_duration_since(Instant::now());
        match ov.wait_timeout(Some(left)) {
            Some(r) => r.ctx(&format!("{what}: Notify"))?,
            None => {
                let _ = cq.cancel_overlapped_requests();
                return fail(format!(
                    "{what}: {} of {n} results after {WAIT:?}: {out:?}",
                    out.len()
                ));
            }
        }
    }
    Ok(out)
}

/// One result, from slot `slot`, with `status` (and `bytes`, when given).
pub(super) fn reap_one(
    side: &V1Side,
    cq: &v1::CompletionQueue,
    slot: usize,
    status: Status,
    bytes: Option<usize>,
    what: &str,
) -> Check {
    let r = reap(side, cq, 1, what)?;
    let (i, res) = r[0];
    ensure_eq!(i, slot, "{what}: the ND_RESULT returned");
    ensure!(
        res.status == status,
        "{what}: expected {}, got {}",
        show(status),
        show(res.status)
    );
    if let Some(b) = bytes {
        ensure_eq!(res.bytes_transferred, b, "{what}: BytesTransferred");
    }
    Ok(())
}

/// The server's v1 opening: Listen on port 0 of the adapter's address (TCP, backlog 0),
/// announce the assigned port, take one request into the side's connector.
pub(super) fn v1_await_request(ctx: &Ctx, side: &V1Side) -> Check<(v1::Listen, SocketAddr)> {
    let mut port = 0u16;
    let listen = side
        .adapter
        .listen(0, v1::PROTOCOL_TCP, 0, Some(&mut port))
        .ctx("INDAdapter::Listen")?;
    let at = SocketAddr::new(ctx.addr.ip(), u16::from_be(port));
    ctx.announce_listening(at);
    let ov = listen
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest")?;
    wait_ok(&ov, "GetConnectionRequest")?;
    Ok((listen, at))
}

/// The client's v1 Connect to the run's server, from port 0, with `pd`.
pub(super) fn v1_connect(ctx: &Ctx, side: &V1Side, pd: &[u8]) -> Check<netdirect::Overlapped> {
    side.connector
        .connect(side.ep(), ctx.addr, v1::PROTOCOL_TCP, 0, pd)
        .ctx("INDConnector::Connect")
}

/// A descriptor carried in a message (20 bytes, as it travels).
pub(super) fn descriptor_at(side: &V1Side, at: usize) -> MwDescriptor {
    let b: [u8; 20] = side.get(at, 20).try_into().unwrap_or([0; 20]);
    MwDescriptor::from_bytes(&b)
}

/// The provider runs SendAndInvalidate (tcp does; a provider without it says
/// `ND_NOT_SUPPORTED`, which makes the scenario "not run").
pub(super) fn expect_ok_or_not_supported(r: netdirect::Result<()>, what: &str) -> Check<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.status() == Status::NOT_SUPPORTED => Ok(false),
        Err(e) => fail(format!("{what}: unexpected {}", show(e.status()))),
    }
}

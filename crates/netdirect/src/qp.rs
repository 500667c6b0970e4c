//! `IND2QueuePair`.

use std::fmt;
use std::sync::Arc;

use netdirect_spi::traits;

use crate::{MemoryRegion, MemoryWindow, OpFlags, Result, Sge};

/// A queue pair (`IND2QueuePair`): a send (initiator) queue and a receive queue, connected to
/// one peer by a `Connector`.
///
/// # Safety of the posts
/// Every post hands memory to the provider *after* the call returns: it reads a Send's or
/// Write's source and writes a Receive's or Read's sink at some point before the request's
/// completion is reported by `CompletionQueue::get_results` (with `SILENT_SUCCESS`, which
/// reports no success, before the completion of a later request of the same queue is
/// reported). The provider checks each SGE against its registration (token, bounds, rights),
/// so it never touches unregistered memory; what it cannot check is that your program leaves
/// the memory alone meanwhile. That is the contract of each `unsafe` post.
///
/// The exception is `INLINE` (Send and Write): its bytes are copied during the call, and, as
/// docs/ND-RULES.md §2.9 allows, its tokens are not checked ("tokens may be invalid"), so the
/// SGEs must name memory valid for reads for the call's duration, registered or not.
///
/// # Example
///
/// A Receive posted before connecting, then a Send of registered memory, each waited for by its
/// context (the peer is a server like the one in the crate's quick start):
///
/// ```no_run
/// use netdirect::{Buffer, ConnectConfig, MrFlags, OpFlags, Provider, QueuePairConfig};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let cq = adapter.create_completion_queue(64, 0, 0)?;
/// let qp = adapter.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
/// let buf = Buffer::new(2048)?;
/// let mr = adapter.create_memory_region()?;
/// mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?.wait()?;
/// let token = mr.get_local_token();
///
/// const RECV: u64 = 1;
/// const SEND: u64 = 2;
/// // SAFETY: the second half is not touched until the Receive completes.
/// unsafe { qp.receive(RECV, &[buf.sge(1024..2048, token)])? };
///
/// let connector = adapter.create_connector()?;
/// connector.bind("127.0.0.1:0".parse().unwrap())?;
/// connector.connect_with(&qp, "127.0.0.1:4791".parse().unwrap(), &ConnectConfig::new())?.wait()?;
/// connector.complete_connect()?.wait()?;
///
/// // SAFETY: no request uses the first half yet.
/// unsafe { buf.as_mut_slice()[..5].copy_from_slice(b"hello") };
/// // SAFETY: the first half is not written until the Send completes.
/// unsafe { qp.send(SEND, &[buf.sge(0..5, token)], OpFlags::empty())? };
/// cq.wait_for_context(SEND, None)?;
/// let reply = cq.wait_for_context(RECV, None)?;
/// // SAFETY: the Receive completed.
/// let bytes = unsafe { &buf.as_slice()[1024..1024 + reply.bytes_transferred as usize] };
/// println!("{}", String::from_utf8_lossy(bytes));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct QueuePair {
    inner: Arc<dyn traits::QueuePair>,
}

impl fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl QueuePair {
    pub(crate) fn from_spi(inner: Arc<dyn traits::QueuePair>) -> Self {
        Self { inner }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::QueuePair> {
        &self.inner
    }

    /// `Flush`: every outstanding request of this queue pair completes with `ND_CANCELED`; a
    /// connected queue pair is disconnected.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// `Send` the bytes the SGEs name (zero SGEs: a zero-byte Send, matched by a zero-byte
    /// Receive). Flags: `SILENT_SUCCESS`, `READ_FENCE`, `SEND_AND_SOLICIT_EVENT`, `INLINE`
    /// (anything else gives `ND_INVALID_PARAMETER_4`).
    ///
    /// Synchronous errors (the queue pair stays usable): `ND_CONNECTION_INVALID` (not
    /// connected), `ND_NO_MORE_ENTRIES` (initiator queue full), `ND_DATA_OVERRUN` (more SGEs
    /// than the queue pair's initiator SGE limit; with `INLINE`, which that limit does not
    /// bind (§2.9), more than 64), `ND_BUFFER_OVERFLOW` (more than `MaxTransferLength`, or
    /// inline data larger than the queue pair's inline size: the size asked at creation, or
    /// 1024 bytes if that is more). An SGE whose token or range is not registered completes
    /// with `ND_ACCESS_VIOLATION` and terminates the connection.
    ///
    /// # Safety
    /// Without `INLINE`, the memory must not be written until the Send completes. With
    /// `INLINE`, each SGE must be valid for reads of `buffer_length` bytes during the call
    /// (its token is not checked; it is read during the call only).
    pub unsafe fn send(&self, context: u64, sge: &[Sge], flags: OpFlags) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.inner.send(context, sge, flags) }
    }

    /// `Receive` into the SGEs; may be posted before connecting. A Send larger than the
    /// Receive completes it with `ND_DATA_OVERRUN` and terminates the connection.
    ///
    /// Synchronous errors (nothing is queued): `ND_NO_MORE_ENTRIES` (receive queue full),
    /// `ND_DATA_OVERRUN` (too many SGEs), `ND_BUFFER_OVERFLOW` (more than
    /// `MaxTransferLength` bytes), `ND_INVALID_DEVICE_REQUEST` (the queue pair takes its
    /// Receives from a shared receive queue).
    ///
    /// # Safety
    /// The memory must not be read or written until the Receive completes.
    pub unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.inner.receive(context, sge) }
    }

    /// `Bind` `window` over `len` bytes at `buffer` inside `region`, so that the peer of this
    /// queue pair — and only this queue pair's peer — can Read or Write them with
    /// `window.get_remote_token()`, which is valid as soon as this returns. The window's rights
    /// come from `flags` alone (`ALLOW_READ`, `ALLOW_WRITE`; 0 grants nothing, D11), whatever
    /// the region's remote flags (R-MW-1). The completion (`RequestType::Bind`) follows in
    /// order on the initiator CQ (`SILENT_SUCCESS`, `READ_FENCE` apply as for other requests).
    ///
    /// Synchronous errors (nothing is bound): `ND_INVALID_PARAMETER_6` (unknown flags),
    /// `_2`/`_3` (a region or window of another adapter), `ND_CONNECTION_INVALID` (never
    /// connected), `ND_NO_MORE_ENTRIES`, `ND_ACCESS_VIOLATION` (the region is not registered,
    /// the range leaves it, or `ALLOW_WRITE` on a region without `ALLOW_LOCAL_WRITE`),
    /// `ND_INVALID_DEVICE_STATE` (the window is bound; Invalidate it first). A window is
    /// unbound when its queue pair's connection ends; its region cannot be deregistered while
    /// it is bound (`ND_DEVICE_BUSY`).
    ///
    /// Safe: the region's registration already made the promise about the memory, which
    /// covers this (see [`MemoryRegion::register`]: any registered byte may be exposed to a
    /// peer, for reading and, if the region allows local writes, for writing, by a window
    /// bound over it).
    pub fn bind(
        &self,
        context: u64,
        region: &MemoryRegion,
        window: &MemoryWindow,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()> {
        self.inner.bind(
            context,
            region.as_spi(),
            window.as_spi(),
            buffer,
            len,
            flags,
        )
    }

    /// `Invalidate` a window bound through this queue pair: its token stops working when this
    /// returns (a later access by the peer fails with `ND_ACCESS_VIOLATION` there and ends the
    /// connection); the completion (`RequestType::Invalidate`) follows in order. A window not
    /// bound through this queue pair completes with `ND_INVALID_DEVICE_REQUEST`, which, like
    /// every error completion, ends the connection. Flags: `SILENT_SUCCESS`, `READ_FENCE`
    /// (else `ND_INVALID_PARAMETER_3`).
    pub fn invalidate(&self, context: u64, window: &MemoryWindow, flags: OpFlags) -> Result<()> {
        self.inner.invalidate(context, window.as_spi(), flags)
    }

    /// `Read` from the peer's `remote_address` (its virtual address, host order) under
    /// `remote_token` (the peer's `get_remote_token()`, passed through unchanged) into the SGEs;
    /// the length read is their total, and zero SGEs make a zero-byte Read (a liveness probe).
    /// Each non-empty SGE is read by a Read Request of its own, and at most the connection's
    /// outbound read limit (ORD) of them are in flight: later requests wait, in order.
    /// The SGEs must be registered with `ALLOW_LOCAL_WRITE`. Flags: `SILENT_SUCCESS`,
    /// `READ_FENCE` (else `ND_INVALID_PARAMETER_6`).
    ///
    /// Synchronous errors as for [`QueuePair::send`]. On a connection that allows no outbound
    /// Reads (ORD 0) the Read can never be issued: it completes `ND_INVALID_DEVICE_REQUEST`
    /// in its turn and ends the connection, as any error completion does. A read the peer
    /// refuses (bad token, rights, bounds) completes with `ND_ACCESS_VIOLATION`
    /// (docs/ND-RULES.md D6) and ends the connection; the peer's memory is not read.
    ///
    /// # Safety
    /// The memory must not be read or written until the Read completes.
    pub unsafe fn read(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            self.inner
                .read(context, sge, remote_address, remote_token, flags)
        }
    }

    /// `Write` the SGEs to the peer's `remote_address` under `remote_token` (zero SGEs: a
    /// zero-byte Write). Flags: `SILENT_SUCCESS`, `READ_FENCE`, `INLINE` (else
    /// `ND_INVALID_PARAMETER_6`); synchronous errors as for [`QueuePair::send`].
    ///
    /// With a netdirect peer the Write completes once the peer has placed it (a zero-length
    /// Read after it came back), so a Write the peer refuses (bad token, rights, bounds)
    /// completes with `ND_ACCESS_VIOLATION` (D6) and leaves its memory untouched; with another
    /// iWARP peer it completes once TCP took it (RFC 5040 §5.5), and a refusal ends the
    /// connection with the later requests `ND_CANCELED`.
    ///
    /// # Safety
    /// As for [`QueuePair::send`].
    pub unsafe fn write(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            self.inner
                .write(context, sge, remote_address, remote_token, flags)
        }
    }
}

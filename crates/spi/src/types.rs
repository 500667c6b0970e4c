//! ND v2 flags, enums and structures (`docs/ND-RULES.md` §1.3–§1.10), in Rust form.

use bitflags::bitflags;

use crate::Status;

/// `ND_VERSION_1`.
pub const ND_VERSION_1: u32 = 0x1;
/// `ND_VERSION_2`, the value every caller passes as `InfoVersion` (D2).
pub const ND_VERSION_2: u32 = 0x2_0000;

bitflags! {
    /// `ND_ADAPTER_FLAG_*` (`ND2_ADAPTER_INFO.AdapterFlags`, §1.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AdapterFlags: u32 {
        /// Data is placed in memory in order (ndrping/ndrpingpong require it).
        const IN_ORDER_DMA_SUPPORTED = 0x0000_0001;
        /// CQ interrupt moderation.
        const CQ_INTERRUPT_MODERATION_SUPPORTED = 0x0000_0004;
        /// CQs can progress in parallel.
        const MULTI_ENGINE_SUPPORTED = 0x0000_0008;
        /// `IND2CompletionQueue::Resize` is supported (D15).
        const CQ_RESIZE_SUPPORTED = 0x0000_0100;
        /// Loopback connections are supported.
        const LOOPBACK_CONNECTIONS_SUPPORTED = 0x0001_0000;
    }

    /// `ND_MR_FLAG_*` (the `flags` of `IND2MemoryRegion::Register`, §1.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct MrFlags: u32 {
        /// Local write access (the sink of a Receive or Read).
        const ALLOW_LOCAL_WRITE = 0x0000_0001;
        /// The peer may RDMA Read this region.
        const ALLOW_REMOTE_READ = 0x0000_0002;
        /// The peer may RDMA Write this region; includes `ALLOW_LOCAL_WRITE` ("remote flags imply local").
        const ALLOW_REMOTE_WRITE = 0x0000_0005;
        /// The region may be the sink of an RDMA Read (iWARP needs this).
        const RDMA_READ_SINK = 0x0000_0008;
        /// Do not secure the virtual memory (accepted and ignored on Linux).
        const DO_NOT_SECURE_VM = 0x8000_0000;
    }

    /// `ND_OP_FLAG_*` (request flags of Send, Bind, Invalidate, Read and Write, §1.6).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OpFlags: u32 {
        /// No completion on success; errors still complete.
        const SILENT_SUCCESS = 0x0000_0001;
        /// Wait for every earlier Read to finish before this request starts.
        const READ_FENCE = 0x0000_0002;
        /// Send only: fire the peer's `ND_CQ_NOTIFY_SOLICITED`.
        const SEND_AND_SOLICIT_EVENT = 0x0000_0004;
        /// Bind only: the peer may Read the window.
        const ALLOW_READ = 0x0000_0008;
        /// Bind only: the peer may Write the window.
        const ALLOW_WRITE = 0x0000_0010;
        /// Send and Write: the data is copied at post time; SGE tokens are not used.
        const INLINE = 0x0000_0020;
    }
}

/// `ND_CQ_NOTIFY_*`: what arms a completion-queue notification (§1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum NotifyType {
    /// Only errors (overrun, catastrophic failure) complete the request.
    Errors = 0,
    /// Any new completion.
    Any = 1,
    /// A Receive of a Send with `SEND_AND_SOLICIT_EVENT`, or an error.
    Solicited = 2,
}

impl NotifyType {
    /// From the raw ND value.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Errors),
            1 => Some(Self::Any),
            2 => Some(Self::Solicited),
            _ => None,
        }
    }
}

/// `ND2_REQUEST_TYPE` (§1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum RequestType {
    /// A Receive.
    Receive = 0,
    /// A Send.
    Send = 1,
    /// A memory-window Bind.
    Bind = 2,
    /// A memory-window Invalidate.
    Invalidate = 3,
    /// An RDMA Read.
    Read = 4,
    /// An RDMA Write.
    Write = 5,
}

/// `ND2_RESULT`: one completion (§1.10). `#[repr(C)]`, 32 bytes, the same layout as the C struct
/// with the two `VOID*` contexts as `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NdResult {
    /// The request's final status.
    pub status: Status,
    /// For a successful Receive, the bytes received. The SPI leaves it undefined for the
    /// other requests; every provider here reports a successful Send's, Write's or Read's
    /// length (the total of its SGEs, as ND v1 and WinOF do) and 0 for the rest and for
    /// failures, so a byte count does not change with the provider.
    pub bytes_transferred: u32,
    /// The `context` given when the queue pair was created (D14: `QueuePairContext`).
    pub qp_context: u64,
    /// The per-request context.
    pub request_context: u64,
    /// Which kind of request completed.
    pub request_type: RequestType,
}

impl NdResult {
    /// An all-zero placeholder, for sizing result arrays.
    pub const EMPTY: Self = Self {
        status: Status::SUCCESS,
        bytes_transferred: 0,
        qp_context: 0,
        request_context: 0,
        request_type: RequestType::Receive,
    };

    /// The completion of a Receive: `bytes` received (0 unless `status` is a success) into
    /// the request `request_context` of the queue pair created with `qp_context`.
    #[must_use]
    pub const fn receive(
        qp_context: u64,
        request_context: u64,
        status: Status,
        bytes: u32,
    ) -> Self {
        Self {
            status,
            bytes_transferred: bytes,
            qp_context,
            request_context,
            request_type: RequestType::Receive,
        }
    }
}

impl Default for NdResult {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// `ND2_SGE`: one scatter/gather element (§1.10). `#[repr(C)]`, 16 bytes.
///
/// `buffer` is a raw address inside a registered memory region whose *local* token is
/// `memory_region_token` (the token may be anything for `INLINE` requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Sge {
    /// First byte.
    pub buffer: *mut u8,
    /// Length in bytes.
    pub buffer_length: u32,
    /// The memory region's local token (`IND2MemoryRegion::GetLocalToken`).
    pub memory_region_token: u32,
}

// SAFETY: an `Sge` is a plain description of memory (address, length, token); it is never
// dereferenced without the registration checks of the provider, and the unsafe post methods
// carry the contract about the memory it names.
unsafe impl Send for Sge {}
// SAFETY: as above; an `Sge` has no interior mutability.
unsafe impl Sync for Sge {}

impl Sge {
    /// Describe `len` bytes at `buffer`, registered under `token`.
    pub const fn new(buffer: *mut u8, len: u32, token: u32) -> Self {
        Self {
            buffer,
            buffer_length: len,
            memory_region_token: token,
        }
    }
}

/// `ND2_ADAPTER_INFO` (§1.10): the adapter's limits and capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct AdapterInfo {
    /// The structure version; callers pass `ND_VERSION_2` (D2).
    pub info_version: u32,
    /// Vendor (typically an OUI).
    pub vendor_id: u16,
    /// Vendor-defined device id.
    pub device_id: u16,
    /// Unique adapter id.
    pub adapter_id: u64,
    /// The largest single registration.
    pub max_registration_size: usize,
    /// Not used by ND.
    pub max_window_size: usize,
    /// Most SGEs per Send/Read/Write.
    pub max_initiator_sge: u32,
    /// Most SGEs per Receive.
    pub max_receive_sge: u32,
    /// Most SGEs per Read (≤ `max_initiator_sge`).
    pub max_read_sge: u32,
    /// Most bytes one request moves, across all its SGEs.
    pub max_transfer_length: u32,
    /// Most inline bytes per request.
    pub max_inline_data_size: u32,
    /// Most Reads in flight that target this side.
    pub max_inbound_read_limit: u32,
    /// Most Reads in flight that this side issues.
    pub max_outbound_read_limit: u32,
    /// Deepest receive queue.
    pub max_receive_queue_depth: u32,
    /// Deepest initiator queue.
    pub max_initiator_queue_depth: u32,
    /// Deepest shared receive queue (0: SRQs not supported).
    pub max_shared_receive_queue_depth: u32,
    /// Deepest completion queue.
    pub max_completion_queue_depth: u32,
    /// Below this size inline beats DMA.
    pub inline_request_threshold: u32,
    /// Above this size Read/Write beat Send/Receive.
    pub large_request_threshold: u32,
    /// Most private-data bytes in Connect.
    pub max_caller_data: u32,
    /// Most private-data bytes in Accept and Reject.
    pub max_callee_data: u32,
    /// `ND_ADAPTER_FLAG_*`.
    pub adapter_flags: AdapterFlags,
}

/// Inbound and outbound RDMA Read limits (IRD/ORD), as `GetReadLimits` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadLimits {
    /// Reads the peer may have in flight against us.
    pub inbound: u32,
    /// Reads we may have in flight against the peer.
    pub outbound: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_c_structs() {
        assert_eq!(size_of::<NdResult>(), 32);
        assert_eq!(size_of::<Sge>(), 16);
        assert_eq!(size_of::<AdapterInfo>(), 96);
        assert_eq!(core::mem::offset_of!(AdapterInfo, adapter_flags), 92);
        assert_eq!(core::mem::offset_of!(NdResult, request_type), 24);
    }

    #[test]
    fn remote_write_implies_local_write() {
        assert!(MrFlags::ALLOW_REMOTE_WRITE.contains(MrFlags::ALLOW_LOCAL_WRITE));
    }
}

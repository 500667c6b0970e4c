//! ND v1: the MS-MPI-era SPI (`INDProvider` ... `INDEndpoint`, the "HPC Pack 2008 SDK
//! interface" of `ndspi.h`), over the same providers and the same engine as the v2 API.
//!
//! Every v1 interface is a type here and every method keeps its snake_case name. Each is a
//! thin front-end over the v2 objects of this crate (docs/ARCHITECTURE.md, "ND v1"):
//!
//! | v1 | runs as |
//! |---|---|
//! | [`Provider::open_adapter`] (by IP) | `ResolveAddress` + `OpenAdapter`; the adapter keeps the IP |
//! | [`Adapter::register_memory`] → [`MrHandle`] | a v2 region registered with full access |
//! | [`Adapter::listen`] (backlog, protocol, port) | a v2 listener bound to the adapter's IP, listening |
//! | [`Connector::create_endpoint`] → [`Endpoint`] | a v2 queue pair; the read limits are kept for Connect/Accept |
//! | [`Endpoint::bind`] → [`MwDescriptor`] | v2 `Bind`; the descriptor is {address, length, token}, big-endian |
//! | [`Endpoint::read`]/[`Endpoint::write`] (descriptor, offset) | v2 Read/Write at `ntoh64(Base) + Offset` under `Token` |
//! | [`Endpoint::send_and_invalidate`] | the SPI's `send_and_invalidate`: an RDMAP Send with Invalidate (RFC 5040 §5.3) on `tcp`, an INVAL record before the Send on `shm` |
//! | [`CompletionQueue::get_results`] | v2 `GetResults`; the request context *is* the caller's [`NdResult1`] |
//!
//! The wire is the v2 wire, so a v1 endpoint and a v2 queue pair connect to each other.
//! A v1 listener serves IANA protocol 6 (TCP, [`PROTOCOL_TCP`]), the protocol every v1
//! program (ndconn, MS-MPI) names; a v2 peer, whose listener has no protocol, is
//! reached with it as well.
//!
//! Ports are `USHORT`s in **network byte order**, as v1 passes them (`Listen`'s `Port` and
//! `pAssignedPort`, `Connect`'s `LocalPort`); addresses are `SocketAddr`s.

mod adapter;
mod connector;
mod cq;
mod endpoint;
mod listen;
mod mw;
mod provider;

pub use adapter::Adapter;
pub use connector::Connector;
pub use cq::CompletionQueue;
pub use endpoint::Endpoint;
pub use listen::Listen;
pub use mw::MemoryWindow;
pub use provider::Provider;

use std::num::NonZeroU64;

use crate::Status;

/// The IANA protocol number v1 listeners serve: 6, TCP (`Listen`'s and `Connect`'s
/// `Protocol`).
pub const PROTOCOL_TCP: i32 = 6;

/// `ND_RESULT`: what a v1 request reports when it completes, in memory the caller owns.
///
/// A post takes a pointer to one; [`CompletionQueue::get_results`] fills in `status` and
/// `bytes_transferred` and hands the same pointer back. `bytes_transferred` is defined for
/// Send, SendAndInvalidate, Receive, Read and Write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NdResult1 {
    /// The request's ND status.
    pub status: Status,
    /// Bytes sent, received, read or written.
    pub bytes_transferred: usize,
}

impl NdResult1 {
    /// A result not yet filled in (`ND_PENDING`, 0 bytes).
    pub const PENDING: Self = Self {
        status: Status::PENDING,
        bytes_transferred: 0,
    };
}

impl Default for NdResult1 {
    fn default() -> Self {
        Self::PENDING
    }
}

/// `ND_MR_HANDLE`: a registration made by [`Adapter::register_memory`].
///
/// Opaque. (It carries the region's local token in its low 32 bits, so that a post finds it
/// without a lookup, and a nonzero serial number above them.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct MrHandle(NonZeroU64);

impl MrHandle {
    pub(crate) fn new(serial: u32, local_token: u32) -> Self {
        let v = (u64::from(serial.max(1)) << 32) | u64::from(local_token);
        Self(NonZeroU64::new(v).unwrap_or(NonZeroU64::MIN))
    }

    /// The handle's bits (what the C ABI stores in an `ND_MR_HANDLE`).
    pub fn to_raw(self) -> u64 {
        self.0.get()
    }

    /// A handle from its bits; `None` for 0 (`NULL`).
    pub fn from_raw(raw: u64) -> Option<Self> {
        NonZeroU64::new(raw).map(Self)
    }

    pub(crate) fn local_token(self) -> u32 {
        self.0.get() as u32
    }
}

/// `ND_SGE`: `pAddr`, `Length` (`SIZE_T`), `hMr`. With `mr` `None` (a NULL `hMr`) the bytes
/// are sent **inline**: copied during the call, unregistered memory allowed (Send, Write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Sge1 {
    /// The first byte.
    pub addr: *mut u8,
    /// Bytes (at most `u32::MAX`, else the post fails `ND_BUFFER_OVERFLOW`).
    pub length: usize,
    /// The registration holding the bytes; `None` sends them inline.
    pub mr: Option<MrHandle>,
}

// SAFETY: a plain description of memory; the unsafe posts carry the contract about it.
unsafe impl Send for Sge1 {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for Sge1 {}

impl Sge1 {
    /// An SGE of `length` bytes at `addr` in registration `mr` (`None`: inline).
    pub const fn new(addr: *mut u8, length: usize, mr: Option<MrHandle>) -> Self {
        Self { addr, length, mr }
    }
}

/// `ND_MW_DESCRIPTOR`: a bound window, to send to the peer. `#pragma pack(1)`, 20 bytes,
/// **every field in network byte order** (it travels as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, packed)]
pub struct MwDescriptor {
    /// The window's base address, big-endian.
    pub base: u64,
    /// The window's length, big-endian.
    pub length: u64,
    /// The access token, as the peer passes it (the v2 remote token, already in network
    /// byte order).
    pub token: u32,
}

impl MwDescriptor {
    /// A descriptor from host-order values.
    pub const fn new(base: u64, length: u64, token: u32) -> Self {
        Self {
            base: base.to_be(),
            length: length.to_be(),
            token,
        }
    }

    /// The base address, host order.
    pub fn base(&self) -> u64 {
        u64::from_be(self.base)
    }

    /// The length, host order.
    pub fn length(&self) -> u64 {
        u64::from_be(self.length)
    }

    /// The token, as it travels.
    pub fn token(&self) -> u32 {
        self.token
    }

    /// The 20 bytes as they go to the peer.
    pub fn to_bytes(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..8].copy_from_slice(&self.base().to_be_bytes());
        b[8..16].copy_from_slice(&self.length().to_be_bytes());
        b[16..].copy_from_slice(&{ self.token }.to_ne_bytes());
        b
    }

    /// A descriptor from the 20 bytes a peer sent.
    pub fn from_bytes(b: &[u8; 20]) -> Self {
        let base = u64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8]));
        let length = u64::from_be_bytes(b[8..16].try_into().unwrap_or([0; 8]));
        let token = u32::from_ne_bytes(b[16..].try_into().unwrap_or([0; 4]));
        Self::new(base, length, token)
    }
}

/// `ND_ADAPTER_INFO1` (`Query` with `VersionRequested` 1). `SIZE_T` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct AdapterInfo1 {
    /// Vendor id.
    pub vendor_id: u32,
    /// Device id.
    pub device_id: u32,
    /// SGEs of a Receive.
    pub max_inbound_sge: usize,
    /// Receives an endpoint may have posted.
    pub max_inbound_requests: usize,
    /// Bytes of one Receive.
    pub max_inbound_length: usize,
    /// SGEs of an outbound request (Send, Bind, Invalidate, Read, Write).
    pub max_outbound_sge: usize,
    /// Outbound requests an endpoint may have outstanding.
    pub max_outbound_requests: usize,
    /// Bytes of one outbound request.
    pub max_outbound_length: usize,
    /// Bytes an inline request (an SGE with no `hMr`) may carry.
    pub max_inline_data: usize,
    /// Reads in flight a local endpoint serves.
    pub max_inbound_read_limit: usize,
    /// Reads in flight a local endpoint may issue.
    pub max_outbound_read_limit: usize,
    /// Results a completion queue holds.
    pub max_cq_entries: usize,
    /// Bytes of one registration.
    pub max_registration_size: usize,
    /// Bytes of one window.
    pub max_window_size: usize,
    /// Above this size Read/Write beats Send.
    pub large_request_threshold: usize,
    /// Private data bytes of Connect.
    pub max_caller_data: usize,
    /// Private data bytes of Accept and Reject.
    pub max_callee_data: usize,
}

impl AdapterInfo1 {
    /// The v1 view of the v2 limits (nd-v1 mapping: inbound = Receive, outbound = initiator).
    pub(crate) fn from_v2(i: &crate::AdapterInfo) -> Self {
        let z = |v: u32| v as usize;
        Self {
            vendor_id: u32::from(i.vendor_id),
            device_id: u32::from(i.device_id),
            max_inbound_sge: z(i.max_receive_sge),
            max_inbound_requests: z(i.max_receive_queue_depth),
            max_inbound_length: z(i.max_transfer_length),
            max_outbound_sge: z(i.max_initiator_sge),
            max_outbound_requests: z(i.max_initiator_queue_depth),
            max_outbound_length: z(i.max_transfer_length),
            max_inline_data: z(i.max_inline_data_size),
            max_inbound_read_limit: z(i.max_inbound_read_limit),
            max_outbound_read_limit: z(i.max_outbound_read_limit),
            max_cq_entries: z(i.max_completion_queue_depth),
            max_registration_size: i.max_registration_size,
            max_window_size: i.max_window_size,
            large_request_threshold: z(i.large_request_threshold),
            max_caller_data: z(i.max_caller_data),
            max_callee_data: z(i.max_callee_data),
        }
    }
}

/// A v2 status as v1 reports it for the same call: v2's `ND_INVALID_BUFFER_SIZE` for too
/// much private data is v1's `ND_BUFFER_OVERFLOW` (Connect, Accept, Reject).
pub(crate) fn private_data_status(e: crate::Error) -> crate::Error {
    if e.status() == Status::INVALID_BUFFER_SIZE {
        crate::Error::new(Status::BUFFER_OVERFLOW)
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_c_structs() {
        assert_eq!(size_of::<NdResult1>(), 16);
        assert_eq!(size_of::<Sge1>(), 24);
        assert_eq!(size_of::<Option<MrHandle>>(), 8);
        assert_eq!(size_of::<MwDescriptor>(), 20);
        assert_eq!(size_of::<AdapterInfo1>(), 128);
    }

    #[test]
    fn descriptors_travel_big_endian() {
        let d = MwDescriptor::new(0x1122_3344_5566_7788, 4096, 0xAABB_CCDD);
        let b = d.to_bytes();
        assert_eq!(b[0], 0x11);
        assert_eq!(b[15], 0x00);
        assert_eq!(b[14], 0x10);
        assert_eq!(MwDescriptor::from_bytes(&b), d);
        assert_eq!(d.base(), 0x1122_3344_5566_7788);
        assert_eq!(d.length(), 4096);
    }

    #[test]
    fn handles_carry_the_token_and_are_never_null() {
        let h = MrHandle::new(0, 0);
        assert_ne!(h.to_raw(), 0);
        let h = MrHandle::new(7, 0xDEAD_BEEF);
        assert_eq!(h.local_token(), 0xDEAD_BEEF);
        assert_eq!(MrHandle::from_raw(h.to_raw()), Some(h));
        assert_eq!(MrHandle::from_raw(0), None);
    }
}

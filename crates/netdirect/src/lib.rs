//! # netdirect: NetworkDirect v2 for Linux
//!
//! Microsoft's NetworkDirect (ND) RDMA programming model as a Rust library. A [`Provider`]
//! opens an [`Adapter`]; the adapter creates [`CompletionQueue`]s, [`MemoryRegion`]s,
//! [`MemoryWindow`]s, [`SharedReceiveQueue`]s, [`QueuePair`]s, [`Connector`]s and
//! [`Listener`]s. Every ND v2 method is here under its snake_case name, and every call reports
//! the exact ND status the SPI documents ([`Status`], carried by [`Error`]).
//!
//! Providers, all in software, no RDMA hardware needed:
//! * `tcp` (default): iWARP — RDMAP, DDP, MPA v2 — over kernel TCP; interoperates on the wire.
//! * `shm`: same-host, over lock-free rings in shared memory, with every ND semantic of `tcp`.
//!
//! Select one with `ND_PROVIDER` (`tcp`, `shm,tcp`, `^shm`) or [`Provider::open`]. The ND
//! support library's helpers (`NdResolveAddress`, `NdOpenAdapter`, ...) are in [`support`].
//!
//! ## Asynchronous requests
//! ND's overlapped requests are [`Overlapped`] handles: poll them
//! (`get_overlapped_result(false)` → `ND_PENDING`), block (`wait()`), or `.await` them.
//! Nothing runs in the background: the thread that polls a completion queue or waits on a
//! request drives the provider's I/O itself, so a polling loop costs no thread hand-offs and a
//! blocked wait costs one wake-up.
//!
//! ## Memory safety
//! Registered memory is written by an agent Rust cannot see (a Receive, a peer's RDMA Write).
//! The ND-shaped posts therefore are `unsafe fn`s with a `# Safety` contract; the provider
//! checks every SGE and every inbound access against the registration (token, bounds,
//! rights), so the only promise left to you is not to touch memory while a request owns it
//! (and, for an `INLINE` Send or Write, whose tokens ND leaves unchecked, that its memory is
//! readable during the call).
//! [`Buffer`] + [`MemoryRegion::register_buffer`] keep memory alive for as long as the provider
//! can touch it.
//!
//! Rule ids (`R-MW-1`, `D7`, ...) refer to the repository's `docs/ND-RULES.md`, the ND rules this
//! library follows.

mod adapter;
mod connect;
mod cq;
mod memory;
mod provider;
mod qp;
pub mod support;

pub use adapter::Adapter;
pub use connect::{Connector, Listener};
pub use cq::{CompletionQueue, SharedReceiveQueue};
pub use memory::{Buffer, MemoryRegion, MemoryWindow};
pub use netdirect_spi::kit::overlapped::Overlapped;
pub use netdirect_spi::kit::progress::ProgressMode;
pub use netdirect_spi::{
    AdapterFlags, AdapterInfo, Error, MrFlags, NdResult, NotifyType, OpFlags, ReadLimits,
    RequestType, Result, Sge, Status, ND_VERSION_1, ND_VERSION_2,
};
pub use provider::{Provider, DEFAULT_PROVIDER};
pub use qp::QueuePair;

/// The provider interface, for people writing providers.
pub mod spi {
    pub use netdirect_spi::kit;
    pub use netdirect_spi::limits;
    pub use netdirect_spi::traits::*;
}

/// Configuration variables of the built-in providers (`nd info` prints them).
pub mod config {
    /// The `shm` provider's variables (`ShmVariable` is the same type as `Variable`).
    pub use netdirect_shm::config::{Variable as ShmVariable, VARIABLES as SHM_VARIABLES};
    pub use netdirect_tcp::config::{Variable, VARIABLES as TCP_VARIABLES};
}

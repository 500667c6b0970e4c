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
//! ND v1, the older SPI MS-MPI programs use (`INDAdapter`, `INDEndpoint`, ...), is [`v1`],
//! over the same providers and wire.
//!
//! ## Quick start
//!
//! A server and a client on one host: the server posts a Receive and accepts; the client
//! connects and Sends. Add `netdirect = "0.1"` to `[dependencies]`; no RDMA hardware is needed.
//!
//! ```
//! use std::thread;
//! use netdirect::{Buffer, ConnectConfig, MrFlags, OpFlags, Provider, QueuePairConfig, Sge};
//!
//! fn main() -> netdirect::Result<()> {
//!     // ND_PROVIDER picks the provider: `tcp` (the default) or `shm`.
//!     let adapter = Provider::from_env()?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
//!
//!     // Server: listen on a port the provider picks; accept one client; receive one message.
//!     let listener = adapter.create_listener()?;
//!     listener.bind("127.0.0.1:0".parse().unwrap())?;
//!     listener.listen(0)?;
//!     let server_addr = listener.get_local_address()?;
//!     let a = adapter.clone();
//!     let server = thread::spawn(move || -> netdirect::Result<Vec<u8>> {
//!         let cq = a.create_completion_queue(16, 0, 0)?;
//!         let qp = a.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
//!         let buf = Buffer::new(64)?;
//!         let mr = a.create_memory_region()?;
//!         mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?.wait()?;
//!         // SAFETY: the buffer is not touched until the Receive completes.
//!         unsafe { qp.receive(1, &[buf.sge(0..64, mr.get_local_token())])? };
//!         let connector = a.create_connector()?;
//!         listener.get_connection_request(&connector)?.wait()?;
//!         connector.accept_with(&qp, &ConnectConfig::new())?.wait()?;
//!         let received = cq.wait_for_context(1, None)?;
//!         // SAFETY: the Receive completed, so nothing writes the buffer any more.
//!         let message = unsafe { &buf.as_slice()[..received.bytes_transferred as usize] };
//!         Ok(message.to_vec())
//!     });
//!
//!     // Client: connect, then Send. INLINE copies the bytes during the call, so they need
//!     // no registration; larger messages go from registered memory, like the Receive above.
//!     let cq = adapter.create_completion_queue(16, 0, 0)?;
//!     let qp = adapter.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
//!     let connector = adapter.create_connector()?;
//!     connector.bind("127.0.0.1:0".parse().unwrap())?;
//!     connector.connect_with(&qp, server_addr, &ConnectConfig::new())?.wait()?;
//!     connector.complete_connect()?.wait()?;
//!     let message = b"hello, RDMA";
//!     let sge = Sge::new(message.as_ptr().cast_mut(), message.len() as u32, 0);
//!     // SAFETY: `message` is readable for the call, which is all INLINE needs.
//!     unsafe { qp.send(2, &[sge], OpFlags::INLINE)? };
//!     cq.wait_for_context(2, None)?;
//!
//!     assert_eq!(server.join().unwrap()?, message);
//!     connector.disconnect()?.wait()?;
//!     Ok(())
//! }
//! ```
//!
//! `examples/hello_rdma.rs` goes on to RDMA Write and Read, with the memory's address and token
//! passed in the private data; `examples/tokio_echo.rs` serves many connections from one
//! thread under tokio (feature `tokio`, `netdirect::tokio::AdapterDriver`).
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
//!
//! ## Features
//!
//! * `tokio`: `netdirect::tokio::AdapterDriver`, which drives an adapter's I/O from tokio's
//!   reactor so that tasks can `.await` requests and completions.

#![warn(missing_docs)]

mod adapter;
mod connect;
mod cq;
mod memory;
pub mod ndk;
mod provider;
mod qp;
pub mod support;
pub mod v1;

pub use adapter::{Adapter, QueuePairConfig};
pub use connect::{ConnectConfig, Connector, Listener};
pub use cq::{CompletionQueue, SharedReceiveQueue};
pub use memory::{Buffer, MemoryRegion, MemoryWindow};
/// # Example
///
/// Block on a request, or poll it (`ND_PENDING` while it runs), or `.await` it:
///
/// ```
/// use netdirect::{Buffer, MrFlags, Provider};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let buf = Buffer::new(4096)?;
/// let mr = adapter.create_memory_region()?;
/// mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?.wait()?; // block
///
/// let deregistered = mr.deregister()?;
/// loop {
///     match deregistered.get_overlapped_result(false) {
///         Err(e) if e.is_pending() => std::thread::yield_now(), // still running
///         done => break done?,
///     }
/// }
///
/// // A request that fails says so with its exact ND status:
/// let listener = adapter.create_listener()?;
/// listener.bind("127.0.0.1:0".parse().unwrap())?;
/// listener.listen(0)?;
/// let request = listener.get_connection_request(&adapter.create_connector()?)?;
/// listener.cancel_overlapped_requests()?;
/// let e = request.wait().unwrap_err();
/// assert_eq!(e.status(), netdirect::Status::CANCELED);
/// println!("{e:?}"); // Error { status: ND_CANCELED (0xC0000120): ... }
/// # Ok(())
/// # }
/// ```
///
/// A request nobody waits for is a warning (`unused_must_use`), since its result would be
/// lost; here made an error:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn finish(connector: &netdirect::Connector) -> netdirect::Result<()> {
///     connector.complete_connect()?; // forgot `.wait()?`
///     Ok(())
/// }
/// # fn main() {}
/// ```
pub use netdirect_spi::kit::overlapped::Overlapped;
pub use netdirect_spi::kit::progress::ProgressMode;
pub use netdirect_spi::{
    AdapterFlags, AdapterInfo, Error, MrFlags, NdResult, NotifyType, OpFlags, ReadLimits,
    RequestType, Result, Sge, Status, ND_VERSION_1, ND_VERSION_2,
};
pub use provider::{Provider, DEFAULT_PROVIDER};
pub use qp::QueuePair;

#[cfg(feature = "tokio")]
pub mod tokio;

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

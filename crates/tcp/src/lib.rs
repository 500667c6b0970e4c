//! `tcp`: a NetworkDirect v2 provider that speaks iWARP (RFC 5040 RDMAP, RFC 5041 DDP,
//! RFC 5044 MPA with RFC 6581 enhancements) over the kernel's TCP.
//!
//! Applications reach it through the `netdirect` crate (`ND_PROVIDER=tcp`, the default). The
//! wire protocol itself lives in the sans-IO `netdirect-wire` crate; this crate owns the
//! sockets and drives the protocol:
//!
//! * [`engine`](crate) — one epoll set per adapter; the waiting caller drives the I/O.
//! * `qp` — the data path: framing Sends into FPDUs, placing inbound segments.
//! * `connector`, `listener` — connection management: TCP connect/accept, the MPA
//!   Request/Reply exchange, the RTR that completes `Accept`.
//! * `srq` — shared receive queues: Receives many queue pairs take from, and the wake-up of
//!   queue pairs holding a Send until one is posted.
//!
//! ND ports are TCP ports (an identity mapping), so a `tcp` listener is reachable by any iWARP
//! peer that connects to that TCP port.
//!
//! Rule ids (`R-QP-7`, `D5`, ...) refer to the repository's `docs/ND-RULES.md`; wire facts cite
//! their RFC section and `docs/WIRE.md`.

#![warn(missing_docs)]
// `unsafe` appears only where application memory is touched by address (`mem`), in the
// SPI's unsafe post methods, whose contracts it forwards, and in the wake signal's
// installation and handler (`wake`).
#![deny(unsafe_op_in_unsafe_fn)]

mod adapter;
mod claim;
pub mod config;
mod connector;
mod cq;
mod engine;
#[doc(hidden)]
pub mod forge;
mod listener;
mod mem;
#[doc(hidden)]
pub mod protect;
mod qp;
mod sockets;
mod srq;
mod wake;

use std::net::SocketAddr;
use std::sync::Arc;

use netdirect_spi::traits;
use netdirect_spi::{fail, Result, Status};

pub use adapter::ADAPTER_ID;

/// This provider's side of the SPI kit's generic objects: a type with no values, only the
/// kit's provider traits, each implemented beside the code it plugs in (`adapter`: the
/// adapter; `connector`: the connector and its state; `listener`: the listener and its state;
/// `srq`: the shared receive queue).
#[derive(Debug)]
pub(crate) enum Tcp {}

/// The provider object.
#[derive(Debug, Default)]
pub struct TcpProvider;

impl TcpProvider {
    /// The provider.
    pub fn new() -> Self {
        Self
    }
}

/// The addresses this adapter serves: the SPI kit's, shared with the other software providers.
pub(crate) use netdirect_spi::kit::addresses::{is_local, local_addresses};

impl traits::Provider for TcpProvider {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        local_addresses()
    }

    fn resolve_address(&self, addr: &SocketAddr) -> Result<u64> {
        if is_local(addr.ip()) {
            Ok(ADAPTER_ID)
        } else {
            fail(Status::INVALID_ADDRESS)
        }
    }

    fn open_adapter(&self, adapter_id: u64) -> Result<Arc<dyn traits::Adapter>> {
        if adapter_id != ADAPTER_ID {
            return fail(Status::INVALID_PARAMETER);
        }
        Ok(adapter::open()?)
    }
}

//! Building blocks shared by the software providers (`tcp`, `shm`): the overlapped-request
//! model, a completion queue, the registration table with its access checks, and the
//! ND objects themselves where they do not depend on the transport (adapter, memory region and
//! window, shared receive queue) and the transport-independent halves of the rest (connector and
//! listener), each generic over the little its provider plugs in.
//! A provider built on hardware (verbs) would not need them; they sit beside the SPI, not
//! inside it.

pub mod adapter;
pub mod addresses;
pub mod affinity;
pub mod config;
pub mod connector;
pub mod cq;
pub mod listener;
pub mod mr;
pub mod mw;
pub mod negotiate;
pub mod overlapped;
pub mod ports;
pub mod progress;
pub mod qp;
pub mod shared_mem;
pub mod srq;
pub mod timers;
pub mod waiters;
pub mod wrq;

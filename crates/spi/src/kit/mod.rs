//! Building blocks shared by the software providers (`tcp`, `shm`): the overlapped-request
//! model, a completion queue, and the registration table with its access checks. A provider
//! built on hardware (verbs) would not need them; they sit beside the SPI, not inside it.

pub mod cq;
pub mod mr;
pub mod negotiate;
pub mod overlapped;
pub mod srq;

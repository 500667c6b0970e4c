//! `shm`: a NetworkDirect v2 provider for peers on the same host, over shared memory.
//!
//! Applications reach it through the `netdirect` crate (`ND_PROVIDER=shm`, or
//! `Provider::open("shm")`). It serves 127.0.0.0/8, `::1` and the host's own addresses with the
//! same IP:port addressing and the same connection semantics as the `tcp` provider, so an
//! application switches providers and nothing else.
//!
//! # Design
//!
//! **Rendezvous** (`proto`, `listener`, `connector`). An ND port is held in the kernel's port
//! space by a socket bound to it that carries nothing (a listener's in TCP's, a connector's in
//! UDP's, so the two stay apart, R-CONN-2): the kernel's bind rules decide every clash, across
//! processes, as for `tcp` (`ND_SHARING_VIOLATION`), and a crashed process's ports go with it;
//! port 0 picks a free one in 49152–65535. A listener waits on the *abstract* Unix-socket name
//! of its address (`\0netdirect-shm/L/<ip>/<port>`; not a file, so nothing is left behind).
//! `Connect` creates the connection's segment with `memfd_create` (sealed against shrinking and
//! growing), connects a `SOCK_SEQPACKET` socket to the listener's name (the destination's, else
//! its family's wildcard listener's) and sends a REQUEST (read limits, ring sizes, addresses,
//! private data) with the memfd attached (`SCM_RIGHTS`). The listener checks the request and the descriptor
//! (a sealed memfd of exactly the announced size) and hands it to `GetConnectionRequest`;
//! `Accept` answers ACCEPT (limits clamped as `tcp` clamps them) or `Reject` answers REJECT.
//! `CompleteConnect` writes an RTR record as the first record of the active side's ring; the
//! passive `Accept` completes when it arrives. The socket stays open for the connection's life:
//! end-of-file on it means the peer disconnected or died.
//!
//! **Segment** (`segment`). One memfd per connection, mapped by both processes:
//!
//! ```text
//! 0      header line   magic, version, ring sizes (checked once by the passive side)
//! 64     side 0 lines  waiting, closed, can_pull, nonce_addr, proof, lease_epoch | copying
//!                      (active side only; `copying` alone in the second line)
//! 192    side 1 lines  the same                                              (passive side only)
//! 320    channel 0     active → passive:  consumer line | N cells × 64 B | D data bytes
//! ...    channel 1     passive → active:  consumer line | N cells × 64 B | D data bytes
//! ```
//!
//! Defaults: N = 256 cells, D = 512 KiB per direction (`ND_SHM_CELLS`, `ND_SHM_DATA_KIB`,
//! [`config::VARIABLES`]).
//!
//! **Ring protocol** (`ring`). Each channel is a single-producer/single-consumer ring. A record
//! is one 64-byte cell: a sequence word (the record's position + 1, stored last with Release),
//! kind and flags, a length, and 48 inline bytes. A message of at most 48 bytes travels inside
//! its cell, so the receiver's poll of the one cell it expects next brings in the mark and the
//! data in a single cache-line transfer. Larger messages are CHUNK records whose bytes sit in
//! the channel's data area at an offset both sides derive from the record lengths (never
//! exchanged); a message larger than `ND_SHM_CHUNK_KIB` is several chunks, so the receiver
//! copies the first while the sender writes the next. The consumer gives space back by storing
//! its positions in its own line; the producer reads them only when its cached copy says
//! "full". Every index read from shared memory is masked, every length checked against the cell
//! or the data area, and a record that breaks the protocol terminates the connection.
//!
//! **Data path.** A Send of at most 48 bytes with nothing queued ahead is written straight into
//! the next cell inside `Send` and completes at once (its bytes are in the ring: local
//! completion, as `tcp` completes a Send once TCP took it). Larger or blocked Sends wait in the
//! send queue and move into the ring as space frees, driven by whoever polls or waits. The
//! receiver's `GetResults` drives its queue pairs itself: the CQ (`cq`) keeps, in front of the
//! kit's `CqCore`, a count of queued completions and the links of its queue pairs, so a poll that
//! finds nothing costs a few loads (the one cell the ring expects next, and local flags), takes
//! no lock and touches no reference count; a poll that finds a record takes the queue pair's lock
//! once, copies the records into the posted Receives in order, with every ND rule of the `tcp`
//! provider (`ND_DATA_OVERRUN` and termination for a message larger than the Receive, zero-byte
//! Sends, flush with `ND_CANCELED` on disconnect or peer death), and returns the space. No
//! syscall happens on this path while both sides poll.
//!
//! **Large messages.** By default a message of more than 48 bytes is copied twice: into the data
//! area by the sender, out of it by the receiver, chunk by chunk, so the two copies run at once
//! on two cores. With `ND_SHM_PULL_MIN_KIB=n`, Sends of at least n KiB are pulled instead: the
//! sender publishes an RTS record with its scatter list, the receiver copies the message straight
//! from the sender's memory with `process_vm_readv` (one copy, no sender CPU) and answers with an
//! ACK record that completes the Send. Each side probes at connection time whether the kernel
//! lets it read its peer (same user, no ptrace restriction) and says so in its side line; a
//! sender pulls only toward a receiver that can. On this VM the pipelined two-copy path measured
//! faster (1 MiB ping-pong 70 µs against 137 µs, with `process_vm_readv` itself at ~10 GB/s at
//! the time), hence the default; one-sided Read and Write will revisit the choice.
//!
//! **Wake-up handshake** (`ring::wake`, `engine`). A thread that blocks (`Overlapped::wait`, a
//! CQ Notify wait) drives progress itself, then *arms* each connection of its adapter: it sets
//! its side's `waiting` word, issues a full fence, and re-checks the ring. If nothing is ready
//! it sleeps in `epoll_wait` on the adapter's descriptor, which holds the connections' sockets.
//! The `waiting` word holds two flags: `ASLEEP` (the side sleeps, or an event loop watches its
//! descriptor) and `WANTS_SPACE` (the side holds output the ring had no room for). A side that
//! publishes a record issues a full fence and reads the peer's word; if `ASLEEP` is set, it
//! sends one WAKE message on the socket. A side that frees space wakes the peer only if it is
//! asleep *and* wants space, so a plain ping-pong costs one WAKE per message, not two. A side
//! that raises `WANTS_SPACE` re-checks the ring's tails afterwards. Either the sleeper sees the
//! change or the changer sees the sleeper (a Dekker handshake, model-checked with loom), so no
//! wake-up is lost, and a busy-polling peer never pays for one. There is no helper thread.
//!
//! **Peer death.** A killed process's descriptors are closed by the kernel: the survivor's
//! socket reads end-of-file. A sleeping survivor (or the progress engine, asleep on the same
//! epoll set) wakes on it at once; a polling one checks the socket every 4096 idle polls or
//! every 10 ms of them, whichever comes first (one `recvmsg`; the time from the coarse clock,
//! no system call, read every second idle poll), so the death is seen within 10 ms plus two
//! polling periods at any polling rate. Either way it drains the records the peer had
//! published and flushes the rest with `ND_CANCELED`.
//!
//! **Trust.** See "Trust model of the shm provider" in `docs/ARCHITECTURE.md`: a same-host peer
//! can garble or withhold its own messages and end the connection, but cannot make us read or
//! write outside the segment, resize it under us, or touch our other connections.
//!
//! **One-sided operations** (`qp`, `ring`). RDMA Write and Read travel as ring records too
//! (WRITE, WPULL, READ; answered by ACK, RRESP or TERM) and the *target* checks and performs
//! them against its own registration table when it drives its queue pair, so the initiator
//! touches the target's memory only where the target granted it and a Deregister can never
//! race a copy (the target holds the registration while it, or the initiator, copies). A Write
//! of at most 32 bytes rides in one cell with its descriptor; larger ones come through the data
//! area in chunks that the two sides copy in and out at the same time (or, with
//! `ND_SHM_WRITE_PULL_MIN_KIB` set and when the kernel allows it, the target pulls them
//! straight from the initiator with `process_vm_readv`: one copy but one core, slower here).
//! A Write or Read of 64 KiB or more (`ND_SHM_MAP_MIN_KIB`) on shared-mappable target memory
//! (a `netdirect::Buffer` of 64 KiB or more) is copied once, by the initiator, through a
//! mapping of the target's memory that the target grants for it, and only to a peer that has
//! shown it may read and write the target's memory anyway (`mapped`: MAPW or MAPR, GRANT,
//! DONE). Requests are pipelined; the target answers them in order. A Write completes on the
//! target's ACK, a Read once its response is in (or, mapped, either once the initiator's copy
//! is done): its data is in place.
//! A refused access completes `ND_ACCESS_VIOLATION` and ends the connection, as in `tcp`.
//! Memory windows (Bind/Invalidate) and shared receive queues (`srq`, with the
//! receiver-not-ready bound `ND_SHM_RNR_TIMEOUT_MS`) behave as in `tcp`. See "One-sided
//! operations and shared receive queues (shm provider)" in `docs/ARCHITECTURE.md`.
//!
//! # Performance (2-vCPU VM, both ends pinned, `nd pingpong --loopback --provider shm`)
//!
//! | size | shm median half round trip | side by side, same minutes |
//! |---|---|---|
//! | 8 B | 0.175–0.195 µs (p99 0.24–0.32) | UCX UCT `am_lat` posix 0.11–0.16, UCX UCP `tag_lat` (default transports) 0.18–0.19, libfabric `fi_pingpong -p shm` 0.30–0.37, raw two-process flag spin 0.05 |
//! | 4 KiB | 0.47 µs | |
//! | 64 KiB | 3.8 µs | |
//! | 1 MiB | 70–95 µs (11–15 GB/s) | libfabric shm 99–103 µs |
//!
//! One-sided, same conditions (`nd rpingpong` / `nd rping --loopback --provider shm`, pipeline
//! 16; 2026-11-22, other work running on the VM at times, so throughput swings 2–4× between
//! runs):
//!
//! | test | shm | side by side |
//! |---|---|---|
//! | `rpingpong --size 8` (median half round trip) | 0.18–0.19 µs (p99 0.23–0.24) | `pingpong --size 8` 0.18 µs |
//! | `rping --op write --size 8` | 9.4 M Writes/s | |
//! | `rping --op write --size 65536` | 15.6–24.7 GB/s | |
//! | `rping --op write --size 1048576` | 6.9–18.3 GB/s, up to 27–28 in quiet moments | `memcpy_bw` 1 MiB 29–36 GB/s; `pvm_bw` 1 MiB 10.5–11.4 GB/s |
//! | same, `ND_SHM_WRITE_PULL_MIN_KIB=16` (target pulls with `process_vm_readv`) | 10.4–10.7 GB/s | |
//! | same, mapped into the target's `Buffer` (the default now; measured on a later day) | 28.6–29.4 GB/s | through the data area (`ND_SHM_MAP_MIN_KIB=0`) 17–21 GB/s in the same minutes |
//! | `rping --op read --size 1048576` | 7.9–27.9 GB/s | |
//!
//! The host is shared and its state moves (the same flag spin measured 0.05 µs and, minutes
//! later, 0.2–0.6 µs): compare only numbers taken side by side.
//!
//! `cargo run --release -p netdirect-shm --example turnaround` measures the software alone
//! (both ends in one thread, no cross-core traffic): about 117 ns per message for posting the
//! Receive, the Send and reaping both completions.
//!
//! An 8-byte message costs one cache-line transfer each way; the rest of the 0.18 µs is
//! software on the turnaround path: about fifteen serialising instructions (the kit `CqCore`'s
//! mutex for push and take, the queue pair's mutex, reference counts, one fence), plus the
//! benchmark's own clock reads. Large messages are copied twice (see "Large messages").
//! (Measured before the queue pair's mutex was biased to the thread that uses it, `bias`:
//! its six locked instructions per message are gone from a one-thread connection, 3 % of the
//! ping-pong.)
//!
//! # Model checking
//!
//! The ring, the wake-up handshake and the queue pair's biased mutex (`bias`, with
//! `membarrier` modelled by fences) are checked with loom:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p netdirect-shm --release loom
//! ```
//!
//! Under `--cfg loom` only the ring, the biased mutex, their atomics and the models are built
//! (the provider is a stub), so normal builds never depend on loom.
//!
//! Rule ids (`R-QP-7`, `D5`, ...) refer to the repository's `docs/ND-RULES.md`.

#![warn(missing_docs)]
// `unsafe` appears only in `segment` (the mapping and the ring's memory), `mem` (application
// memory by address), `bias` (the biased mutex's cell) and the SPI's unsafe post methods, whose
// contracts the queue pair forwards.
#![deny(unsafe_op_in_unsafe_fn)]
// Under `--cfg loom` only the ring, the biased mutex and their models are built; the rest of
// their API is unused.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

mod bias;
mod ring;
mod sync;

#[cfg(not(loom))]
mod adapter;
pub mod config;
#[cfg(not(loom))]
mod connector;
#[cfg(not(loom))]
mod cq;
#[cfg(not(loom))]
mod engine;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod forge;
#[cfg(not(loom))]
mod link;
#[cfg(not(loom))]
mod listener;
#[cfg(not(loom))]
mod mapped;
#[cfg(not(loom))]
mod mem;
#[cfg(not(loom))]
mod proto;
#[cfg(not(loom))]
mod qp;
#[cfg(not(loom))]
mod segment;
#[cfg(not(loom))]
mod srq;

use std::net::SocketAddr;
use std::sync::Arc;

use netdirect_spi::traits;
use netdirect_spi::{fail, Result, Status};

#[cfg(not(loom))]
pub use adapter::ADAPTER_ID;

/// This provider's side of the SPI kit's generic objects: a type with no values, only the
/// kit's provider traits, each implemented beside the code it plugs in (`adapter`: the
/// adapter; `connector`: the connector and its state; `listener`: the listener and its state;
/// `srq`: the shared receive queue).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) enum Shm {}

/// The provider object.
#[derive(Debug, Default)]
pub struct ShmProvider;

impl ShmProvider {
    /// The provider.
    pub fn new() -> Self {
        Self
    }
}

/// The addresses this adapter serves: the SPI kit's, shared with the other software providers.
pub(crate) use netdirect_spi::kit::addresses::{is_local, local_addresses};

impl traits::Provider for ShmProvider {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        local_addresses()
    }

    fn resolve_address(&self, addr: &SocketAddr) -> Result<u64> {
        if is_local(addr.ip()) {
            #[cfg(not(loom))]
            return Ok(ADAPTER_ID);
        }
        fail(Status::INVALID_ADDRESS)
    }

    #[cfg(not(loom))]
    fn open_adapter(&self, adapter_id: u64) -> Result<Arc<dyn traits::Adapter>> {
        if adapter_id != ADAPTER_ID {
            return fail(Status::INVALID_PARAMETER);
        }
        Ok(adapter::open()?)
    }

    #[cfg(loom)]
    fn open_adapter(&self, _adapter_id: u64) -> Result<Arc<dyn traits::Adapter>> {
        fail(Status::NOT_SUPPORTED)
    }
}

//! Run-time knobs of the `shm` provider, read once per adapter from the environment.
//!
//! Every variable is listed in [`VARIABLES`] with its default and meaning (the `fi_info -e`
//! convention).

// Under `--cfg loom` only the documented list is built (the `netdirect` crate re-exports it).
#[cfg(not(loom))]
use crate::segment::Params;
#[cfg(not(loom))]
use netdirect_spi::kit::config::var;

/// One documented environment variable (the SPI kit's, shared by the software providers).
pub use netdirect_spi::kit::config::Variable;

/// Every variable the provider reads.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "ND_SHM_CELLS",
        default: "256",
        meaning: "64-byte cells per direction of a connection (power of two, 16–65536): how many \
                  records may be in flight",
    },
    Variable {
        name: "ND_SHM_DATA_KIB",
        default: "512",
        meaning: "data area per direction, in KiB (power of two, 4–262144): where messages of \
                  more than 48 bytes travel",
    },
    Variable {
        name: "ND_SHM_CHUNK_KIB",
        default: "64",
        meaning: "largest piece of a message in the data area, in KiB (at most a quarter of the \
                  data area): the pipelining grain of large Sends",
    },
    Variable {
        name: "ND_SHM_MAP_MIN_KIB",
        default: "64",
        meaning: "RDMA Writes and Reads of at least this many KiB on shared-mappable target \
                  memory (a netdirect::Buffer of 64 KiB or more) are copied once, by the \
                  initiator, through a mapping of the target's memory, when the initiator has \
                  shown it may read and write the target's process anyway (same ptrace \
                  access); smaller Writes into such a region are placed by the initiator \
                  within their post once the target leased it the region; 0 turns both off",
    },
    Variable {
        name: "ND_SHM_PULL_MIN_KIB",
        default: "0",
        meaning: "Sends of at least this many KiB are pulled by the receiver straight from the \
                  sender's memory (process_vm_readv, one copy, no sender CPU) when the kernel \
                  allows it; 0 (the default) copies them twice through the data area, which \
                  two cores pipeline and which measured faster here",
    },
    Variable {
        name: "ND_SHM_RNR_TIMEOUT_MS",
        default: "3000",
        meaning: "how long a message that finds no Receive posted (on its queue pair or its \
                  shared receive queue) stays held in the ring before the receiver ends the \
                  connection and the Send fails ND_IO_TIMEOUT (R-QP-7); counted while the \
                  receiving application drives or waits on the adapter",
    },
    Variable {
        name: "ND_SHM_REQUEST_TIMEOUT_MS",
        default: "5000",
        meaning: "how long a listener waits for the REQUEST of a process that connected to its \
                  rendezvous socket before closing the connection (as tcp's \
                  ND_TCP_REQUEST_TIMEOUT_MS), so stray or stalled peers cannot hold its \
                  descriptors",
    },
    Variable {
        name: "ND_SHM_WRITE_PULL_MIN_KIB",
        default: "0",
        meaning: "RDMA Writes of at least this many KiB are pulled by the target straight from \
                  the initiator's memory into the registered target (process_vm_readv, one \
                  copy, one core) when the kernel allows it; 0 (the default) sends every Write \
                  not mapped (ND_SHM_MAP_MIN_KIB) through the data area, two copies that two \
                  cores pipeline, which measured faster here (1 MiB: up to 28 GB/s against \
                  process_vm_readv's 11-21 GB/s)",
    },
];

/// The parsed configuration.
#[cfg(not(loom))]
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) params: Params,
    pub(crate) chunk: usize,
    /// Smallest Send pulled with cross-memory attach (0: never).
    pub(crate) pull_min: u64,
    /// Smallest RDMA Write pulled by the target with cross-memory attach (0: never).
    pub(crate) write_pull_min: u64,
    /// Smallest RDMA Write copied into a mapping of the target's memory (0: never).
    pub(crate) map_min: u64,
    /// How long a message waits for a Receive (`ND_SHM_RNR_TIMEOUT_MS`).
    pub(crate) rnr_timeout: std::time::Duration,
    /// How long a listener waits for a REQUEST (`ND_SHM_REQUEST_TIMEOUT_MS`).
    pub(crate) request_timeout: std::time::Duration,
}

#[cfg(not(loom))]
impl Config {
    pub(crate) fn from_env() -> Self {
        let cells = var::<u32>("ND_SHM_CELLS", 256)
            .clamp(16, 65536)
            .next_power_of_two();
        let data_len = (var::<u64>("ND_SHM_DATA_KIB", 512).clamp(4, 256 << 10) << 10)
            .next_power_of_two()
            .min(256 << 20);
        let chunk = (var::<usize>("ND_SHM_CHUNK_KIB", 64).max(1) << 10).min(data_len as usize / 4);
        let pull_min = var::<u64>("ND_SHM_PULL_MIN_KIB", 0) << 10;
        let write_pull_min = var::<u64>("ND_SHM_WRITE_PULL_MIN_KIB", 0) << 10;
        let map_min = var::<u64>("ND_SHM_MAP_MIN_KIB", 64) << 10;
        Self {
            params: Params { cells, data_len },
            chunk,
            pull_min,
            write_pull_min,
            map_min,
            rnr_timeout: std::time::Duration::from_millis(var("ND_SHM_RNR_TIMEOUT_MS", 3_000)),
            request_timeout: std::time::Duration::from_millis(var(
                "ND_SHM_REQUEST_TIMEOUT_MS",
                5_000,
            )),
        }
    }
}

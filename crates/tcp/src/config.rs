//! Run-time knobs of the `tcp` provider, read once from the environment.
//!
//! Every variable is listed in [`VARIABLES`] with its default and meaning, so `nd info` can
//! print them (the `fi_info -e` convention).

use std::time::Duration;

use netdirect_spi::kit::config::var;

/// One documented environment variable (the SPI kit's, shared by the software providers).
pub use netdirect_spi::kit::config::Variable;

/// Every variable the provider reads.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "ND_TCP_CRC",
        default: "1",
        meaning: "offer MPA CRC32c (1) or not (0); CRC is on if either side asks (RFC 5044 §7.1.1)",
    },
    Variable {
        name: "ND_TCP_MULPDU",
        default: "64768",
        meaning: "largest ULPDU we send, in bytes (128–64768, RFC 5044 §4.5); smaller values follow a real MSS",
    },
    Variable {
        name: "ND_TCP_WRITE_PROBE",
        default: "1",
        meaning: "complete RDMA Writes only once a zero-length Read after them is answered (1), so a refused Write completes ND_ACCESS_VIOLATION, or when TCP takes them (0); needs a netdirect peer",
    },
    Variable {
        name: "ND_TCP_CONNECT_TIMEOUT_MS",
        default: "30000",
        meaning: "how long Connect waits for the TCP handshake and for its MPA Request to be sent before ND_IO_TIMEOUT; the wait for the peer's Accept (the MPA Reply) has no limit (IND2Connector::Connect), CancelOverlappedRequests or releasing the connector ends it",
    },
    Variable {
        name: "ND_TCP_REQUEST_TIMEOUT_MS",
        default: "5000",
        meaning: "how long a listener waits for an accepted TCP connection's MPA Request before closing it (siw's MPAREP_TIMEOUT, docs/WIRE.md §2.3), so stray or stalled connections cannot pile up",
    },
    Variable {
        name: "ND_TCP_RNR_TIMEOUT_MS",
        default: "3000",
        meaning: "how long a Send that finds no Receive posted (on its queue pair or its shared receive queue) waits for one, with the stream held (TCP back-pressure), before the receiver ends the connection and the Send fails ND_IO_TIMEOUT (R-QP-7); counted while the receiving application drives the adapter",
    },
    Variable {
        name: "ND_TCP_TIMEOUT_MS",
        default: "10000",
        meaning: "how long a connection whose peer or path stopped answering lives on (like an RNIC's retry limit; at most 30000): unacknowledged data gives up after it (TCP_USER_TIMEOUT), an idle connection is probed (keepalive) and gives up after it too; then the oldest outstanding request completes ND_IO_TIMEOUT, the rest ND_CANCELED, and NotifyDisconnect completes; 0: the kernel's own limits (minutes)",
    },
    Variable {
        name: "ND_TCP_WAKE_SIGNAL",
        default: "SIGRTMAX-1",
        meaning: "the real-time signal that ends a blocking wait asleep in recv(2): a waiter with one connection to hear and nothing else sleeps in the read itself, one system call fewer than poll(2) then recv; taken only if it has no handler (an application's own use wins), and only by threads that do not block it; 0: off, waiters sleep in poll(2)",
    },
];

/// The largest `ND_TCP_TIMEOUT_MS`: an application learns of a dead path within 30 s at most.
const MAX_TIMEOUT_MS: u64 = 30_000;

/// The parsed configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) crc: bool,
    pub(crate) mulpdu: usize,
    pub(crate) connect_timeout: Duration,
    /// How long a listener waits for a connection's MPA Request (`ND_TCP_REQUEST_TIMEOUT_MS`).
    pub(crate) request_timeout: Duration,
    pub(crate) write_probe: bool,
    /// How long an inbound Send waits for a Receive (`ND_TCP_RNR_TIMEOUT_MS`).
    pub(crate) rnr_timeout: Duration,
    /// How long a dead path or peer goes unnoticed at most (`ND_TCP_TIMEOUT_MS`; zero: the
    /// kernel's limits).
    pub(crate) timeout: Duration,
}

impl Config {
    pub(crate) fn from_env() -> Self {
        Self {
            crc: var::<u8>("ND_TCP_CRC", 1) != 0,
            mulpdu: var::<usize>("ND_TCP_MULPDU", netdirect_wire::fpdu::MAX_MULPDU).clamp(
                netdirect_wire::fpdu::MIN_MULPDU,
                netdirect_wire::fpdu::MAX_MULPDU,
            ),
            connect_timeout: Duration::from_millis(var("ND_TCP_CONNECT_TIMEOUT_MS", 30_000)),
            request_timeout: Duration::from_millis(var("ND_TCP_REQUEST_TIMEOUT_MS", 5_000)),
            write_probe: var::<u8>("ND_TCP_WRITE_PROBE", 1) != 0,
            rnr_timeout: Duration::from_millis(var("ND_TCP_RNR_TIMEOUT_MS", 3_000)),
            timeout: Duration::from_millis(
                var::<u64>("ND_TCP_TIMEOUT_MS", 10_000).min(MAX_TIMEOUT_MS),
            ),
        }
    }
}

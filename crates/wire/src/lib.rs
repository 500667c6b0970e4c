//! Sans-IO iWARP wire protocol for netdirect: MPA framing and startup
//! (RFC 5044, RFC 6581), DDP segment headers (RFC 5041) and RDMAP messages
//! (RFC 5040), as spoken by Linux soft-iWARP (`siw`) and iWARP RNICs.
//!
//! # Module map
//!
//! | Module | Concern | RFC |
//! |---|---|---|
//! | [`crc`] | CRC-32C helpers (little-endian on the wire) | RFC 5044 §4.4 |
//! | [`mpa`] | MPA Request/Reply frames, MPA v2 IRD/ORD word | RFC 5044 §7.1, RFC 6581 §6 |
//! | [`handshake`] | Initiator/Responder startup negotiation, RTR | RFC 5044 §7.1.2, RFC 6581 §9 |
//! | [`ddp`] | Tagged/untagged DDP headers | RFC 5041 §4 |
//! | [`rdmap`] | Opcodes, Read Request header, Terminate, error codes | RFC 5040 §4 |
//! | [`fpdu`] | FPDU encoding (zero-copy gather) and the streaming [`fpdu::Deframer`] | RFC 5044 §4 |
//! | [`sequence`] | MSN counters, inbound QN/MSN/MO and STag/TO continuity checks | RFC 5041 §4.3, §5 |
//!
//! # The sans-IO contract
//!
//! Nothing in this crate performs I/O, spawns threads, reads clocks or
//! sleeps. Callers own the socket and the timers (siw's MPA timeouts are 10 s
//! for the Reply and 5 s for the Request):
//!
//! * Encoders return bytes (`Vec` for the rare MPA frames) or write into
//!   caller-provided fixed buffers (FPDU prefixes and trailers). The FPDU
//!   paths never allocate; payload is gathered from caller slices
//!   ([`fpdu::encode_prefix`] + [`fpdu::encode_trailer`]) and delivered
//!   borrowed from the caller's input ([`fpdu::Event::Payload`]), or read by
//!   the caller straight into its destination ([`fpdu::Deframer::payload_direct`]).
//! * Decoders take whatever bytes have arrived, report "need more" or how many
//!   bytes they consumed, and never look past the end of their frame.
//! * Nothing a peer sends can panic: every decoder returns a typed error, and
//!   every receive-side error maps to the Terminate code
//!   ([`rdmap::TermError`]) the caller should send before closing. Functions
//!   that can panic on *local* misuse say so in a `# Panics` section.
//!
//! # What this crate does not do
//!
//! * No sockets, no TCP options (TCP_NODELAY, MSS), no port mapping (iwpmd).
//! * No memory registration, STag validation or buffer placement: the caller
//!   checks STags/bounds and posts Receives, and reports failures with the
//!   [`rdmap::TermError`] codes.
//! * No MPA markers (never requested; Requests asking for them must be
//!   rejected, see [`handshake::must_reject`]).
//! * No RFC 7306 atomics or immediate data (answered with "unexpected opcode").
//!
//! # Testing
//!
//! The crate's tests check the worked byte examples of the project's wire
//! reference (every FPDU there was verified with tshark), round-trip every
//! header type with proptest, feed random chunkings and random garbage to the
//! deframer and the MPA decoders, and cover each negative case. Fuzz targets
//! live in the repository's `fuzz/` package (`cargo +nightly fuzz run
//! deframer` / `mpa`); under `cfg(fuzzing)` CRC checks always pass
//! ([`crc::crc_matches`]).
//!
//! Section numbers `docs/WIRE.md §N` refer to the repository's summary of the iWARP wire facts,
//! each pointing at its RFC.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod crc;
pub mod ddp;
pub mod fpdu;
pub mod handshake;
pub mod mpa;
pub mod rdmap;
pub mod sequence;

//! What the raw-socket tests share: the MPA handshake message an ND side sends, and then its
//! FPDUs, read off a plain TCP stream through the wire crate's parsers. Each test binary uses
//! the part it needs.

#![allow(dead_code)]

use std::io::{ErrorKind, Read};
use std::net::TcpStream;

use netdirect_conformance::check::Context;
use netdirect_conformance::{ensure, Check, Failure};
use netdirect_wire::fpdu::{Deframer, Event, SegmentHeader};

/// Whole segments (header and payload, CRC checked when negotiated) read off a stream.
pub(crate) struct Segments {
    d: Deframer,
    buf: Vec<u8>,
    at: usize,
    len: usize,
}

impl Segments {
    /// A reader for a connection that negotiated `crc` (MPA markers are never used).
    pub(crate) fn new(crc: bool) -> Self {
        Self {
            d: Deframer::new(crc, 65535),
            buf: vec![0; 64 * 1024],
            at: 0,
            len: 0,
        }
    }

    /// The next whole segment on `s`, or `None` once the ND side closed (or reset) the stream
    /// between two FPDUs. A stream that ends inside an FPDU, or a malformed FPDU, fails.
    pub(crate) fn next(&mut self, s: &mut TcpStream) -> Check<Option<(SegmentHeader, Vec<u8>)>> {
        let mut cur: Option<(SegmentHeader, Vec<u8>)> = None;
        loop {
            if self.at == self.len {
                let n = match s.read(&mut self.buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => 0,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Failure(format!("reading the ND side: {e}"))),
                };
                if n == 0 {
                    ensure!(
                        cur.is_none() && self.d.at_boundary(),
                        "the ND side's stream ended inside an FPDU"
                    );
                    return Ok(None);
                }
                (self.at, self.len) = (0, n);
            }
            let (ev, used) = self
                .d
                .next(&self.buf[self.at..self.len])
                .map_err(|e| Failure(format!("the ND side sent a bad FPDU: {e}")))?;
            self.at += used;
            match ev {
                Some(Event::Header(h)) => cur = Some((h, Vec::new())),
                Some(Event::Payload(p)) => cur
                    .as_mut()
                    .ok_or_else(|| Failure("payload before a header".into()))?
                    .1
                    .extend_from_slice(p),
                Some(Event::End) => return Ok(cur),
                None => {}
            }
        }
    }
}

/// Read the ND side's MPA Request or Reply (`what`) off `s`: `parse` is the wire crate's
/// `Responder::handle_request` or `Initiator::handle_reply` over the bytes so far. No byte may
/// follow it, as the ND side sends nothing more until it hears from us (RFC 5044 §7.1.2
/// rule 4).
pub(crate) fn read_mpa<T, E: std::fmt::Display>(
    s: &mut TcpStream,
    what: &str,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(T, usize)>, E>,
) -> Check<T> {
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 1024];
        let n = s.read(&mut chunk).ctx(&format!("read the {what}"))?;
        ensure!(n > 0, "the ND side closed before its {what}");
        buf.extend_from_slice(&chunk[..n]);
        let parsed = parse(&buf).map_err(|e| Failure(format!("bad {what}: {e}")))?;
        if let Some((msg, used)) = parsed {
            ensure!(
                used == buf.len(),
                "bytes after the {what} (RFC 5044 §7.1.2 rule 4)"
            );
            return Ok(msg);
        }
    }
}

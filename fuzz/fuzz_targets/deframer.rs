//! Fuzzes the FPDU deframer and the receive sequencer.
//!
//! Input layout: byte 0 selects CRC on/off, a small receive limit, and
//! whether payload is taken with `payload_direct`; bytes 1..9 are chunk
//! sizes (cycled) used to split the rest of the input, which is the stream.
//! Under `cfg(fuzzing)` CRC checks always pass, so CRC-on runs still reach
//! the header logic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netdirect_wire::fpdu::{Deframer, Event};
use netdirect_wire::sequence::RxSequencer;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (sizes, stream) = rest.split_at(rest.len().min(8));
    let crc_on = mode & 1 != 0;
    let max_ulpdu = if mode & 2 != 0 { 256 } else { 65535 };
    let direct = mode & 4 != 0;

    let mut d = Deframer::new(crc_on, max_ulpdu);
    let mut seq = RxSequencer::new();
    let mut off = 0;
    let mut step = 0;
    while off < stream.len() {
        let size = sizes.get(step % sizes.len().max(1)).map_or(stream.len(), |&s| usize::from(s) + 1);
        step += 1;
        let mut chunk = &stream[off..(off + size).min(stream.len())];
        while !chunk.is_empty() {
            if direct && d.payload_remaining() > 0 {
                let k = d.payload_remaining().min(chunk.len());
                d.payload_direct(&chunk[..k]);
                chunk = &chunk[k..];
                off += k;
                continue;
            }
            match d.next(chunk) {
                Ok((ev, n)) => {
                    assert!(n > 0 || ev.is_some(), "deframer stalled");
                    assert!(n <= chunk.len());
                    if let Some(Event::Header(h)) = ev {
                        let _ = seq.check(&h.ddp, h.payload_len);
                        if let Some(t) = h.terminate {
                            if let Some(dh) = t.ddp_header {
                                let _ = dh.decode();
                            }
                        }
                    }
                    chunk = &chunk[n..];
                    off += n;
                }
                Err(e) => {
                    assert_eq!(d.next(chunk), Err(e), "not poisoned");
                    let _ = e.terminate();
                    return;
                }
            }
        }
    }
});

//! Property test: a random sequence of valid FPDUs, split at arbitrary chunk
//! boundaries (and with parts of payloads taken through `payload_direct`),
//! deframes to the same headers and payload bytes as when fed whole.

mod common;
mod strategies;

use common::{deframe, Seg};
use netdirect_wire::fpdu::{encode_fpdu, Deframer, Event};
use proptest::prelude::*;
use strategies::fpdu_parts;

/// Feeds `stream` in chunks of the given sizes (cycled); when `directs` says
/// so, payload bytes are taken with `payload_direct` instead of `next`.
fn deframe_chunked(crc_on: bool, stream: &[u8], chunks: &[usize], directs: &[u16]) -> Vec<Seg> {
    let mut d = Deframer::new(crc_on, 65535);
    let mut out = Vec::new();
    let mut cur: Option<Seg> = None;
    let mut off = 0;
    let mut step = 0usize;
    let mut calls = 0usize;
    while off < stream.len() {
        let size = chunks[step % chunks.len()].max(1);
        let direct = directs[step % directs.len()];
        step += 1;
        let mut chunk = &stream[off..(off + size).min(stream.len())];
        while !chunk.is_empty() {
            calls += 1;
            assert!(
                calls < 10 * stream.len() + 100,
                "deframer does not progress"
            );
            let rem = d.payload_remaining();
            if rem > 0 && !direct.is_multiple_of(3) {
                // The driver reads part of the payload straight into place.
                let k = rem.min(chunk.len()).min(usize::from(direct).max(1));
                d.payload_direct(&chunk[..k]);
                cur.as_mut().unwrap().payload.extend_from_slice(&chunk[..k]);
                chunk = &chunk[k..];
                off += k;
                continue;
            }
            let (ev, n) = d.next(chunk).expect("valid stream");
            assert!(n > 0, "non-empty input must be consumed");
            match ev {
                Some(Event::Header(h)) => {
                    assert!(cur.is_none());
                    cur = Some(Seg {
                        hdr: h,
                        payload: Vec::new(),
                    });
                }
                Some(Event::Payload(p)) => {
                    assert_eq!(p, &chunk[..n]);
                    cur.as_mut().unwrap().payload.extend_from_slice(p)
                }
                Some(Event::End) => out.push(cur.take().unwrap()),
                None => assert_eq!(n, chunk.len()),
            }
            chunk = &chunk[n..];
            off += n;
        }
    }
    assert!(cur.is_none());
    assert!(d.at_boundary());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn chunked_equals_whole(
        fpdus in proptest::collection::vec(fpdu_parts(), 1..12),
        crc_on in any::<bool>(),
        chunks in proptest::collection::vec(1usize..300, 1..40),
        directs in proptest::collection::vec(any::<u16>(), 1..40),
    ) {
        let mut stream = Vec::new();
        for (h, extra, p) in &fpdus {
            stream.extend_from_slice(&encode_fpdu(h, extra, p, crc_on));
        }
        let mut d = Deframer::new(crc_on, 65535);
        let whole = deframe(&mut d, &stream).expect("valid stream");
        prop_assert!(d.at_boundary());
        prop_assert_eq!(whole.len(), fpdus.len());
        for (seg, (h, extra, p)) in whole.iter().zip(&fpdus) {
            prop_assert_eq!(&seg.hdr.ddp, h);
            prop_assert_eq!(&seg.payload, p);
            prop_assert_eq!(seg.hdr.payload_len as usize, p.len());
            prop_assert_eq!(usize::from(seg.hdr.ulpdu_len), h.len() + extra.len() + p.len());
            if let Some(rr) = seg.hdr.read_request {
                prop_assert_eq!(&rr.to_bytes()[..], &extra[..]);
            }
            if let Some(t) = seg.hdr.terminate {
                let mut b = [0u8; netdirect_wire::rdmap::TERMINATE_MAX_LEN];
                let n = t.encode(&mut b);
                prop_assert_eq!(&b[..n], &extra[..]);
            }
        }
        let chunked = deframe_chunked(crc_on, &stream, &chunks, &directs);
        prop_assert_eq!(chunked, whole);
    }
}

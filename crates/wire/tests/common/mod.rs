//! Helpers shared by the integration tests.
#![allow(dead_code)]

use netdirect_wire::fpdu::{Deframer, Event, FramingError, SegmentHeader};

/// Parses whitespace-separated hex ("00 1a 41 ...").
pub(crate) fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
        .collect()
}

/// One fully received segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(crate) hdr: SegmentHeader,
    pub(crate) payload: Vec<u8>,
}

/// Feeds `input` to `d` in one piece, looping until it is consumed; returns the
/// completed segments (a trailing partial segment is dropped).
pub(crate) fn deframe(d: &mut Deframer, input: &[u8]) -> Result<Vec<Seg>, FramingError> {
    let mut out = Vec::new();
    let mut cur: Option<Seg> = None;
    let mut off = 0;
    while off < input.len() {
        let (ev, n) = d.next(&input[off..])?;
        assert!(n > 0 || ev.is_some(), "no progress");
        off += n;
        match ev {
            Some(Event::Header(h)) => {
                assert!(cur.is_none());
                cur = Some(Seg {
                    hdr: h,
                    payload: Vec::new(),
                });
            }
            Some(Event::Payload(p)) => cur.as_mut().unwrap().payload.extend_from_slice(p),
            Some(Event::End) => out.push(cur.take().unwrap()),
            None => assert_eq!(off, input.len()),
        }
    }
    Ok(out)
}

/// Deframes a single complete FPDU and returns its only segment.
pub(crate) fn deframe_one(crc_on: bool, fpdu: &[u8]) -> Result<Seg, FramingError> {
    let mut d = Deframer::new(crc_on, 65535);
    let mut segs = deframe(&mut d, fpdu)?;
    assert_eq!(segs.len(), 1);
    assert!(d.at_boundary());
    Ok(segs.remove(0))
}

//! Property tests: arbitrary or corrupted bytes never panic and never stall
//! the decoders (each call consumes ≥ 1 byte, returns an event, or errors).

mod strategies;

use netdirect_wire::fpdu::{encode_fpdu, Deframer, Event};
use netdirect_wire::handshake::{Initiator, InitiatorConfig, Responder};
use netdirect_wire::mpa::{EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrTypes};
use proptest::prelude::*;
use strategies::fpdu_parts;

/// `input` cut into pieces of the sizes in `chunks`, taken in turn (0 counts as 1).
fn pieces<'a>(input: &'a [u8], chunks: &'a [usize]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = input;
    chunks.iter().cycle().map_while(move |&size| {
        if rest.is_empty() {
            return None;
        }
        let (piece, tail) = rest.split_at(size.clamp(1, rest.len()));
        rest = tail;
        Some(piece)
    })
}

/// Drives a deframer over `input` in chunks; checks progress and poisoning.
fn drive(crc_on: bool, max_ulpdu: usize, input: &[u8], chunks: &[usize]) {
    let mut d = Deframer::new(crc_on, max_ulpdu);
    for (step, mut chunk) in pieces(input, chunks).enumerate() {
        while !chunk.is_empty() {
            match d.next(chunk) {
                Ok((ev, n)) => {
                    assert!(n > 0 || ev.is_some(), "stalled");
                    assert!(n <= chunk.len());
                    if ev.is_none() {
                        assert_eq!(n, chunk.len());
                    }
                    chunk = &chunk[n..];
                    if d.payload_remaining() > 0 && step % 2 == 1 && !chunk.is_empty() {
                        let k = d.payload_remaining().min(chunk.len());
                        d.payload_direct(&chunk[..k]);
                        chunk = &chunk[k..];
                    }
                }
                Err(e) => {
                    // Poisoned: the same error forever.
                    assert_eq!(d.next(chunk), Err(e));
                    assert_eq!(d.next(&[]), Err(e));
                    assert_eq!(d.error(), Some(&e));
                    let _ = e.terminate();
                    return;
                }
            }
        }
    }
}

/// What a deframer makes of `input` fed in `chunks`: its events, with payload bytes gathered
/// per segment (their split is the chunking's), and the error it stopped at, if any.
fn outcome(crc_on: bool, max_ulpdu: usize, input: &[u8], chunks: &[usize]) -> Vec<String> {
    let mut d = Deframer::new(crc_on, max_ulpdu);
    let mut out = Vec::new();
    let mut payload = Vec::new();
    for mut chunk in pieces(input, chunks) {
        while !chunk.is_empty() {
            match d.next(chunk) {
                Ok((ev, n)) => {
                    match ev {
                        Some(Event::Header(h)) => out.push(format!("{h:?}")),
                        Some(Event::Payload(p)) => payload.extend_from_slice(p),
                        Some(Event::End) => out.push(format!("end {payload:?}")),
                        None => {}
                    }
                    if matches!(ev, Some(Event::End)) {
                        payload.clear();
                    }
                    chunk = &chunk[n..];
                }
                Err(e) => {
                    out.push(format!("error {e:?}"));
                    return out;
                }
            }
        }
    }
    out.push(format!("open {} {payload:?}", d.at_boundary()));
    out
}

/// A stream of valid FPDUs with some bytes overwritten.
fn corrupted_stream() -> impl Strategy<Value = (bool, Vec<u8>)> {
    (
        proptest::collection::vec(fpdu_parts(), 1..6),
        any::<bool>(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    )
        .prop_map(|(parts, crc_on, edits)| {
            let mut s = Vec::new();
            for (h, e, p) in &parts {
                s.extend_from_slice(&encode_fpdu(h, e, p, crc_on));
            }
            for (i, b) in edits {
                let i = i.index(s.len());
                s[i] = b;
            }
            (crc_on, s)
        })
}

fn valid_mpa_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        0u8..16,
        0u8..=2,
        any::<bool>(),
        any::<[u8; 4]>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(req, flags, rev, enh, word, ulp)| {
            MpaFrame {
                kind: if req {
                    FrameKind::Request
                } else {
                    FrameKind::Reply
                },
                flags: MpaFlags::from_bits_truncate(flags << 4),
                rev,
                enhanced: (enh && rev == 2).then(|| EnhancedData::decode(word)),
                ulp_data: &ulp,
            }
            .to_vec()
        })
}

fn mpa_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        (
            valid_mpa_frame(),
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            proptest::collection::vec(any::<u8>(), 0..16),
        )
            .prop_map(|(mut f, edits, tail)| {
                for (i, b) in edits {
                    let i = i.index(f.len());
                    f[i] = b;
                }
                f.extend_from_slice(&tail);
                f
            }),
    ]
}

fn check_mpa(buf: &[u8]) {
    if let Ok(Some((f, n))) = MpaFrame::decode(buf) {
        assert!(n <= buf.len());
        assert_eq!(n, 20 + f.pd_len());
    }
    for p2p in [false, true] {
        let mut init = Initiator::new(InitiatorConfig {
            crc: true,
            ird: 4,
            ord: 4,
            p2p,
            private_data: vec![1, 2, 3],
            probe: false,
        });
        if let Ok(Some((_, n))) = init.handle_reply(buf) {
            assert!(n <= buf.len());
        }
    }
    let mut resp = Responder::new();
    if let Ok(Some((req, n))) = resp.handle_request(buf) {
        assert!(n <= buf.len());
        // Whatever was received, answering never panics.
        let _ = netdirect_wire::handshake::try_accept(&req, &Default::default());
        let _ = netdirect_wire::handshake::try_reject(&req, b"x");
        let _ = netdirect_wire::handshake::must_reject(&req);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn deframer_garbage(
        input in proptest::collection::vec(any::<u8>(), 0..2048),
        crc_on in any::<bool>(),
        max_ulpdu in prop_oneof![Just(65535usize), 0usize..2000],
        chunks in proptest::collection::vec(1usize..64, 1..16),
    ) {
        drive(crc_on, max_ulpdu, &input, &chunks);
    }

    #[test]
    fn deframer_corrupted((crc_on, input) in corrupted_stream(),
                          chunks in proptest::collection::vec(1usize..512, 1..16)) {
        drive(crc_on, 65535, &input, &chunks);
        drive(!crc_on, 65535, &input, &chunks);
    }

    /// The deframer's verdict on any input (its events, the error and the Terminate it names)
    /// does not depend on how the bytes were split: one piece, arbitrary pieces, or one byte
    /// at a time.
    #[test]
    fn deframer_outcome_is_chunking_independent(
        (crc_on, input) in prop_oneof![
            corrupted_stream(),
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..512)),
        ],
        max_ulpdu in prop_oneof![Just(65535usize), 0usize..2000],
        chunks in proptest::collection::vec(1usize..80, 1..16),
    ) {
        let whole = outcome(crc_on, max_ulpdu, &input, &[usize::MAX]);
        prop_assert_eq!(&outcome(crc_on, max_ulpdu, &input, &chunks), &whole);
        prop_assert_eq!(&outcome(crc_on, max_ulpdu, &input, &[1]), &whole);
    }

    #[test]
    fn mpa_garbage(buf in mpa_input()) {
        check_mpa(&buf);
        for k in 0..buf.len().min(40) {
            check_mpa(&buf[..k]);
        }
    }
}

#[test]
fn rtr_types_cover_all_bits() {
    assert_eq!(RtrTypes::all().bits(), 0x7);
}

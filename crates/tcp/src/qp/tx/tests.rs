//! Unit tests of the transmit side: a frame cut at a chunk boundary survives teardown, and the
//! staging buffer and the inline stash stay bounded while output waits.

use super::*;

/// One segment over `payload` (no registration: the tests own the memory).
fn seg_of(payload: &[u8]) -> Seg {
    Seg::new(payload.as_ptr() as usize as u64, payload.len() as u32, None)
}

/// Bytes still queued.
fn queued(tx: &Tx) -> usize {
    tx.chunks
        .iter()
        .map(|c| match *c {
            Chunk::Staged { len, .. } | Chunk::User { len, .. } => len as usize,
            Chunk::Done | Chunk::Resp => 0,
        })
        .sum::<usize>()
        - tx.head_done
}

/// Teardown after a write that stopped exactly between two chunks of one frame (a 4 KiB
/// Send's frame is its prefix, the application's bytes and its trailer): the rest of the
/// frame stays queued, so the stream stays framed for the Terminate that follows; after
/// a write that ended on a frame's end, nothing does.
#[test]
fn a_frame_begun_on_a_chunk_boundary_is_kept_at_teardown() {
    let payload = vec![7u8; 4096];
    let seg = [seg_of(&payload)];
    let mut tx = Tx::new();
    tx.start(65504);
    tx.encode_send(&seg, 4096, OpFlags::empty(), None, true);
    let whole = queued(&tx);
    let Some(Chunk::Staged { len: prefix, .. }) = tx.chunks.front().copied() else {
        panic!("a staged prefix first");
    };
    let mut w = Written::default();
    tx.advance(prefix as usize, &mut w);
    assert_eq!(tx.head_done, 0, "the write stopped on the chunk boundary");
    tx.cut_to_current_frame();
    assert_eq!(
        queued(&tx),
        whole - prefix as usize,
        "the rest of the frame is kept"
    );
    // The whole frame written: teardown drops the next message entirely.
    let mut tx = Tx::new();
    tx.start(65504);
    tx.encode_send(&seg, 4096, OpFlags::empty(), None, true);
    let first = queued(&tx);
    tx.encode_send(&seg, 4096, OpFlags::empty(), None, true);
    tx.advance(first, &mut w);
    tx.cut_to_current_frame();
    assert_eq!(queued(&tx), 0, "nothing of the next frame was written");
}

/// A sender that keeps requests queued while its peer reads slowly never lets the output
/// drain: its staging buffer must stay bounded anyway (it used to grow with every frame
/// until the queue emptied, and its offsets are 32-bit).
#[test]
fn staging_stays_bounded_while_output_never_drains() {
    use std::io::Read;
    let (a, b) = Socket::pair(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    a.set_send_buffer_size(16 << 10).unwrap();
    b.set_nonblocking(true).unwrap();
    let mut reader: std::os::unix::net::UnixStream = std::os::fd::OwnedFd::from(b).into();
    let payload = vec![7u8; 512];
    let seg = [seg_of(&payload)];
    let mut tx = Tx::new();
    tx.start(65504);
    let (mut queued, mut sent, mut got) = (0usize, 0usize, 0usize);
    let mut buf = [0u8; 400];
    let mut peak = 0;
    while sent < 20_000 {
        // At most 32 requests outstanding, as a send queue of that depth allows.
        while queued < 32 {
            tx.encode_send(&seg, 512, OpFlags::empty(), None, true);
            queued += 1;
        }
        let w = tx.write_to(&a).unwrap();
        queued -= w.done;
        sent += w.done;
        peak = peak.max(tx.staged.len());
        // The peer reads less than a frame per round: the output never drains.
        if let Ok(n) = reader.read(&mut buf) {
            got += n;
        }
    }
    assert!(tx.has_output(), "the test must keep output queued");
    assert!(got < sent * 540, "the peer must fall behind");
    assert!(
        peak < 4 * COMPACT_MIN,
        "staging grew to {peak} bytes for {sent} frames"
    );
}

/// Inline payloads that always have one more waiting to be encoded (a request held
/// behind a fence keeps the stash from emptying) must not grow the stash without bound.
#[test]
fn inline_stash_stays_bounded_while_requests_keep_waiting() {
    let mut payload = vec![3u8; 512];
    let sge = [Sge {
        buffer: payload.as_mut_ptr(),
        buffer_length: 512,
        memory_region_token: 0,
    }];
    let mut tx = Tx::new();
    tx.start(65504);
    tx.stash_inline(&sge);
    let mut peak = 0;
    for _ in 0..20_000 {
        tx.stash_inline(&sge);
        tx.encode_stashed_inline(OpFlags::INLINE, None, None, true);
        peak = peak.max(tx.stash.len());
        // Keep the encoded frames from piling up: this test is about the stash.
        tx.chunks.clear();
        tx.staged.clear();
    }
    assert_eq!(tx.stash_lens.len(), 1, "one payload always waits");
    assert!(peak < 4 * COMPACT_MIN, "the stash grew to {peak} bytes");
}

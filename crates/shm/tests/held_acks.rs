//! Held acknowledgements (`qp` module docs): the target of an RDMA Write holds the ACK that
//! completes it until the application's next call into the provider, and the target's next
//! Write carries it. These tests pin down when the ACK must go all the same: the target's next
//! poll, its Disconnect or release, and, with the adapter's descriptor exported, at once. Each
//! runs both ends in one process; a lost ACK shows as the initiator's Write never completing
//! (every wait has a deadline).

#![cfg(not(loom))]

mod common;

use std::time::Instant;

use common::{done_ok, pair, End, DEADLINE};
use netdirect::{NdResult, OpFlags, RequestType};

/// Where the Writes land in the target's buffer.
const AT: usize = 4096;
/// The buffers: heap memory (below `Buffer::SHARED_MIN`), so that every Write goes through
/// the ring and is answered by an ACK (into shared memory a small Write is placed by the
/// initiator, under a lease, and needs no answer: `placed_writes.rs`).
const BUF: usize = 32 << 10;

/// Post an INLINE Write of `data` (staged at offset 0 of `from`'s buffer) to `AT` in `to`'s.
fn write_inline(from: &End, to: &End, ctx: u64, data: &[u8]) {
    from.fill(0, data);
    let sge = from.buf.sge(0..data.len(), from.token());
    let addr = to.buf.as_ptr() as u64 + AT as u64;
    // SAFETY: INLINE: the bytes are read during the call.
    unsafe {
        from.qp
            .write(ctx, &[sge], addr, to.mr.get_remote_token(), OpFlags::INLINE)
    }
    .expect("post Write");
}

/// Poll the target's CQ (which drives its queue pair and places the Write) until `data` is in
/// its memory; the target itself completes nothing.
fn place(target: &End, data: &[u8]) {
    let end = Instant::now() + DEADLINE;
    let mut r = [NdResult::EMPTY];
    while target.read(AT, data.len()) != data {
        assert_eq!(target.cq.get_results(&mut r), 0, "target completion {r:?}");
        assert!(Instant::now() < end, "the Write was never placed");
    }
}

/// `n` polls of `e`'s CQ find nothing: what `e` waits for is not in its ring. Deterministic:
/// the other end runs no code meanwhile.
fn nothing_for(e: &End, n: usize, what: &str) {
    let mut r = [NdResult::EMPTY];
    for _ in 0..n {
        assert_eq!(e.cq.get_results(&mut r), 0, "{what}: {r:?}");
    }
}

/// A connected pair whose initiator `c` wrote 8 bytes (message `k`) into the target `s`,
/// and `s`'s polling pass placed them: the ACK is held.
fn placed(k: u64) -> (End, End) {
    let (c, s) = pair(BUF);
    let data = common::message(k, 8);
    write_inline(&c, &s, 1, &data);
    place(&s, &data);
    (c, s)
}

/// The pass that placed a Write holds its ACK; the target's next poll sends it, though it
/// finds nothing else to do.
#[test]
fn a_held_ack_goes_with_the_targets_next_poll() {
    let (c, s) = placed(1);
    nothing_for(&c, 10_000, "the ACK is held until the target's next call");
    nothing_for(&s, 1, "the target's next poll");
    done_ok(c.poll(), RequestType::Write, 1, 8, "the initiator's Write");
}

/// A Write ping-pong as `nd rpingpong` runs it: each side's Write carries the ACK of the
/// peer's, and completes when the peer's next Write (or poll) arrives. Sizes from 1 byte to
/// past what fits in one cell with its descriptor (the ACK then rides on the WRITE header and
/// the bytes follow in the data area).
#[test]
fn each_write_of_a_ping_pong_carries_the_ack_of_the_last() {
    let (c, s) = pair(BUF);
    let mut k = 0u64;
    for len in [1usize, 8, 32, 33, 200, 1000] {
        for _ in 0..50 {
            k += 1;
            let ping = common::message(k, len);
            write_inline(&c, &s, 2 * k, &ping);
            place(&s, &ping);
            k += 1;
            let pong = common::message(k, len);
            write_inline(&s, &c, 2 * k, &pong);
            // The client's poll takes the pong, and with it the ACK of its own Write.
            done_ok(
                c.poll(),
                RequestType::Write,
                2 * (k - 1),
                len,
                "the ping, answered by the pong",
            );
            place(&c, &pong);
            // The server's Write completes with the client's next call.
            nothing_for(&c, 1, "the client's next call");
            done_ok(s.poll(), RequestType::Write, 2 * k, len, "the pong");
        }
    }
}

/// A Disconnect right after the pass that placed the peer's Write sends the held ACK first:
/// the Write completes successfully, not ND_CANCELED.
#[test]
fn a_disconnect_sends_the_held_ack_first() {
    let (c, s) = placed(3);
    s.disconnect();
    done_ok(
        c.poll(),
        RequestType::Write,
        1,
        8,
        "the Write placed before the Disconnect",
    );
}

/// Releasing the target's queue pair (and the rest of its end) implies a Disconnect: the held
/// ACK goes first there too.
#[test]
fn a_released_queue_pair_sends_the_held_ack_first() {
    let (c, s) = placed(5);
    drop(s);
    done_ok(
        c.poll(),
        RequestType::Write,
        1,
        8,
        "the Write placed before the release",
    );
}

/// With the adapter's descriptor in an event loop nothing is held: the pass that placed the
/// Write sends its ACK. (A loop that sleeps until the descriptor is readable would not be back
/// to send it, and a held ACK makes the descriptor readable for nobody.)
#[test]
fn nothing_is_held_once_the_descriptor_is_exported() {
    let (c, s) = pair(BUF);
    let _fd = s.adapter.fd();
    let data = common::message(4, 8);
    write_inline(&c, &s, 1, &data);
    place(&s, &data);
    done_ok(
        c.poll(),
        RequestType::Write,
        1,
        8,
        "the Write, with no further call of the target",
    );
}

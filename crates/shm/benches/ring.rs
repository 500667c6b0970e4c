//! The shm provider's rings: one message pushed by the sender and popped by the receiver, by
//! size, through the public API (the ring itself is private to the crate).
//!
//! `cargo bench -p netdirect-shm --bench ring` (divan). Each iteration posts a Receive and a
//! Send on a connection whose two ends live in this thread and polls both completion queues:
//! one ring push (inline cell up to 48 B, data area above), one pop into the posted buffer and
//! the two completions. The sizes straddle the ring's paths: 8 and 48 B inline (one 64-byte
//! cell), 49 B the first out-of-line size, 4 KiB and 64 KiB through the data area, 1 MiB the
//! bandwidth size of issue 5.
//!
//! `bench/callgrind` runs these same cases for instruction counts (`ND_BENCH_CASE`, see
//! `bench/harness.rs`): the case names are part of its contract.

use divan::counter::BytesCount;
use divan::{black_box, Bencher};

// The Write ping-pong round is `post_poll`'s (`shm_write`), not used here.
#[allow(dead_code)]
#[path = "../../netdirect/benches/loopback/mod.rs"]
mod loopback;

#[path = "../../../bench/harness.rs"]
mod harness;

fn main() {
    let Some(case) = harness::Case::from_env() else {
        return divan::main();
    };
    match case.name.as_str() {
        "push_pop" => case.run(push_pop_op(case.arg)),
        _ => case.unknown(),
    }
}

fn push_pop_op(len: usize) -> impl FnMut() -> u32 {
    let pair = loopback::Pair::new("shm");
    move || pair.round(black_box(len))
}

#[divan::bench(args = [8, 48, 49, 4096, 65536, 1 << 20])]
fn push_pop(bencher: Bencher<'_, '_>, len: usize) {
    bencher
        .counter(BytesCount::new(len))
        .bench_local(push_pop_op(len));
}

//! Post + poll of one Send/Receive over an in-process loopback connection, per provider.
//!
//! `cargo bench -p netdirect --bench post_poll` (divan). Each iteration posts a Receive on one
//! end and a Send on the other, then polls both completion queues until each has its
//! completion: the provider's whole software cost for one message (for `tcp`: MPA/DDP framing,
//! CRC, the send and receive syscalls on a loopback socket; for `shm`: ring push and pop and the
//! CQ), without the cross-core transfer that `nd pingpong` also measures. Both ends run in this
//! thread, so the figure is the same on a quiet or a busy second core.
//!
//! `bench/callgrind` runs these same cases for instruction counts (`ND_BENCH_CASE`, see
//! `bench/harness.rs`): the case names are part of its contract.

use divan::{black_box, Bencher};

#[path = "loopback/mod.rs"]
mod loopback;

#[path = "../../../bench/harness.rs"]
mod harness;

fn main() {
    let Some(case) = harness::Case::from_env() else {
        return divan::main();
    };
    match case.name.as_str() {
        "tcp" | "shm" => case.run(round_op(&case.name, case.arg)),
        "shm_write" => {
            let pair = loopback::Pair::new("shm");
            case.run(|| pair.write_round(case.arg))
        }
        _ => case.unknown(),
    }
}

fn round_op(provider: &str, len: usize) -> impl FnMut() -> u32 {
    let pair = loopback::Pair::new(provider);
    move || pair.round(black_box(len))
}

/// 8 B: the latency size of issues 3 and 5 (inline on both providers); 4 KiB: a page.
#[divan::bench(args = [8, 4096])]
fn tcp(bencher: Bencher<'_, '_>, len: usize) {
    bencher.bench_local(round_op("tcp", len));
}

#[divan::bench(args = [8, 4096])]
fn shm(bencher: Bencher<'_, '_>, len: usize) {
    bencher.bench_local(round_op("shm", len));
}

/// One round of an RDMA Write ping-pong (`nd rpingpong`): an INLINE Write each way, 8 B.
#[divan::bench(args = [8])]
fn shm_write(bencher: Bencher<'_, '_>, len: usize) {
    let pair = loopback::Pair::new("shm");
    bencher.bench_local(|| pair.write_round(black_box(len)));
}

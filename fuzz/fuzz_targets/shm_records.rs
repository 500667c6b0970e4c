//! Fuzzes what a same-host peer can write into an `shm` connection's ring: records of any
//! kind, flags and lengths, descriptors steered onto the victim's exposed region or not, and
//! data-area bytes, followed by a plain message (`netdirect_shm::forge::run` documents the
//! input layout).
//!
//! The property (issue 5's trust model): the victim neither panics nor hangs — its posted
//! Receive completes, delivered or flushed — and no byte of its memory changes outside the
//! region it exposed and that Receive.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    netdirect_shm::forge::run(data);
});

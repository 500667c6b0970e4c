//! Fuzzes what an iWARP peer can send a `tcp` queue pair after a correct MPA exchange: Sends,
//! RDMA Writes, Read Requests, unsolicited Read Responses, Terminates and raw bytes, with
//! right or wrong sequence numbers, STags, offsets, lengths and CRCs
//! (`netdirect_tcp::forge::run` documents the input layout). Unlike `placement`, which checks
//! the decisions, this runs the provider's whole receive path over a real socket.
//!
//! The property: the victim neither panics nor hangs — its posted Receive completes — and no
//! byte of its memory changes outside the region it exposed for remote writing and that
//! Receive.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    netdirect_tcp::forge::run(data);
});

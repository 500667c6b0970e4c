//! Sends whose payload straddles the receive path's direct-placement threshold (4096 bytes,
//! `qp/rx.rs`): after the header of a large segment the stream is read in short pieces so
//! that the next large payload can go straight to its destination, and what is left of a
//! payload is read either into the destination or through the stream buffer. Every size from
//! 4000 to 4200 bytes crosses these paths at a different point; each is sent back to back
//! with the others (so one read ends inside the next message), scattered over Receive SGEs
//! split at varied places, and every byte is checked.
//!
//! Both ends share one adapter in this process over real loopback sockets: the waiting
//! thread drives both.

// One-SGE requests are written `&[a..b]`, as in the conformance suite.
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::ops::Range;

use netdirect::{OpFlags, Provider, Status};
use netdirect_conformance::check::{
    expect_bytes, expect_empty, expect_results, fail, next_results, pattern, Check, Context, Expect,
};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::connect_pair;
use netdirect_conformance::{Side, SideConfig};

const SERVER_QP: u64 = 0x5B_0001;
const CLIENT_QP: u64 = 0x5B_0002;
/// Messages in flight at once at most (the Receive and Send queue depth).
const BATCH: usize = 32;
/// Bytes between message slots: the largest message plus room for spare Receive bytes.
const STRIDE: usize = 4352;
/// Receive slots start here; Send slots at 0.
const RECV_BASE: usize = BATCH * STRIDE;

/// Split `len` bytes into SGE lengths, one of several shapes by `kind`; the last SGE may
/// reach past the message (a Receive larger than the message) by `spare` bytes.
fn split(len: usize, kind: usize, spare: usize) -> Vec<usize> {
    let mut v = match kind % 5 {
        0 => vec![len],
        1 => vec![1, len - 1],
        2 => vec![len / 2, len - len / 2],
        // A first SGE short of the direct threshold, then the rest in two.
        3 if len > 4010 => vec![7, 4000, len - 4007 - (len - 4007) / 2, (len - 4007) / 2],
        3 => vec![7, len - 7],
        _ => vec![len - 64, 63, 1],
    };
    v.retain(|&l| l > 0);
    *v.last_mut().expect("non-empty") += spare;
    v
}

/// Lay SGE lengths out inside slot `slot` of the area at `base`, with a one-byte gap between
/// consecutive SGEs so that a byte placed one past an SGE's end lands in a gap.
fn ranges(base: usize, slot: usize, lens: &[usize]) -> Vec<Range<usize>> {
    let mut at = base + slot * STRIDE;
    lens.iter()
        .map(|&l| {
            let r = at..at + l;
            at += l + 1;
            r
        })
        .collect()
}

fn sizes() -> Vec<usize> {
    (4000..=4200).collect()
}

/// Send every size, `batch` messages at a time: a batch of one is a ping-pong's pattern, where
/// each read after a large header comes back with just that message's remainder.
fn boundary_sizes(provider: &Provider, fam: Family, batch: usize) -> Check {
    let a = provider
        .open_adapter_for(SocketAddr::new(fam.ip(), 0))
        .ctx("open adapter")?;
    let cfg = |qp_context| SideConfig {
        buf_len: 2 * RECV_BASE,
        depth: BATCH as u32,
        sge: 4,
        qp_context,
    };
    let server = Side::on(&a, cfg(SERVER_QP))?;
    let client = Side::on(&a, cfg(CLIENT_QP))?;
    let _l = connect_pair(&server, &client, fam.ip())?;

    let sizes = sizes();
    for (b, chunk) in sizes.chunks(batch).enumerate() {
        let mut plans = Vec::with_capacity(chunk.len());
        for (slot, &len) in chunk.iter().enumerate() {
            let n = b * batch + slot;
            let seed = 0x4096_0000 + n as u64;
            let send = ranges(0, slot, &split(len, n + 2, 0));
            let spare = if n.is_multiple_of(3) { 17 } else { 0 };
            let recv = ranges(RECV_BASE, slot, &split(len, n, spare));
            // SAFETY: nothing is posted on these ranges: the previous batch completed.
            unsafe {
                client.write(&send, &pattern(seed, len));
                let area = recv[0].start..recv.last().expect("non-empty").end + 1;
                server.write(std::slice::from_ref(&area), &vec![0; area.len()]);
            }
            server
                .recv(n as u64, &recv)
                .ctx(&format!("post Receive {n} ({len} bytes)"))?;
            plans.push((n, len, seed, send, recv));
        }
        // All Sends at once: they leave back to back and arrive as one stream.
        for (n, len, _, send, _) in &plans {
            client
                .send(*n as u64, send, OpFlags::empty())
                .ctx(&format!("Send {n} ({len} bytes)"))?;
        }
        let got = next_results(&server.rcq, plans.len(), "Receive completions")?;
        let want: Vec<Expect> = plans
            .iter()
            .map(|(n, len, ..)| {
                Expect::recv(Status::SUCCESS, *n as u64, SERVER_QP, Some(*len as u32))
            })
            .collect();
        expect_results(&got, &want, "Receive completions")?;
        let got = next_results(&client.scq, plans.len(), "Send completions")?;
        let want: Vec<Expect> = plans
            .iter()
            .map(|(n, ..)| Expect::send(Status::SUCCESS, *n as u64, CLIENT_QP))
            .collect();
        expect_results(&got, &want, "Send completions")?;
        for (n, len, seed, _, recv) in &plans {
            let what = format!("message {n} ({len} bytes, {} SGEs)", recv.len());
            // SAFETY: the Receive completed; nothing writes these bytes any more.
            let placed = unsafe { server.read(recv, *len) };
            expect_bytes(&placed, &pattern(*seed, *len), &what)?;
            // Nothing beyond the message: the gaps between SGEs and the spare bytes.
            let first = recv[0].start;
            let end = recv.last().expect("non-empty").end + 1;
            // SAFETY: as above.
            let whole = unsafe { server.read(&[first..end], end - first) };
            let mut left = *len;
            for (i, r) in recv.iter().enumerate() {
                let used = r.len().min(left);
                left -= used;
                // The SGE's unused bytes and the gap byte after it.
                let untouched = &whole[r.start + used - first..r.end + 1 - first];
                if untouched.iter().any(|&x| x != 0) {
                    return fail(format!("{what}: SGE {i} written beyond its share"));
                }
            }
        }
    }
    expect_empty(&server.rcq, "receive CQ")?;
    expect_empty(&client.scq, "initiator CQ")
}

#[test]
fn sends_around_the_direct_placement_threshold() {
    let mut failures = Vec::new();
    for fam in Family::available() {
        let label = harness::label("tcp", fam, "rx-boundary");
        let r = harness::with_deadline(&label, move || {
            let provider = Provider::select("tcp").ctx("open provider")?;
            boundary_sizes(&provider, fam, BATCH)?;
            boundary_sizes(&provider, fam, 1)
        });
        if let Err(e) = r {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

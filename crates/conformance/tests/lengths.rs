//! What a successful request reports in `BytesTransferred`, in one process over real sockets,
//! for every provider and both loopback families.
//!
//! ND v2 defines the field for Receives only (docs/ND-RULES.md §1.10: undefined for the
//! rest); ND v1 defines it for Send, Read and Write as well, and WinOF reports the request's
//! length there (the ND v1 `INDEndpoint` documentation and WinOF's provider). Every provider here reports, for a successful Send, Write and
//! Read, the total of its scatter/gather list, whatever way the request took inside the
//! provider: the sizes below cover zero bytes, copied within the post (INLINE or registered),
//! several SGEs, past a shm cell (49 B), chunked, and for one-sided requests the whole 64 KiB
//! `Buffer`, which shm copies through a mapping of the target's memory when the kernel lets
//! it. An application that counts bytes then sees the same figures when it switches with
//! `ND_PROVIDER`.

// Requests are lists of byte ranges (one per SGE): `&[0..8]` is a one-SGE request.
#![allow(clippy::single_range_in_vec_init)]

use std::net::IpAddr;
use std::ops::Range;

use netdirect::{MrFlags, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{next_results, Check, Context, Expect};
use netdirect_conformance::harness;
use netdirect_conformance::side::{default_pair, reading_pair};
use netdirect_conformance::Needs;

/// Sends of every shape the providers treat apart: (what, source ranges, flags).
fn sends() -> Vec<(&'static str, Vec<Range<usize>>, OpFlags)> {
    vec![
        ("zero bytes", vec![], OpFlags::empty()),
        ("8 B inline", vec![0..8], OpFlags::INLINE),
        ("8 B registered", vec![0..8], OpFlags::empty()),
        (
            "48 B in three SGEs",
            vec![0..16, 100..116, 200..216],
            OpFlags::empty(),
        ),
        ("49 B", vec![0..49], OpFlags::empty()),
        ("4 KiB", vec![0..4096], OpFlags::empty()),
        ("60,000 B", vec![0..60_000], OpFlags::empty()),
    ]
}

fn total(ranges: &[Range<usize>]) -> u32 {
    ranges.iter().map(|r| r.len() as u32).sum()
}

fn send_lengths(p: &Provider, ip: IpAddr) -> Check {
    let (_a, server, client, _listener) = default_pair(p, ip)?;
    let mut ctx = 0;
    for (what, ranges, flags) in sends() {
        ctx += 1;
        let n = total(&ranges);
        server.recv(ctx, &[0..65536]).ctx(what)?;
        client.send(ctx, &ranges, flags).ctx(what)?;
        let r = next_results(&client.scq, 1, what)?;
        Expect::send(Status::SUCCESS, ctx, client.qp_context)
            .with_bytes(n)
            .check(&r[0], &format!("the Send of {what}"))?;
        let r = next_results(&server.rcq, 1, what)?;
        Expect::recv(Status::SUCCESS, ctx, server.qp_context, Some(n))
            .check(&r[0], &format!("the Receive of {what}"))?;
    }
    // Two Sends posted back to back, each reported with its own length.
    server.recv(101, &[0..32768]).ctx("Receive 1")?;
    server.recv(102, &[32768..65536]).ctx("Receive 2")?;
    client.send(101, &[0..8], OpFlags::empty()).ctx("Send 1")?;
    client
        .send(102, &[0..5000], OpFlags::empty())
        .ctx("Send 2")?;
    let r = next_results(&client.scq, 2, "two Sends")?;
    for (i, (ctx, n)) in [(101, 8), (102, 5000)].into_iter().enumerate() {
        Expect::send(Status::SUCCESS, ctx, client.qp_context)
            .with_bytes(n)
            .check(&r[i], &format!("back-to-back Send {}", i + 1))?;
    }
    let r = next_results(&server.rcq, 2, "two Receives")?;
    for (i, (ctx, n)) in [(101, 8), (102, 5000)].into_iter().enumerate() {
        Expect::recv(Status::SUCCESS, ctx, server.qp_context, Some(n))
            .check(&r[i], &format!("back-to-back Receive {}", i + 1))?;
    }
    Ok(())
}

fn one_sided_lengths(p: &Provider, ip: IpAddr) -> Check {
    let (_a, server, client, _listener) = reading_pair(p, ip, 1)?;
    let target = server.register_again(
        MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ,
    )?;
    let token = target.get_remote_token();
    let mut ctx = 0;
    // 64 KiB: the whole buffer, which takes the mapped path where a provider has one.
    let cases: [(&str, Vec<Range<usize>>, OpFlags); 6] = [
        ("zero bytes", vec![], OpFlags::empty()),
        ("8 B inline", vec![0..8], OpFlags::INLINE),
        ("8 B", vec![0..8], OpFlags::empty()),
        ("40 B in two SGEs", vec![0..20, 64..84], OpFlags::empty()),
        ("4 KiB", vec![0..4096], OpFlags::empty()),
        ("64 KiB", vec![0..65536], OpFlags::empty()),
    ];
    for (what, ranges, flags) in cases {
        let n = total(&ranges);
        ctx += 1;
        client
            .rdma_write(ctx, &ranges, server.addr(0), token, flags)
            .ctx(what)?;
        let r = next_results(&client.scq, 1, what)?;
        Expect::initiator(RequestType::Write, Status::SUCCESS, ctx, client.qp_context)
            .with_bytes(n)
            .check(&r[0], &format!("the Write of {what}"))?;
        if flags.contains(OpFlags::INLINE) {
            continue; // INLINE applies to sources only
        }
        ctx += 1;
        client
            .rdma_read(ctx, &ranges, server.addr(0), token, OpFlags::empty())
            .ctx(what)?;
        let r = next_results(&client.scq, 1, what)?;
        Expect::initiator(RequestType::Read, Status::SUCCESS, ctx, client.qp_context)
            .with_bytes(n)
            .check(&r[0], &format!("the Read of {what}"))?;
    }
    Ok(())
}

#[test]
fn a_send_reports_its_length() {
    harness::each_provider(Needs::TwoSided, "send-lengths", |p, fam| {
        send_lengths(p, fam.ip())
    });
}

#[test]
fn a_write_and_a_read_report_their_length() {
    harness::each_provider(Needs::OneSided, "one-sided-lengths", |p, fam| {
        one_sided_lengths(p, fam.ip())
    });
}

//! Shared receive queues inside one process (IND2SharedReceiveQueue in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.6): both ends on one adapter, so every wait drives both.
//!
//! Runs against every provider whose adapter reports `MaxSharedReceiveQueueDepth > 0`, and
//! says on stderr which ones it skipped. The receivers' bounds (`ND_TCP_RNR_TIMEOUT_MS`,
//! `ND_SHM_RNR_TIMEOUT_MS`) are set large, so they never fire here; the multi-process
//! `rnr-*` scenarios test them.

#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;

use netdirect::{OpFlags, Provider, SharedReceiveQueue, Status};
use netdirect_conformance::check::{
    expect_bytes, expect_completed, expect_empty, expect_pending, expect_status, next_results,
    pattern, wait_ok, Check, Context, Expect,
};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::connect_pair;
use netdirect_conformance::{ensure, Side, SideConfig};

const SERVER_QP: u64 = 0x5352_5100_0000_0001;
const CLIENT_QP: u64 = 0x5352_5100_0000_0002;
/// Registered bytes per side: room for a 1 MiB message.
const BUF: usize = 4 << 20;

/// A server side whose queue pair takes its Receives from `srq` (the side's own QP is
/// replaced before it is connected).
fn srq_side(
    p: &Provider,
    fam: Family,
    srq_depth: u32,
    threshold: u32,
) -> Check<(Side, SharedReceiveQueue)> {
    let a = p
        .open_adapter_for(SocketAddr::new(fam.ip(), 0))
        .ctx("open adapter")?;
    let mut side = Side::on(
        &a,
        SideConfig {
            qp_context: SERVER_QP,
            buf_len: BUF,
            ..SideConfig::default()
        },
    )?;
    let srq = a
        .create_shared_receive_queue(srq_depth, 4, threshold, 0, 0)
        .ctx("CreateSharedReceiveQueue")?;
    side.qp = a
        .create_queue_pair_with_srq(&side.rcq, &side.scq, &srq, SERVER_QP, 8, 4, 0)
        .ctx("CreateQueuePairWithSrq")?;
    Ok((side, srq))
}

/// Post a Receive on `srq` into byte ranges of `side`'s buffer.
fn srq_recv(
    side: &Side,
    srq: &SharedReceiveQueue,
    ctx: u64,
    ranges: &[std::ops::Range<usize>],
) -> netdirect::Result<()> {
    let sge = side.sges(ranges);
    // SAFETY: the ranges lie inside the side's registered buffer, read only after the
    // Receive completed.
    unsafe { srq.receive(ctx, &sge) }
}

fn client_on(server: &Side) -> Check<Side> {
    Side::on(
        &server.adapter,
        SideConfig {
            qp_context: CLIENT_QP,
            buf_len: BUF,
            ..SideConfig::default()
        },
    )
}

/// Receives posted before the queue pair connects take messages in post order, with the
/// queue pair's context; the local rules of Receive and Modify give their documented status.
fn delivery_and_local_rules(p: &Provider, fam: Family) -> Check {
    let (server, srq) = srq_side(p, fam, 4, 0)?;
    // "You can call this method before any associated queue pairs are connected."
    for i in 0..3u64 {
        let at = 4096 * (i as usize + 1);
        srq_recv(&server, &srq, 100 + i, &[at..at + 2048]).ctx("SRQ Receive before connect")?;
    }
    expect_status(
        srq_recv(&server, &srq, 9, &[0..1, 1..2, 2..3, 3..4, 4..5]),
        Status::DATA_OVERRUN,
        "SRQ Receive with more SGEs than maxRequestSge",
    )?;
    srq_recv(&server, &srq, 103, &[16384..16384 + 2048]).ctx("fourth Receive (depth 4)")?;
    expect_status(
        srq_recv(&server, &srq, 9, &[0..8]),
        Status::NO_MORE_ENTRIES,
        "SRQ Receive beyond the depth",
    )?;
    expect_status(
        srq.modify(2, 0),
        Status::BUFFER_OVERFLOW,
        "Modify to a depth below the Receives posted",
    )?;
    srq.modify(8, 0).ctx("Modify to a larger depth")?;
    let max = server.info.max_shared_receive_queue_depth;
    for depth in [max + 1, u32::MAX] {
        expect_status(
            srq.modify(depth, 0),
            Status::INVALID_PARAMETER,
            &format!("Modify to {depth}, above MaxSharedReceiveQueueDepth {max}"),
        )?;
    }
    srq_recv(&server, &srq, 104, &[20480..20480 + 2048]).ctx("Receive after growing")?;
    let (g, mask) = srq.get_notify_affinity().ctx("GetNotifyAffinity")?;
    ensure!(
        g == 0 && mask != 0,
        "GetNotifyAffinity gave ({g}, {mask:#x})"
    );
    let client = client_on(&server)?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    let mut want = Vec::new();
    for i in 0..5u64 {
        let len = 100 + 300 * i as usize;
        let bytes = pattern(0x5150 + i, len);
        // SAFETY: nothing is posted on the client's send range yet for this message.
        unsafe { client.write(&[0..len], &bytes) };
        client.send(i, &[0..len], OpFlags::empty()).ctx("Send")?;
        let r = next_results(&client.scq, 1, "Send")?;
        Expect::send(Status::SUCCESS, i, CLIENT_QP).check(&r[0], "Send")?;
        want.push(bytes);
    }
    let r = next_results(&server.rcq, 5, "five Receives from the SRQ")?;
    for (i, (res, bytes)) in r.iter().zip(&want).enumerate() {
        Expect::recv(
            Status::SUCCESS,
            100 + i as u64,
            SERVER_QP,
            Some(bytes.len() as u32),
        )
        .check(res, "SRQ Receive (FIFO, the QP's context)")?;
        let at = 4096 * (i + 1);
        // SAFETY: that Receive completed.
        let got = unsafe { server.read(&[at..at + 2048], bytes.len()) };
        expect_bytes(&got, bytes, "SRQ Receive payload")?;
    }
    // A 1 MiB message: its bulk is read from the socket straight into the SRQ Receive's two
    // SGEs, as into a queue pair's own Receive.
    const MIB: usize = 1 << 20;
    let big = pattern(0xB16, MIB);
    srq_recv(
        &server,
        &srq,
        105,
        &[MIB..MIB + 300_001, 3 * MIB..3 * MIB + MIB],
    )
    .ctx("SRQ Receive for 1 MiB")?;
    // SAFETY: nothing is posted on this range.
    unsafe { client.write(&[MIB..2 * MIB], &big) };
    client
        .send(9, &[MIB..2 * MIB], OpFlags::empty())
        .ctx("1 MiB Send")?;
    let r = next_results(&server.rcq, 1, "1 MiB Receive")?;
    Expect::recv(Status::SUCCESS, 105, SERVER_QP, Some(MIB as u32)).check(&r[0], "1 MiB")?;
    // SAFETY: the Receive completed.
    let got = unsafe { server.read(&[MIB..MIB + 300_001, 3 * MIB..4 * MIB], MIB) };
    expect_bytes(&got, &big, "1 MiB through the SRQ")?;
    next_results(&client.scq, 1, "1 MiB Send")?;
    expect_status(
        server.recv(7, &[0..8]),
        Status::INVALID_DEVICE_REQUEST,
        "Receive on a queue pair that takes its Receives from an SRQ",
    )?;
    // Whatever its SGEs: the queue pair has no receive queue to check them against.
    let many = vec![0..8; 65];
    expect_status(
        server.recv(8, &many),
        Status::INVALID_DEVICE_REQUEST,
        "Receive of 65 SGEs on a queue pair that takes its Receives from an SRQ",
    )
}

/// Notify completes once fewer Receives than the threshold remain; Modify may lower the
/// threshold; every pending Notify completes together; Cancel completes them ND_CANCELED
/// before it returns.
fn threshold_notify(p: &Provider, fam: Family) -> Check {
    let (server, srq) = srq_side(p, fam, 8, 2)?;
    for i in 0..3u64 {
        let at = 4096 * (i as usize + 1);
        srq_recv(&server, &srq, 200 + i, &[at..at + 64]).ctx("SRQ Receive")?;
    }
    let n1 = srq.notify().ctx("Notify")?;
    let n2 = srq.notify().ctx("second Notify")?;
    expect_pending(&n1, "Notify with 3 posted, threshold 2")?;
    let client = client_on(&server)?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    client.send(1, &[0..8], OpFlags::empty()).ctx("Send 1")?;
    next_results(&server.rcq, 1, "first Receive")?;
    expect_pending(&n1, "Notify with 2 posted (not below 2)")?;
    client.send(2, &[0..8], OpFlags::empty()).ctx("Send 2")?;
    next_results(&server.rcq, 1, "second Receive")?;
    wait_ok(&n1, "Notify once 1 Receive remains")?;
    wait_ok(&n2, "the other Notify, completed by the same event")?;
    // Lower the threshold to 1: one posted is not below it.
    srq.modify(0, 1).ctx("Modify threshold only")?;
    let n3 = srq.notify().ctx("Notify at threshold 1")?;
    expect_pending(&n3, "Notify with 1 posted, threshold 1")?;
    srq.cancel_overlapped_requests()
        .ctx("CancelOverlappedRequests")?;
    expect_completed(&n3, Status::CANCELED, "Notify after Cancel")?;
    next_results(&client.scq, 2, "Sends")?;
    Ok(())
}

/// A Send that finds the SRQ empty waits, with the connection intact, until a Receive is
/// posted; the post itself delivers it. Two queue pairs share the queue.
fn empty_srq_waits(p: &Provider, fam: Family) -> Check {
    let (server, srq) = srq_side(p, fam, 8, 0)?;
    let a = server.adapter.clone();
    let mut server2 = Side::on(&a, SideConfig::default())?;
    server2.qp = a
        .create_queue_pair_with_srq(&server2.rcq, &server2.scq, &srq, SERVER_QP + 1, 8, 4, 0)
        .ctx("second CreateQueuePairWithSrq")?;
    server2.qp_context = SERVER_QP + 1;
    let client = client_on(&server)?;
    let client2 = client_on(&server)?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    let _l2 = connect_pair(&server2, &client2, fam.ip())?;
    let msg = pattern(0xE5, 3000);
    // SAFETY: nothing is posted on this range.
    unsafe { client.write(&[0..3000], &msg) };
    client
        .send(1, &[0..3000], OpFlags::empty())
        .ctx("Send into the empty SRQ")?;
    let r = next_results(&client.scq, 1, "Send")?;
    Expect::send(Status::SUCCESS, 1, CLIENT_QP).check(&r[0], "Send (TCP took it)")?;
    // The message is at the server now; polling reads it and finds no Receive.
    expect_empty(&server.rcq, "server CQ with the SRQ empty")?;
    expect_empty(&server.rcq, "server CQ with the SRQ empty, again")?;
    srq_recv(&server, &srq, 300, &[8192..8192 + 4096]).ctx("SRQ Receive")?;
    let r = next_results(&server.rcq, 1, "the held Send")?;
    Expect::recv(Status::SUCCESS, 300, SERVER_QP, Some(3000)).check(&r[0], "held Send")?;
    // SAFETY: the Receive completed.
    let got = unsafe { server.read(&[8192..8192 + 3000], 3000) };
    expect_bytes(&got, &msg, "held Send payload")?;
    // The connection survived: a reply goes through, and the other queue pair takes the next.
    server.send(2, &[0..8], OpFlags::empty()).ctx("reply")?;
    client.recv(3, &[0..64]).ctx("client Receive")?;
    let r = next_results(&client.rcq, 1, "reply")?;
    Expect::recv(Status::SUCCESS, 3, CLIENT_QP, Some(8)).check(&r[0], "reply")?;
    client2
        .send(4, &[0..16], OpFlags::empty())
        .ctx("Send on the second connection")?;
    srq_recv(&server, &srq, 301, &[0..64]).ctx("SRQ Receive")?;
    let r = next_results(&server2.rcq, 1, "second queue pair's Receive")?;
    Expect::recv(Status::SUCCESS, 301, SERVER_QP + 1, Some(16)).check(&r[0], "second QP")?;
    expect_empty(&server.rcq, "first queue pair's CQ")?;
    // Flush of a queue pair leaves the SRQ's Receives in the SRQ.
    srq_recv(&server, &srq, 302, &[0..64]).ctx("SRQ Receive")?;
    server2.qp.flush().ctx("Flush the second queue pair")?;
    expect_empty(
        &server2.rcq,
        "flushed queue pair: no SRQ Receive is its to cancel",
    )?;
    client
        .send(5, &[0..8], OpFlags::empty())
        .ctx("Send after the other's Flush")?;
    let r = next_results(&server.rcq, 1, "Receive after the other queue pair's Flush")?;
    Expect::recv(Status::SUCCESS, 302, SERVER_QP, Some(8)).check(&r[0], "after Flush")?;
    let r = next_results(&client.scq, 1, "Send after the Flush")?;
    Expect::send(Status::SUCCESS, 5, CLIENT_QP).check(&r[0], "Send after the Flush")?;
    let r = next_results(&client2.scq, 1, "second connection's Send")?;
    Expect::send(Status::SUCCESS, 4, CLIENT_QP).check(&r[0], "second connection's Send")
}

/// Without an SRQ: a Send that arrives before its Receive is posted waits for it (the
/// connection survives), and the post itself delivers it, in order with what follows.
fn late_queue_pair_receive(p: &Provider, fam: Family) -> Check {
    let a = p
        .open_adapter_for(SocketAddr::new(fam.ip(), 0))
        .ctx("open adapter")?;
    let server = Side::on(
        &a,
        SideConfig {
            qp_context: SERVER_QP,
            ..SideConfig::default()
        },
    )?;
    let client = client_on(&server)?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    let first = pattern(0x1A7E, 500);
    // SAFETY: nothing is posted on these ranges.
    unsafe { client.write(&[0..500], &first) };
    client
        .send(1, &[0..500], OpFlags::empty())
        .ctx("Send before any Receive")?;
    client
        .send(2, &[600..610], OpFlags::empty())
        .ctx("second Send")?;
    next_results(&client.scq, 2, "both Sends")?;
    expect_empty(&server.rcq, "server CQ with no Receive posted")?;
    expect_empty(&server.rcq, "server CQ with no Receive posted, again")?;
    server.recv(10, &[4096..8192]).ctx("late Receive")?;
    server.recv(11, &[8192..8300]).ctx("second late Receive")?;
    let r = next_results(&server.rcq, 2, "the held Sends")?;
    Expect::recv(Status::SUCCESS, 10, SERVER_QP, Some(500)).check(&r[0], "held Send")?;
    Expect::recv(Status::SUCCESS, 11, SERVER_QP, Some(10)).check(&r[1], "next Send")?;
    // SAFETY: the Receive completed.
    let got = unsafe { server.read(&[4096..8192], 500) };
    expect_bytes(&got, &first, "held Send payload")?;
    server.send(3, &[0..8], OpFlags::empty()).ctx("reply")?;
    client.recv(4, &[0..64]).ctx("client Receive")?;
    let r = next_results(&client.rcq, 1, "reply")?;
    Expect::recv(Status::SUCCESS, 4, CLIENT_QP, Some(8)).check(&r[0], "reply")
}

#[test]
fn a_send_waits_for_a_late_queue_pair_receive() {
    long_rnr_bound();
    harness::each_provider(
        netdirect_conformance::Needs::TwoSided,
        "late-receive",
        late_queue_pair_receive,
    );
}

/// Bounds long enough never to fire here: these tests are about the wait, not its bound.
fn long_rnr_bound() {
    std::env::set_var("ND_TCP_RNR_TIMEOUT_MS", "60000");
    std::env::set_var("ND_SHM_RNR_TIMEOUT_MS", "60000");
}

fn each(name: &str, f: fn(&Provider, Family) -> Check) {
    long_rnr_bound();
    let ran = harness::each_provider(netdirect_conformance::Needs::Srq, name, f);
    assert!(ran > 0, "no provider supports shared receive queues");
}

#[test]
fn srq_delivery_and_local_rules() {
    each("srq-delivery", delivery_and_local_rules);
}

#[test]
fn srq_threshold_notify() {
    each("srq-threshold", threshold_notify);
}

#[test]
fn empty_srq_holds_the_send_until_a_receive_is_posted() {
    each("srq-empty", empty_srq_waits);
}

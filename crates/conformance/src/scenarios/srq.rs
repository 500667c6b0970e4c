//! Receivers without a Receive, and shared receive queues under load (R-QP-7,
//! `docs/ND-RULES.md` §2.4 CreateQueuePairWithSrq, §2.6).
//!
//! * `rnr-timeout`, `rnr-timeout-srq`: a Send that finds no Receive (on the queue pair, or
//!   in its empty SRQ) is held while the receiver's bound runs, then fails `ND_IO_TIMEOUT` at
//!   the sender; the receiver reports no completion for it, and its SRQ keeps its Receives.
//!   The server sets the bound (`ND_TCP_RNR_TIMEOUT_MS`, `ND_SHM_RNR_TIMEOUT_MS`) for its own
//!   process before it opens the adapter, so no other scenario sees the short value.
//! * `srq-server-256`: one SRQ feeds 256 connections from one client process; every message
//!   is checked byte for byte, echoed, and its buffer reposted; at the end every buffer is
//!   accounted for. The SRQ holds fewer buffers than the messages in flight, so Sends find it
//!   empty and wait for reposts.

use std::net::SocketAddr;
use std::ops::Range;

use netdirect::{
    CompletionQueue, Connector, NdResult, NotifyType, OpFlags, QueuePair, RequestType, Status,
};

use super::{any_port, await_request, client_side, server_side};
use crate::check::{
    expect_bytes, expect_empty, expect_status, fail, next_results, pattern, wait_ok, Check,
    Context, Expect, WAIT,
};
use crate::side::{listen, Ctx, Side, SideConfig};
use crate::{ensure, ensure_eq};

/// The receiver's bound in the `rnr-*` scenarios.
const RNR_MS: &str = "300";
/// Larger than what the kernel buffers of a stalled loopback connection hold (`tcp_rmem` +
/// `tcp_wmem` maxima are a few MiB), so TCP cannot take the whole Send and it is still
/// outstanding when the receiver gives up.
const BIG: usize = 32 << 20;

/// Use a short receiver-not-ready bound in this process (read when an adapter opens), for
/// each provider that has one.
fn short_rnr_bound() {
    std::env::set_var("ND_TCP_RNR_TIMEOUT_MS", RNR_MS);
    std::env::set_var("ND_SHM_RNR_TIMEOUT_MS", RNR_MS);
}

fn serve_one(ctx: &Ctx, side: &Side) -> Check {
    let (_listener, _) = await_request(ctx, side)?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")
}

fn connect_one(ctx: &Ctx, side: &Side) -> Check {
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")
}

/// How the receiver spends the time the bound runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Receiver {
    /// Blocked in a wait (the engine sleeps until the bound's deadline).
    Waits,
    /// Busy-polling its CQ, which drives its queue pair but no engine timer.
    Polls,
}

/// The receiver holds the Send until its bound runs out, then ends the connection: its
/// NotifyDisconnect completes and its CQ reports nothing for the Send.
fn rnr_receiver(ctx: &Ctx, side: &Side, how: Receiver) -> Check {
    serve_one(ctx, side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    if how == Receiver::Polls {
        let deadline = std::time::Instant::now() + WAIT;
        let mut r = [NdResult::EMPTY; 4];
        while nd.try_result().is_none() {
            let n = side.rcq.get_results(&mut r);
            ensure!(n == 0, "the receiver got completions {:?}", &r[..n]);
            ensure!(
                std::time::Instant::now() < deadline,
                "a polling receiver never timed the held Send out"
            );
        }
    }
    wait_ok(&nd, "NotifyDisconnect once the held Send timed out")?;
    expect_empty(&side.rcq, "the receiver's CQ (it sees no CQE, R-QP-7)")?;
    ctx.linger();
    Ok(())
}

/// The sender's Send fails ND_IO_TIMEOUT; what it posts afterwards is flushed.
fn rnr_sender(ctx: &Ctx) -> Check {
    let side = client_side(
        ctx,
        SideConfig {
            buf_len: BIG,
            ..SideConfig::default()
        },
    )?;
    connect_one(ctx, &side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    side.send(1, &[0..BIG], OpFlags::empty())
        .ctx("Send with no Receive at the peer")?;
    let r = next_results(&side.scq, 1, "the Send nobody receives")?;
    Expect {
        status: Status::IO_TIMEOUT,
        request_type: RequestType::Send,
        request_context: 1,
        qp_context: side.qp_context,
        bytes: None,
    }
    .check(&r[0], "Send with no Receive posted at the peer (R-QP-7)")?;
    wait_ok(&nd, "NotifyDisconnect after the timeout")?;
    side.send(2, &[0..8], OpFlags::empty())
        .ctx("Send after the connection ended")?;
    let r = next_results(&side.scq, 1, "Send after the end")?;
    Expect::send(Status::CANCELED, 2, side.qp_context).check(&r[0], "Send after the end")
}

// ---------------------------------------------------------------------------------------------
// rnr-timeout

pub(super) fn rnr_timeout_server(ctx: &Ctx) -> Check {
    short_rnr_bound();
    let side = server_side(ctx, SideConfig::default())?;
    rnr_receiver(ctx, &side, Receiver::Waits)
}

pub(super) fn rnr_timeout_polling_server(ctx: &Ctx) -> Check {
    short_rnr_bound();
    let side = server_side(ctx, SideConfig::default())?;
    rnr_receiver(ctx, &side, Receiver::Polls)
}

pub(super) fn rnr_timeout_client(ctx: &Ctx) -> Check {
    rnr_sender(ctx)
}

// ---------------------------------------------------------------------------------------------
// rnr-timeout-srq

pub(super) fn rnr_timeout_srq_server(ctx: &Ctx) -> Check {
    short_rnr_bound();
    let mut side = server_side(ctx, SideConfig::default())?;
    let srq = side
        .adapter
        .create_shared_receive_queue(4, 1, 0, 0, 0)
        .ctx("CreateSharedReceiveQueue")?;
    side.qp = side
        .adapter
        .create_queue_pair_with_srq(&side.rcq, &side.scq, &srq, side.qp_context, 8, 4, 0)
        .ctx("CreateQueuePairWithSrq")?;
    rnr_receiver(ctx, &side, Receiver::Waits)?;
    // The SRQ outlives the connection it could not serve: a Receive posted now stays in it
    // (no queue pair takes it, nothing completes), and it counts as outstanding.
    let sge = side.sges(&[0..64]);
    // SAFETY (each post): inside the side's registered buffer; never read.
    unsafe { srq.receive(7, &sge) }.ctx("SRQ Receive after the timeout")?;
    expect_empty(&side.rcq, "the SRQ's Receive stays in the SRQ")?;
    // It counts: three more fill the depth of 4, a fifth is refused, and the depth cannot
    // go below the four.
    for k in 0..3u64 {
        unsafe { srq.receive(8 + k, &sge) }.ctx("SRQ Receive up to the depth")?;
    }
    expect_status(
        unsafe { srq.receive(11, &sge) },
        Status::NO_MORE_ENTRIES,
        "SRQ Receive beyond the depth",
    )?;
    expect_status(
        srq.modify(3, 0),
        Status::BUFFER_OVERFLOW,
        "Modify below the 4 Receives in the SRQ",
    )?;
    srq.modify(4, 0)
        .ctx("Modify to a depth of the 4 Receives in the SRQ")?;
    Ok(())
}

pub(super) fn rnr_timeout_srq_client(ctx: &Ctx) -> Check {
    rnr_sender(ctx)
}

// ---------------------------------------------------------------------------------------------
// srq-server-256

/// Connections, messages per connection, and the largest message.
const CONNS: usize = 256;
const MSGS: usize = 8;
const MAX_MSG: usize = 4096;
/// Receive buffers the server's SRQ holds: fewer than the messages in flight.
const SRQ_BUFS: usize = 512;
/// Receives reposted beyond what the messages need: left in the SRQ at the end, where
/// Modify's accounting must see them.
const SPARE: usize = 5;

/// Length of message `k` on connection `c` (1..=MAX_MSG, varied so SGE and segment
/// boundaries fall everywhere).
fn msg_len(c: usize, k: usize) -> usize {
    1 + (c * 131 + k * 977 + c * k * 7) % MAX_MSG
}

fn msg_bytes(c: usize, k: usize) -> Vec<u8> {
    pattern(((c as u64) << 16) | k as u64, msg_len(c, k))
}

/// Poll `cq` into `out`, blocking on Notify(ANY) when it is empty (race rule: a completion
/// after the short poll fires the Notify). `None` after [`WAIT`] with nothing.
fn poll_some(cq: &CompletionQueue, out: &mut [NdResult], what: &str) -> Check<usize> {
    let n = cq.get_results(out);
    if n > 0 {
        return Ok(n);
    }
    let ov = cq.notify(NotifyType::Any).ctx("Notify")?;
    match ov.wait_timeout(Some(WAIT)) {
        Some(r) => r.ctx(&format!("{what}: Notify"))?,
        None => {
            let _ = cq.cancel_overlapped_requests();
            return fail(format!("{what}: nothing for {WAIT:?}"));
        }
    }
    Ok(cq.get_results(out))
}

pub(super) fn srq_server_256_server(ctx: &Ctx) -> Check {
    let side = server_side(
        ctx,
        SideConfig {
            buf_len: SRQ_BUFS * MAX_MSG,
            ..SideConfig::default()
        },
    )?;
    let a = &side.adapter;
    let depth = (CONNS * MSGS * 2) as u32;
    // One CQ for both directions: a single wait sees the echo completions that free
    // buffers as well as the Receives that need them.
    let cq = a.create_completion_queue(depth, 0, 0).ctx("CQ")?;
    let srq = a
        .create_shared_receive_queue(SRQ_BUFS as u32, 2, 0, 0, 0)
        .ctx("CreateSharedReceiveQueue")?;
    let post = |b: usize| -> Check {
        // Two SGEs per buffer, split unevenly, so a message crosses an SGE boundary.
        let at = b * MAX_MSG;
        let sge = side.sges(&[at..at + 1000, at + 1000..at + MAX_MSG]);
        // SAFETY: buffer `b` is read only after its Receive completed, and reposted only
        // after the echo Send that read it completed.
        unsafe { srq.receive(b as u64, &sge) }.ctx("SRQ Receive")
    };
    for b in 0..SRQ_BUFS {
        post(b)?;
    }
    let mut posts = SRQ_BUFS;
    let mut conns: Vec<Connector> = Vec::with_capacity(CONNS);
    for _ in 0..CONNS {
        conns.push(a.create_connector().ctx("create connector")?);
    }
    let (listener, laddr) = listen(a, any_port(ctx), 0)?;
    ctx.announce_listening(laddr);
    // Every GetConnectionRequest at once; each incoming request completes the oldest.
    let gcrs = conns
        .iter()
        .map(|c| listener.get_connection_request(c))
        .collect::<netdirect::Result<Vec<_>>>()
        .ctx("GetConnectionRequest")?;
    // Requests arrive in whatever order the client's connections got through; each names
    // its client connection in its private data, which becomes its queue pair's context.
    let mut accepts = Vec::with_capacity(CONNS);
    let mut by_id: Vec<Option<QueuePair>> = (0..CONNS).map(|_| None).collect();
    for (conn, gcr) in conns.iter().zip(&gcrs) {
        wait_ok(gcr, "GetConnectionRequest")?;
        let pd = conn.private_data().ctx("private data")?;
        ensure!(pd.len() >= 2, "private data too short: {pd:?}");
        let c = usize::from(u16::from_le_bytes([pd[0], pd[1]]));
        ensure!(
            c < CONNS && by_id[c].is_none(),
            "bad or repeated connection id {c}"
        );
        let qp = a
            .create_queue_pair_with_srq(&cq, &cq, &srq, c as u64, MSGS as u32, 2, 0)
            .ctx("CreateQueuePairWithSrq")?;
        accepts.push(conn.accept(&qp, 0, 0, &[]).ctx("Accept")?);
        by_id[c] = Some(qp);
    }
    let qps: Vec<QueuePair> = by_id.into_iter().flatten().collect();
    for aov in &accepts {
        wait_ok(aov, "Accept")?;
    }
    // Receive, check, echo from the same buffer, repost once the echo left.
    let mut next = [0usize; CONNS];
    let (mut received, mut echoed) = (0, 0);
    let mut out = vec![NdResult::EMPTY; 64];
    while received < CONNS * MSGS || echoed < CONNS * MSGS {
        let n = poll_some(&cq, &mut out, "server receives")?;
        for r in &out[..n] {
            if r.request_type == RequestType::Send {
                ensure_eq!(r.status, Status::SUCCESS, "echo Send ({r:?})");
                echoed += 1;
                if posts < CONNS * MSGS + SPARE {
                    post(r.request_context as usize)?;
                    posts += 1;
                }
                // Buffers not reposted are done here; `SPARE` more than the messages need
                // stay in the SRQ at the end, for the accounting below.
                continue;
            }
            ensure_eq!(r.status, Status::SUCCESS, "SRQ Receive status ({r:?})");
            ensure_eq!(r.request_type, RequestType::Receive, "request type");
            let (c, b) = (r.qp_context as usize, r.request_context as usize);
            ensure!(c < CONNS && b < SRQ_BUFS, "unknown contexts in {r:?}");
            let k = next[c];
            ensure!(k < MSGS, "connection {c}: more than {MSGS} messages");
            next[c] += 1;
            let want = msg_bytes(c, k);
            ensure_eq!(
                r.bytes_transferred as usize,
                want.len(),
                "length of {c}/{k}"
            );
            let range = b * MAX_MSG..b * MAX_MSG + want.len();
            // SAFETY: the Receive into buffer `b` completed; nothing is posted on it.
            let got = unsafe { side.read(std::slice::from_ref(&range), want.len()) };
            expect_bytes(&got, &want, &format!("connection {c} message {k}"))?;
            let sge = side.sges(std::slice::from_ref(&range));
            // SAFETY: the Send reads buffer `b`, which stays untouched until it completes.
            unsafe { qps[c].send(b as u64, &sge, OpFlags::empty()) }.ctx("echo Send")?;
            received += 1;
        }
    }
    // Accounting: every message landed in a posted buffer exactly once, and the SRQ holds
    // the rest: posts − completions Receives are still outstanding, so a depth below that
    // is refused and that depth itself is accepted (Modify's ND_BUFFER_OVERFLOW rule).
    let outstanding = posts - received;
    ensure_eq!(received, CONNS * MSGS, "Receive completions");
    ensure_eq!(outstanding, SPARE, "Receives left in the SRQ");
    expect_status(
        srq.modify(outstanding as u32 - 1, 0),
        Status::BUFFER_OVERFLOW,
        &format!("Modify below the {outstanding} Receives still in the SRQ"),
    )?;
    srq.modify(outstanding as u32, 0)
        .ctx("Modify to exactly the Receives still in the SRQ")?;
    ensure!(
        next.iter().all(|&k| k == MSGS),
        "every connection delivered {MSGS} messages"
    );
    expect_empty(&cq, "CQ after the exchange")?;
    ctx.linger();
    Ok(())
}

pub(super) fn srq_server_256_client(ctx: &Ctx) -> Check {
    // Send area: one MAX_MSG slot per message; echo area after it.
    let slots = CONNS * MSGS;
    let side = client_side(
        ctx,
        SideConfig {
            buf_len: 2 * slots * MAX_MSG,
            ..SideConfig::default()
        },
    )?;
    let a = &side.adapter;
    let depth = (slots * 2) as u32;
    let cq = a.create_completion_queue(depth, 0, 0).ctx("CQ")?;
    let slot = |c: usize, k: usize| (c * MSGS + k) * MAX_MSG;
    let echo = |c: usize, k: usize| (slots + c * MSGS + k) * MAX_MSG;
    let mut qps = Vec::with_capacity(CONNS);
    let mut conns = Vec::with_capacity(CONNS);
    let mut pending = Vec::with_capacity(CONNS);
    for c in 0..CONNS {
        let qp = a
            .create_queue_pair(&cq, &cq, c as u64, MSGS as u32, MSGS as u32, 1, 1, 0)
            .ctx("create QP")?;
        for k in 0..MSGS {
            let r = echo(c, k)..echo(c, k) + MAX_MSG;
            let sge = side.sges(std::slice::from_ref(&r));
            // SAFETY: the echo slot is read only after its Receive completed.
            unsafe { qp.receive(k as u64, &sge) }.ctx("client Receive")?;
        }
        let conn = a.create_connector().ctx("create connector")?;
        conn.bind(SocketAddr::new(ctx.addr.ip(), 0)).ctx("bind")?;
        let id = (c as u16).to_le_bytes();
        pending.push(conn.connect(&qp, ctx.addr, 0, 0, &id).ctx("Connect")?);
        qps.push(qp);
        conns.push(conn);
    }
    for (c, ov) in pending.iter().enumerate() {
        wait_ok(ov, &format!("Connect {c}"))?;
        let cc = conns[c].complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, "CompleteConnect")?;
    }
    // Every message of every connection, interleaved across connections.
    for k in 0..MSGS {
        for (c, qp) in qps.iter().enumerate() {
            let bytes = msg_bytes(c, k);
            let r: Range<usize> = slot(c, k)..slot(c, k) + bytes.len();
            // SAFETY: nothing is posted on this slot yet.
            unsafe { side.write(std::slice::from_ref(&r), &bytes) };
            let sge = side.sges(std::slice::from_ref(&r));
            // SAFETY: the slot is not written again.
            unsafe { qp.send(k as u64, &sge, OpFlags::empty()) }.ctx("Send")?;
        }
    }
    let mut next = [0usize; CONNS];
    let (mut echoes, mut sent) = (0, 0);
    let mut out = vec![NdResult::EMPTY; 64];
    while echoes < slots || sent < slots {
        let n = poll_some(&cq, &mut out, "client echoes")?;
        for r in &out[..n] {
            if r.request_type == RequestType::Send {
                ensure_eq!(r.status, Status::SUCCESS, "Send ({r:?})");
                sent += 1;
                continue;
            }
            ensure_eq!(r.status, Status::SUCCESS, "echo Receive ({r:?})");
            let (c, k) = (r.qp_context as usize, r.request_context as usize);
            ensure!(c < CONNS && k == next[c], "echo out of order: {r:?}");
            next[c] += 1;
            let want = msg_bytes(c, k);
            ensure_eq!(r.bytes_transferred as usize, want.len(), "echo length");
            let e = echo(c, k)..echo(c, k) + want.len();
            // SAFETY: that Receive completed.
            let got = unsafe { side.read(std::slice::from_ref(&e), want.len()) };
            expect_bytes(&got, &want, &format!("echo of connection {c} message {k}"))?;
            echoes += 1;
        }
    }
    Ok(())
}

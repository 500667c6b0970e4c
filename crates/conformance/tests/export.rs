//! The adapter's descriptor exported while work already waits for the application's next
//! call, in one process over real sockets, for every provider and both loopback families.
//!
//! An event loop that adopts the descriptor sleeps until it is readable and then drives the
//! adapter (`progress`). Whatever was left before the export must therefore show as
//! readiness at once: a message that arrived while nobody drove the adapter, and the answer to
//! a peer's RDMA Write that the target's polling pass held back (both providers hold it for
//! the application's next call). Otherwise the loop sleeps, and so does a peer that waits for
//! that answer.

// Requests are lists of byte ranges (one per SGE): `&[0..8]` is a one-SGE request.
#![allow(clippy::single_range_in_vec_init)]

use std::net::IpAddr;
use std::os::fd::BorrowedFd;

use netdirect::{Adapter, MrFlags, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{next_results, Check, Context, Expect, WAIT};
use netdirect_conformance::harness;
use netdirect_conformance::side::default_pair;
use netdirect_conformance::{ensure, Needs};
use rustix::event::{poll, PollFd, PollFlags};

/// Whether `fd` becomes readable within the suite's wait.
fn readable(fd: BorrowedFd<'_>) -> bool {
    let t = rustix::time::Timespec {
        tv_sec: WAIT.as_secs() as _,
        tv_nsec: 0,
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&t)), Ok(n) if n > 0)
}

/// Export `a`'s descriptor, see it readable, and drive the adapter once, as an event loop
/// does on readiness.
fn export_and_serve(a: &Adapter, what: &str) -> Check {
    ensure!(
        readable(a.fd()),
        "{what}: the exported descriptor stayed silent"
    );
    a.progress();
    Ok(())
}

/// The target of an INLINE Write placed it in a polling pass, which held the answer; the
/// export must announce it, and the initiator's Write completes.
fn held_answer(p: &Provider, ip: IpAddr) -> Check {
    let (a, server, client, _listener) = default_pair(p, ip)?;
    let target = server.register_again(MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE)?;
    // Whatever the connection's set-up left to read (a shm WAKE) is read now: a stale one
    // would make the descriptor readable whatever the export did.
    a.progress();
    let data = *b"held ack";
    // SAFETY: no request uses the first bytes of the client's buffer now.
    unsafe { client.write(&[0..8], &data) };
    client
        .rdma_write(
            1,
            &[0..8],
            server.addr(4096),
            target.get_remote_token(),
            OpFlags::INLINE,
        )
        .ctx("Write")?;
    let deadline = std::time::Instant::now() + WAIT;
    let mut r = [netdirect::NdResult::EMPTY];
    // SAFETY: the provider writes these bytes only while this thread polls.
    while unsafe { server.read(&[4096..4104], 8) } != data {
        ensure!(
            server.rcq.get_results(&mut r) == 0,
            "target completion {r:?}"
        );
        ensure!(
            std::time::Instant::now() < deadline,
            "the Write was never placed"
        );
    }
    export_and_serve(&a, "a held answer")?;
    let r = next_results(&client.scq, 1, "Write")?;
    Expect {
        status: Status::SUCCESS,
        request_type: RequestType::Write,
        request_context: 1,
        qp_context: client.qp_context,
        bytes: None,
    }
    .check(&r[0], "the Write")
}

/// A Send that arrived while nobody drove the adapter: the export must announce it.
fn waiting_message(p: &Provider, ip: IpAddr) -> Check {
    let (a, server, client, _listener) = default_pair(p, ip)?;
    a.progress();
    server.recv(7, &[0..64]).ctx("Receive")?;
    client.send(2, &[0..16], OpFlags::empty()).ctx("Send")?;
    // The Send is on its way (shm: in the ring; tcp: in the socket) once it completes.
    let r = next_results(&client.scq, 1, "Send")?;
    Expect::send(Status::SUCCESS, 2, client.qp_context).check(&r[0], "the Send")?;
    export_and_serve(&a, "a waiting message")?;
    let r = next_results(&server.rcq, 1, "Receive")?;
    Expect::recv(Status::SUCCESS, 7, server.qp_context, Some(16)).check(&r[0], "the Receive")
}

/// A message that arrives after a poll read the one before it, while the readiness that one
/// raised is still unreported: an event loop (poll the descriptor, then `progress`) must get
/// to it. On `tcp` the first message's edge-triggered event is still queued when the second
/// arrives, so the second raises none of its own: the `progress` that reports the old event
/// has to read the socket, whatever the last read left it believing.
fn after_a_poll_read(p: &Provider, ip: IpAddr) -> Check {
    let (a, server, client, _listener) = default_pair(p, ip)?;
    let _ = a.fd();
    a.progress();
    server.recv(1, &[0..64]).ctx("Receive 1")?;
    server.recv(2, &[64..128]).ctx("Receive 2")?;
    let deadline = std::time::Instant::now() + WAIT;
    let mut r = [netdirect::NdResult::EMPTY];
    // Polling drives one queue pair's I/O only; the adapter's event queue stays untouched.
    let mut poll_for =
        |cq: &netdirect::CompletionQueue, what: &str| -> Check<netdirect::NdResult> {
            loop {
                if cq.get_results(&mut r) == 1 {
                    return Ok(r[0]);
                }
                ensure!(
                    std::time::Instant::now() < deadline,
                    "{what}: never completed"
                );
            }
        };
    client.send(11, &[0..16], OpFlags::empty()).ctx("Send 1")?;
    let c = poll_for(&client.scq, "Send 1")?;
    Expect::send(Status::SUCCESS, 11, client.qp_context).check(&c, "Send 1")?;
    let c = poll_for(&server.rcq, "Receive 1")?;
    Expect::recv(Status::SUCCESS, 1, server.qp_context, Some(16)).check(&c, "Receive 1")?;
    client.send(12, &[0..16], OpFlags::empty()).ctx("Send 2")?;
    let c = poll_for(&client.scq, "Send 2")?;
    Expect::send(Status::SUCCESS, 12, client.qp_context).check(&c, "Send 2")?;
    // The event loop: the Receive's Notify ends it.
    let ov = server
        .rcq
        .notify(netdirect::NotifyType::Any)
        .ctx("Notify")?;
    while !ov.is_complete() {
        export_and_serve(&a, "the second message")?;
    }
    let c = poll_for(&server.rcq, "Receive 2")?;
    Expect::recv(Status::SUCCESS, 2, server.qp_context, Some(16)).check(&c, "Receive 2")
}

#[test]
fn a_message_behind_one_a_poll_read_reaches_an_event_loop() {
    harness::each_provider(Needs::TwoSided, "export-after-poll", |p, fam| {
        after_a_poll_read(p, fam.ip())
    });
}

#[test]
fn a_held_answer_makes_the_exported_descriptor_readable() {
    harness::each_provider(Needs::OneSided, "export-held-answer", |p, fam| {
        held_answer(p, fam.ip())
    });
}

#[test]
fn a_waiting_message_makes_the_exported_descriptor_readable() {
    harness::each_provider(Needs::TwoSided, "export-waiting-message", |p, fam| {
        waiting_message(p, fam.ip())
    });
}

//! After a connection ends, a blocking wait on the same adapter sleeps. A socket that is reset,
//! or shut down for writing, reports itself writable for ever: a queue pair that kept output
//! (or the wish to write) for it would keep it in the sleeping thread's `poll` set and make
//! every wait of the adapter spin.
//!
//! * The peer resets the connection while our output is queued (it stopped reading, then went
//!   away): every Send completes, then we wait.
//! * We Disconnect right after taking a peer's Write and its completion probe, whose answer
//!   waited to leave with our next message: the answer goes with the close, then we wait.
//!
//! "Sleeps" is checked by the waiting thread's CPU time over a one-second wait: a sleeping
//! thread uses next to none, a spinning one all of it; the bound (a quarter) is far from both.

use std::time::{Duration, Instant};

use netdirect::{Adapter, Buffer, MrFlags, NdResult, NotifyType, OpFlags, Provider};
use rustix::time::{clock_gettime, ClockId};

fn adapter() -> Adapter {
    Provider::open("tcp")
        .expect("tcp")
        .open_adapter_for("127.0.0.1:0".parse().unwrap())
        .expect("adapter")
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A connected pair on two adapters, driven by this thread.
struct Pair {
    server: Adapter,
    l: netdirect::Listener,
    client: Adapter,
    scq: netdirect::CompletionQueue,
    sqp: netdirect::QueuePair,
    ccq: netdirect::CompletionQueue,
    cqp: netdirect::QueuePair,
    cconn: netdirect::Connector,
    sconn: netdirect::Connector,
}

fn pair() -> Pair {
    let server = adapter();
    let l = server.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("address");
    let sconn = server.create_connector().expect("connector");
    let req = l.get_connection_request(&sconn).expect("request");
    let client = adapter();
    let ccq = client.create_completion_queue(8, 0, 0).expect("cq");
    let cqp = client
        .create_queue_pair(&ccq, &ccq, 1, 4, 4, 1, 1, 0)
        .expect("qp");
    let cconn = client.create_connector().expect("connector");
    let connect = cconn.connect(&cqp, addr, 0, 0, b"").expect("connect");
    let drive = |done: &dyn Fn() -> bool| {
        let end = Instant::now() + Duration::from_secs(30);
        while !done() {
            server.progress();
            client.progress();
            assert!(Instant::now() < end, "the connection never came up");
        }
    };
    drive(&|| req.try_result().is_some());
    let scq = server.create_completion_queue(64, 0, 0).expect("cq");
    let sqp = server
        .create_queue_pair(&scq, &scq, 2, 4, 16, 1, 1, 0)
        .expect("qp");
    let acc = sconn.accept(&sqp, 0, 0, b"").expect("accept");
    drive(&|| connect.try_result().is_some());
    cconn
        .complete_connect()
        .expect("complete connect")
        .wait()
        .expect("complete connect");
    drive(&|| acc.try_result().is_some());
    assert_eq!(acc.try_result(), Some(Ok(())));
    Pair {
        server,
        l,
        client,
        scq,
        sqp,
        ccq,
        cqp,
        cconn,
        sconn,
    }
}

/// CPU time this thread uses in a one-second blocking wait on `server` (a request to `l`
/// that never comes).
fn cpu_of_a_wait(server: &Adapter, l: &netdirect::Listener) -> Duration {
    let c2 = server.create_connector().expect("connector");
    let r = l.get_connection_request(&c2).expect("request");
    let before = thread_cpu();
    assert!(r.wait_timeout(Some(Duration::from_secs(1))).is_none());
    thread_cpu() - before
}

#[test]
fn a_wait_after_a_peer_reset_sleeps() {
    let p = pair();
    // 16 × 4 MiB of Sends the client never reads: far more than the sockets hold.
    const LEN: usize = 4 << 20;
    let buf = Buffer::new(LEN).expect("buffer");
    let mr = p.server.create_memory_region().expect("mr");
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
        .expect("register")
        .wait()
        .expect("register");
    let sge = buf.sge(0..LEN, mr.get_local_token());
    for i in 0..16 {
        // SAFETY: the buffer is not written while the Sends are outstanding.
        unsafe { p.sqp.send(i, &[sge], OpFlags::empty()) }.expect("send");
    }
    p.server.progress();
    // The client goes away with unread bytes in its socket: the kernel resets the connection.
    drop((p.cqp, p.ccq, p.cconn));
    drop(p.client);

    // Every Send completes (most flushed), seen through blocking waits.
    let mut out = [NdResult::EMPTY; 64];
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(30);
    while got < 16 {
        let ov = p.scq.notify(NotifyType::Any).expect("notify");
        got += p.scq.get_results(&mut out);
        if got < 16 {
            let _ = ov.wait_timeout(Some(Duration::from_secs(1)));
            got += p.scq.get_results(&mut out);
        }
        assert!(
            Instant::now() < end,
            "the Sends never completed ({got} of 16)"
        );
    }

    // Now a blocking wait on something else of the same adapter.
    let used = cpu_of_a_wait(&p.server, &p.l);
    assert!(
        used < Duration::from_millis(250),
        "the waiting thread spun: {used:?} of CPU in a one-second wait"
    );
}

/// Disconnect right after taking a peer's Write and its completion probe: the probe's answer
/// waited to leave with our next message, and goes with the close instead; the Write
/// completes, and the adapter's next wait sleeps.
#[test]
fn a_wait_after_a_disconnect_with_a_deferred_answer_sleeps() {
    let p = pair();
    let tbuf = Buffer::new(4096).expect("buffer");
    let tmr = p.server.create_memory_region().expect("mr");
    tmr.register_buffer(
        &tbuf,
        MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE,
    )
    .expect("register")
    .wait()
    .expect("register");
    let sbuf = Buffer::new(4096).expect("buffer");
    // SAFETY: no request uses the buffer yet.
    unsafe { sbuf.as_mut_slice()[..8].copy_from_slice(b"ABCDEFGH") };
    let smr = p.client.create_memory_region().expect("mr");
    smr.register_buffer(&sbuf, MrFlags::ALLOW_LOCAL_WRITE)
        .expect("register")
        .wait()
        .expect("register");
    // SAFETY: both buffers outlive the request.
    unsafe {
        p.cqp.write(
            7,
            &[sbuf.sge(0..8, smr.get_local_token())],
            tbuf.as_ptr() as u64,
            tmr.get_remote_token(),
            OpFlags::empty(),
        )
    }
    .expect("write");
    // The server takes the Write (and the probe sent with it) in one pass, and stops there:
    // the probe's answer waits for the server's next message.
    let end = Instant::now() + Duration::from_secs(30);
    // SAFETY (each look): the Write has placed its bytes or has not begun; nothing else
    // writes there.
    while unsafe { &tbuf.as_slice()[..8] } != b"ABCDEFGH" {
        p.client.progress();
        p.server.progress();
        assert!(Instant::now() < end, "the Write never landed");
    }
    p.sconn
        .disconnect()
        .expect("disconnect")
        .wait()
        .expect("disconnect");
    let mut out = [NdResult::EMPTY; 4];
    while p.ccq.get_results(&mut out) == 0 {
        assert!(Instant::now() < end, "the client's Write never completed");
    }
    let used = cpu_of_a_wait(&p.server, &p.l);
    assert!(
        used < Duration::from_millis(250),
        "the waiting thread spun: {used:?} of CPU in a one-second wait"
    );
}

//! The named-field forms (`QueuePairConfig`, `ConnectConfig`), waiting for one request's
//! completion (`CompletionQueue::wait_for_context`), and the tokio driver, on real connections
//! over 127.0.0.1 with each provider.

use std::thread;
use std::time::Duration;

use netdirect::{
    Adapter, Buffer, CompletionQueue, ConnectConfig, Connector, MemoryRegion, MrFlags, NdResult,
    OpFlags, Provider, QueuePair, QueuePairConfig, RequestType, Status,
};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

fn adapter(provider: &str) -> Adapter {
    Provider::open(provider)
        .expect("provider")
        .open_adapter_for("127.0.0.1:0".parse().expect("addr"))
        .expect("adapter")
}

/// A connected pair of queue pairs on one adapter, with their CQs and connectors.
struct Pair {
    scq: CompletionQueue,
    sqp: QueuePair,
    sconn: Connector,
    ccq: CompletionQueue,
    cqp: QueuePair,
    cconn: Connector,
}

/// Connect a client to a server on `a` with these configurations; `before_accept` runs on
/// the server's queue pair first (to post Receives).
fn connect(
    a: &Adapter,
    config: QueuePairConfig,
    client: &ConnectConfig<'_>,
    server: &ConnectConfig<'_>,
    before_accept: impl FnOnce(&QueuePair),
) -> Pair {
    connect_with_cq_depth(a, 64, config, client, server, before_accept)
}

/// [`connect`] with a client CQ of `client_cq_depth` entries.
fn connect_with_cq_depth(
    a: &Adapter,
    client_cq_depth: u32,
    config: QueuePairConfig,
    client: &ConnectConfig<'_>,
    server: &ConnectConfig<'_>,
    before_accept: impl FnOnce(&QueuePair),
) -> Pair {
    let l = a.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("address");
    let scq = a.create_completion_queue(64, 0, 0).expect("cq");
    let sqp = a
        .create_queue_pair_with(&scq, &scq, config.context(1))
        .expect("server qp");
    before_accept(&sqp);
    let sconn = a.create_connector().expect("connector");
    let request = l.get_connection_request(&sconn).expect("request");

    let ccq = a
        .create_completion_queue(client_cq_depth, 0, 0)
        .expect("cq");
    let cqp = a
        .create_queue_pair_with(&ccq, &ccq, config.context(2))
        .expect("client qp");
    let cconn = a.create_connector().expect("connector");
    cconn
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let connecting = cconn.connect_with(&cqp, addr, client).expect("connect");
    request.wait().expect("connection request");
    let accepting = sconn.accept_with(&sqp, server).expect("accept");
    connecting.wait().expect("connect completes");
    cconn
        .complete_connect()
        .expect("complete connect")
        .wait()
        .expect("complete connect completes");
    accepting.wait().expect("accept completes");
    Pair {
        scq,
        sqp,
        sconn,
        ccq,
        cqp,
        cconn,
    }
}

fn registered(a: &Adapter, len: usize) -> (Buffer, MemoryRegion, u32) {
    let buf = Buffer::new(len).expect("buffer");
    let mr = a.create_memory_region().expect("mr");
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
        .expect("register")
        .wait()
        .expect("registered");
    let token = mr.get_local_token();
    (buf, mr, token)
}

/// Zero-byte Sends need no memory.
fn send_empty(qp: &QueuePair, context: u64) {
    // SAFETY: no SGEs, no memory.
    unsafe { qp.send(context, &[], OpFlags::empty()) }.expect("Send");
}

/// The named form makes the same queue pair as the positional one, and its errors keep the
/// ND parameter numbers.
#[test]
fn queue_pair_config_checks_each_field_under_its_nd_parameter_number() {
    for provider in PROVIDERS {
        let a = adapter(provider);
        let info = a.query();
        let cq = a.create_completion_queue(8, 0, 0).expect("cq");
        let ok = QueuePairConfig::new();
        a.create_queue_pair_with(&cq, &cq, ok)
            .expect("defaults fit");
        let cases = [
            (
                ok.receive_depth(info.max_receive_queue_depth + 1),
                Status::INVALID_PARAMETER_5,
            ),
            (
                ok.initiator_depth(info.max_initiator_queue_depth + 1),
                Status::INVALID_PARAMETER_6,
            ),
            (
                ok.max_receive_sge(info.max_receive_sge + 1),
                Status::INVALID_PARAMETER_7,
            ),
            (
                ok.max_initiator_sge(info.max_initiator_sge + 1),
                Status::INVALID_PARAMETER_8,
            ),
            (
                ok.inline_data(info.max_inline_data_size + 1),
                Status::INVALID_PARAMETER_9,
            ),
        ];
        for (config, status) in cases {
            let e = a.create_queue_pair_with(&cq, &cq, config).unwrap_err();
            assert_eq!(e.status(), status, "{provider}: {config:?}");
        }
        // A CQ of another adapter is parameter 2 or 3, as in the positional form.
        let other = adapter(provider);
        let foreign = other.create_completion_queue(8, 0, 0).expect("cq");
        let e = a.create_queue_pair_with(&foreign, &cq, ok).unwrap_err();
        assert_eq!(e.status(), Status::INVALID_PARAMETER_2, "{provider}");
        let e = a.create_queue_pair_with(&cq, &foreign, ok).unwrap_err();
        assert_eq!(e.status(), Status::INVALID_PARAMETER_3, "{provider}");
        // The struct-literal form and the setters agree.
        let literal = QueuePairConfig {
            receive_depth: 4,
            inline_data: 64,
            ..QueuePairConfig::default()
        };
        assert_eq!(
            literal,
            QueuePairConfig::new().receive_depth(4).inline_data(64)
        );
    }
}

/// `connect_with`/`accept_with` carry the read limits and private data; each completion
/// carries the queue pair's context from `QueuePairConfig::context`.
#[test]
fn connect_config_carries_read_limits_and_private_data() {
    for provider in PROVIDERS {
        let a = adapter(provider);
        let client = ConnectConfig::new().read_limits(1, 2).private_data(b"hi");
        let server = ConnectConfig {
            inbound_read_limit: 2,
            outbound_read_limit: 1,
            private_data: b"welcome",
        };
        let p = connect(&a, QueuePairConfig::new(), &client, &server, |qp| {
            // SAFETY: no SGEs, no memory.
            unsafe { qp.receive(5, &[]) }.expect("Receive");
        });
        assert_eq!(p.sconn.private_data().expect("pd"), b"hi", "{provider}");
        assert_eq!(
            p.cconn.private_data().expect("pd"),
            b"welcome",
            "{provider}"
        );
        let limits = p.cconn.get_read_limits().expect("limits");
        assert_eq!((limits.inbound, limits.outbound), (1, 2), "{provider}");
        let limits = p.sconn.get_read_limits().expect("limits");
        assert_eq!((limits.inbound, limits.outbound), (2, 1), "{provider}");

        send_empty(&p.cqp, 6);
        let sent = p.ccq.wait_for_context(6, None).expect("Send");
        assert_eq!(
            (sent.qp_context, sent.request_type),
            (2, RequestType::Send),
            "{provider}"
        );
        let got = p.scq.wait_for_context(5, None).expect("Receive");
        assert_eq!(
            (got.qp_context, got.request_type),
            (1, RequestType::Receive),
            "{provider}"
        );
    }
}

/// Waiting for the last of several completions keeps the earlier ones, in order, for the next
/// `get_results`; a timeout consumes nothing; a failed completion is its status.
#[test]
fn wait_for_context_keeps_the_other_completions_in_order() {
    for provider in PROVIDERS {
        let a = adapter(provider);
        let (buf, _mr, token) = registered(&a, 4096);
        let p = connect(
            &a,
            QueuePairConfig::new(),
            &ConnectConfig::new(),
            &ConnectConfig::new(),
            |qp| {
                for i in 0..4u64 {
                    let at = i as usize * 1024;
                    // SAFETY: each Receive owns its quarter of the buffer until it completes.
                    unsafe { qp.receive(10 + i, &[buf.sge(at..at + 1024, token)]) }
                        .expect("Receive");
                }
            },
        );
        for i in 0..3 {
            send_empty(&p.cqp, 20 + i);
        }
        // The client's third Send, then its first two in issue order.
        let third = p.ccq.wait_for_context(22, None).expect("third Send");
        assert_eq!(third.request_context, 22, "{provider}");
        let mut r = [NdResult::EMPTY; 8];
        let n = p.ccq.get_results(&mut r);
        let contexts: Vec<u64> = r[..n].iter().map(|r| r.request_context).collect();
        assert_eq!(
            contexts,
            [20, 21],
            "{provider}: the set-aside Sends, in order"
        );

        // The server's third Receive; the first two wait in the stash.
        let got = p.scq.wait_for_context(12, None).expect("third Receive");
        assert_eq!(got.request_type, RequestType::Receive, "{provider}");
        // Nothing arrives for the fourth Receive: a timeout, and nothing consumed.
        let e = p
            .scq
            .wait_for_context(13, Some(Duration::from_millis(50)))
            .unwrap_err();
        assert_eq!(e.status(), Status::TIMEOUT, "{provider}");
        // A set-aside completion is found by a later wait too.
        assert_eq!(
            p.scq
                .wait_for_context(11, None)
                .expect("second")
                .request_context,
            11
        );
        // A Send arriving now follows the stash in `get_results`.
        send_empty(&p.cqp, 23);
        p.ccq.wait_for_context(23, None).expect("fourth Send");
        let mut contexts = Vec::new();
        while contexts.len() < 2 {
            let n = p.scq.get_results(&mut r[..1]);
            contexts.extend(r[..n].iter().map(|r| r.request_context));
            thread::yield_now();
        }
        assert_eq!(
            contexts,
            [10, 13],
            "{provider}: stash first, then the queue"
        );

        // A failed completion: the flush cancels a posted Receive.
        // SAFETY: no SGEs, no memory.
        unsafe { p.sqp.receive(30, &[]) }.expect("Receive");
        p.sqp.flush().expect("flush");
        let e = p.scq.wait_for_context(30, None).unwrap_err();
        assert_eq!(e.status(), Status::CANCELED, "{provider}");
    }
}

/// Two threads waiting on one CQ for different requests each get their own, whichever of
/// them took it from the queue.
#[test]
fn concurrent_waiters_each_find_their_completion() {
    for provider in PROVIDERS {
        let a = adapter(provider);
        let p = connect(
            &a,
            QueuePairConfig::new().receive_depth(64),
            &ConnectConfig::new(),
            &ConnectConfig::new(),
            |qp| {
                for i in 0..40u64 {
                    // SAFETY: no SGEs, no memory.
                    unsafe { qp.receive(i, &[]) }.expect("Receive");
                }
            },
        );
        let waiters: Vec<_> = (0..2u64)
            .map(|parity| {
                let cq = p.scq.clone();
                thread::spawn(move || {
                    for i in (parity..40).step_by(2) {
                        let r = cq
                            .wait_for_context(i, Some(Duration::from_secs(20)))
                            .unwrap_or_else(|e| panic!("Receive {i}: {e:?}"));
                        assert_eq!(r.request_context, i);
                    }
                })
            })
            .collect();
        for i in 0..40 {
            send_empty(&p.cqp, 100 + i);
            if i % 8 == 7 {
                // Let the client's completions drain now and then.
                p.ccq.wait_for_context(100 + i, None).expect("Send");
            }
        }
        for w in waiters {
            w.join().expect("waiter");
        }
        let mut r = [NdResult::EMPTY; 64];
        assert_eq!(
            p.scq.get_results(&mut r),
            0,
            "{provider}: nothing left over"
        );
        drop(p.sconn);
    }
}

/// `AdapterDriver` alone drives the adapter: every step is awaited on a current-thread
/// runtime, without a thread that polls.
#[cfg(feature = "tokio")]
#[test]
fn adapter_driver_drives_awaited_requests() {
    use netdirect::tokio::AdapterDriver;
    for provider in PROVIDERS {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let a = adapter(provider);
            let driver = AdapterDriver::spawn(&a).expect("driver");
            let l = a.create_listener().expect("listener");
            l.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
            l.listen(0).expect("listen");
            let addr = l.get_local_address().expect("address");
            let scq = a.create_completion_queue(8, 0, 0).expect("cq");
            let sqp = a
                .create_queue_pair_with(&scq, &scq, QueuePairConfig::new())
                .expect("qp");
            // SAFETY: no SGEs, no memory.
            unsafe { sqp.receive(1, &[]) }.expect("Receive");
            let sconn = a.create_connector().expect("connector");
            let request = l.get_connection_request(&sconn).expect("request");

            let client = {
                let a = a.clone();
                tokio::spawn(async move {
                    let cq = a.create_completion_queue(8, 0, 0).expect("cq");
                    let qp = a
                        .create_queue_pair_with(&cq, &cq, QueuePairConfig::new())
                        .expect("qp");
                    let conn = a.create_connector().expect("connector");
                    conn.bind("127.0.0.1:0".parse().expect("addr"))
                        .expect("bind");
                    let config = ConnectConfig::new().private_data(b"tokio");
                    conn.connect_with(&qp, addr, &config)
                        .expect("connect")
                        .await
                        .expect("connected");
                    conn.complete_connect()
                        .expect("complete")
                        .await
                        .expect("completed");
                    send_empty(&qp, 2);
                    let mut r = [NdResult::EMPTY; 1];
                    assert_eq!(cq.next_results(&mut r).await.expect("results"), 1);
                    assert_eq!(r[0].request_context, 2);
                    (conn, qp, cq)
                })
            };
            request.await.expect("request");
            assert_eq!(sconn.private_data().expect("pd"), b"tokio");
            sconn
                .accept_with(&sqp, &ConnectConfig::new())
                .expect("accept")
                .await
                .expect("accepted");
            let mut r = [NdResult::EMPTY; 1];
            assert_eq!(scq.next_results(&mut r).await.expect("results"), 1);
            assert_eq!(r[0].request_context, 1, "{provider}");
            let (conn, _qp, _cq) = client.await.expect("client task");
            conn.disconnect()
                .expect("disconnect")
                .await
                .expect("disconnected");
            assert!(!driver.is_finished(), "the driver runs until aborted");
            driver.abort();
            assert!(driver.await.unwrap_err().is_cancelled());
        });
    }
}

/// After an overrun every Notify fails with `ND_BUFFER_OVERFLOW`, yet nothing is lost:
/// `wait_for_context` polls instead of sleeping, and finds its completion behind the others.
#[test]
fn wait_for_context_polls_after_an_overrun() {
    for provider in PROVIDERS {
        let a = adapter(provider);
        let p = connect_with_cq_depth(
            &a,
            2,
            QueuePairConfig::new(),
            &ConnectConfig::new(),
            &ConnectConfig::new(),
            |qp| {
                for i in 0..3u64 {
                    // SAFETY: no SGEs, no memory.
                    unsafe { qp.receive(10 + i, &[]) }.expect("Receive");
                }
            },
        );
        // An armed Notify keeps completions in the queue (none goes straight to a poller).
        let armed = p.ccq.notify(netdirect::NotifyType::Any).expect("notify");
        for i in 0..3 {
            send_empty(&p.cqp, 20 + i);
        }
        // Drive without taking completions until the third Send overruns the depth of 2.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            a.progress();
            let ov = p.ccq.notify(netdirect::NotifyType::Any).expect("notify");
            if ov.try_result() == Some(Err(Status::BUFFER_OVERFLOW.into())) {
                break;
            }
            ov.cancel();
            assert!(
                std::time::Instant::now() < deadline,
                "{provider}: no overrun"
            );
            thread::yield_now();
        }
        assert!(
            armed.is_complete(),
            "{provider}: the first Send fired the Notify"
        );

        // A Receive that completes after the overrun.
        // SAFETY: no SGEs, no memory.
        unsafe { p.cqp.receive(50, &[]) }.expect("Receive");
        send_empty(&p.sqp, 30);
        p.scq.wait_for_context(30, None).expect("server Send");
        let got = p
            .ccq
            .wait_for_context(50, Some(Duration::from_secs(10)))
            .expect("the Receive, by polling");
        assert_eq!(got.request_type, RequestType::Receive, "{provider}");
        let mut r = [NdResult::EMPTY; 8];
        let n = p.ccq.get_results(&mut r);
        let contexts: Vec<u64> = r[..n].iter().map(|r| r.request_context).collect();
        assert_eq!(
            contexts,
            [20, 21, 22],
            "{provider}: every Send kept, in order"
        );
        // Still overrun: Notify keeps saying so.
        let ov = p.ccq.notify(netdirect::NotifyType::Any).expect("notify");
        assert_eq!(ov.try_result(), Some(Err(Status::BUFFER_OVERFLOW.into())));
    }
}

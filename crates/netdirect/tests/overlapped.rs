//! The overlapped model in one process: the adapter descriptor under epoll, polling,
//! blocking waits and cancellation, with a real listener and connector on 127.0.0.1.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use netdirect::{Adapter, Error, Overlapped, Provider, Status};
use rustix::event::epoll;

fn adapter() -> Adapter {
    let p = Provider::open("tcp").expect("tcp provider");
    p.open_adapter_for("127.0.0.1:0".parse().expect("addr"))
        .expect("adapter")
}

fn listen(a: &Adapter) -> (netdirect::Listener, SocketAddr) {
    let l = a.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("local address");
    (l, addr)
}

/// Wait on the adapter descriptor with epoll until `done` holds, calling `progress` on every
/// readiness, as an event loop would. Fails if the descriptor stays silent for 10 s.
fn run_event_loop(adapters: &[&Adapter], done: impl Fn() -> bool) {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).expect("epoll");
    for (i, a) in adapters.iter().enumerate() {
        epoll::add(
            &ep,
            a.fd(),
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .expect("add");
    }
    let mut events = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 4];
    while !done() {
        let t = rustix::time::Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        };
        let (ready, _) = epoll::wait(&ep, &mut events[..], Some(&t)).expect("epoll_wait");
        assert!(
            !ready.is_empty(),
            "the adapter descriptor never became readable"
        );
        for ev in ready.iter() {
            adapters[ev.data.u64() as usize].progress();
        }
    }
}

#[test]
fn descriptor_becomes_readable_and_progress_completes_requests() {
    let server = adapter();
    let client = adapter();
    let (listener, addr) = listen(&server);
    let sconn = server.create_connector().expect("connector");
    let req = listener
        .get_connection_request(&sconn)
        .expect("get connection request");
    assert_eq!(req.get_overlapped_result(false), Err(Error::PENDING));

    let cq = client.create_completion_queue(8, 0, 0).expect("cq");
    let qp = client
        .create_queue_pair(&cq, &cq, 7, 4, 4, 1, 1, 0)
        .expect("qp");
    let conn = client.create_connector().expect("connector");
    conn.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let connect = conn.connect(&qp, addr, 0, 0, b"epoll").expect("connect");

    // The request arrives: the server's descriptor must report it.
    run_event_loop(&[&server, &client], || req.try_result().is_some());
    assert_eq!(req.try_result(), Some(Ok(())));
    assert_eq!(sconn.private_data().expect("private data"), b"epoll");

    let scq = server.create_completion_queue(8, 0, 0).expect("cq");
    let sqp = server
        .create_queue_pair(&scq, &scq, 9, 4, 4, 1, 1, 0)
        .expect("qp");
    let accept = sconn.accept(&sqp, 0, 0, b"ok").expect("accept");
    run_event_loop(&[&server, &client], || connect.try_result().is_some());
    assert_eq!(connect.try_result(), Some(Ok(())));
    conn.complete_connect()
        .expect("complete connect")
        .wait()
        .expect("complete connect");
    run_event_loop(&[&server, &client], || accept.try_result().is_some());
    assert_eq!(accept.try_result(), Some(Ok(())));
}

#[test]
fn cancel_completes_pending_requests_in_order() {
    let a = adapter();
    let (listener, _) = listen(&a);
    let reqs: Vec<Overlapped> = (0..3)
        .map(|_| {
            listener
                .get_connection_request(&a.create_connector().expect("connector"))
                .expect("request")
        })
        .collect();
    for r in &reqs {
        assert!(r
            .get_overlapped_result(false)
            .expect_err("pending")
            .is_pending());
    }
    listener.cancel_overlapped_requests().expect("cancel");
    // Before cancel_overlapped_requests returns, every request has its final status.
    for r in &reqs {
        assert_eq!(r.try_result(), Some(Err(Error::new(Status::CANCELED))));
    }
}

#[test]
fn wait_timeout_returns_while_pending() {
    let a = adapter();
    let (listener, _) = listen(&a);
    let req = listener
        .get_connection_request(&a.create_connector().expect("connector"))
        .expect("request");
    assert_eq!(req.wait_timeout(Some(Duration::from_millis(20))), None);
    listener.cancel_overlapped_requests().expect("cancel");
    assert_eq!(req.wait(), Err(Error::new(Status::CANCELED)));
}

#[test]
fn an_overlapped_is_a_future() {
    let server = adapter();
    let client = adapter();
    let (listener, addr) = listen(&server);
    let sconn = server.create_connector().expect("connector");
    let req = listener.get_connection_request(&sconn).expect("request");
    let cq = client.create_completion_queue(8, 0, 0).expect("cq");
    let qp = client
        .create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)
        .expect("qp");
    let conn = client.create_connector().expect("connector");
    let connect = conn.connect(&qp, addr, 0, 0, &[]).expect("connect");
    // A minimal executor: poll the future, and between polls drive both adapters, as a
    // reactor watching their descriptors would.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = std::pin::pin!(req);
    let result = loop {
        if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            break r;
        }
        server.progress();
        client.progress();
    };
    assert_eq!(result, Ok(()));
    drop(connect);
}

#[test]
fn dropping_a_cancel_on_drop_future_withdraws_only_that_request() {
    let a = adapter();
    let (listener, addr) = listen(&a);
    let first = listener
        .get_connection_request(&a.create_connector().expect("connector"))
        .expect("request");
    let second_conn = a.create_connector().expect("connector");
    let second = listener
        .get_connection_request(&second_conn)
        .expect("request");
    // Poll the first once as a future, then drop it: it is withdrawn...
    {
        let mut fut = std::pin::pin!(first.clone().cancel_on_drop());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(first.try_result(), Some(Err(Error::new(Status::CANCELED))));
    // ...and the next connection goes to the second request, not to the withdrawn one.
    assert!(second.try_result().is_none());
    let client = adapter();
    let cq = client.create_completion_queue(4, 0, 0).expect("cq");
    let qp = client
        .create_queue_pair(&cq, &cq, 0, 2, 2, 1, 1, 0)
        .expect("qp");
    let conn = client.create_connector().expect("connector");
    let _connect = conn.connect(&qp, addr, 0, 0, b"second").expect("connect");
    while second.try_result().is_none() {
        a.progress();
        client.progress();
    }
    assert_eq!(
        second.try_result(),
        Some(Ok(())),
        "the second request gets the connection"
    );
    assert_eq!(second_conn.private_data().expect("private data"), b"second");
}

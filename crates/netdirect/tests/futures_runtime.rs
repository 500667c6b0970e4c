//! Futures under a real runtime (tokio, current-thread, driven only by the adapter's
//! descriptor), and dropped futures: dropping a future never releases memory the provider
//! can still touch.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use netdirect::{
    Adapter, Buffer, CompletionQueue, Error, MemoryRegion, MrFlags, NdResult, NotifyType, OpFlags,
    Provider, QueuePair, Status,
};
use tokio::io::unix::AsyncFd;

fn adapter() -> Adapter {
    Provider::open("tcp")
        .expect("tcp provider")
        .open_adapter_for("127.0.0.1:0".parse().expect("addr"))
        .expect("adapter")
}

/// The reactor side: progress the adapter whenever its descriptor is readable. A polled
/// `Overlapped` also drives the adapter once per poll; what arrives while every future is
/// pending reaches them through the descriptor.
async fn drive(adapter: Adapter) {
    // SAFETY: the `AsyncFd` owns the adapter, whose descriptor stays open and unchanged
    // for as long as tokio has it registered.
    let fd = unsafe { AsyncFd::register_with_interest(adapter, tokio::io::Interest::READABLE) }
        .expect("register the adapter descriptor");
    loop {
        let mut guard = fd.readable().await.expect("readable");
        fd.get_ref().progress();
        guard.clear_ready();
    }
}

fn registered(a: &Adapter, len: usize) -> (Buffer, MemoryRegion, u32) {
    let buf = Buffer::new(len).expect("buffer");
    let mr = a.create_memory_region().expect("mr");
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
        .expect("register")
        .wait()
        .expect("register completes");
    let token = mr.get_local_token();
    (buf, mr, token)
}

/// Connect `client` (plain QP) to `server` on one adapter, every step awaited.
async fn connect(a: &Adapter, server: &QueuePair, client: &QueuePair) -> netdirect::Listener {
    let l = a.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("address");
    let sconn = a.create_connector().expect("connector");
    let gcr = l
        .get_connection_request(&sconn)
        .expect("GetConnectionRequest");
    let cconn = a.create_connector().expect("connector");
    cconn
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let connect = cconn.connect(client, addr, 0, 0, &[]).expect("Connect");
    gcr.await.expect("GetConnectionRequest completes");
    let accept = sconn.accept(server, 0, 0, &[]).expect("Accept");
    connect.await.expect("Connect completes");
    cconn
        .complete_connect()
        .expect("CompleteConnect")
        .await
        .expect("CompleteConnect completes");
    accept.await.expect("Accept completes");
    // The connectors may go: the connection lives in the queue pairs.
    l
}

async fn next_one(cq: &CompletionQueue) -> NdResult {
    let mut r = [NdResult::EMPTY; 1];
    let n = cq.next_results(&mut r).await.expect("next_results");
    assert_eq!(n, 1);
    r[0]
}

/// Run `f` on its own thread and fail if it has not returned within a minute: a future that
/// never completes fails the test instead of hanging it.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("finished within a minute (a future never completed)")
}

#[test]
fn futures_complete_under_tokio_driven_by_the_descriptor() {
    within(futures_under_tokio);
}

fn futures_under_tokio() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let a = adapter();
        tokio::spawn(drive(a.clone()));
        let (buf, _mr, token) = registered(&a, 8192);
        let scq = a.create_completion_queue(16, 0, 0).expect("cq");
        let ccq = a.create_completion_queue(16, 0, 0).expect("cq");
        // The server's Receives come from an SRQ with threshold 2: its Notify is awaited too.
        let srq = a.create_shared_receive_queue(8, 1, 2, 0, 0).expect("srq");
        let server = a
            .create_queue_pair_with_srq(&scq, &scq, &srq, 7, 4, 1, 0)
            .expect("qp");
        let client = a
            .create_queue_pair(&ccq, &ccq, 8, 4, 4, 1, 1, 0)
            .expect("qp");
        for i in 0..3u64 {
            let at = 4096 + 1024 * i as usize;
            // SAFETY: read only after the Receive completed.
            unsafe { srq.receive(i, &[buf.sge(at..at + 1024, token)]) }.expect("SRQ Receive");
        }
        let low = srq.notify().expect("SRQ Notify");
        let _l = connect(&a, &server, &client).await;
        for i in 0..2u64 {
            let msg = [i as u8 + 1; 100];
            // SAFETY: no request covers the send area now.
            unsafe { buf.as_mut_slice()[..100].copy_from_slice(&msg) };
            // SAFETY: the send area is not written until the Send completes (awaited below).
            unsafe { client.send(i, &[buf.sge(0..100, token)], OpFlags::empty()) }.expect("Send");
            let s = next_one(&ccq).await;
            assert_eq!((s.status, s.request_context), (Status::SUCCESS, i));
            let r = next_one(&scq).await;
            assert_eq!(
                (
                    r.status,
                    r.request_context,
                    r.qp_context,
                    r.bytes_transferred
                ),
                (Status::SUCCESS, i, 7, 100)
            );
            let at = 4096 + 1024 * i as usize;
            // SAFETY: that Receive completed.
            assert_eq!(unsafe { &buf.as_slice()[at..at + 100] }, &msg[..]);
        }
        // Two of three taken: one left, below the threshold of 2.
        low.await.expect("SRQ Notify below the threshold");
        // A CQ Notify future, awaited across a Send that completes later.
        let n = scq.notify(NotifyType::Any).expect("Notify");
        // SAFETY: as above.
        unsafe { client.send(9, &[buf.sge(0..8, token)], OpFlags::empty()) }.expect("Send");
        n.await.expect("Notify completes");
    });
}

#[test]
fn a_dropped_future_leaves_posted_memory_to_the_provider() {
    within(dropped_future);
}

fn dropped_future() {
    let a = adapter();
    let (buf, mr, token) = registered(&a, 4096);
    let cq = a.create_completion_queue(8, 0, 0).expect("cq");
    let server = a.create_queue_pair(&cq, &cq, 1, 4, 4, 1, 1, 0).expect("qp");
    let ccq = a.create_completion_queue(8, 0, 0).expect("cq");
    let client = a
        .create_queue_pair(&ccq, &ccq, 2, 4, 4, 1, 1, 0)
        .expect("qp");
    let (cbuf, _cmr, ctoken) = registered(&a, 4096);
    // SAFETY: read only after the Receive completed (it is never read: the handle goes).
    unsafe { server.receive(5, &[buf.sge(0..4096, token)]) }.expect("Receive");
    let _l = futures_block_on(connect(&a, &server, &client));
    // A future waiting for the Receive is polled once and dropped, as a select! or a timeout
    // would; so is a cancel-on-drop Notify.
    {
        let mut r = [NdResult::EMPTY; 1];
        let mut fut = pin!(cq.next_results(&mut r));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let notify = cq.notify(NotifyType::Any).expect("Notify");
        let mut fut2 = Box::pin(notify.clone().cancel_on_drop());
        assert!(fut2.as_mut().poll(&mut cx).is_pending());
        drop(fut2);
        assert_eq!(notify.try_result(), Some(Err(Error::CANCELED)));
    }
    // The application lets go of the memory and asks for the registration to end: the
    // Receive still holds it, so Deregister waits for it.
    drop(buf);
    let dereg = mr.deregister().expect("Deregister");
    assert!(dereg
        .get_overlapped_result(false)
        .is_err_and(|e| e.is_pending()));
    // SAFETY: no request covers the client's buffer yet.
    unsafe { cbuf.as_mut_slice()[..64].fill(0xAB) };
    // SAFETY: not written until the Send completes.
    unsafe { client.send(1, &[cbuf.sge(0..64, ctoken)], OpFlags::empty()) }.expect("Send");
    let mut r = [NdResult::EMPTY; 1];
    while cq.get_results(&mut r) == 0 {
        cq.notify(NotifyType::Any)
            .expect("Notify")
            .wait_timeout(Some(std::time::Duration::from_secs(20)))
            .expect("a completion within 20 s")
            .expect("Notify");
    }
    assert_eq!(
        (r[0].status, r[0].request_context, r[0].bytes_transferred),
        (Status::SUCCESS, 5, 64),
        "the Receive landed in memory the registration kept alive"
    );
    dereg
        .wait_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("Deregister completes once the Receive is done")
        .expect("Deregister");
}

/// A minimal executor for one future: poll, and between polls drive nothing but the
/// futures themselves (each poll of an `Overlapped` drives the adapter once).
fn futures_block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

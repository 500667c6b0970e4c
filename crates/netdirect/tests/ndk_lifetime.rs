//! NDK's callback and lifetime rules between separate processes, on both providers, over
//! 127.0.0.1 and ::1: a pending request's callback comes once, on the callback thread; a
//! consumer closes objects from inside a completion callback, and the close completion is
//! the object's last callback; closing a pending Connect cancels it before the close
//! completes; antecedents (PD, CQ, QP, listener) closed before their successors complete
//! only after them, and a closed listener refuses at once.

mod ndk_common;

use std::net::SocketAddr;
use std::sync::mpsc;

use ndk_common::*;
use netdirect::ndk::{CompletionMode, NtStatus};

fn close_wait(f: impl FnOnce(Box<dyn FnOnce() + Send>) -> NtStatus) {
    let (tx, rx) = mpsc::channel();
    let s = f(Box::new(move || tx.send(()).unwrap()));
    if s == NtStatus::PENDING {
        rx.recv_timeout(BOUND).expect("the close never completed");
    } else {
        assert_eq!(s, NtStatus::SUCCESS);
    }
}

/// A close callback that logs `what`.
fn logged(log: &Log, what: &str) -> impl FnOnce() + Send + 'static {
    let (log, what) = (log.clone(), what.to_string());
    move || log.push(what)
}

/// The server: accepts the first request (whose peer then declines), holds the second
/// without an answer, accepts the third and then closes its listener while that connection
/// lives.
fn server(cfg: &Cfg) {
    let side = Side::new(cfg, |_| {});
    let (l, rx) = side.listen_announced();

    // 1: the peer closes its connector inside its Connect callback: this Accept fails.
    let c1 = rx.recv_timeout(BOUND).expect("request 1");
    let qp1 = side
        .pd
        .create_qp(&side.cq, &side.cq, 1, 4, 4, 1, 1, 0)
        .expect("qp");
    let s = call(&side.calls, |cb| c1.accept(&qp1, 0, 0, b"", None, cb));
    assert_ne!(s, NtStatus::SUCCESS, "the peer declined");
    close_wait(|cb| c1.close(cb));
    close_wait(|cb| qp1.close(cb));

    // 2: held unanswered until the peer has cancelled its Connect by closing.
    let c2 = rx.recv_timeout(BOUND).expect("request 2");
    say("held");
    hear("cancelled");
    close_wait(|cb| c2.close(cb));

    // 3: accepted; then the listener closes while the connection lives.
    let c3 = rx.recv_timeout(BOUND).expect("request 3");
    let s = call(&side.calls, |cb| c3.accept(&side.qp, 0, 0, b"", None, cb));
    assert_eq!(s, NtStatus::SUCCESS);
    hear("connected");
    let log = Log::default();
    let endpoint = l.get_local_address().expect("address");
    let s = l.close(logged(&log, "listener closed"));
    assert_eq!(
        s,
        NtStatus::PENDING,
        "an accepted connector still holds the listener"
    );
    // The endpoint stays taken while the accepted connector lives.
    let again = side.a.create_listener(|_| {}).expect("listener");
    let s = call(&side.calls, |cb| again.listen(endpoint, cb));
    assert_eq!(
        s,
        NtStatus::SHARING_VIOLATION,
        "the closing listener's endpoint"
    );
    say("listener closing");
    hear("done");
    log.push("closing c3");
    close_wait(|cb| c3.close(cb));
    log.wait_for("listener closed");
    assert_eq!(log.get(), ["closing c3", "listener closed"]);
    // Released with the listener's close: the address can be listened on again.
    let s = call(&side.calls, |cb| again.listen(endpoint, cb));
    assert_eq!(
        s,
        NtStatus::SUCCESS,
        "the endpoint after the listener's close"
    );
    close_wait(|cb| again.close(cb));
    assert!(
        rx.try_recv().is_err(),
        "a request after the listener's close was delivered"
    );
    side.close();
    say("ok");
}

fn client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let mut closed_inline = Vec::new();

    // 1: close the connector and its QP from inside the Connect completion callback.
    let log = Log::default();
    let qp1 = side
        .pd
        .create_qp(&side.cq, &side.cq, 1, 4, 4, 1, 1, 0)
        .expect("qp");
    let c1 = side.a.create_connector().expect("connector");
    let (l, c, q) = (log.clone(), c1.clone(), qp1.clone());
    let s = c1.connect(&qp1, cfg.addr(0), at, 0, 0, b"", move |st| {
        assert!(netdirect::ndk::on_callback_thread());
        l.push(format!("connect {st:?}"));
        let s = c.close(logged(&l, "c1 closed"));
        l.push(format!("c1 close {s:?}"));
        let s = q.close(logged(&l, "qp1 closed"));
        l.push(format!("qp1 close {s:?}"));
        l.push("callback returns");
    });
    assert_eq!(s, NtStatus::PENDING, "this side runs in pending mode");
    drop((c1, qp1));
    log.wait_for("qp1 closed");
    let ok = format!("connect {:?}", NtStatus::SUCCESS);
    let pending = format!("{:?}", NtStatus::PENDING);
    assert_eq!(
        log.get(),
        [
            ok,
            format!("c1 close {pending}"),
            format!("qp1 close {pending}"),
            "callback returns".into(),
            "c1 closed".into(),
            "qp1 closed".into(),
        ],
        "the closes completed after the callback returned, the QP's after its connector's"
    );

    // 2: closing a connector whose Connect is pending cancels it; the close comes last.
    let log = Log::default();
    let qp2 = side
        .pd
        .create_qp(&side.cq, &side.cq, 2, 4, 4, 1, 1, 0)
        .expect("qp");
    let c2 = side.a.create_connector().expect("connector");
    let l = log.clone();
    let s = c2.connect(&qp2, cfg.addr(0), at, 0, 0, b"", move |st| {
        l.push(format!("connect {st:?}"));
    });
    assert_eq!(s, NtStatus::PENDING);
    hear("held");
    // The close cancels the Connect: its callback (STATUS_CANCELLED) comes first, and the
    // close either pends until it has returned or, if it already has, completes inline
    // with no callback of its own.
    let s = c2.close(logged(&log, "c2 closed"));
    let cancelled = format!("connect {:?}", NtStatus::CANCELLED);
    if s == NtStatus::PENDING {
        log.wait_for("c2 closed");
        assert_eq!(log.get(), [cancelled, "c2 closed".to_string()]);
    } else {
        assert_eq!(s, NtStatus::SUCCESS);
        log.wait_for(&cancelled);
        closed_inline.push(log);
    }
    say("cancelled");
    close_wait(|cb| qp2.close(cb));

    // 3: close the antecedents first: PD, CQ, QP pend until the connector has closed.
    let log = Log::default();
    let pd = side.a.create_pd().expect("pd");
    let cq = side.a.create_cq(16, |_| {}, None).expect("cq");
    let qp = pd.create_qp(&cq, &cq, 3, 4, 4, 1, 1, 0).expect("qp");
    let mr = pd.create_mr(false).expect("mr");
    let c3 = side.a.create_connector().expect("connector");
    let s = call(&side.calls, |cb| {
        c3.connect(&qp, cfg.addr(0), at, 0, 0, b"", cb)
    });
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(
        call(&side.calls, |cb| c3.complete_connect(None, cb)),
        NtStatus::SUCCESS
    );
    say("connected");
    assert_eq!(pd.close(logged(&log, "pd closed")), NtStatus::PENDING);
    assert_eq!(cq.close(logged(&log, "cq closed")), NtStatus::PENDING);
    assert_eq!(qp.close(logged(&log, "qp closed")), NtStatus::PENDING);
    assert_eq!(
        mr.close(|| panic!("an inline close has no callback")),
        NtStatus::SUCCESS
    );
    hear("listener closing");
    // The listener closed: a new request is refused at once.
    let qp4 = side
        .pd
        .create_qp(&side.cq, &side.cq, 4, 4, 4, 1, 1, 0)
        .expect("qp");
    let c4 = side.a.create_connector().expect("connector");
    let s = call(&side.calls, |cb| {
        c4.connect(&qp4, cfg.addr(0), at, 0, 0, b"", cb)
    });
    assert_eq!(s, NtStatus::CONNECTION_REFUSED);
    close_wait(|cb| c4.close(cb));
    close_wait(|cb| qp4.close(cb));
    log.push("closing c3");
    close_wait(|cb| c3.close(cb));
    log.wait_for("pd closed");
    log.wait_for("cq closed");
    let got = log.get();
    let at_ = |e: &str| got.iter().position(|x| x == e).unwrap();
    assert_eq!(got[0], "closing c3", "{got:?}");
    assert!(
        at_("qp closed") < at_("cq closed") && at_("qp closed") < at_("pd closed"),
        "{got:?}"
    );
    say("done");
    side.close();
    for log in closed_inline {
        assert!(
            !log.get().iter().any(|e| e == "c2 closed"),
            "a close that completed inline called back"
        );
    }
    say("ok");
}

fn child() -> bool {
    let Some(role) = role() else {
        return false;
    };
    let cfg = Cfg::from_env();
    match role.as_str() {
        "server" => server(&cfg),
        "client" => client(&cfg, std::env::var("ND_TEST_AT").unwrap().parse().unwrap()),
        other => panic!("unknown role {other}"),
    }
    true
}

#[test]
fn callbacks_once_close_last_and_antecedents_after_successors() {
    const TEST: &str = "callbacks_once_close_last_and_antecedents_after_successors";
    if child() {
        return;
    }
    for (provider, ip) in matrix() {
        let mut s = spawn(TEST, "server", provider, ip, CompletionMode::Inline, &[]);
        let at = s.line_with("listening ");
        let mut c = spawn(
            TEST,
            "client",
            provider,
            ip,
            CompletionMode::Pending,
            &[("ND_TEST_AT", at)],
        );
        for (from_server, word) in [
            (true, "held"),
            (false, "cancelled"),
            (false, "connected"),
            (true, "listener closing"),
            (false, "done"),
        ] {
            if from_server {
                s.line_with(word);
                c.tell(word);
            } else {
                c.line_with(word);
                s.tell(word);
            }
        }
        c.line_with("ok");
        s.line_with("ok");
        c.finish();
        s.finish();
    }
}

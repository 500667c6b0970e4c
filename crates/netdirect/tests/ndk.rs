//! NDK connections between separate processes, on both providers, over 127.0.0.1 and ::1:
//! the connect event hands over a provider-created connector, Accept, data, the disconnect
//! event; Reject, close-without-Accept and paused connect events refusing; and NDK talking to
//! ND v2 and ND v1 both ways.

mod ndk_common;

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc;
use std::sync::Mutex;

use ndk_common::*;
use netdirect::ndk::{CompletionMode, NdkConnector, NdkOpFlags, NtStatus};
use netdirect::{Buffer, ConnectConfig, MrFlags, OpFlags, Provider, QueuePairConfig, Sge};

const HELLO: &[u8] = b"hello";
const WELCOME: &[u8] = b"welcome";
const MESSAGE: &[u8] = b"8 bytes!";

/// The NDK server: connect event → Accept → one Receive → the peer's disconnect event.
fn ndk_server(cfg: &Cfg) {
    let side = Side::new(cfg, |_| {});
    side.recv(1);
    let (tx, rx) = mpsc::channel::<NdkConnector>();
    let tx = Mutex::new(tx);
    let l = side
        .a
        .create_listener(move |c| {
            assert!(netdirect::ndk::on_callback_thread());
            tx.lock().unwrap().send(c).unwrap();
        })
        .expect("listener");
    assert_eq!(
        call(&side.calls, |cb| l.listen(cfg.addr(0), cb)),
        NtStatus::SUCCESS
    );
    say(format!(
        "listening {}",
        l.get_local_address().expect("address")
    ));
    let c = rx.recv_timeout(BOUND).expect("no connect event");
    // The request's private data, NDK style: a size probe, then a short buffer, then all.
    let mut len = 0;
    assert_eq!(
        c.get_connection_data(None, None, None, &mut len),
        NtStatus::SUCCESS
    );
    assert_eq!(len as usize, HELLO.len());
    let mut short = [0u8; 2];
    let mut len = 2;
    assert_eq!(
        c.get_connection_data(None, None, Some(&mut short), &mut len),
        NtStatus::BUFFER_TOO_SMALL
    );
    assert_eq!((&short[..], len as usize), (&HELLO[..2], HELLO.len()));
    let mut data = [0u8; 64];
    let mut len = 64;
    assert_eq!(
        c.get_connection_data(None, None, Some(&mut data), &mut len),
        NtStatus::SUCCESS
    );
    assert_eq!(&data[..len as usize], HELLO);
    assert_eq!(c.get_peer_address().expect("peer").ip(), cfg.ip);
    let log = Log::default();
    let l2 = log.clone();
    let event = Box::new(move || l2.push("disconnect"));
    let s = call(&side.calls, |cb| {
        c.accept(&side.qp, 0, 0, WELCOME, Some(event), cb)
    });
    assert_eq!(s, NtStatus::SUCCESS);
    let r = next(&side.cq);
    assert_eq!(
        (r.status, r.request_context, r.qp_context),
        (NtStatus::SUCCESS, 1, 0x51de)
    );
    assert_eq!(side.slot_bytes(1, r.bytes_transferred as usize), MESSAGE);
    log.wait_for("disconnect");
    close_connector(&c);
    close_wait(|cb| l.close(cb));
    side.close();
    assert_eq!(log.get(), ["disconnect"], "the disconnect event came once");
    say("ok");
}

/// Close `c` and wait for its completion, if it pends.
fn close_connector(c: &NdkConnector) {
    close_wait(|cb| c.close(cb));
}

fn close_wait(f: impl FnOnce(Box<dyn FnOnce() + Send>) -> NtStatus) {
    let (tx, rx) = mpsc::channel();
    let s = f(Box::new(move || tx.send(()).unwrap()));
    if s == NtStatus::PENDING {
        rx.recv_timeout(BOUND).expect("the close never completed");
    } else {
        assert_eq!(s, NtStatus::SUCCESS);
    }
}

/// The NDK client: Connect → CompleteConnect → Send → Disconnect.
fn ndk_client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let c = side.a.create_connector().expect("connector");
    let s = call(&side.calls, |cb| {
        c.connect(&side.qp, cfg.addr(0), at, 0, 0, HELLO, cb)
    });
    assert_eq!(s, NtStatus::SUCCESS);
    let mut data = [0u8; 64];
    let mut len = 64;
    assert_eq!(
        c.get_connection_data(None, None, Some(&mut data), &mut len),
        NtStatus::SUCCESS
    );
    assert_eq!(&data[..len as usize], WELCOME);
    assert_eq!(c.get_local_address().expect("local").ip(), cfg.ip);
    assert_eq!(
        call(&side.calls, |cb| c.complete_connect(None, cb)),
        NtStatus::SUCCESS
    );
    assert_eq!(side.send(2, MESSAGE, NdkOpFlags::NONE), NtStatus::SUCCESS);
    let r = next(&side.cq);
    assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 2));
    assert_eq!(call(&side.calls, |cb| c.disconnect(cb)), NtStatus::SUCCESS);
    close_connector(&c);
    side.close();
    say("ok");
}

fn v2_adapter(cfg: &Cfg) -> netdirect::Adapter {
    Provider::open(&cfg.provider)
        .and_then(|p| p.open_adapter_for(cfg.addr(0)))
        .expect("v2 adapter")
}

/// The same server through ND v2.
fn v2_server(cfg: &Cfg) -> netdirect::Result<()> {
    let a = v2_adapter(cfg);
    let cq = a.create_completion_queue(16, 0, 0)?;
    let qp = a.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
    let buf = Buffer::new(64)?;
    let mr = a.create_memory_region()?;
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?
        .wait()?;
    // SAFETY: the buffer is read after the Receive completed.
    unsafe { qp.receive(1, &[buf.sge(0..64, mr.get_local_token())])? };
    let l = a.create_listener()?;
    l.bind(cfg.addr(0))?;
    l.listen(0)?;
    say(format!("listening {}", l.get_local_address()?));
    let c = a.create_connector()?;
    l.get_connection_request(&c)?.wait()?;
    assert_eq!(c.private_data()?, HELLO);
    c.accept_with(&qp, &ConnectConfig::new().private_data(WELCOME))?
        .wait()?;
    let gone = c.notify_disconnect()?;
    let r = cq.wait_for_context(1, Some(BOUND))?;
    // SAFETY: the Receive completed.
    assert_eq!(
        unsafe { &buf.as_slice()[..r.bytes_transferred as usize] },
        MESSAGE
    );
    gone.wait()?;
    say("ok");
    Ok(())
}

/// The same client through ND v2.
fn v2_client(cfg: &Cfg, at: SocketAddr) -> netdirect::Result<()> {
    let a = v2_adapter(cfg);
    let cq = a.create_completion_queue(16, 0, 0)?;
    let qp = a.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
    let c = a.create_connector()?;
    c.bind(cfg.addr(0))?;
    c.connect_with(&qp, at, &ConnectConfig::new().private_data(HELLO))?
        .wait()?;
    assert_eq!(c.private_data()?, WELCOME);
    c.complete_connect()?.wait()?;
    let sge = Sge::new(MESSAGE.as_ptr().cast_mut(), MESSAGE.len() as u32, 0);
    // SAFETY: INLINE copies the bytes during the call.
    unsafe { qp.send(2, &[sge], OpFlags::INLINE)? };
    cq.wait_for_context(2, Some(BOUND))?;
    c.disconnect()?.wait()?;
    say("ok");
    Ok(())
}

/// The client through ND v1 (`netdirect::v1`): Connect with protocol 6, CompleteConnect, an
/// inline Send with its caller-owned `ND_RESULT`, Disconnect.
fn v1_client(cfg: &Cfg, at: SocketAddr) -> netdirect::Result<()> {
    use netdirect::v1;
    let a = v1::Provider::open(&cfg.provider)?.open_adapter(cfg.addr(0))?;
    let cq = a.create_completion_queue(16)?;
    let c = a.create_connector()?;
    let ep = c.create_endpoint(&cq, &cq, 4, 4, 1, 1, 0, 0, None)?;
    c.connect(&ep, at, v1::PROTOCOL_TCP, 0, HELLO)?.wait()?;
    let mut pdata = [0u8; 64];
    let n = c.get_connection_data(None, None, &mut pdata)?;
    assert_eq!(&pdata[..n], WELCOME);
    c.complete_connect()?.wait()?;
    let mut result = v1::NdResult1::PENDING;
    let sge = v1::Sge1 {
        addr: MESSAGE.as_ptr().cast_mut(),
        length: MESSAGE.len(),
        mr: None,
    };
    // SAFETY: an inline Send (no registration) copies the bytes during the call; `result`
    // outlives the request, which completes below.
    unsafe { ep.send(&mut result, &[sge], OpFlags::empty())? };
    let mut done = [std::ptr::null_mut(); 1];
    let deadline = std::time::Instant::now() + BOUND;
    while cq.get_results(&mut done) == 0 {
        assert!(std::time::Instant::now() < deadline, "no completion");
        std::thread::yield_now();
    }
    assert_eq!(done[0], std::ptr::addr_of_mut!(result));
    assert_eq!(result.status, netdirect::Status::SUCCESS);
    c.disconnect()?.wait()?;
    say("ok");
    Ok(())
}

/// The server through ND v1: Listen (protocol 6, an assigned port), a connection request
/// into a connector, a Receive, Accept, the message, the peer's disconnect.
fn v1_server(cfg: &Cfg) -> netdirect::Result<()> {
    use netdirect::v1;
    let a = v1::Provider::open(&cfg.provider)?.open_adapter(cfg.addr(0))?;
    let cq = a.create_completion_queue(16)?;
    let mut port = 0u16;
    let l = a.listen(0, v1::PROTOCOL_TCP, 0, Some(&mut port))?;
    say(format!(
        "listening {}",
        SocketAddr::new(cfg.ip, u16::from_be(port))
    ));
    let c = a.create_connector()?;
    l.get_connection_request(&c)?.wait()?;
    let ep = c.create_endpoint(&cq, &cq, 4, 4, 1, 1, 0, 0, None)?;
    let mut buf = [0u8; 64];
    let at = buf.as_mut_ptr();
    // SAFETY: `buf` outlives the registration and is read after the Receive completed.
    let (mr, registered) = unsafe { a.register_memory(at, 64)? };
    registered.wait()?;
    let mut result = v1::NdResult1::PENDING;
    let sge = v1::Sge1 {
        addr: at,
        length: 64,
        mr: Some(mr),
    };
    // SAFETY: as above; `result` outlives the Receive.
    unsafe { ep.receive(&mut result, &[sge])? };
    let mut pdata = [0u8; 64];
    let n = c.get_connection_data(None, None, &mut pdata)?;
    assert_eq!(&pdata[..n], HELLO);
    c.accept(&ep, WELCOME)?.wait()?;
    let gone = c.notify_disconnect()?;
    let mut done = [std::ptr::null_mut(); 1];
    let deadline = std::time::Instant::now() + BOUND;
    while cq.get_results(&mut done) == 0 {
        assert!(std::time::Instant::now() < deadline, "no completion");
        std::thread::yield_now();
    }
    assert_eq!(result.status, netdirect::Status::SUCCESS);
    // SAFETY: the Receive completed.
    assert_eq!(&buf[..result.bytes_transferred], MESSAGE);
    gone.wait()?;
    say("ok");
    Ok(())
}

/// The refusing server: the first request is rejected, the second closed without Accept,
/// then connect events are paused (the third is refused as if nobody listened), then
/// resumed (the fourth is accepted).
fn reject_server(cfg: &Cfg) {
    let side = Side::new(cfg, |_| {});
    let (l, rx) = side.listen_announced();
    let first = rx.recv_timeout(BOUND).expect("first request");
    assert_eq!(first.reject(b"no"), NtStatus::SUCCESS);
    close_connector(&first);
    let second = rx.recv_timeout(BOUND).expect("second request");
    close_connector(&second);
    l.control_connect_events(true);
    say("paused");
    hear("refused");
    l.control_connect_events(false);
    say("resumed");
    let fourth = rx.recv_timeout(BOUND).expect("fourth request");
    let s = call(&side.calls, |cb| {
        fourth.accept(&side.qp, 0, 0, b"", None, cb)
    });
    assert_eq!(s, NtStatus::SUCCESS);
    hear("done");
    close_connector(&fourth);
    close_wait(|cb| l.close(cb));
    assert!(
        rx.try_recv().is_err(),
        "a paused request reached the consumer"
    );
    side.close();
    say("ok");
}

fn reject_client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let attempt = |pdata_back: Option<&[u8]>| {
        let c = side.a.create_connector().expect("connector");
        let s = call(&side.calls, |cb| {
            c.connect(&side.qp, cfg.addr(0), at, 0, 0, b"", cb)
        });
        if s == NtStatus::CONNECTION_REFUSED {
            if let Some(want) = pdata_back {
                let mut d = [0u8; 16];
                let mut len = 16;
                let got = c.get_connection_data(None, None, Some(&mut d), &mut len);
                if got == NtStatus::SUCCESS {
                    assert_eq!(&d[..len as usize], want);
                }
            }
        }
        (s, c)
    };
    let (s, c) = attempt(Some(b"no"));
    assert_eq!(s, NtStatus::CONNECTION_REFUSED, "rejected");
    close_connector(&c);
    let (s, c) = attempt(None);
    assert_eq!(s, NtStatus::CONNECTION_REFUSED, "closed without Accept");
    close_connector(&c);
    hear("paused");
    let (s, c) = attempt(None);
    assert_eq!(s, NtStatus::CONNECTION_REFUSED, "connect events paused");
    close_connector(&c);
    say("refused");
    hear("resumed");
    let (s, c) = attempt(None);
    assert_eq!(s, NtStatus::SUCCESS, "connect events resumed");
    assert_eq!(
        call(&side.calls, |cb| c.complete_connect(None, cb)),
        NtStatus::SUCCESS
    );
    say("done");
    close_connector(&c);
    side.close();
    say("ok");
}

fn child() -> bool {
    let Some(role) = role() else {
        return false;
    };
    let cfg = Cfg::from_env();
    let at = || -> SocketAddr { std::env::var("ND_TEST_AT").unwrap().parse().unwrap() };
    match role.as_str() {
        "ndk-server" => ndk_server(&cfg),
        "ndk-client" => ndk_client(&cfg, at()),
        "v2-server" => v2_server(&cfg).expect("v2 server"),
        "v2-client" => v2_client(&cfg, at()).expect("v2 client"),
        "v1-server" => v1_server(&cfg).expect("v1 server"),
        "v1-client" => v1_client(&cfg, at()).expect("v1 client"),
        "reject-server" => reject_server(&cfg),
        "reject-client" => reject_client(&cfg, at()),
        other => panic!("unknown role {other}"),
    }
    true
}

/// Run `server` and `client` roles against each other in every configuration.
fn pair(test: &str, server: &str, client: &str, relay: &[(&str, &str)]) {
    if child() {
        return;
    }
    for (i, (provider, ip)) in matrix().into_iter().enumerate() {
        // Alternate which side completes inline and which through callbacks.
        let (sm, cm) = if i % 2 == 0 {
            (CompletionMode::Pending, CompletionMode::Inline)
        } else {
            (CompletionMode::Inline, CompletionMode::Pending)
        };
        let mut s = spawn(test, server, provider, ip, sm, &[]);
        let at = s.line_with("listening ");
        let mut c = spawn(test, client, provider, ip, cm, &[("ND_TEST_AT", at)]);
        for (from, word) in relay {
            if *from == "server" {
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
        let _: IpAddr = ip;
    }
}

#[test]
fn connect_event_accept_data_disconnect_event() {
    pair(
        "connect_event_accept_data_disconnect_event",
        "ndk-server",
        "ndk-client",
        &[],
    );
}

#[test]
fn ndk_listener_serves_a_v2_client() {
    pair(
        "ndk_listener_serves_a_v2_client",
        "ndk-server",
        "v2-client",
        &[],
    );
}

#[test]
fn ndk_connector_reaches_a_v2_listener() {
    pair(
        "ndk_connector_reaches_a_v2_listener",
        "v2-server",
        "ndk-client",
        &[],
    );
}

#[test]
fn reject_close_without_accept_and_paused_events_refuse() {
    pair(
        "reject_close_without_accept_and_paused_events_refuse",
        "reject-server",
        "reject-client",
        &[
            ("server", "paused"),
            ("client", "refused"),
            ("server", "resumed"),
            ("client", "done"),
        ],
    );
}

#[test]
fn ndk_listener_serves_a_v1_client() {
    pair(
        "ndk_listener_serves_a_v1_client",
        "ndk-server",
        "v1-client",
        &[],
    );
}

#[test]
fn ndk_connector_reaches_a_v1_listener() {
    pair(
        "ndk_connector_reaches_a_v1_listener",
        "v1-server",
        "ndk-client",
        &[],
    );
}

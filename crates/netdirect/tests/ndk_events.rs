//! NDK's event and work-request rules between separate processes, on both providers, over
//! 127.0.0.1 and ::1: CQ arms merge (ERRORS then SOLICITED is SOLICITED; ERRORS ignores
//! successes; an arm after new entries fires at once) and CQ callbacks are serialized; the
//! SRQ threshold callback fires once per arm; a DEFER chain cut by an inline failure still
//! delivers the earlier requests, and the failed one has no CQ entry; RDMA Reads and Writes
//! out of range or with a wrong token complete with `STATUS_ACCESS_VIOLATION`, ND's status.
//!
//! One process drives (`cmd ...` lines, relayed by the test to the other process, whose
//! `sent` answers come back), the other follows.

mod ndk_common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use ndk_common::*;
use netdirect::ndk::{
    CompletionMode, NdkConnector, NdkCq, NdkCqNotifyType, NdkOpFlags, NdkQp, NdkResult, NtStatus,
};

/// Ask the other process to do `cmd`; wait for its `sent`.
fn ask(cmd: &str) {
    say(format!("cmd {cmd}"));
    hear("sent");
}

/// Accept the first request on `side`'s QP.
fn accept_first(side: &Side, pdata: &[u8]) -> (netdirect::ndk::NdkListener, NdkConnector) {
    let (l, rx) = side.listen_announced();
    let c = rx.recv_timeout(BOUND).expect("request");
    let s = call(&side.calls, |cb| c.accept(&side.qp, 1, 0, pdata, None, cb));
    assert_eq!(s, NtStatus::SUCCESS);
    (l, c)
}

fn close_wait(f: impl FnOnce(Box<dyn FnOnce() + Send>) -> NtStatus) {
    let (tx, rx) = mpsc::channel();
    let s = f(Box::new(move || tx.send(()).unwrap()));
    if s == NtStatus::PENDING {
        rx.recv_timeout(BOUND).expect("the close never completed");
    }
}

fn connect(side: &Side, qp: &NdkQp, at: SocketAddr) -> NdkConnector {
    let c = side.a.create_connector().expect("connector");
    let s = call(&side.calls, |cb| {
        c.connect(qp, side.cfg.addr(0), at, 0, 1, b"", cb)
    });
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(
        call(&side.calls, |cb| c.complete_connect(None, cb)),
        NtStatus::SUCCESS
    );
    c
}

/// Poll `n` completions.
fn take(cq: &NdkCq, n: usize) -> Vec<NdkResult> {
    (0..n).map(|_| next(cq)).collect()
}

/// CQ arms, driven by the receiving server.
fn arm_server(cfg: &Cfg) {
    let log = Log::default();
    let cell: Arc<OnceLock<(NdkCq, NdkQp)>> = Arc::default();
    let stream = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicUsize::new(0));
    let (l, c, s, i, r) = (log.clone(), cell.clone(), stream.clone(), inside, received);
    let side = Side::new(cfg, move |st| {
        assert!(netdirect::ndk::on_callback_thread());
        if i.swap(true, Ordering::AcqRel) {
            l.push("overlap");
        }
        let (cq, _) = c.get().expect("set");
        let mut rs = [NdkResult::EMPTY; 64];
        let mut seen = Vec::new();
        loop {
            let n = cq.get_cq_results(&mut rs);
            seen.extend(rs[..n].iter().map(|e| e.request_context));
            if n < rs.len() {
                break;
            }
        }
        if s.load(Ordering::Acquire) {
            let total = r.fetch_add(seen.len(), Ordering::AcqRel) + seen.len();
            if total >= 200 {
                l.push("all");
            } else {
                cq.arm_cq(NdkCqNotifyType::Any);
            }
        } else {
            l.push(format!("fire {st:?} {seen:?}"));
        }
        i.store(false, Ordering::Release);
    });
    cell.set((side.cq.clone(), side.qp.clone())).ok().unwrap();
    for ctx in 1..=210 {
        side.recv(ctx);
    }
    let (listener, conn) = accept_first(&side, b"");
    // ERRORS then SOLICITED: SOLICITED. A plain Send does not fire it; the solicited one does.
    side.cq.arm_cq(NdkCqNotifyType::Errors);
    side.cq.arm_cq(NdkCqNotifyType::Solicited);
    ask("send 1 plain");
    ask("send 1 solicit");
    let first = format!("fire {:?} [1, 2]", NtStatus::SUCCESS);
    log.wait_for(&first);
    // ERRORS ignores a success; merged with ANY after a new entry, it fires at once.
    side.cq.arm_cq(NdkCqNotifyType::Errors);
    ask("send 1 plain");
    let r = next(&side.cq);
    assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 3));
    side.cq.arm_cq(NdkCqNotifyType::Any);
    let second = format!("fire {:?} []", NtStatus::SUCCESS);
    log.wait_for(&second);
    // Serialized callbacks, each re-arming from inside itself, while 200 Sends land.
    stream.store(true, Ordering::Release);
    side.cq.arm_cq(NdkCqNotifyType::Any);
    ask("send 200 plain");
    log.wait_for("all");
    close_wait(|cb| conn.close(cb));
    close_wait(|cb| listener.close(cb));
    side.close();
    assert_eq!(
        log.get(),
        [first, second, "all".to_string()],
        "one callback per arm, none overlapping"
    );
    say("DONE");
}

/// The SRQ threshold callback, driven by the receiving server.
fn srq_server(cfg: &Cfg) {
    let log = Log::default();
    let side = Side::new(cfg, |_| {});
    let l = log.clone();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let notify: Arc<dyn Fn(NtStatus) + Send + Sync> = Arc::new(move |st| {
        let n = f.fetch_add(1, Ordering::AcqRel) + 1;
        l.push(format!("srq {n} {st:?}"));
    });
    let srq = side
        .pd
        .create_srq(16, 1, 2, Some(notify), None)
        .expect("srq");
    // Nothing queued yet: below the threshold at once.
    log.wait_for(&format!("srq 1 {:?}", NtStatus::SUCCESS));
    let qp = side
        .pd
        .create_qp_with_srq(&side.cq, &side.cq, &srq, 7, 4, 1, 0)
        .expect("qp");
    for ctx in 1..=4 {
        let sge = side.slot(ctx);
        // SAFETY: the slot is only read after its Receive completed.
        assert_eq!(unsafe { srq.srq_receive(ctx, &[sge]) }, NtStatus::SUCCESS);
    }
    // Re-armed with 4 queued: quiet until fewer than 2 are.
    assert_eq!(
        call(&side.calls, |cb| srq.modify_srq(0, 2, cb)),
        NtStatus::SUCCESS
    );
    let (listener, rx) = side.listen_announced();
    let conn = rx.recv_timeout(BOUND).expect("request");
    assert_eq!(
        call(&side.calls, |cb| conn.accept(&qp, 0, 0, b"", None, cb)),
        NtStatus::SUCCESS
    );
    ask("send 3 plain");
    assert!(take(&side.cq, 3)
        .iter()
        .all(|r| r.status == NtStatus::SUCCESS && r.qp_context == 7));
    log.wait_for(&format!("srq 2 {:?}", NtStatus::SUCCESS));
    // Fired: disarmed, so the last Receive's use goes unnoticed...
    ask("send 1 plain");
    assert_eq!(take(&side.cq, 1)[0].request_context, 4);
    // ...until ModifySrq sets a threshold again, which finds none queued and fires at once.
    assert_eq!(
        call(&side.calls, |cb| srq.modify_srq(0, 2, cb)),
        NtStatus::SUCCESS
    );
    log.wait_for(&format!("srq 3 {:?}", NtStatus::SUCCESS));
    close_wait(|cb| conn.close(cb));
    close_wait(|cb| listener.close(cb));
    close_wait(|cb| qp.close(cb));
    close_wait(|cb| srq.close(cb));
    side.close();
    assert_eq!(fired.load(Ordering::Acquire), 3, "{:?}", log.get());
    say("DONE");
}

/// The passive sender for the two servers above: connects, then Sends on command.
fn sender(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let c = connect(&side, &side.qp, at);
    let mut ctx = 0u64;
    loop {
        let cmd = hear("cmd ");
        let words: Vec<&str> = cmd.split(' ').collect();
        if words[0] == "quit" {
            break;
        }
        let (n, flags): (usize, _) = match words[..] {
            ["send", n, "plain"] => (n.parse().unwrap(), NdkOpFlags::NONE),
            ["send", n, "solicit"] => (n.parse().unwrap(), NdkOpFlags::SEND_AND_SOLICIT_EVENT),
            _ => panic!("unknown command {cmd}"),
        };
        let mut done = 0;
        for i in 0..n {
            ctx += 1;
            assert_eq!(side.send(ctx, &ctx.to_le_bytes(), flags), NtStatus::SUCCESS);
            // At most 32 in flight.
            if i + 1 - done >= 32 {
                assert_eq!(next(&side.cq).status, NtStatus::SUCCESS);
                done += 1;
            }
        }
        for r in take(&side.cq, n - done) {
            assert_eq!(r.status, NtStatus::SUCCESS);
        }
        say("sent");
    }
    close_wait(|cb| c.close(cb));
    side.close();
    say("DONE");
}

/// The passive receiver for the DEFER chain: checks the messages it is told to expect.
fn receiver(cfg: &Cfg) {
    let side = Side::new(cfg, |_| {});
    for ctx in 1..=16 {
        side.recv(ctx);
    }
    let (l, c) = accept_first(&side, b"");
    let mut got = 0u64;
    loop {
        let cmd = hear("cmd ");
        if cmd == "quit" {
            break;
        }
        let want: Vec<&str> = cmd
            .strip_prefix("expect ")
            .expect("expect")
            .split(',')
            .collect();
        for w in want {
            got += 1;
            let r = next(&side.cq);
            assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, got));
            assert_eq!(
                side.slot_bytes(got, r.bytes_transferred as usize),
                w.as_bytes()
            );
        }
        say("sent");
    }
    close_wait(|cb| c.close(cb));
    close_wait(|cb| l.close(cb));
    side.close();
    say("DONE");
}

/// A DEFER chain whose fourth request fails inline.
fn defer_client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let c = connect(&side, &side.qp, at);
    for ctx in 1..=3u64 {
        let s = side.send(ctx, format!("m{ctx}").as_bytes(), NdkOpFlags::DEFER);
        assert_eq!(s, NtStatus::SUCCESS);
    }
    // A flag Send does not take: an inline failure, so no CQ entry, and the deferred
    // requests before it must go out all the same.
    let bad = NdkOpFlags::DEFER | NdkOpFlags::ALLOW_REMOTE_READ;
    assert_eq!(side.send(4, b"m4", bad), NtStatus::INVALID_PARAMETER);
    assert_eq!(side.send(5, b"m5", NdkOpFlags::NONE), NtStatus::SUCCESS);
    ask("expect m1,m2,m3,m5");
    let ctxs: Vec<u64> = take(&side.cq, 4)
        .iter()
        .map(|r| r.request_context)
        .collect();
    assert_eq!(ctxs, [1, 2, 3, 5]);
    assert_eq!(call(&side.calls, |cb| c.disconnect(cb)), NtStatus::SUCCESS);
    let mut rest = [NdkResult::EMPTY; 8];
    assert_eq!(
        side.cq.get_cq_results(&mut rest),
        0,
        "the failed post left an entry"
    );
    close_wait(|cb| c.close(cb));
    side.close();
    say("DONE");
}

/// The passive RDMA target: accepts every request from inside its connect event (a QP made
/// there too) and tells each peer where its memory is.
fn rw_server(cfg: &Cfg) {
    let side = Arc::new(Side::new(cfg, |_| {}));
    let mut pdata = (side.buf.as_ptr() as u64).to_le_bytes().to_vec();
    pdata.extend_from_slice(&side.mr.get_remote_token().to_le_bytes());
    let kept: Arc<Mutex<Vec<(NdkConnector, NdkQp)>>> = Arc::default();
    let (s, k) = (side.clone(), kept.clone());
    let l = side
        .a
        .create_listener(move |c| {
            let qp = s.pd.create_qp(&s.cq, &s.cq, 9, 4, 4, 1, 1, 0).expect("qp");
            let st = c.accept(&qp, 1, 0, &pdata, None, |_| {});
            assert!(st == NtStatus::PENDING || st == NtStatus::SUCCESS, "{st:?}");
            k.lock().unwrap().push((c, qp));
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
    assert_eq!(hear("cmd "), "quit");
    let kept = std::mem::take(&mut *kept.lock().unwrap());
    for (c, qp) in kept {
        close_wait(|cb| c.close(cb));
        close_wait(|cb| qp.close(cb));
    }
    close_wait(|cb| l.close(cb));
    drop(l);
    match Arc::try_unwrap(side) {
        Ok(side) => side.close(),
        Err(side) => panic!("the side is still held {} times", Arc::strong_count(&side)),
    }
    say("DONE");
}

/// Reads and Writes, good and bad, each bad one on a connection of its own (a refused
/// access ends its connection).
fn rw_client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    let mut n = 0;
    let mut attempt = |read: bool, offset: u64, token_xor: u32, len: usize| -> NtStatus {
        n += 1;
        let qp = side
            .pd
            .create_qp(&side.cq, &side.cq, n, 4, 4, 1, 1, 0)
            .expect("qp");
        let c = connect(&side, &qp, at);
        let mut d = [0u8; 12];
        let mut dl = 12;
        assert_eq!(
            c.get_connection_data(None, None, Some(&mut d), &mut dl),
            NtStatus::SUCCESS
        );
        let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
        let token = u32::from_le_bytes(d[8..].try_into().unwrap()) ^ token_xor;
        let sge = side.buf.sge(0..len, side.mr.get_local_token());
        // SAFETY: the buffer is not touched until the request completed.
        let s = unsafe {
            if read {
                qp.read(n, &[sge], addr + offset, token, NdkOpFlags::NONE)
            } else {
                qp.write(n, &[sge], addr + offset, token, NdkOpFlags::NONE)
            }
        };
        assert_eq!(s, NtStatus::SUCCESS, "posted");
        let r = next(&side.cq);
        assert_eq!(r.request_context, n);
        close_wait(|cb| c.close(cb));
        close_wait(|cb| qp.close(cb));
        let mut rest = [NdkResult::EMPTY; 8];
        while side.cq.get_cq_results(&mut rest) > 0 {}
        r.status
    };
    assert_eq!(attempt(false, 0, 0, 16), NtStatus::SUCCESS, "write");
    assert_eq!(attempt(true, 0, 0, 16), NtStatus::SUCCESS, "read");
    assert_eq!(
        attempt(false, 8192 - 8, 0, 16),
        NtStatus::ACCESS_VIOLATION,
        "write out of range"
    );
    assert_eq!(
        attempt(false, 0, 0x100, 16),
        NtStatus::ACCESS_VIOLATION,
        "write, wrong token"
    );
    assert_eq!(
        attempt(true, 8192 - 8, 0, 16),
        NtStatus::ACCESS_VIOLATION,
        "read out of range"
    );
    assert_eq!(
        attempt(true, 0, 0x100, 16),
        NtStatus::ACCESS_VIOLATION,
        "read, wrong token"
    );
    side.close();
    say("DONE");
}

/// The passive side of send-and-invalidate: binds a window over its memory, sends its
/// address and token, then reports the message that invalidates it.
fn sai_server(cfg: &Cfg) {
    let side = Side::new(cfg, |_| {});
    side.recv(1);
    let (l, c) = accept_first(&side, b"");
    let mw = side.pd.create_mw().expect("mw");
    let at = side.slot(40);
    let s = side.qp.bind(
        7,
        &side.mr,
        &mw,
        at.buffer,
        64,
        NdkOpFlags::ALLOW_REMOTE_WRITE,
    );
    assert_eq!(s, NtStatus::SUCCESS);
    let r = next(&side.cq);
    assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 7));
    let mut msg = (at.buffer as u64).to_le_bytes().to_vec();
    msg.extend_from_slice(&mw.get_remote_token().to_le_bytes());
    assert_eq!(side.send(8, &msg, NdkOpFlags::NONE), NtStatus::SUCCESS);
    assert_eq!(next(&side.cq).request_context, 8);
    loop {
        let cmd = hear("cmd ");
        if cmd == "quit" {
            break;
        }
        assert_eq!(cmd, "expect invalidation");
        let r = next(&side.cq);
        assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 1));
        say("sent");
    }
    close_wait(|cb| c.close(cb));
    close_wait(|cb| l.close(cb));
    close_wait(|cb| mw.close(cb));
    side.close();
    say("DONE");
}

/// `NdkSendAndInvalidate`: a Write through the peer's window works, the Send with Invalidate
/// lands, and the same Write is then refused.
fn sai_client(cfg: &Cfg, at: SocketAddr) {
    let side = Side::new(cfg, |_| {});
    side.recv(1);
    let c = connect(&side, &side.qp, at);
    let r = next(&side.cq);
    assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 1));
    let d = side.slot_bytes(1, 12);
    let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
    let token = u32::from_le_bytes(d[8..].try_into().unwrap());
    let sge = side.slot(2);
    let write = |ctx: u64| {
        let one = netdirect::Sge::new(sge.buffer, 8, sge.memory_region_token);
        // SAFETY: the slot is not touched until the Write completed.
        assert_eq!(
            unsafe { side.qp.write(ctx, &[one], addr, token, NdkOpFlags::NONE) },
            NtStatus::SUCCESS
        );
        let r = next(&side.cq);
        assert_eq!(r.request_context, ctx);
        r.status
    };
    assert_eq!(write(10), NtStatus::SUCCESS, "a Write through the window");
    let msg = netdirect::Sge::new(sge.buffer, 8, side.mr.get_local_token());
    // SAFETY: as above.
    let s = unsafe {
        side.qp
            .send_and_invalidate(11, &[msg], NdkOpFlags::NONE, token)
    };
    assert_eq!(s, NtStatus::SUCCESS);
    let r = next(&side.cq);
    assert_eq!((r.status, r.request_context), (NtStatus::SUCCESS, 11));
    ask("expect invalidation");
    assert_eq!(
        write(12),
        NtStatus::ACCESS_VIOLATION,
        "the window was invalidated"
    );
    let mut rest = [NdkResult::EMPTY; 8];
    while side.cq.get_cq_results(&mut rest) > 0 {}
    close_wait(|cb| c.close(cb));
    side.close();
    say("DONE");
}

fn child() -> bool {
    let Some(role) = role() else {
        return false;
    };
    let cfg = Cfg::from_env();
    let at = || -> SocketAddr { std::env::var("ND_TEST_AT").unwrap().parse().unwrap() };
    match role.as_str() {
        "arm-server" => arm_server(&cfg),
        "srq-server" => srq_server(&cfg),
        "sender" => sender(&cfg, at()),
        "receiver" => receiver(&cfg),
        "defer-client" => defer_client(&cfg, at()),
        "rw-server" => rw_server(&cfg),
        "rw-client" => rw_client(&cfg, at()),
        "sai-server" => sai_server(&cfg),
        "sai-client" => sai_client(&cfg, at()),
        other => panic!("unknown role {other}"),
    }
    true
}

/// Run the listening `server` and the `client`; `driver_is_server` says which one sends the
/// commands, which the test relays to the other.
fn run(test: &str, server: &str, client: &str, driver_is_server: bool) {
    if child() {
        return;
    }
    for (i, (provider, ip)) in matrix().into_iter().enumerate() {
        let (sm, cm) = if i % 2 == 0 {
            (CompletionMode::Pending, CompletionMode::Inline)
        } else {
            (CompletionMode::Inline, CompletionMode::Pending)
        };
        let mut s = spawn(test, server, provider, ip, sm, &[]);
        let at = s.line_with("listening ");
        let mut c = spawn(test, client, provider, ip, cm, &[("ND_TEST_AT", at)]);
        let (driver, passive) = if driver_is_server {
            (&mut s, &mut c)
        } else {
            (&mut c, &mut s)
        };
        loop {
            let l = driver.next_line();
            if let Some((_, cmd)) = l.split_once("cmd ") {
                passive.tell(&format!("cmd {cmd}"));
                passive.line_with("sent");
                driver.tell("sent");
            } else if l.contains("DONE") {
                break;
            }
        }
        passive.tell("cmd quit");
        passive.line_with("DONE");
        c.finish();
        s.finish();
    }
}

#[test]
fn cq_arms_merge_and_callbacks_are_serialized() {
    run(
        "cq_arms_merge_and_callbacks_are_serialized",
        "arm-server",
        "sender",
        true,
    );
}

#[test]
fn srq_threshold_callback_fires_once_per_arm() {
    run(
        "srq_threshold_callback_fires_once_per_arm",
        "srq-server",
        "sender",
        true,
    );
}

#[test]
fn defer_chain_cut_by_an_inline_failure() {
    run(
        "defer_chain_cut_by_an_inline_failure",
        "receiver",
        "defer-client",
        false,
    );
}

#[test]
fn reads_and_writes_out_of_range_or_with_a_wrong_token_fail() {
    run(
        "reads_and_writes_out_of_range_or_with_a_wrong_token_fail",
        "rw-server",
        "rw-client",
        false,
    );
}

#[test]
fn send_and_invalidate_invalidates_the_peers_window() {
    run(
        "send_and_invalidate_invalidates_the_peers_window",
        "sai-server",
        "sai-client",
        false,
    );
}

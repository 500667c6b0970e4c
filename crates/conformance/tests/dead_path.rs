//! A path that dies under a `tcp` connection is reported on both sides within
//! `ND_TCP_TIMEOUT_MS` (plus 2 s), as an RNIC reports retries run out: two hosts (network
//! namespaces joined by a veth pair, `netns::on_two_hosts`) hold two connections, and then
//! the link goes down for good, or a partition drops every packet between them.
//!
//! On each host one connection has data in flight (an 8 MiB Send posted after the failure,
//! more than TCP's buffers take, so it is outstanding) and the other is idle, waiting on a
//! Receive. On every one of the four ends `NotifyDisconnect` completes, the oldest
//! outstanding request completes `ND_IO_TIMEOUT` (the Send on the sending end, the first
//! Receive on the idle one: TCP_USER_TIMEOUT and keepalive probes, `sockets::watch_path`),
//! and the rest `ND_CANCELED` (docs/WIRE.md §4.5).
//!
//! Needs root and `ip` (and `nft` for the partition, else `blackhole` routes stand in);
//! skipped without them, failed under CI.

// Requests are lists of byte ranges (one per SGE).
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{mpsc, Once};
use std::time::{Duration, Instant};

use netdirect::{Adapter, OpFlags, Overlapped, Provider, Status};
use netdirect_conformance::check::{
    expect_empty, expect_pending, expect_results, fail, next_results, wait_ok, Check, Context,
    Expect,
};
use netdirect_conformance::netns::{on_two_hosts, Host};
use netdirect_conformance::side::listen;
use netdirect_conformance::{Side, SideConfig};

/// `ND_TCP_TIMEOUT_MS` in these tests.
const TIMEOUT_MS: u64 = 2000;
/// The bound: the timeout plus 2 s.
const SLACK: Duration = Duration::from_secs(2);
/// The Send that stays in flight: more than the socket buffers take.
const BIG: usize = 8 << 20;
const R0: u64 = 0x10;
const R1: u64 = 0x11;
const S0: u64 = 0x20;

/// Every test of this binary sets the same value before it opens an adapter (read then).
fn set_timeout() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("ND_TCP_TIMEOUT_MS", TIMEOUT_MS.to_string()));
}

#[derive(Debug, Clone, Copy)]
enum Failure {
    /// Host a's end of the link goes down (host b's loses its carrier).
    LinkDown,
    /// Both hosts drop what comes from the other.
    Partition,
}

/// What the two hosts' threads tell each other.
#[derive(Debug)]
enum Msg {
    /// Host b listens here.
    Listening(SocketAddr),
    /// Connected, Receives and NotifyDisconnects posted.
    Ready,
    /// The failure began at this instant.
    Failed(Instant),
}

fn recv(from: &Receiver<Msg>) -> Check<Msg> {
    from.recv()
        .map_err(|_| netdirect_conformance::Failure("the other host gave up".into()))
}

/// One end of each connection on `adapter`: the one that sends, the one that stays idle.
struct Ends {
    sending: Side,
    idle: Side,
}

fn ends(adapter: &Adapter) -> Check<Ends> {
    let cfg = SideConfig {
        buf_len: BIG + 4096,
        ..SideConfig::default()
    };
    Ok(Ends {
        sending: Side::on(adapter, cfg)?,
        idle: Side::on(adapter, cfg)?,
    })
}

/// Post the Receives and NotifyDisconnect of a connected end.
fn arm(s: &Side) -> Check<Overlapped> {
    s.recv(R0, &[0..BIG]).ctx("post the large Receive")?;
    s.recv(R1, &[BIG..BIG + 64]).ctx("post a second Receive")?;
    let nd = s.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    Ok(nd)
}

/// After the failure at `t0`: Send on the sending end, then both ends must report within the
/// bound, with the statuses the module docs list.
fn report(e: &Ends, nds: [Overlapped; 2], t0: Instant, what: &str) -> Check {
    e.sending
        .send(S0, &[0..BIG], OpFlags::empty())
        .ctx("post the 8 MiB Send")?;
    let bound = Duration::from_millis(TIMEOUT_MS) + SLACK;
    for (nd, end) in nds.iter().zip(["sending", "idle"]) {
        let left = (t0 + bound).saturating_duration_since(Instant::now());
        match nd.wait_timeout(Some(left)) {
            Some(r) => {
                r.ctx(&format!("{what}: NotifyDisconnect of the {end} end"))?;
                eprintln!("{what}: the {end} end after {:?}", t0.elapsed());
            }
            None => {
                return fail(format!(
                    "{what}: the {end} end's NotifyDisconnect still pending {:?} after the failure",
                    t0.elapsed()
                ))
            }
        }
    }
    let took = t0.elapsed();
    let s = &e.sending;
    let r = next_results(&s.scq, 1, "the Send in flight")?;
    expect_results(
        &r,
        &[Expect::send(Status::IO_TIMEOUT, S0, s.qp_context)],
        &format!("{what}: the sending end's Send (reported after {took:?})"),
    )?;
    let r = next_results(&s.rcq, 2, "the sending end's Receives")?;
    let want = [
        Expect::recv(Status::CANCELED, R0, s.qp_context, None),
        Expect::recv(Status::CANCELED, R1, s.qp_context, None),
    ];
    expect_results(&r, &want, &format!("{what}: the sending end's Receives"))?;
    let i = &e.idle;
    let r = next_results(&i.rcq, 2, "the idle end's Receives")?;
    let want = [
        Expect::recv(Status::IO_TIMEOUT, R0, i.qp_context, None),
        Expect::recv(Status::CANCELED, R1, i.qp_context, None),
    ];
    expect_results(&r, &want, &format!("{what}: the idle end's Receives"))?;
    expect_empty(&i.scq, "the idle end's initiator CQ")?;
    eprintln!("{what}: reported {took:?} after the failure");
    Ok(())
}

/// Host a: connects both connections to host b, then brings the failure about.
fn host_a(h: Host, how: Failure, to_b: Sender<Msg>, from_b: Receiver<Msg>) -> Check {
    let p = Provider::open("tcp").ctx("tcp")?;
    let adapter = p.open_adapter_for(SocketAddr::new(h.ip, 0)).ctx("open")?;
    let e = ends(&adapter)?;
    let Msg::Listening(at) = recv(&from_b)? else {
        return fail("expected host b's listener");
    };
    for s in [&e.sending, &e.idle] {
        let cov = s.connect(SocketAddr::new(h.ip, 0), at, 0, 0, &[])?;
        wait_ok(&cov, "Connect")?;
        let cc = s.connector.complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, "CompleteConnect")?;
    }
    let nds = [arm(&e.sending)?, arm(&e.idle)?];
    let Msg::Ready = recv(&from_b)? else {
        return fail("expected host b ready");
    };
    match how {
        Failure::LinkDown => h.set_link(false)?,
        Failure::Partition => h.partition()?,
    }
    let t0 = Instant::now();
    let _ = to_b.send(Msg::Failed(t0));
    report(&e, nds, t0, &format!("host a, {how:?}"))
}

/// Host b: listens, accepts both connections (host a's sending end meets b's idle one), and
/// waits for the failure.
fn host_b(h: Host, how: Failure, to_a: Sender<Msg>, from_a: Receiver<Msg>) -> Check {
    let p = Provider::open("tcp").ctx("tcp")?;
    let adapter = p.open_adapter_for(SocketAddr::new(h.ip, 0)).ctx("open")?;
    let e = ends(&adapter)?;
    let (listener, at) = listen(&adapter, SocketAddr::new(h.ip, 0), 4)?;
    let _ = to_a.send(Msg::Listening(at));
    // Host a connects its sending end first: it meets our idle end.
    for s in [&e.idle, &e.sending] {
        let gcr = listener
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&gcr, "GetConnectionRequest")?;
        let aov = s.connector.accept(&s.qp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, "Accept")?;
    }
    let nds = [arm(&e.sending)?, arm(&e.idle)?];
    let _ = to_a.send(Msg::Ready);
    let Msg::Failed(t0) = recv(&from_a)? else {
        return fail("expected the failure");
    };
    if let Failure::Partition = how {
        h.partition()?;
    }
    report(&e, nds, t0, &format!("host b, {how:?}"))
}

fn run(how: Failure) {
    set_timeout();
    let (to_b, from_a) = mpsc::channel();
    let (to_a, from_b) = mpsc::channel();
    on_two_hosts(
        &format!("the dead-path checks ({how:?})"),
        move |h| host_a(h, how, to_b, from_b),
        move |h| host_b(h, how, to_a, from_a),
    );
}

#[test]
fn a_link_down_for_good_is_reported_on_both_sides() {
    run(Failure::LinkDown);
}

#[test]
fn a_permanent_partition_is_reported_on_both_sides() {
    run(Failure::Partition);
}

//! Blocking waits on several threads of one adapter (`engine.rs`): one thread sleeps in
//! `poll(2)` (the leader), the others on a condition variable (followers). A completion wakes
//! only threads other than the one that made it, so every way a request can complete must
//! still reach the thread that waits for it:
//! * the leader's dispatch completes a follower's request (the follower is woken);
//! * a thread that is not waiting at all completes a sleeper's request (it drives the
//!   adapter's I/O itself, `Adapter::progress`);
//! * the leader returns to its caller while a follower still waits (leadership passes on);
//! * a thread queues output the socket cannot take while another thread sleeps as leader:
//!   the leader's `poll` set must grow to watch for writability.
//!
//! Two threads play a ping-pong through two queue pairs of one adapter, both blocking on CQ
//! notifications (`docs/ND-RULES.md` §2.5: poll, arm Notify, poll again, wait). Which thread
//! leads at any moment is up to the scheduler; every interleaving must finish, and a wake-up
//! lost would leave a thread asleep until the wait's bound ([`WAIT`]), which fails the test.
//! The ping-pongs run on both providers (their engines share the roles, `kit::waiters`); the
//! writability case is tcp's own. With the descriptor exported, a thread that drives the
//! adapter once drained the wake eventfd that was to wake the sleeping leader
//! (`WakeFd::drain`): that showed here about once in fifteen runs, and in most runs of
//! 30,000 rounds.

// One-SGE requests are written `&[a..b]`, as in the conformance suite.
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::sync::Barrier;

use netdirect::{CompletionQueue, NdResult, NotifyType, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{fail, pattern, Check, Context, WAIT};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::connect_pair;
use netdirect_conformance::{Needs, Side, SideConfig};

const SERVER_QP: u64 = 0xB10C_0001;
const CLIENT_QP: u64 = 0xB10C_0002;
const ROUNDS: usize = 300;
/// Message size: small, so each message is one segment read at once.
const LEN: usize = 64;
/// Receives write here; Sends read from 0.
const RECV_AT: usize = 4096;

/// How a side behaves besides blocking on its own notifications.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// Only wait for its own completions.
    Plain,
    /// Right after each Send also drive the whole adapter's I/O: on loopback the message is
    /// already in the peer's socket, so this thread reads it and completes the peer's
    /// Receive (and fires its Notify) while not waiting itself; the peer, asleep, must be
    /// woken although its socket has nothing left to report.
    DrivesAll,
}

/// The next completion of `cq`, blocking on Notify when none is queued.
fn next(cq: &CompletionQueue, what: &str) -> Check<NdResult> {
    let mut out = [NdResult::EMPTY; 1];
    loop {
        if cq.get_results(&mut out) == 1 {
            return Ok(out[0]);
        }
        let ov = cq.notify(NotifyType::Any).ctx("Notify")?;
        // The race rule: what arrived between the short poll and Notify fired it already, so
        // poll once more before sleeping.
        if cq.get_results(&mut out) == 1 {
            return Ok(out[0]);
        }
        match ov.wait_timeout(Some(WAIT)) {
            Some(r) => r.ctx(&format!("{what}: Notify"))?,
            None => {
                return fail(format!(
                    "{what}: no wake-up within {WAIT:?} (a lost wake-up)"
                ))
            }
        }
    }
}

/// One side of the ping-pong: `serve` answers, the other side starts each round.
fn play(side: &Side, serve: bool, style: Style) -> Check {
    let who = if serve { "server" } else { "client" };
    // SAFETY: no request is outstanding on the send area yet.
    unsafe { side.write(&[0..LEN], &pattern(u64::from(serve), LEN)) };
    let send = |i: usize| -> Check {
        side.send(i as u64, &[0..LEN], OpFlags::empty())
            .ctx(&format!("{who} Send {i}"))?;
        if let Style::DrivesAll = style {
            side.adapter.progress();
        }
        let r = next(&side.scq, &format!("{who} Send {i}"))?;
        if r.status != Status::SUCCESS || r.request_type != RequestType::Send {
            return fail(format!("{who} Send {i}: {r:?}"));
        }
        Ok(())
    };
    side.recv(0, &[RECV_AT..RECV_AT + LEN])
        .ctx(&format!("{who} Receive"))?;
    for i in 0..ROUNDS {
        if !serve {
            send(i)?;
        }
        let r = next(&side.rcq, &format!("{who} Receive {i}"))?;
        if r.status != Status::SUCCESS || r.bytes_transferred as usize != LEN {
            return fail(format!("{who} Receive {i}: {r:?}"));
        }
        side.recv(0, &[RECV_AT..RECV_AT + LEN])
            .ctx(&format!("{who} Receive {i}"))?;
        if serve {
            send(i)?;
        }
    }
    Ok(())
}

fn two_threads(provider: &Provider, fam: Family, exported: bool, styles: [Style; 2]) -> Check {
    let a = provider
        .open_adapter_for(SocketAddr::new(fam.ip(), 0))
        .ctx("open adapter")?;
    if exported {
        // From now on data sockets sit in the epoll set too and a leader sleeps in
        // `epoll_wait` (the engine's other waiting mode).
        let _ = a.fd();
    }
    let cfg = |qp_context| SideConfig {
        buf_len: 2 * RECV_AT,
        depth: 4,
        sge: 1,
        qp_context,
    };
    let server = Side::on(&a, cfg(SERVER_QP))?;
    let client = Side::on(&a, cfg(CLIENT_QP))?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    std::thread::scope(|s| {
        let srv = s.spawn(|| play(&server, true, styles[0]));
        let cli = s.spawn(|| play(&client, false, styles[1]));
        let (srv, cli) = (srv.join(), cli.join());
        match (srv, cli) {
            (Ok(a), Ok(b)) => a.and(b),
            _ => fail("a side panicked"),
        }
    })
}

/// Run on every provider: the roles and hand-overs live in the shared kit (`kit::waiters`),
/// the sleeps in each provider's engine.
fn each(name: &str, exported: bool, styles: [Style; 2]) {
    harness::each_provider(Needs::TwoSided, name, move |p, fam| {
        two_threads(p, fam, exported, styles)
    });
}

#[test]
fn two_blocking_threads_wake_each_other() {
    each("blocking-threads", false, [Style::Plain, Style::Plain]);
}

#[test]
fn a_thread_that_is_not_waiting_wakes_the_sleeper() {
    each(
        "blocking-threads-driver",
        false,
        [Style::DrivesAll, Style::Plain],
    );
}

#[test]
fn two_blocking_threads_with_the_descriptor_exported() {
    each(
        "blocking-threads-exported",
        true,
        [Style::Plain, Style::DrivesAll],
    );
}

/// Bytes of the large Send: more than a loopback socket takes at once.
const BIG: usize = 16 << 20;

/// One thread (`idle`) sleeps as the leader of the client's adapter, waiting for a reply that
/// comes only after a large Send has arrived; then another thread posts that Send, which TCP
/// takes only in part, and waits for it. The rest goes out only if the sleeping leader wakes
/// for writability; the server, on its own adapter and thread, reads it all and replies.
fn output_queued_while_another_thread_leads(fam: Family) -> Check {
    let provider = Provider::select("tcp").ctx("open provider")?;
    let cfg = |qp_context| SideConfig {
        buf_len: 2 * BIG,
        depth: 4,
        sge: 1,
        qp_context,
    };
    let server = Side::open(&provider, fam.ip(), cfg(SERVER_QP))?;
    let client = Side::open(&provider, fam.ip(), cfg(CLIENT_QP))?;
    let _l = connect_pair(&server, &client, fam.ip())?;
    server.recv(1, &[BIG..2 * BIG]).ctx("server Receive")?;
    client.recv(2, &[BIG..BIG + LEN]).ctx("client Receive")?;
    let asleep = Barrier::new(2);
    std::thread::scope(|s| {
        let srv = s.spawn(|| -> Check {
            let r = next(&server.rcq, "server Receive")?;
            if r.status != Status::SUCCESS || r.bytes_transferred as usize != BIG {
                return fail(format!("server Receive: {r:?}"));
            }
            server
                .send(3, &[0..LEN], OpFlags::empty())
                .ctx("server Send")?;
            next(&server.scq, "server Send").map(drop)
        });
        let idle = s.spawn(|| -> Check {
            let mut out = [NdResult::EMPTY; 1];
            if client.rcq.get_results(&mut out) == 1 {
                return fail("a reply before the request");
            }
            let ov = client.rcq.notify(NotifyType::Any).ctx("Notify")?;
            asleep.wait();
            match ov.wait_timeout(Some(WAIT)) {
                Some(r) => r.ctx("client reply Notify")?,
                None => return fail("client reply: no wake-up (a lost wake-up)"),
            }
            next(&client.rcq, "client reply").map(drop)
        });
        // Most likely the idle thread leads by now; either way the Send must complete.
        asleep.wait();
        let sent = client
            .send(4, &[0..BIG], OpFlags::empty())
            .ctx("client Send")
            .and_then(|()| next(&client.scq, "client large Send"));
        let results = [srv.join(), idle.join()];
        let r = sent?;
        if r.status != Status::SUCCESS {
            return fail(format!("client large Send: {r:?}"));
        }
        for j in results {
            j.map_err(|_| netdirect_conformance::Failure("a thread panicked".into()))??;
        }
        Ok(())
    })
}

#[test]
fn output_queued_on_one_thread_wakes_the_leader_for_writability() {
    let mut failures = Vec::new();
    for fam in Family::available() {
        let label = harness::label("tcp", fam, "blocking-threads-output");
        if let Err(e) = harness::with_deadline(&label, move || {
            output_queued_while_another_thread_leads(fam)
        }) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

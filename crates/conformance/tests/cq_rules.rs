//! `IND2CompletionQueue::Notify` and `Resize` over real connections (`docs/ND-RULES.md` §2.5,
//! R-CQ-1, R-CANCEL-1): each Notify type, the race rule, fire-once, ANY over SOLICITED,
//! overrun, resize while messages flow, and Cancel's FIFO order.
//!
//! Both ends live on one adapter in one process, so the test decides exactly when the
//! receiving side's I/O is driven: `Adapter::progress` places what arrived (pushing
//! completions) without reporting any, and `get_results` reports them. That makes the race
//! rule deterministic: an entry can be made to arrive after a short poll and before Notify.

#![allow(clippy::single_range_in_vec_init)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Wake, Waker};

use netdirect::{CompletionQueue, NdResult, NotifyType, OpFlags, Overlapped, Provider, Status};
use netdirect_conformance::check::{
    expect_completed, expect_pending, expect_status, next_results, wait_ok, wait_status, Check,
    Context, Expect, Failure,
};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::connect_pair;
use netdirect_conformance::{ensure, ensure_eq, providers_for, Needs, Side, SideConfig};

const SERVER_QP: u64 = 0xC0_0001;
const CLIENT_QP: u64 = 0xC0_0002;

/// A connected pair on one adapter; the server's receive CQ has `rcq_depth` entries and its
/// queue pair `rq_depth` Receives.
struct Pair {
    server: Side,
    client: Side,
    _l: netdirect::Listener,
}

fn pair(p: &Provider, fam: Family, rcq_depth: u32, rq_depth: u32) -> Check<Pair> {
    let a = p
        .open_adapter_for(SocketAddr::new(fam.ip(), 0))
        .ctx("open adapter")?;
    let mut server = Side::on(
        &a,
        SideConfig {
            qp_context: SERVER_QP,
            ..SideConfig::default()
        },
    )?;
    server.rcq = a
        .create_completion_queue(rcq_depth, 0, 0)
        .ctx("receive CQ")?;
    server.qp = a
        .create_queue_pair(&server.rcq, &server.scq, SERVER_QP, rq_depth, 8, 4, 4, 0)
        .ctx("create QP")?;
    let client = Side::on(
        &a,
        SideConfig {
            qp_context: CLIENT_QP,
            depth: 64,
            ..SideConfig::default()
        },
    )?;
    let l = connect_pair(&server, &client, fam.ip())?;
    Ok(Pair {
        server,
        client,
        _l: l,
    })
}

impl Pair {
    /// The client sends `len` bytes with `flags`; returns once TCP (or the ring) took them.
    fn send(&self, ctx: u64, len: usize, flags: OpFlags) -> Check {
        self.client.send(ctx, &[0..len], flags).ctx("client Send")?;
        let r = next_results(&self.client.scq, 1, "client Send")?;
        Expect::send(Status::SUCCESS, ctx, CLIENT_QP).check(&r[0], "client Send")
    }

    /// Place whatever arrived at the server, pushing completions without reporting them.
    fn drive(&self) {
        self.server.adapter.progress();
    }
}

/// A short poll: nothing queued (the precondition of the race rule).
fn short_poll(cq: &CompletionQueue) -> Check {
    let mut r = [NdResult::EMPTY; 4];
    let n = cq.get_results(&mut r);
    ensure!(n < r.len(), "the poll was not short");
    Ok(())
}

/// SOLICITED fires only for a Send carrying SEND_AND_SOLICIT_EVENT, or an error; ANY
/// issued while it is outstanding upgrades it; all outstanding requests complete together.
fn solicited_and_any(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    for i in 0..4 {
        s.recv(10 + i, &[0..64]).ctx("Receive")?;
    }
    short_poll(rcq)?;
    let sol = rcq.notify(NotifyType::Solicited).ctx("Notify(SOLICITED)")?;
    t.send(1, 8, OpFlags::empty())?;
    let r = next_results(rcq, 1, "plain Receive")?;
    Expect::recv(Status::SUCCESS, 10, SERVER_QP, Some(8)).check(&r[0], "plain Receive")?;
    expect_pending(&sol, "SOLICITED after a plain Send")?;
    t.send(2, 8, OpFlags::SEND_AND_SOLICIT_EVENT)?;
    wait_ok(&sol, "SOLICITED after a solicited Send")?;
    let r = next_results(rcq, 1, "solicited Receive")?;
    Expect::recv(Status::SUCCESS, 11, SERVER_QP, Some(8)).check(&r[0], "solicited Receive")?;
    // ANY over SOLICITED: a plain Send now completes both.
    short_poll(rcq)?;
    let sol = rcq.notify(NotifyType::Solicited).ctx("Notify(SOLICITED)")?;
    let any = rcq.notify(NotifyType::Any).ctx("Notify(ANY)")?;
    expect_pending(&sol, "SOLICITED")?;
    t.send(3, 8, OpFlags::empty())?;
    wait_ok(&any, "ANY after a plain Send")?;
    expect_completed(&sol, Status::SUCCESS, "SOLICITED, upgraded by ANY")?;
    next_results(rcq, 1, "third Receive")?;
    // An error satisfies SOLICITED: Flush completes the last Receive ND_CANCELED.
    short_poll(rcq)?;
    let sol = rcq.notify(NotifyType::Solicited).ctx("Notify(SOLICITED)")?;
    s.qp.flush().ctx("Flush")?;
    wait_ok(&sol, "SOLICITED after an error completion")?;
    let r = next_results(rcq, 1, "flushed Receive")?;
    Expect::recv(Status::CANCELED, 13, SERVER_QP, None).check(&r[0], "flushed Receive")
}

/// ERRORS ignores successes and fires on an error.
fn errors_only(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    s.recv(1, &[0..64]).ctx("Receive")?;
    s.recv(2, &[0..64]).ctx("Receive")?;
    short_poll(rcq)?;
    let err = rcq.notify(NotifyType::Errors).ctx("Notify(ERRORS)")?;
    t.send(1, 8, OpFlags::SEND_AND_SOLICIT_EVENT)?;
    t.drive();
    expect_pending(&err, "ERRORS after a successful (even solicited) Receive")?;
    s.qp.flush().ctx("Flush")?;
    wait_ok(&err, "ERRORS after ND_CANCELED")?;
    let r = next_results(rcq, 2, "both Receives")?;
    Expect::recv(Status::SUCCESS, 1, SERVER_QP, Some(8)).check(&r[0], "Receive")?;
    Expect::recv(Status::CANCELED, 2, SERVER_QP, None).check(&r[1], "flushed Receive")
}

/// The race rule: an entry queued after the last short poll makes the next Notify complete
/// at once (without driving anything); it fires at most once; a full poll does not clear it
/// but a short one does (R-CQ-1, "ndreceiveflushqp").
fn race_rule(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    for i in 0..4 {
        s.recv(i, &[0..64]).ctx("Receive")?;
    }
    short_poll(rcq)?;
    t.send(1, 8, OpFlags::empty())?;
    t.drive();
    let n = rcq
        .notify(NotifyType::Any)
        .ctx("Notify after the entry arrived")?;
    expect_completed(&n, Status::SUCCESS, "Notify for an entry never reported")?;
    let again = rcq.notify(NotifyType::Any).ctx("second Notify")?;
    expect_pending(&again, "the same entry fires only once")?;
    rcq.cancel_overlapped_requests().ctx("cancel")?;
    // A full poll (exactly as many as asked) leaves later entries' triggers alone.
    t.send(2, 8, OpFlags::empty())?;
    t.drive();
    let mut one = [NdResult::EMPTY; 1];
    ensure_eq!(rcq.get_results(&mut one), 1, "first entry");
    t.send(3, 8, OpFlags::empty())?;
    t.drive();
    ensure_eq!(rcq.get_results(&mut one), 1, "second entry (full poll)");
    let n = rcq.notify(NotifyType::Any).ctx("Notify after full polls")?;
    expect_completed(
        &n,
        Status::SUCCESS,
        "entries since the last short poll fire Notify",
    )?;
    // A short poll clears: the next Notify waits for a new entry.
    let r = next_results(rcq, 1, "third entry")?;
    Expect::recv(Status::SUCCESS, 2, SERVER_QP, Some(8)).check(&r[0], "third entry")?;
    short_poll(rcq)?;
    let n = rcq
        .notify(NotifyType::Any)
        .ctx("Notify after a short poll")?;
    expect_pending(&n, "Notify after a short poll")?;
    t.send(4, 8, OpFlags::empty())?;
    wait_ok(&n, "Notify on the next entry")
}

/// An application that arms Notify and then only polls (never waits on the request) still
/// gets its completions: polling drives the I/O even while a Notify is armed. (A provider may
/// leave the I/O to the wait on the first poll after arming, the blocking application's
/// re-poll, but not beyond.) The Notify fires for the entry the polls produced.
fn arm_then_poll(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    s.recv(1, &[0..64]).ctx("Receive")?;
    short_poll(rcq)?;
    let n = rcq.notify(NotifyType::Any).ctx("Notify(ANY)")?;
    expect_pending(&n, "Notify before the Send")?;
    t.send(1, 8, OpFlags::empty())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut one = [NdResult::EMPTY; 1];
    let mut polls = 0u64;
    while rcq.get_results(&mut one) == 0 {
        polls += 1;
        ensure!(
            std::time::Instant::now() < deadline,
            "no completion after {polls} polls with a Notify armed"
        );
        std::hint::spin_loop();
    }
    Expect::recv(Status::SUCCESS, 1, SERVER_QP, Some(8)).check(&one[0], "polled Receive")?;
    expect_completed(&n, Status::SUCCESS, "the Notify the polled entry fired")
}

/// Two threads blocked on one adapter at once, each in `GetOverlappedResult(wait)` on its own
/// CQ's Notify, while a third drives a ping-pong: whichever of them sleeps in the provider's
/// wait and whichever waits behind it both wake for their own completion (a completion one
/// of them makes for the other wakes it; the sleeper hands over when it returns). The waits
/// have no timeout: a lost wake-up hangs the scenario, which the harness reports.
fn two_waiters(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    t.server.recv(1, &[0..64]).ctx("server Receive")?;
    t.client.recv(2, &[0..64]).ctx("client Receive")?;
    short_poll(&t.server.rcq)?;
    short_poll(&t.client.rcq)?;
    let a = t.server.rcq.notify(NotifyType::Any).ctx("server Notify")?;
    let b = t.client.rcq.notify(NotifyType::Any).ctx("client Notify")?;
    let (ra, rb) = std::thread::scope(|sc| -> Check<_> {
        let wa = sc.spawn(|| a.wait());
        let wb = sc.spawn(|| b.wait());
        t.send(1, 8, OpFlags::empty())?;
        t.server
            .send(3, &[0..8], OpFlags::empty())
            .ctx("server Send")?;
        next_results(&t.server.scq, 1, "server Send")?;
        Ok((
            wa.join()
                .map_err(|_| Failure("server's waiter panicked".into()))?,
            wb.join()
                .map_err(|_| Failure("client's waiter panicked".into()))?,
        ))
    })?;
    ensure!(ra.is_ok(), "server's Notify: {ra:?}");
    ensure!(rb.is_ok(), "client's Notify: {rb:?}");
    let r = next_results(&t.server.rcq, 1, "server Receive")?;
    Expect::recv(Status::SUCCESS, 1, SERVER_QP, Some(8)).check(&r[0], "server Receive")?;
    let r = next_results(&t.client.rcq, 1, "client Receive")?;
    Expect::recv(Status::SUCCESS, 2, CLIENT_QP, Some(8)).check(&r[0], "client Receive")
}

/// A connection whose client is alone on its adapter (no listener, no other connection):
/// a blocking waiter there has nothing to hear but that connection's bytes, where the tcp
/// provider sleeps inside `recv` rather than in `poll` (docs/ARCHITECTURE.md, "Who drives
/// the I/O"). Everything else must still end the wait: a Cancel from another thread, round
/// after round, every other one made once the waiter is asleep in the kernel and the others
/// at varied moments around its sleep; and the peer's answer to a Send another thread posts
/// on the same queue pair meanwhile. The waits have no timeout. A lost wake-up would hang
/// them, or (tcp) leave each to the provider's one-second backstop, which the rounds
/// together would take far beyond the harness's deadline.
fn lone_connection(p: &Provider, fam: Family) -> Check {
    // Each side on an adapter of its own.
    let side = |qp_context| -> Check<Side> {
        let a = p
            .open_adapter_for(SocketAddr::new(fam.ip(), 0))
            .ctx("open adapter")?;
        Side::on(
            &a,
            SideConfig {
                qp_context,
                ..SideConfig::default()
            },
        )
    };
    let (server, client) = (side(SERVER_QP)?, side(CLIENT_QP)?);
    let _l = connect_pair(&server, &client, fam.ip())?;
    client.recv(1, &[0..64]).ctx("client Receive")?;
    for round in 0..200u32 {
        short_poll(&client.rcq)?;
        let n = client.rcq.notify(NotifyType::Any).ctx("Notify")?;
        let tid = AtomicU32::new(0);
        let r = std::thread::scope(|sc| -> Check<_> {
            let w = sc.spawn(|| {
                tid.store(this_tid(), Ordering::SeqCst);
                n.wait()
            });
            if round % 2 == 0 {
                until_asleep(&tid, &w);
            } else {
                for _ in 0..(round % 8) * 2_000 {
                    std::hint::spin_loop();
                }
            }
            client.rcq.cancel_overlapped_requests().ctx("cancel")?;
            w.join()
                .map_err(|_| Failure(format!("round {round}: the waiter panicked")))
        })?;
        expect_status(r, Status::CANCELED, &format!("round {round}: the wait"))?;
    }
    // The Receive is still posted; the client's wait ends on the server's answer to a Send
    // posted (by this thread) while it sleeps.
    server.recv(2, &[0..64]).ctx("server Receive")?;
    short_poll(&client.rcq)?;
    let n = client.rcq.notify(NotifyType::Any).ctx("Notify")?;
    let r = std::thread::scope(|sc| -> Check<_> {
        let w = sc.spawn(|| n.wait());
        client
            .send(3, &[0..8], OpFlags::empty())
            .ctx("client Send")?;
        next_results(&server.rcq, 1, "server Receive")?;
        server
            .send(4, &[0..16], OpFlags::empty())
            .ctx("server Send")?;
        w.join().map_err(|_| Failure("the waiter panicked".into()))
    })?;
    ensure!(r.is_ok(), "the wait for the answer: {r:?}");
    let r = next_results(&client.rcq, 1, "client Receive")?;
    Expect::recv(Status::SUCCESS, 1, CLIENT_QP, Some(16)).check(&r[0], "client Receive")?;
    let r = next_results(&client.scq, 1, "client Send")?;
    Expect::send(Status::SUCCESS, 3, CLIENT_QP).check(&r[0], "client Send")
}

/// The calling thread's kernel id.
fn this_tid() -> u32 {
    rustix::thread::gettid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs()
}

/// Return once the thread `tid` names (set by the thread itself) sleeps in a system call
/// other than a futex (a lock on its way), by `/proc`, or once `w` has finished.
fn until_asleep<T>(tid: &AtomicU32, w: &std::thread::ScopedJoinHandle<'_, T>) {
    #[cfg(target_arch = "x86_64")]
    const FUTEX: &str = "202";
    #[cfg(not(target_arch = "x86_64"))]
    const FUTEX: &str = "98";
    while !w.is_finished() {
        let t = tid.load(Ordering::SeqCst);
        if t != 0 {
            let dir = format!("/proc/self/task/{t}");
            let stat = std::fs::read_to_string(format!("{dir}/stat")).unwrap_or_default();
            // The state follows the parenthesized command name.
            let sleeping = stat.rsplit(") ").next().is_some_and(|r| r.starts_with('S'));
            let call = std::fs::read_to_string(format!("{dir}/syscall")).unwrap_or_default();
            if sleeping && call.split(' ').next() != Some(FUTEX) {
                return;
            }
        }
        std::thread::yield_now();
    }
}

/// Overrun: more completions than the depth make the CQ unusable — pending and later
/// Notify give ND_BUFFER_OVERFLOW — but every completion is still reported. Resize below the
/// queued count is refused and changes nothing.
fn overrun(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 2, 4)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    for i in 0..3 {
        s.recv(i, &[0..64]).ctx("Receive")?;
    }
    t.send(1, 8, OpFlags::empty())?;
    t.send(2, 8, OpFlags::empty())?;
    t.drive();
    expect_status(
        rcq.resize(1),
        Status::BUFFER_OVERFLOW,
        "Resize below 2 queued",
    )?;
    let max = s.info.max_completion_queue_depth;
    for depth in [0, max + 1, u32::MAX] {
        expect_status(
            rcq.resize(depth),
            Status::INVALID_PARAMETER,
            &format!("Resize to {depth} (MaxCompletionQueueDepth {max})"),
        )?;
    }
    let mut one = [NdResult::EMPTY; 1];
    ensure_eq!(rcq.get_results(&mut one), 1, "one of the two");
    // One queued, depth 2: a full poll keeps the trigger of the second; arm ERRORS, which it
    // does not satisfy, so this Notify is pending when the overrun happens.
    let pending = rcq.notify(NotifyType::Errors).ctx("Notify(ERRORS)")?;
    expect_pending(&pending, "ERRORS with successes queued")?;
    s.recv(3, &[0..64]).ctx("Receive")?;
    t.send(3, 8, OpFlags::empty())?;
    t.send(4, 8, OpFlags::empty())?;
    wait_status(
        &pending,
        Status::BUFFER_OVERFLOW,
        "pending Notify at the overrun",
    )?;
    let later = rcq
        .notify(NotifyType::Any)
        .ctx("Notify after the overrun")?;
    expect_completed(&later, Status::BUFFER_OVERFLOW, "Notify after the overrun")?;
    let mut all = [NdResult::EMPTY; 8];
    let n = rcq.get_results(&mut all);
    ensure_eq!(n, 3, "no completion is lost in an overrun");
    for (r, ctx) in all[..n].iter().zip(1..) {
        Expect::recv(Status::SUCCESS, ctx, SERVER_QP, Some(8)).check(r, "Receive")?;
    }
    Ok(())
}

/// Resize up and down while messages flow: no completion lost or reordered, none overruns.
fn resize_under_traffic(p: &Provider, fam: Family) -> Check {
    const RQ: u32 = 8;
    const MSGS: u64 = 300;
    let t = pair(p, fam, RQ, RQ)?;
    let (s, rcq) = (&t.server, &t.server.rcq);
    for i in 0..u64::from(RQ) {
        s.recv(i, &[0..64]).ctx("Receive")?;
    }
    let mut posted = u64::from(RQ);
    let (mut sent, mut done, mut got) = (0u64, 0u64, 0u64);
    let mut depth_up = true;
    let mut refusals = 0;
    let mut out = [NdResult::EMPTY; 3];
    while got < MSGS {
        // Keep up to 16 Sends in flight from the client.
        while sent < MSGS && sent - done < 16 {
            t.client
                .send(sent, &[0..8], OpFlags::empty())
                .ctx("client Send")?;
            sent += 1;
        }
        done += t.client.scq.get_results(&mut [NdResult::EMPTY; 16]) as u64;
        // Take at most 3 at a time so entries stay queued across resizes.
        let n = rcq.get_results(&mut out);
        for r in &out[..n] {
            Expect::recv(Status::SUCCESS, got, SERVER_QP, Some(8)).check(r, "Receive in order")?;
            got += 1;
            if posted < MSGS {
                s.recv(posted, &[0..64]).ctx("repost")?;
                posted += 1;
            }
        }
        // Never below the Receives outstanding (RQ): a smaller CQ could overrun legitimately.
        let depth = if depth_up { 64 } else { RQ };
        match rcq.resize(depth) {
            Ok(()) => depth_up = !depth_up,
            Err(e) if e.status() == Status::BUFFER_OVERFLOW => refusals += 1,
            Err(e) => return Err(e).ctx("Resize"),
        }
        if n == 0 {
            let nt = rcq.notify(NotifyType::Any).ctx("Notify")?;
            // Some completion is due (Sends are in flight): this returns, or the CQ overran.
            wait_ok(&nt, "Notify while resizing")?;
        }
    }
    ensure!(
        refusals == 0,
        "Resize to >= the outstanding Receives was refused {refusals} times"
    );
    while done < MSGS {
        done += next_results(&t.client.scq, 1, "remaining Sends")?.len() as u64;
    }
    Ok(())
}

/// Records the order in which wakers fire.
struct Recorder {
    id: usize,
    log: Arc<Mutex<Vec<usize>>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.log.lock().expect("log").push(self.id);
    }
}

/// Cancel completes every Notify ND_CANCELED before it returns, in issue order within the
/// CQ; a later Cancel on another CQ comes after (R-CANCEL-1, ndcq).
fn cancel_order(p: &Provider, fam: Family) -> Check {
    let t = pair(p, fam, 16, 8)?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let arm = |cq: &CompletionQueue, ty: NotifyType, id: usize| -> Check<Overlapped> {
        let mut ov = cq.notify(ty).ctx("Notify")?;
        let w = Waker::from(Arc::new(Recorder {
            id,
            log: log.clone(),
        }));
        let mut cx = TaskContext::from_waker(&w);
        ensure!(
            std::pin::Pin::new(&mut ov).poll(&mut cx).is_pending(),
            "Notify {id} completed early"
        );
        Ok(ov)
    };
    short_poll(&t.server.rcq)?;
    short_poll(&t.server.scq)?;
    let a = [
        arm(&t.server.rcq, NotifyType::Errors, 0)?,
        arm(&t.server.rcq, NotifyType::Any, 1)?,
        arm(&t.server.rcq, NotifyType::Solicited, 2)?,
    ];
    let b = arm(&t.server.scq, NotifyType::Any, 3)?;
    t.server
        .rcq
        .cancel_overlapped_requests()
        .ctx("cancel rcq")?;
    for ov in &a {
        expect_completed(
            ov,
            Status::CANCELED,
            "Notify after its CQ's Cancel returned",
        )?;
    }
    t.server
        .scq
        .cancel_overlapped_requests()
        .ctx("cancel scq")?;
    expect_completed(&b, Status::CANCELED, "Notify on the other CQ")?;
    ensure_eq!(
        *log.lock().expect("log"),
        vec![0, 1, 2, 3],
        "cancellations in issue order, CQ by CQ"
    );
    Ok(())
}

fn each(name: &str, f: fn(&Provider, Family) -> Check) {
    let mut failures = Vec::new();
    for p in providers_for(Needs::TwoSided) {
        for fam in Family::available() {
            let label = harness::label(p, fam, name);
            let r = harness::with_deadline(&label, move || {
                let provider = Provider::select(p).ctx("open provider")?;
                f(&provider, fam)
            });
            match r {
                Ok(()) => eprintln!("{label} passed"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn notify_solicited_and_any_over_solicited() {
    each("cq-solicited", solicited_and_any);
}

#[test]
fn notify_errors() {
    each("cq-errors", errors_only);
}

#[test]
fn notify_race_rule_and_fire_once() {
    each("cq-race", race_rule);
}

#[test]
fn arming_then_only_polling_still_progresses() {
    each("cq-arm-then-poll", arm_then_poll);
}

#[test]
fn two_threads_blocked_on_one_adapter_both_wake() {
    each("cq-two-waiters", two_waiters);
}

#[test]
fn a_lone_connections_waiter_wakes_for_cancel_and_answers() {
    each("cq-lone-connection", lone_connection);
}

#[test]
fn overrun_keeps_every_completion() {
    each("cq-overrun", overrun);
}

#[test]
fn resize_while_messages_flow() {
    each("cq-resize", resize_under_traffic);
}

#[test]
fn cancel_completes_notify_in_fifo_order() {
    each("cq-cancel-order", cancel_order);
}

//! A thread asleep in a wait: connections and listeners created meanwhile are watched, and
//! canceled requests wake it.

use super::*;

/// Wait until thread `tid` of this process sleeps in a system call (its state in
/// `/proc/self/task/<tid>/stat` is `S`): a thread about to block in the adapter's wait is there
/// once the kernel has put it to sleep.
fn until_asleep(tid: i32) -> Check {
    let path = format!("/proc/self/task/{tid}/stat");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let stat = std::fs::read_to_string(&path).unwrap_or_default();
        // "tid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        if state == Some(Some('S')) {
            return Ok(());
        }
        ensure!(std::time::Instant::now() < end, "thread {tid} never slept");
        std::thread::yield_now();
    }
}

/// Another thread that waits for `ov` (which never completes on its own), once it sleeps.
fn sleep_on(ov: Overlapped) -> Check<std::thread::JoinHandle<netdirect::Result<()>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn(move || {
        let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        ov.wait()
    });
    let tid = rx
        .recv()
        .map_err(|_| netdirect_conformance::check::Failure("no tid".into()))?;
    until_asleep(tid)?;
    Ok(sleeper)
}

/// The [`sleep_on`] thread's request ended ND_CANCELED.
fn canceled(sleeper: std::thread::JoinHandle<netdirect::Result<()>>) -> Check {
    let woke = sleeper.join();
    ensure!(
        matches!(woke, Ok(Err(e)) if e.status() == Status::CANCELED),
        "the sleeping thread's request: {woke:?}"
    );
    Ok(())
}

/// One thread of a server's adapter blocks on GetConnectionRequest (it leads the adapter's
/// wait, asleep on the connections it knows, with no time limit); another accepts a request
/// and waits for the Accept, also with no time limit. The connection the Accept attaches is
/// watched at once, so the peer's RTR completes the Accept; were it not, both threads would
/// sleep until the scenario's deadline fails it as hung.
#[test]
fn a_connection_attached_while_another_thread_sleeps_is_watched() {
    each("accept-while-another-leads", |p, ip| {
        let server = open(p, ip)?;
        let client = open(p, ip)?;
        let Requested {
            listener: l,
            server: s,
            client: c,
            cov,
            ..
        } = requested_between(&server, &client, ip)?;
        // The other thread: asleep in the server adapter's wait, on a request that never comes.
        let idle = server.create_connector().ctx("connector")?;
        let never = l
            .get_connection_request(&idle)
            .ctx("second GetConnectionRequest")?;
        let sleeper = sleep_on(never)?;
        // Accept (its progress finds no RTR yet), then the client's RTR, then wait.
        let aov = s.connector.accept(&s.qp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&cov, "Connect")?;
        wait_ok(
            &c.connector.complete_connect().ctx("CompleteConnect")?,
            "CompleteConnect",
        )?;
        aov.wait().ctx("Accept")?;
        l.cancel_overlapped_requests().ctx("cancel")?;
        canceled(sleeper)
    });
}

/// One thread of a server's adapter sleeps in the adapter's wait (a Notify on a queue that
/// never completes) before the adapter has any listener: it leads the wait, asleep on what
/// the adapter had then. This thread then listens and blocks on GetConnectionRequest, with no
/// time limit, as a follower, and only then does a client connect. The new listener must
/// reach the leader's sleep, or the connection wakes nobody and both threads sleep until the
/// scenario's deadline fails it as hung.
#[test]
fn a_listener_created_while_another_thread_sleeps_is_watched() {
    each("listen-while-another-leads", |p, ip| {
        let server = open(p, ip)?;
        // Everything but the listener exists before the other thread sleeps (a registration
        // completing would wake it, which would hide the fault).
        let s = Side::on(&server, SideConfig::default())?;
        let idle_cq = server.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let never = idle_cq.notify(NotifyType::Any).ctx("Notify")?;
        let sleeper = sleep_on(never)?;
        let (l, laddr) = netdirect_conformance::side::listen(&server, SocketAddr::new(ip, 0), 4)?;
        let gcr = l
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        // The client connects once this thread sleeps in its wait for the request.
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        let provider = p.clone();
        let client = std::thread::spawn(move || -> Check {
            until_asleep(me)?;
            let adapter = open(&provider, ip)?;
            let c = Side::on(&adapter, SideConfig::default())?;
            let cov = c.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
            wait_ok(&cov, "Connect")?;
            wait_ok(
                &c.connector.complete_connect().ctx("CompleteConnect")?,
                "CompleteConnect",
            )
        });
        gcr.wait().ctx("GetConnectionRequest")?;
        let aov = s.connector.accept(&s.qp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, "Accept")?;
        client
            .join()
            .map_err(|_| netdirect_conformance::check::Failure("client panicked".into()))??;
        idle_cq.cancel_overlapped_requests().ctx("cancel")?;
        canceled(sleeper)
    });
}

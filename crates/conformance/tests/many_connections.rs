//! Many connections on one adapter (docs/BENCHMARKS.md, connection scale): 300 connected
//! queue pairs in one process, both ends on one adapter and one CQ each, every connection
//! carrying one 8-byte message checked at its own queue pair, with blocking waits throughout
//! (over 64 data sockets a `tcp` adapter watches them through its epoll set, not `poll(2)`).
//! Each connection costs at most one descriptor per end: `nd connrate` shows it at 10,000
//! connections under a 20,000-descriptor limit.
//!
//! One test in its own binary, so that no other test opens descriptors meanwhile (about 2 s
//! per provider and family in a debug build).

use std::net::{IpAddr, SocketAddr};

use netdirect::{Buffer, Connector, MrFlags, OpFlags, Provider, QueuePair};
use netdirect_conformance::check::{next_results, wait_ok, Check, Context};
use netdirect_conformance::side::listen;
use netdirect_conformance::{ensure, ensure_eq, harness, Needs};

const CONNECTIONS: usize = 300;

fn descriptors() -> Check<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")
        .ctx("list /proc/self/fd")?
        .count())
}

fn many(p: &Provider, ip: IpAddr) -> Check {
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let (ccq, scq) = (
        a.create_completion_queue(64, 0, 0).ctx("client CQ")?,
        a.create_completion_queue(64, 0, 0).ctx("server CQ")?,
    );
    let (cbuf, sbuf) = (
        Buffer::new(8 * CONNECTIONS).ctx("buffer")?,
        Buffer::new(8 * CONNECTIONS).ctx("buffer")?,
    );
    let (cmr, smr) = (
        a.create_memory_region().ctx("MR")?,
        a.create_memory_region().ctx("MR")?,
    );
    wait_ok(
        &cmr.register_buffer(&cbuf, MrFlags::ALLOW_LOCAL_WRITE)
            .ctx("register")?,
        "register",
    )?;
    wait_ok(
        &smr.register_buffer(&sbuf, MrFlags::ALLOW_LOCAL_WRITE)
            .ctx("register")?,
        "register",
    )?;
    let (l, laddr) = listen(&a, SocketAddr::new(ip, 0), 0)?;
    let before = descriptors()?;
    let mut held: Vec<(QueuePair, Connector, QueuePair, Connector)> = Vec::new();
    for i in 0..CONNECTIONS {
        let what = |s: &str| format!("connection {i}: {s}");
        let cqp = a
            .create_queue_pair(&ccq, &ccq, i as u64, 1, 1, 1, 1, 0)
            .ctx("client QP")?;
        let sqp = a
            .create_queue_pair(&scq, &scq, i as u64, 1, 1, 1, 1, 0)
            .ctx("server QP")?;
        // SAFETY: slot `i` belongs to this Receive alone; read after its completion.
        unsafe {
            sqp.receive(
                i as u64,
                &[sbuf.sge(8 * i..8 * i + 8, smr.get_local_token())],
            )
            .ctx("Receive")?;
        }
        let (c, s) = (
            a.create_connector().ctx("connector")?,
            a.create_connector().ctx("connector")?,
        );
        let gcr = l.get_connection_request(&s).ctx("GetConnectionRequest")?;
        let cov = c.connect(&cqp, laddr, 0, 0, &[]).ctx(&what("Connect"))?;
        wait_ok(&gcr, &what("GetConnectionRequest"))?;
        let aov = s.accept(&sqp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&cov, &what("Connect"))?;
        wait_ok(
            &c.complete_connect().ctx("CompleteConnect")?,
            &what("CompleteConnect"),
        )?;
        wait_ok(&aov, &what("Accept"))?;
        held.push((cqp, c, sqp, s));
    }
    let grown = descriptors()?.saturating_sub(before);
    ensure!(
        grown <= 2 * CONNECTIONS + 8,
        "{CONNECTIONS} connections (both ends in this process) took {grown} descriptors: more \
         than one per connection per end"
    );
    for (i, (cqp, ..)) in held.iter().enumerate() {
        // SAFETY: slot `i` is written before its Send and not again; the buffer is registered
        // until the Sends complete below.
        unsafe {
            cbuf.as_mut_slice()[8 * i..8 * i + 8].copy_from_slice(&(i as u64).to_le_bytes());
            cqp.send(
                0,
                &[cbuf.sge(8 * i..8 * i + 8, cmr.get_local_token())],
                OpFlags::empty(),
            )
            .ctx("Send")?;
        }
        next_results(&ccq, 1, "the Send")?;
    }
    let mut arrived = vec![false; CONNECTIONS];
    for _ in 0..CONNECTIONS {
        let r = next_results(&scq, 1, "a Receive")?;
        ensure_eq!(
            r[0].status,
            netdirect::Status::SUCCESS,
            "a Receive's status"
        );
        let i = r[0].request_context as usize;
        ensure!(
            i < CONNECTIONS && !arrived[i],
            "Receive {i} completed twice"
        );
        arrived[i] = true;
        // SAFETY: Receive `i` completed; nothing writes its slot any more.
        let got = unsafe { sbuf.as_slice()[8 * i..8 * i + 8].to_vec() };
        ensure_eq!(
            got,
            (i as u64).to_le_bytes().to_vec(),
            "connection {i}'s message"
        );
        ensure_eq!(r[0].qp_context, i as u64, "the Receive's queue pair");
    }
    Ok(())
}

#[test]
fn many_connections_on_one_adapter() {
    harness::each_provider(Needs::TwoSided, "many-connections", |p, fam| {
        many(p, fam.ip())
    });
}

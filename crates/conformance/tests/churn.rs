//! Connection churn never runs out of ports (R-CONN-1): a client that connects, exchanges a
//! message and disconnects as fast as it can, for two back-to-back runs of 20 s, never has a
//! Bind to port 0 or a Connect refused. Over TCP the end that closes first keeps its port in
//! TIME_WAIT for a minute (RFC 9293 §3.6.1), here the client's: at a few hundred connections
//! a second, the 16,384 ports of the range (49152–65535) would all be held by TIME_WAITs of
//! the connections just closed, and a provider that gives up on such ports would fail
//! `ND_TOO_MANY_ADDRESSES` in the second run.
//!
//! `tcp` runs both 20 s runs (about 40 s); `shm` keeps its connectors' ports in UDP's space,
//! where a closed socket leaves nothing behind, so a short run of each shows only that
//! nothing else breaks (about 6 s).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use netdirect::{Adapter, Buffer, CompletionQueue, MemoryRegion, MrFlags, OpFlags, Provider};
use netdirect_conformance::check::{next_results, wait_ok, Check, Context};
use netdirect_conformance::ensure_eq;
use netdirect_conformance::harness::with_deadline_within;
use netdirect_conformance::side::listen;

/// One end's resources that outlive the connections: its CQ and registered buffer.
struct End {
    cq: CompletionQueue,
    mr: MemoryRegion,
    buf: Buffer,
}

impl End {
    fn new(a: &Adapter) -> Check<Self> {
        let cq = a.create_completion_queue(16, 0, 0).ctx("create CQ")?;
        let buf = Buffer::new(4096).ctx("buffer")?;
        let mr = a.create_memory_region().ctx("create MR")?;
        wait_ok(
            &mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
                .ctx("register")?,
            "register",
        )?;
        Ok(Self { cq, mr, buf })
    }
}

/// Connections made, one after another, for `run`: each Binds the client's connector to port
/// 0, connects, sends 8 bytes the server checks, and the client disconnects first.
fn churn(a: &Adapter, ip: IpAddr, run: Duration) -> Check<u64> {
    let (listener, laddr) = listen(a, SocketAddr::new(ip, 0), 16)?;
    let (client, server) = (End::new(a)?, End::new(a)?);
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < run {
        let what = |s: &str| format!("connection {n}: {s}");
        let cqp = a
            .create_queue_pair(&client.cq, &client.cq, 1, 2, 2, 1, 1, 0)
            .ctx("client QP")?;
        let sqp = a
            .create_queue_pair(&server.cq, &server.cq, 2, 2, 2, 1, 1, 0)
            .ctx("server QP")?;
        let (c, s) = (
            a.create_connector().ctx("client connector")?,
            a.create_connector().ctx("server connector")?,
        );
        let gcr = listener
            .get_connection_request(&s)
            .ctx("GetConnectionRequest")?;
        c.bind(SocketAddr::new(ip, 0))
            .ctx(&what("Bind to port 0"))?;
        let cov = c.connect(&cqp, laddr, 0, 0, &[]).ctx(&what("Connect"))?;
        wait_ok(&gcr, &what("GetConnectionRequest"))?;
        let aov = s.accept(&sqp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&cov, &what("Connect"))?;
        wait_ok(
            &c.complete_connect().ctx("CompleteConnect")?,
            "CompleteConnect",
        )?;
        wait_ok(&aov, &what("Accept"))?;
        let rtoken = server.mr.get_local_token();
        let stoken = client.mr.get_local_token();
        let stamp = n.to_le_bytes();
        // SAFETY: the buffers outlive the requests (their completions are taken below), and
        // the client's bytes are written before the Send is posted.
        unsafe {
            sqp.receive(1, &[server.buf.sge(0..64, rtoken)])
                .ctx("Receive")?;
            client.buf.as_mut_slice()[..8].copy_from_slice(&stamp);
            cqp.send(2, &[client.buf.sge(0..8, stoken)], OpFlags::empty())
                .ctx("Send")?;
        }
        let got = next_results(&server.cq, 1, &what("the Receive"))?;
        ensure_eq!(
            got[0].status,
            netdirect::Status::SUCCESS,
            "the Receive's status"
        );
        // SAFETY: the Receive completed: nothing writes the buffer now.
        let arrived = unsafe { server.buf.as_slice()[..8].to_vec() };
        ensure_eq!(arrived, stamp.to_vec(), "the message");
        next_results(&client.cq, 1, &what("the Send"))?;
        wait_ok(
            &c.disconnect().ctx("Disconnect")?,
            &what("client Disconnect"),
        )?;
        wait_ok(
            &s.disconnect().ctx("Disconnect")?,
            &what("server Disconnect"),
        )?;
        n += 1;
    }
    Ok(n)
}

fn two_runs(name: &'static str, each: Duration) {
    let r = with_deadline_within(name, each * 2 + Duration::from_secs(60), move || {
        let p = Provider::select(name).ctx("open provider")?;
        let ip: IpAddr = Ipv4Addr::LOCALHOST.into();
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        for run in 1..=2 {
            let n = churn(&a, ip, each)
                .map_err(|e| netdirect_conformance::Failure(format!("run {run}: {}", e.0)))?;
            eprintln!(
                "[provider={name}] churn run {run}: {n} connections in {each:?} ({:.0}/s)",
                n as f64 / each.as_secs_f64()
            );
        }
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn tcp_churn_never_runs_out_of_ports() {
    two_runs("tcp", Duration::from_secs(20));
}

#[test]
fn shm_churn_never_runs_out_of_ports() {
    two_runs("shm", Duration::from_secs(3));
}

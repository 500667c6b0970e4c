//! The Terminate a target sends for a protection violation reaches the initiator even when
//! the target releases the connection right after, with the rest of the refused Write still
//! arriving: the initiator's Write completes `ND_ACCESS_VIOLATION` (D6), not `ND_CANCELED`.
//!
//! The initiator Writes 8 MiB (more than the socket buffers hold, so it is still sending)
//! into a region the target registered for remote Read only. The target's first look at the
//! Write refuses it, sends one Terminate and ends the connection; the target then releases
//! its queue pair, connector and adapter at once. On `tcp` the unread rest of the Write makes
//! the target's kernel answer with a reset, which the initiator's next `send` meets before
//! it has read the Terminate that came first; it must read it still
//! (`TcpQp::lost_connection`). Each end runs on its own thread and adapter, as two processes
//! would, and the case runs several times, since the loss depended on timing.

// Requests are lists of byte ranges (one per SGE).
#![allow(clippy::single_range_in_vec_init)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::mpsc;

use netdirect::{MrFlags, OpFlags, Provider, Status};
use netdirect_conformance::check::{
    expect_results, fail, next_results, wait_ok, Check, Context, Expect,
};
use netdirect_conformance::side::listen;
use netdirect_conformance::{Failure, Side, SideConfig};

const LEN: usize = 8 << 20;
const ROUNDS: usize = 8;
const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The target: accept, expose a read-only region, and release everything as soon as the
/// connection ends.
fn target(p: &Provider, to: mpsc::Sender<(SocketAddr, u64, u32)>) -> Check {
    let a = p.open_adapter_for(SocketAddr::new(LOCAL, 0)).ctx("open")?;
    let side = Side::on(
        &a,
        SideConfig {
            buf_len: LEN,
            ..SideConfig::default()
        },
    )?;
    let ro = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
    let (listener, at) = listen(&a, SocketAddr::new(LOCAL, 0), 1)?;
    let gcr = listener
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest")?;
    let _ = to.send((at, side.addr(0), ro.get_remote_token()));
    wait_ok(&gcr, "GetConnectionRequest")?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    // Completes at once if the Write already ended the connection.
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    // The refused Write ends the connection; released at once (drop order: the queue pair
    // and connector with `side`, then the adapter).
    wait_ok(&nd, "NotifyDisconnect after the refused Write")?;
    drop(side);
    drop(ro);
    Ok(())
}

/// The initiator: Write into the read-only region; the Write must be refused as such.
fn initiator(p: &Provider, from: mpsc::Receiver<(SocketAddr, u64, u32)>) -> Check {
    let a = p.open_adapter_for(SocketAddr::new(LOCAL, 0)).ctx("open")?;
    let side = Side::on(
        &a,
        SideConfig {
            buf_len: LEN,
            ..SideConfig::default()
        },
    )?;
    let (at, addr, token) = from
        .recv()
        .map_err(|_| Failure("the target gave up".into()))?;
    let cov = side.connect(SocketAddr::new(LOCAL, 0), at, 0, 0, &[])?;
    wait_ok(&cov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    side.rdma_write(1, &[0..LEN], addr, token, OpFlags::empty())
        .ctx("post the Write")?;
    let r = next_results(&side.scq, 1, "the refused Write")?;
    expect_results(
        &r,
        &[Expect::initiator(
            netdirect::RequestType::Write,
            Status::ACCESS_VIOLATION,
            1,
            side.qp_context,
        )],
        "an 8 MiB Write into a read-only region whose target then let go (D6)",
    )
}

#[test]
fn the_terminate_reaches_the_initiator_when_the_target_lets_go() {
    for name in ["tcp", "shm"] {
        let p = Provider::open(name).expect("provider");
        for round in 0..ROUNDS {
            let (to, from) = mpsc::channel();
            let (rt, ri) = std::thread::scope(|s| {
                let t = s.spawn(|| target(&p, to));
                let i = s.spawn(|| initiator(&p, from));
                (t.join().expect("target"), i.join().expect("initiator"))
            });
            let r = rt
                .and(ri)
                .or_else(|Failure(m)| fail(format!("{name}, round {round}: {m}")));
            if let Err(Failure(m)) = r {
                panic!("{m}");
            }
        }
    }
}

//! RDMA Writes without the completion probe (`ND_TCP_WRITE_PROBE=0`, which is also how the
//! `tcp` provider behaves against a peer that does not echo the probe flag, such as siw): a
//! Write completes once TCP took it (RFC 5040 §5.5 rule 9). Data still arrives intact and a
//! Read after a Write still returns it; a refused Write cannot be reported any more (it has
//! completed), but the connection still ends and the target's memory is still untouched.
//!
//! Its own test binary: the variable is read when an adapter opens, and set here before any.

#![allow(clippy::single_range_in_vec_init)]

use netdirect::{MrFlags, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{
    expect_bytes, fast_pattern, next_results, wait_ok, Check, Context, Expect,
};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::default_pair;
use netdirect_conformance::{ensure_eq, Needs};

fn done(ty: RequestType, status: Status, ctx: u64, qp: u64) -> Expect {
    Expect {
        status,
        request_type: ty,
        request_context: ctx,
        qp_context: qp,
        bytes: None,
    }
}

fn run(p: &Provider, fam: Family) -> Check {
    let ip = fam.ip();
    let (_a, server, client, _l) = default_pair(p, ip)?;
    let target = server.register_again(MrFlags::ALLOW_REMOTE_WRITE)?;
    let token = target.get_remote_token();
    server.recv(1, &[0..64]).ctx("post Receive")?;
    let data = fast_pattern(0x0FF, 4096);
    // SAFETY: nothing is posted on these ranges.
    unsafe { client.write(&[8192..8192 + 4096], &data) };
    client
        .rdma_write(
            2,
            &[8192..8192 + 4096],
            server.addr(16384),
            token,
            OpFlags::empty(),
        )
        .ctx("Write")?;
    client
        .send(3, &[0..8], OpFlags::empty())
        .ctx("Send after it")?;
    let r = next_results(&client.scq, 2, "Write, Send")?;
    done(RequestType::Write, Status::SUCCESS, 2, client.qp_context).check(&r[0], "Write")?;
    Expect::send(Status::SUCCESS, 3, client.qp_context).check(&r[1], "Send")?;
    // The Send's arrival proves the Write before it placed (RFC 5040 §5.5 rule 10).
    let r = next_results(&server.rcq, 1, "the server's first Receive")?;
    Expect::recv(Status::SUCCESS, 1, server.qp_context, Some(8)).check(&r[0], "Receive")?;
    // SAFETY: the Write was placed (above) and nothing else writes there.
    let got = unsafe { server.read(&[16384..16384 + 4096], 4096) };
    expect_bytes(&got, &data, "Write without the probe")?;
    // A refused Write: it completes when TCP took it; the Terminate then ends the connection.
    server.recv(4, &[0..64]).ctx("post Receive")?;
    let nd = client
        .connector
        .notify_disconnect()
        .ctx("NotifyDisconnect")?;
    client
        .rdma_write(
            5,
            &[8192..8192 + 16],
            server.addr(0) - 8,
            token,
            OpFlags::empty(),
        )
        .ctx("Write outside the region")?;
    let r = next_results(&client.scq, 1, "refused Write")?;
    ensure_eq!(
        r[0].status,
        Status::SUCCESS,
        "without the probe a Write completes when TCP took it"
    );
    let r = next_results(&server.rcq, 1, "the server's Receive")?;
    Expect::recv(Status::CANCELED, 4, server.qp_context, None)
        .check(&r[0], "the target's Receive after the violation")?;
    wait_ok(&nd, "NotifyDisconnect after the Terminate")?;
    // SAFETY: the connection is gone.
    let untouched = unsafe { server.read(&[0..8], 8) };
    expect_bytes(&untouched, &[0; 8], "the target's memory")?;
    client
        .send(6, &[0..8], OpFlags::empty())
        .ctx("Send after the end")?;
    let r = next_results(&client.scq, 1, "Send after the end")?;
    Expect::send(Status::CANCELED, 6, client.qp_context).check(&r[0], "Send after the end")
}

#[test]
fn writes_complete_locally_without_the_probe() {
    std::env::set_var("ND_TCP_WRITE_PROBE", "0");
    harness::each_provider(Needs::IwarpWire, "write-probe-off", run);
}

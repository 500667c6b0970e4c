//! Queue pair rules before and after connecting: posts on an unconnected queue pair, the
//! connected limits, Deregister against queued Receives, and a refused Receive.

use super::*;

#[test]
fn unconnected_queue_pair() {
    each("unconnected-qp", |p, ip| {
        let a = open(p, ip)?;
        let max_sge = a.query().max_receive_sge;
        let side = Side::on(
            &a,
            SideConfig {
                depth: 2,
                sge: max_sge,
                ..SideConfig::default()
            },
        )?;
        // §2.9 Send: not connected.
        expect_status(
            side.send(1, &[0..8], OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "Send on an unconnected QP",
        )?;
        expect_status(
            side.send(1, &[], OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "zero-byte Send on an unconnected QP",
        )?;
        // Too many SGEs: more than the QP was created with, even at the adapter maximum.
        let many: Vec<_> = (0..=max_sge as usize).map(|i| i * 8..i * 8 + 8).collect();
        expect_status(
            side.recv(9, &many),
            Status::DATA_OVERRUN,
            "Receive with MaxReceiveSge + 1 SGEs",
        )?;
        // R-QP-5: Receives work before any connection; the queue holds `depth` of them.
        side.recv(1, &[0..64]).ctx("first Receive")?;
        side.recv(2, &[64..128]).ctx("second Receive")?;
        expect_status(
            side.recv(3, &[128..192]),
            Status::NO_MORE_ENTRIES,
            "Receive beyond the receive queue depth",
        )?;
        // ndreceiveflushqp: Flush, then Notify(ANY) completes on the unreported CQEs, and the
        // CQ yields exactly 2 CQEs, both ND_CANCELED.
        side.qp.flush().ctx("Flush")?;
        let n = side.rcq.notify(NotifyType::Any).ctx("Notify")?;
        wait_ok(&n, "Notify(ANY) after Flush")?;
        let r = next_results(&side.rcq, 2, "flushed Receives")?;
        expect_results(
            &r,
            &[
                Expect::recv(Status::CANCELED, 1, side.qp_context, None),
                Expect::recv(Status::CANCELED, 2, side.qp_context, None),
            ],
            "flushed Receives",
        )?;
        expect_empty(&side.rcq, "receive CQ after the 2 flushed CQEs")?;
        expect_empty(&side.scq, "initiator CQ after the Flush")?;
        // The QP is still usable after the synchronous failures and the Flush.
        side.recv(4, &[0..64]).ctx("Receive after Flush")?;
        side.qp.flush().ctx("second Flush")?;
        let r = next_results(&side.rcq, 1, "Receive flushed by the second Flush")?;
        Expect::recv(Status::CANCELED, 4, side.qp_context, None).check(&r[0], "second Flush")?;
        Ok(())
    });
}

#[test]
fn connected_queue_pair_limits() {
    each("connected-qp", |p, ip| {
        let a = open(p, ip)?;
        let max_sge = a.query().max_initiator_sge.min(a.query().max_receive_sge);
        let server = Side::on(&a, SideConfig::default())?;
        // Initiator depth 1, and a Send far larger than what the socket buffers can hold
        // while the peer has no Receive posted (its stream stalls): the Send stays queued.
        const BIG: usize = 64 << 20;
        let client = Side::on(
            &a,
            SideConfig {
                buf_len: BIG,
                depth: 1,
                sge: max_sge,
                ..SideConfig::default()
            },
        )?;
        let _listener = connect_pair(&server, &client, ip)?;
        // §2.10 Connect: the QP is already connected.
        let c2 = a.create_connector().ctx("create connector")?;
        c2.bind(SocketAddr::new(ip, 0)).ctx("Connector::bind")?;
        let dest = server
            .connector
            .get_local_address()
            .ctx("GetLocalAddress")?;
        expect_outcome(
            c2.connect(&client.qp, dest, 0, 0, &[]),
            Status::CONNECTION_ACTIVE,
            "Connect with an already connected QP",
        )?;
        // §2.9 Send: more SGEs than the QP allows, even at the adapter maximum.
        let many: Vec<_> = (0..=max_sge as usize).map(|i| i * 8..i * 8 + 8).collect();
        expect_status(
            client.send(1, &many, OpFlags::empty()),
            Status::DATA_OVERRUN,
            "Send with MaxInitiatorSge + 1 SGEs",
        )?;
        // INLINE is not bound by the queue pair's SGE limit (§2.9), but by the providers' own
        // (64), the same on every provider.
        let inline_many: Vec<_> = (0..65).map(|i| i..i + 1).collect();
        expect_status(
            client.send(1, &inline_many, OpFlags::INLINE),
            Status::DATA_OVERRUN,
            "INLINE Send with 65 SGEs",
        )?;
        expect_status(
            client.send(1, &[0..8], OpFlags::from_bits_retain(0x4000)),
            Status::INVALID_PARAMETER_4,
            "Send with an unknown flag",
        )?;
        client
            .send(2, &[0..BIG], OpFlags::empty())
            .ctx("64 MiB Send")?;
        expect_status(
            client.send(3, &[0..8], OpFlags::empty()),
            Status::NO_MORE_ENTRIES,
            "Send beyond the initiator queue depth",
        )?;
        // Disconnect flushes the queued Send (§2.10 Disconnect).
        let d = client.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, "Disconnect")?;
        let r = next_results(&client.scq, 1, "the queued Send")?;
        Expect::send(Status::CANCELED, 2, client.qp_context).check(&r[0], "the queued Send")?;
        expect_empty(&client.scq, "initiator CQ")?;
        Ok(())
    });
}

/// A region's Deregister waits for every queued request that uses the region, and for nothing
/// else: with two Receives posted in it, it is still pending after the first completes, and
/// done once the second has (whatever the queue pair keeps to make its next posts cheap, it
/// holds no part of the region with no request queued).
#[test]
fn deregister_waits_for_queued_receives_and_no_longer() {
    each("deregister-queued", |p, ip| {
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        server.recv(1, &[0..64]).ctx("Receive 1")?;
        server.recv(2, &[64..128]).ctx("Receive 2")?;
        let dereg = server.mr.deregister().ctx("Deregister")?;
        expect_pending(&dereg, "Deregister with two Receives queued in the region")?;
        for k in 1..=2u64 {
            client
                .send(k, &[0..8], OpFlags::empty())
                .ctx(&format!("Send {k}"))?;
            let r = next_results(&server.rcq, 1, &format!("Receive {k}"))?;
            Expect::recv(Status::SUCCESS, k, server.qp_context, Some(8))
                .check(&r[0], &format!("Receive {k}"))?;
            next_results(&client.scq, 1, &format!("Send {k}"))?;
            if k == 1 {
                expect_pending(&dereg, "Deregister while Receive 2 is queued in the region")?;
            }
        }
        wait_ok(&dereg, "Deregister once no request uses the region")
    });
}

/// A Receive whose segment fails its check completes ND_ACCESS_VIOLATION and ends the
/// connection (R-QP-6); the Receive posted before it is flushed first, so the completions keep
/// the order the Receives were posted in.
#[test]
fn a_refused_receive_completes_after_the_ones_before_it() {
    each("refused-receive-order", |p, ip| {
        let (_a, server, _client, _listener) = default_pair(p, ip)?;
        refused_after_flushed(&server)
    });
}

/// Receive 1, then Receive 2 under a wrong token, on `server`: they complete ND_CANCELED
/// and ND_ACCESS_VIOLATION, in that order.
fn refused_after_flushed(server: &Side) -> Check {
    server.recv(1, &[0..64]).ctx("Receive 1")?;
    let mut bad = server.sges(&[64..128]);
    bad[0].memory_region_token ^= 0x5A5A_0000;
    // SAFETY: the segment names memory of `buf` (under a wrong token): nothing is written.
    unsafe { server.qp.receive(2, &bad) }.ctx("Receive 2")?;
    let r = next_results(&server.rcq, 2, "both Receives")?;
    Expect::recv(Status::CANCELED, 1, server.qp_context, None).check(&r[0], "Receive 1")?;
    Expect::recv(Status::ACCESS_VIOLATION, 2, server.qp_context, None).check(&r[1], "Receive 2")
}

/// The same on a queue pair that never connected (Receives may be posted before connecting,
/// R-QP-5): the Receive before the refused one is flushed first, and as there is no connection
/// for the error to end, the queue pair stays ready to connect (IND2Connector::Connect lists
/// ND_CONNECTION_ACTIVE only for a queue pair already connected): it connects and carries a
/// message.
#[test]
fn a_refused_receive_before_connecting_leaves_the_queue_pair_connectable() {
    each("refused-receive-unconnected", |p, ip| {
        let a = open(p, ip)?;
        let server = Side::on(&a, SideConfig::default())?;
        let client = Side::on(&a, SideConfig::default())?;
        refused_after_flushed(&server)?;
        connect_and_exchange(&server, &client, ip).map(drop)
    });
}

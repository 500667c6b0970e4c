//! The limits of object creation and the checks of objects from another adapter: completion
//! queue and queue pair depths and SGEs, memory registration errors, and the limits the
//! provider objects check themselves.

use super::*;

#[test]
fn completion_queue_depth_limits() {
    each("cq-depth", |p, ip| {
        let a = open(p, ip)?;
        let max = a.query().max_completion_queue_depth;
        expect_status(
            a.create_completion_queue(0, 0, 0),
            Status::INVALID_PARAMETER_3,
            "CQ depth 0",
        )?;
        expect_status(
            a.create_completion_queue(max + 1, 0, 0),
            Status::INVALID_PARAMETER_3,
            "CQ depth MaxCompletionQueueDepth + 1",
        )?;
        // D3 / R-CQ-2: the maximum itself is allowed.
        a.create_completion_queue(max, 0, 0)
            .ctx("CQ depth == MaxCompletionQueueDepth (R-CQ-2)")?;
        Ok(())
    });
}

#[test]
fn queue_pair_limits() {
    each("qp-limits", |p, ip| {
        let a = open(p, ip)?;
        let i = a.query();
        let cq = a.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let qp = |rd, id, rs, is, inline| a.create_queue_pair(&cq, &cq, 0, rd, id, rs, is, inline);
        let cases = [
            (
                (i.max_receive_queue_depth + 1, 1, 1, 1, 0),
                Status::INVALID_PARAMETER_5,
                "receive depth MaxReceiveQueueDepth + 1 (R-QP-1)",
            ),
            (
                (1, i.max_initiator_queue_depth + 1, 1, 1, 0),
                Status::INVALID_PARAMETER_6,
                "initiator depth MaxInitiatorQueueDepth + 1",
            ),
            (
                (1, 1, i.max_receive_sge + 1, 1, 0),
                Status::INVALID_PARAMETER_7,
                "MaxReceiveSge + 1",
            ),
            (
                (1, 1, 1, i.max_initiator_sge + 1, 0),
                Status::INVALID_PARAMETER_8,
                "MaxInitiatorSge + 1",
            ),
            (
                (1, 1, 1, 1, i.max_inline_data_size + 1),
                Status::INVALID_PARAMETER_9,
                "MaxInlineDataSize + 1",
            ),
        ];
        for ((rd, id, rs, is, inline), want, what) in cases {
            expect_status(qp(rd, id, rs, is, inline), want, what)?;
        }
        // R-QP-2 (ndqpmaxall, as the helper really calls it) and R-CQ-3 (QP deeper than its CQ).
        qp(
            i.max_receive_sge,
            i.max_initiator_queue_depth,
            i.max_receive_sge,
            i.max_initiator_sge,
            0,
        )
        .ctx("all maxima together (R-QP-2)")?;
        qp(64, 64, 1, 1, i.max_inline_data_size)
            .ctx("a QP of depth 64 on a CQ of depth 2 (R-CQ-3)")?;
        // Only depths beyond the limits are errors (IND2Adapter::CreateQueuePair): a queue
        // pair without Receives (one-sided traffic only), or without requests of its own.
        qp(0, 1, 1, 1, 0).ctx("receive depth 0")?;
        qp(1, 0, 1, 1, 0).ctx("initiator depth 0")?;
        Ok(())
    });
}

/// One adapter's queues with another adapter of the same provider: `ND_INVALID_PARAMETER_2`
/// (receive CQ), `_3` (initiator CQ), `_4` (SRQ), checked before the limits (`_5` on), through
/// the API and through the SPI objects. Accepted, such a queue pair's completions would be
/// driven by the wrong adapter's engine: a wait on the CQ could sleep forever.
#[test]
fn queues_of_another_adapter_are_invalid_parameters() {
    each("qp-foreign-queues", |p, ip| {
        use netdirect::spi::QueuePairConfig;
        let (a, b) = (open(p, ip)?, open(p, ip)?);
        let mine = a.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let theirs = b.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let deep = a.query().max_receive_queue_depth + 1;
        let qp = |r: &netdirect::CompletionQueue, i: &netdirect::CompletionQueue, depth| {
            a.create_queue_pair(r, i, 0, depth, 1, 1, 1, 0)
        };
        expect_status(
            qp(&theirs, &mine, 1),
            Status::INVALID_PARAMETER_2,
            "receive CQ",
        )?;
        expect_status(
            qp(&mine, &theirs, 1),
            Status::INVALID_PARAMETER_3,
            "initiator CQ",
        )?;
        expect_status(
            qp(&theirs, &theirs, deep),
            Status::INVALID_PARAMETER_2,
            "another adapter's CQ and a depth beyond the limit",
        )?;
        let spi = |r: &netdirect::CompletionQueue, i: &netdirect::CompletionQueue, depth| {
            let mut cfg = QueuePairConfig::single_cq(r.as_spi().clone(), depth);
            cfg.initiator_cq = i.as_spi().clone();
            a.as_spi().create_queue_pair(cfg).map(|_| ())
        };
        expect_status(
            spi(&theirs, &mine, 1),
            Status::INVALID_PARAMETER_2,
            "SPI receive CQ",
        )?;
        expect_status(
            spi(&mine, &theirs, 1),
            Status::INVALID_PARAMETER_3,
            "SPI initiator CQ",
        )?;
        expect_status(
            spi(&theirs, &mine, deep),
            Status::INVALID_PARAMETER_2,
            "SPI: another adapter's CQ and a depth beyond the limit",
        )?;
        if a.query().max_shared_receive_queue_depth > 0 {
            let srq = b
                .create_shared_receive_queue(4, 1, 0, 0, 0)
                .ctx("create SRQ")?;
            expect_status(
                a.create_queue_pair_with_srq(&mine, &mine, &srq, 0, 1, 1, 0),
                Status::INVALID_PARAMETER_4,
                "another adapter's SRQ",
            )?;
        }
        // A connector of one adapter with the other's queue pair: `_1` (the queue pair is
        // Connect's first parameter).
        let foreign = b
            .create_queue_pair(&theirs, &theirs, 0, 1, 1, 1, 1, 0)
            .ctx("create QP")?;
        let dest = SocketAddr::new(ip, 9);
        expect_status(
            a.create_connector()
                .ctx("create connector")?
                .connect(&foreign, dest, 0, 0, &[]),
            Status::INVALID_PARAMETER_1,
            "Connect with another adapter's queue pair",
        )?;
        qp(&mine, &mine, 1).ctx("the adapter's own CQs")?;
        Ok(())
    });
}

#[test]
fn memory_region_register_errors() {
    each("mr-register", |p, ip| {
        let a = open(p, ip)?;
        let mr = a.create_memory_region().ctx("create MR")?;
        let buf = netdirect::Buffer::new(4096).ctx("buffer")?;
        // D7: null first, then zero length.
        // SAFETY: a null pointer and a zero-length range name no memory.
        let null = unsafe { mr.register(std::ptr::null_mut(), 4096, MrFlags::ALLOW_LOCAL_WRITE) };
        expect_outcome(null, Status::INVALID_PARAMETER, "Register a null buffer")?;
        // SAFETY: zero bytes of a live buffer.
        let empty = unsafe { mr.register(buf.as_ptr(), 0, MrFlags::ALLOW_LOCAL_WRITE) };
        expect_outcome(empty, Status::INVALID_BUFFER_SIZE, "Register 0 bytes")?;
        // The failures left the MR usable: Register → Deregister → Register again (ndmrlat).
        for round in 0..2 {
            let ov = mr
                .register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
                .ctx("Register")?;
            wait_ok(&ov, &format!("Register, round {round}"))?;
            let ov = mr.deregister().ctx("Deregister")?;
            wait_ok(&ov, &format!("Deregister, round {round}"))?;
        }
        Ok(())
    });
}

/// The provider objects behind the API (`as_spi()`) check the adapter's limits too: a depth
/// no adapter offers is ND_INVALID_PARAMETER_n there as well, not a queue sized from it.
#[test]
fn provider_objects_check_the_limits_themselves() {
    each("spi-limits", |p, ip| {
        use netdirect::spi::QueuePairConfig;
        let a = open(p, ip)?;
        let spi = a.as_spi();
        expect_status(
            spi.create_completion_queue(0, 0, 0).map(|_| ()),
            Status::INVALID_PARAMETER_3,
            "SPI CreateCompletionQueue of depth 0",
        )?;
        expect_status(
            spi.create_completion_queue(u32::MAX, 0, 0).map(|_| ()),
            Status::INVALID_PARAMETER_3,
            "SPI CreateCompletionQueue beyond the maximum",
        )?;
        let cq = a.create_completion_queue(8, 0, 0).ctx("create CQ")?;
        expect_status(
            spi.create_queue_pair(QueuePairConfig::single_cq(cq.as_spi().clone(), u32::MAX))
                .map(|_| ()),
            Status::INVALID_PARAMETER_5,
            "SPI CreateQueuePair beyond the maximum depth",
        )?;
        // Resize and Modify of the SPI objects: a depth of 0 would make the next completion
        // an overrun, which leaves the CQ unusable.
        let max = a.query().max_completion_queue_depth;
        for depth in [Some(0), max.checked_add(1)].into_iter().flatten() {
            expect_status(
                cq.as_spi().resize(depth),
                Status::INVALID_PARAMETER,
                &format!("SPI Resize to {depth}"),
            )?;
        }
        cq.as_spi().resize(max).ctx("SPI Resize to the maximum")?;
        let max_srq = a.query().max_shared_receive_queue_depth;
        if max_srq > 0 {
            expect_status(
                spi.create_shared_receive_queue(u32::MAX, 1, 0, 0, 0)
                    .map(|_| ()),
                Status::INVALID_PARAMETER_3,
                "SPI CreateSharedReceiveQueue beyond the maximum",
            )?;
            let srq = a
                .create_shared_receive_queue(4, 1, 0, 0, 0)
                .ctx("create SRQ")?;
            expect_status(
                srq.as_spi().modify(max_srq.saturating_add(1), 0),
                Status::INVALID_PARAMETER,
                "SPI Modify beyond the maximum",
            )?;
        }
        Ok(())
    });
}

/// A Receive for more than `MaxTransferLength` bytes: ND_BUFFER_OVERFLOW ("more data than the
/// hardware supports", IND2QueuePair::Receive, IND2SharedReceiveQueue::Receive), checked
/// before anything else about its SGEs; nothing is queued.
#[test]
fn a_receive_beyond_the_transfer_limit_is_refused() {
    each("receive-beyond-max-transfer", |p, ip| {
        let a = open(p, ip)?;
        let side = Side::on(&a, SideConfig::default())?;
        let max = u64::from(a.query().max_transfer_length);
        let half = u32::try_from(max / 2 + 1).unwrap_or(u32::MAX);
        let sge = netdirect::Sge::new(side.buf.as_ptr(), half, side.mr.get_local_token());
        // SAFETY: refused before the provider keeps or touches anything.
        let r = unsafe { side.qp.receive(1, &[sge, sge]) };
        expect_status(
            r,
            Status::BUFFER_OVERFLOW,
            "QP Receive beyond MaxTransferLength",
        )?;
        if a.query().max_shared_receive_queue_depth > 0 {
            let srq = a
                .create_shared_receive_queue(4, 4, 0, 0, 0)
                .ctx("create SRQ")?;
            // SAFETY: as above.
            let r = unsafe { srq.receive(1, &[sge, sge]) };
            expect_status(
                r,
                Status::BUFFER_OVERFLOW,
                "SRQ Receive beyond MaxTransferLength",
            )?;
        }
        expect_empty(&side.rcq, "nothing completes for a refused Receive")?;
        Ok(())
    });
}

//! One-sided requests' local rules, in one process over real sockets, for every provider and
//! both loopback families: argument checks of Read, Write, Bind and Invalidate
//! (IND2QueuePair, docs/ND-RULES.md §2.9), memory registration (§2.7, D7, R-MR-1) and a local
//! protection error.

#![allow(clippy::single_range_in_vec_init)]

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use netdirect::{
    Adapter, CompletionQueue, MemoryRegion, MemoryWindow, MrFlags, NdResult, OpFlags, ProgressMode,
    Provider, RequestType, Status,
};
use netdirect_conformance::check::{
    expect_empty, expect_status, next_results, wait_ok, Check, Context, Expect, WAIT,
};
use netdirect_conformance::harness;
use netdirect_conformance::side::{connect_pair, connect_pair_reading, default_pair};
use netdirect_conformance::{ensure, Needs, Side, SideConfig};

fn each(name: &'static str, f: fn(&Provider, IpAddr) -> Check) {
    harness::each_provider(Needs::OneSided, name, move |p, fam| f(p, fam.ip()));
}

/// Bind `w` over the first 4 KiB of `side`'s buffer in `region` with remote write access,
/// and see the Bind complete.
fn bind_first_page(side: &Side, region: &MemoryRegion, w: &MemoryWindow, ctx: u64) -> Check {
    side.qp
        .bind(
            ctx,
            region,
            w,
            side.buf.as_ptr(),
            4096,
            OpFlags::ALLOW_WRITE,
        )
        .ctx("Bind")?;
    let r = next_results(&side.scq, 1, "Bind")?;
    done(RequestType::Bind, Status::SUCCESS, ctx, side.qp_context).check(&r[0], "Bind")
}

fn done(ty: RequestType, status: Status, ctx: u64, qp: u64) -> Expect {
    Expect::initiator(ty, status, ctx, qp)
}

#[test]
fn one_sided_requests_on_an_unconnected_queue_pair() {
    each("rdma-unconnected", |p, ip| {
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let side = Side::on(&a, SideConfig::default())?;
        let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
        expect_status(
            side.rdma_write(1, &[0..8], 0, 0, OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "Write on an unconnected QP",
        )?;
        expect_status(
            side.rdma_read(1, &[0..8], 0, 0, OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "Read on an unconnected QP",
        )?;
        expect_status(
            side.qp
                .bind(1, &side.mr, &w, side.buf.as_ptr(), 64, OpFlags::ALLOW_READ),
            Status::CONNECTION_INVALID,
            "Bind on an unconnected QP",
        )?;
        expect_status(
            side.qp.invalidate(1, &w, OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "Invalidate on an unconnected QP",
        )?;
        ensure!(w.get_remote_token() == 0, "an unbound window has a token");
        Ok(())
    });
}

#[test]
fn one_sided_argument_checks() {
    each("rdma-arguments", |p, ip| {
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let info = a.query();
        let server = Side::on(&a, SideConfig::default())?;
        let client = Side::on(
            &a,
            SideConfig {
                depth: 2,
                sge: 2,
                ..SideConfig::default()
            },
        )?;
        let _listener = connect_pair(&server, &client, ip)?;
        let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
        let bad = OpFlags::from_bits_retain(0x4000);
        expect_status(
            client.rdma_write(1, &[0..8], 0, 0, bad),
            Status::INVALID_PARAMETER_6,
            "Write with an unknown flag",
        )?;
        expect_status(
            client.rdma_write(1, &[0..8], 0, 0, OpFlags::SEND_AND_SOLICIT_EVENT),
            Status::INVALID_PARAMETER_6,
            "Write with SEND_AND_SOLICIT_EVENT",
        )?;
        expect_status(
            client.rdma_read(1, &[0..8], 0, 0, OpFlags::INLINE),
            Status::INVALID_PARAMETER_6,
            "Read with INLINE",
        )?;
        expect_status(
            client
                .qp
                .bind(1, &client.mr, &w, client.buf.as_ptr(), 64, OpFlags::INLINE),
            Status::INVALID_PARAMETER_6,
            "Bind with INLINE",
        )?;
        expect_status(
            client.qp.invalidate(1, &w, OpFlags::INLINE),
            Status::INVALID_PARAMETER_3,
            "Invalidate with INLINE",
        )?;
        // More SGEs than the QP allows (D12 rounds 2 up to 4), even at the adapter maximum.
        let many: Vec<_> = (0..=info.max_initiator_sge as usize)
            .map(|i| i * 8..i * 8 + 8)
            .collect();
        expect_status(
            client.rdma_write(1, &many, 0, 0, OpFlags::empty()),
            Status::DATA_OVERRUN,
            "Write with too many SGEs",
        )?;
        expect_status(
            client.rdma_read(1, &many, 0, 0, OpFlags::empty()),
            Status::DATA_OVERRUN,
            "Read with too many SGEs",
        )?;
        // Inline data beyond the inline limit.
        expect_status(
            client.rdma_write(1, &[0..4096], 0, 0, OpFlags::INLINE),
            Status::BUFFER_OVERFLOW,
            "INLINE Write larger than the inline limit",
        )?;
        // Bind: the region must allow what the window grants, and contain it.
        let ro = client.register_again(MrFlags::ALLOW_REMOTE_READ)?;
        expect_status(
            client
                .qp
                .bind(1, &ro, &w, client.buf.as_ptr(), 64, OpFlags::ALLOW_WRITE),
            Status::ACCESS_VIOLATION,
            "Bind ALLOW_WRITE over a region without ALLOW_LOCAL_WRITE",
        )?;
        let len = client.buf.len();
        expect_status(
            client.qp.bind(
                1,
                &client.mr,
                &w,
                client.buf.as_ptr(),
                len + 1,
                OpFlags::ALLOW_READ,
            ),
            Status::ACCESS_VIOLATION,
            "Bind one byte past the region",
        )?;
        let empty = a.create_memory_region().ctx("create MR")?;
        expect_status(
            client
                .qp
                .bind(1, &empty, &w, client.buf.as_ptr(), 64, OpFlags::ALLOW_READ),
            Status::ACCESS_VIOLATION,
            "Bind over a region that is not registered",
        )?;
        ensure!(w.get_remote_token() == 0, "failed Binds bound the window");
        expect_empty(&client.scq, "initiator CQ after synchronous failures")?;
        // The queue pair still works: a read-only window over a read-only region (R-MW-1).
        client
            .qp
            .bind(7, &ro, &w, client.buf.as_ptr(), 64, OpFlags::ALLOW_READ)
            .ctx("Bind")?;
        let r = next_results(&client.scq, 1, "Bind")?;
        done(RequestType::Bind, Status::SUCCESS, 7, client.qp_context).check(&r[0], "Bind")?;
        // Initiator queue depth 2: two requests fit, the third does not.
        client
            .rdma_write(8, &[0..8], 0, 0, OpFlags::empty())
            .ctx("Write 1")?;
        client
            .rdma_write(9, &[0..8], 0, 0, OpFlags::empty())
            .ctx("Write 2")?;
        expect_status(
            client.rdma_write(10, &[0..8], 0, 0, OpFlags::empty()),
            Status::NO_MORE_ENTRIES,
            "Write beyond the initiator queue depth",
        )?;
        Ok(())
    });
}

#[test]
fn write_from_unregistered_memory_fails_locally() {
    each("rdma-local-protection", |p, ip| {
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        let target = server.register_again(MrFlags::ALLOW_REMOTE_WRITE)?;
        server.recv(1, &[0..64]).ctx("post Receive")?;
        // A local SGE whose token is wrong: the post succeeds, the Write completes
        // ND_ACCESS_VIOLATION without sending anything, the connection ends.
        let mut sge = client.sges(&[0..64]);
        sge[0].memory_region_token ^= 0x100;
        // SAFETY: the SGE names the client's registered buffer (with a wrong token).
        unsafe {
            client.qp.write(
                2,
                &sge,
                server.addr(0),
                target.get_remote_token(),
                OpFlags::empty(),
            )
        }
        .ctx("Write with a bad local token")?;
        client
            .send(3, &[0..8], OpFlags::empty())
            .ctx("Send after it")?;
        let r = next_results(&client.scq, 2, "local protection error")?;
        done(
            RequestType::Write,
            Status::ACCESS_VIOLATION,
            2,
            client.qp_context,
        )
        .check(&r[0], "Write with a bad local token")?;
        Expect::send(Status::CANCELED, 3, client.qp_context).check(&r[1], "Send after it")?;
        let r = next_results(&server.rcq, 1, "the server's Receive")?;
        Expect::recv(Status::CANCELED, 1, server.qp_context, None)
            .check(&r[0], "the peer's Receive after a local error")?;
        Ok(())
    });
}

/// A Read on a connection with no outbound Reads (ORD 0) can never be issued. Read does not
/// list a synchronous status for it (IND2QueuePair::Read): the post succeeds, and the Read
/// completes `ND_INVALID_DEVICE_REQUEST` (a malformed request, docs/ND-RULES.md §2.5) in its
/// turn, after the Write before it, and ends the connection, as any error completion does.
#[test]
fn a_read_without_outbound_reads_fails_in_its_turn() {
    each("rdma-read-ord-0", |p, ip| {
        // Connect(0, 0) and Accept(0, 0): no Reads either way.
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        let target = server.register_again(MrFlags::ALLOW_REMOTE_WRITE)?;
        server.recv(1, &[0..64]).ctx("post Receive")?;
        client
            .rdma_write(
                2,
                &[0..8],
                server.addr(0),
                target.get_remote_token(),
                OpFlags::empty(),
            )
            .ctx("Write before it")?;
        client
            .rdma_read(
                3,
                &[0..8],
                server.addr(0),
                target.get_remote_token(),
                OpFlags::empty(),
            )
            .ctx("Read with ORD 0")?;
        client
            .send(4, &[0..8], OpFlags::empty())
            .ctx("Send after it")?;
        let r = next_results(&client.scq, 3, "the Write, the Read and the Send")?;
        let q = client.qp_context;
        done(RequestType::Write, Status::SUCCESS, 2, q).check(&r[0], "Write before it")?;
        done(RequestType::Read, Status::INVALID_DEVICE_REQUEST, 3, q)
            .check(&r[1], "Read with ORD 0")?;
        Expect::send(Status::CANCELED, 4, q).check(&r[2], "Send after it")?;
        let r = next_results(&server.rcq, 1, "the server's Receive")?;
        Expect::recv(Status::CANCELED, 1, server.qp_context, None)
            .check(&r[0], "the peer's Receive after the error")?;
        Ok(())
    });
}

/// More bytes than a loopback TCP connection can hold in flight (the largest send buffer
/// plus the largest receive buffer the kernel allows, by `/proc`), and more than an `shm`
/// ring: a response this long cannot be wholly handed over before its reader takes some.
fn beyond_what_is_in_flight() -> usize {
    let max = |name: &str| -> usize {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
            .unwrap_or(32 << 20)
    };
    max("tcp_rmem") + max("tcp_wmem") + (4 << 20)
}

/// How the target takes away the memory a Read is reading.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Revoke {
    /// Invalidate the window the Read names.
    Invalidate,
    /// Release the window the Read names (which unbinds it, docs/ND-RULES.md G10).
    Release,
    /// Deregister the region the Read names.
    Deregister,
}

/// IND2QueuePair::Invalidate: "Any in-progress data transfers that reference the memory
/// window will fail." The target of a long Read invalidates the window the Read reads through
/// once the first bytes of the response reached the initiator: no more of it goes, the
/// initiator's Read completes `ND_ACCESS_VIOLATION` and the Send after it `ND_CANCELED`, and
/// the connection ends, which flushes the target's Invalidate `ND_CANCELED` (the window is
/// unbound all the same).
#[test]
fn a_read_response_fails_when_its_window_is_invalidated() {
    each("rdma-read-invalidated", |p, ip| {
        revoked_mid_read(p, ip, Revoke::Invalidate)
    });
}

/// The same with the window released instead of invalidated: no more of the response goes.
#[test]
fn a_read_response_fails_when_its_window_is_released() {
    each("rdma-read-window-released", |p, ip| {
        revoked_mid_read(p, ip, Revoke::Release)
    });
}

/// The same with the region the Read names deregistered instead, as a Write's later segments
/// into a deregistered region are refused: the Read fails the same way, and the Deregister
/// completes once the response has let go of the region.
#[test]
fn a_read_response_fails_when_its_region_is_deregistered() {
    each("rdma-read-deregistered", |p, ip| {
        revoked_mid_read(p, ip, Revoke::Deregister)
    });
}

/// A Read longer than what can be in flight, from memory the target takes away (`how`) once
/// the response began to arrive. Each end is on an adapter of its own, driven by this thread
/// only (manual mode: a progress engine would hand over the whole response at once).
fn revoked_mid_read(p: &Provider, ip: IpAddr, how: Revoke) -> Check {
    // The Read takes `read` bytes from the start of the buffers; the Send goes from and into
    // the last 64 bytes.
    let read = beyond_what_is_in_flight();
    let len = read + 64;
    let msg = read..read + 8;
    // For a Deregister the Read names heap memory of a region of its own: shm grants a
    // `Buffer`'s memory to the initiator, which then copies the whole Read at once, a copy
    // that cannot be cut (docs/ARCHITECTURE.md, "Mapped Writes and Reads"). Declared before
    // the queue pairs, so that it outlives them whatever happens.
    let mut heap = match how {
        Revoke::Invalidate | Revoke::Release => Vec::new(),
        Revoke::Deregister => vec![0u8; read],
    };
    let side = |qp_context| -> Check<Side> {
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        a.set_progress_mode(ProgressMode::Manual)
            .ctx("set_progress_mode")?;
        let cfg = SideConfig {
            buf_len: len,
            qp_context,
            ..SideConfig::default()
        };
        Side::on(&a, cfg)
    };
    let (server, client) = (side(0x5E)?, side(0xC1)?);
    let _listener = connect_pair_reading(&server, &client, ip, 1)?;
    // SAFETY: nothing is posted on the server's buffer yet.
    unsafe {
        server.write(&[0..1], &[0xA5]);
        server.write(&[read - 1..read], &[0xA5]);
    }
    let w = server
        .adapter
        .create_memory_window()
        .ctx("CreateMemoryWindow")?;
    let region = server.adapter.create_memory_region().ctx("create MR")?;
    let (addr, token) = match how {
        Revoke::Invalidate | Revoke::Release => {
            let (buf, flags) = (server.buf.as_ptr(), OpFlags::ALLOW_READ);
            server
                .qp
                .bind(1, &server.mr, &w, buf, len, flags)
                .ctx("Bind")?;
            let r = next_results(&server.scq, 1, "Bind")?;
            done(RequestType::Bind, Status::SUCCESS, 1, 0x5E).check(&r[0], "Bind")?;
            (server.addr(0), w.get_remote_token())
        }
        Revoke::Deregister => {
            heap[0] = 0xA5;
            heap[read - 1] = 0xA5;
            let flags = MrFlags::ALLOW_REMOTE_READ;
            // SAFETY: `heap` outlives every queue pair that could reach it (declared first),
            // and is not touched again.
            let ov = unsafe { region.register(heap.as_mut_ptr(), read, flags) }.ctx("register")?;
            wait_ok(&ov, "register")?;
            (heap.as_ptr() as u64, region.get_remote_token())
        }
    };
    server
        .recv(2, std::slice::from_ref(&msg))
        .ctx("server Receive")?;
    client
        .rdma_read(3, &[0..read], addr, token, OpFlags::empty())
        .ctx("Read")?;
    client
        .send(4, &[msg], OpFlags::empty())
        .ctx("Send after the Read")?;
    // Until the response began to arrive. Before the client first took any of it, the server
    // could hand over no more than what is in flight, and the client took no more than that:
    // the response is in progress.
    let deadline = Instant::now() + WAIT;
    loop {
        server.adapter.progress();
        client.adapter.progress();
        // SAFETY: one thread: the providers write the sink only inside the calls above.
        if unsafe { client.read(&[0..1], 1) } == [0xA5] {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "no byte of the response in {WAIT:?}"
        );
    }
    let deregistered = match how {
        Revoke::Invalidate => {
            server
                .qp
                .invalidate(5, &w, OpFlags::empty())
                .ctx("Invalidate")?;
            let r = next_results(&server.scq, 1, "Invalidate")?;
            done(RequestType::Invalidate, Status::CANCELED, 5, 0x5E).check(&r[0], "Invalidate")?;
            None
        }
        Revoke::Release => {
            drop(w);
            None
        }
        Revoke::Deregister => Some(region.deregister().ctx("Deregister")?),
    };
    // The server is driven too: what is left of the frame on the wire, and the Terminate, go
    // as the client takes the bytes before them.
    let r = results_driving(
        &client.scq,
        2,
        &server.adapter,
        "the client's Read and Send",
    )?;
    done(RequestType::Read, Status::ACCESS_VIOLATION, 3, 0xC1)
        .check(&r[0], "Read of memory taken away")?;
    Expect::send(Status::CANCELED, 4, 0xC1).check(&r[1], "Send after the Read")?;
    if let Some(ov) = deregistered {
        wait_ok(&ov, "Deregister")?;
    }
    // SAFETY: the Read has completed.
    let tail = unsafe { client.read(&[read - 1..read], 1) };
    ensure!(
        tail == [0],
        "the end of the response arrived after the memory was taken away"
    );
    Ok(())
}

/// Poll `cq` for `n` completions, driving `other` (the peer's adapter) between polls.
fn results_driving(
    cq: &CompletionQueue,
    n: usize,
    other: &Adapter,
    what: &str,
) -> Check<Vec<NdResult>> {
    let deadline = Instant::now() + WAIT;
    let mut out = vec![NdResult::EMPTY; n];
    let mut got = 0;
    while got < n {
        got += cq.get_results(&mut out[got..]);
        other.progress();
        ensure!(
            Instant::now() < deadline,
            "{what}: only {got} of {n} completions in {WAIT:?}: {:?}",
            &out[..got]
        );
    }
    Ok(out)
}

#[test]
fn registration_rules() {
    each("rdma-registration", |p, ip| {
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let buf = netdirect::Buffer::new(4096).ctx("buffer")?;
        // Every flag of §1.5 is accepted.
        let all = MrFlags::ALLOW_LOCAL_WRITE
            | MrFlags::ALLOW_REMOTE_READ
            | MrFlags::ALLOW_REMOTE_WRITE
            | MrFlags::RDMA_READ_SINK
            | MrFlags::DO_NOT_SECURE_VM;
        // R-MR-1: the same buffer registered thousands of times, with different rights.
        let flags = [
            MrFlags::ALLOW_LOCAL_WRITE,
            MrFlags::ALLOW_REMOTE_READ,
            MrFlags::ALLOW_REMOTE_WRITE,
            MrFlags::RDMA_READ_SINK | MrFlags::ALLOW_LOCAL_WRITE,
            all,
        ];
        let mut mrs = Vec::new();
        let mut tokens = std::collections::HashSet::new();
        for i in 0..4000 {
            let mr = a.create_memory_region().ctx("create MR")?;
            let ov = mr
                .register_buffer(&buf, flags[i % flags.len()])
                .ctx("Register")?;
            wait_ok(&ov, "Register")?;
            ensure!(
                tokens.insert(mr.get_remote_token()),
                "registration {i} got a token already in use"
            );
            ensure!(
                mr.get_local_token() != 0,
                "registration {i} got local token 0"
            );
            mrs.push(mr);
        }
        for mr in &mrs {
            wait_ok(&mr.deregister().ctx("Deregister")?, "Deregister")?;
        }
        // Deregistering twice, or an empty region: the region has nothing registered.
        expect_status(
            mrs[0].deregister(),
            Status::INVALID_DEVICE_STATE,
            "Deregister twice",
        )?;
        // D7, in order: null, then zero length, then beyond MaxRegistrationSize.
        let mr = a.create_memory_region().ctx("create MR")?;
        // SAFETY: these calls name no memory (null or zero bytes) or fail before using it.
        unsafe {
            expect_status(
                mr.register(std::ptr::null_mut(), 0, MrFlags::ALLOW_LOCAL_WRITE),
                Status::INVALID_PARAMETER,
                "Register null with length 0 (null is checked first)",
            )?;
            expect_status(
                mr.register(buf.as_ptr(), 0, MrFlags::ALLOW_LOCAL_WRITE),
                Status::INVALID_BUFFER_SIZE,
                "Register 0 bytes",
            )?;
            let max = a.query().max_registration_size;
            if max < usize::MAX {
                expect_status(
                    mr.register(buf.as_ptr(), max + 1, MrFlags::ALLOW_LOCAL_WRITE),
                    Status::INVALID_PARAMETER,
                    "Register more than MaxRegistrationSize",
                )?;
            }
        }
        Ok(())
    });
}

#[test]
fn windows_are_unbound_when_their_connection_ends() {
    each("rdma-window-unbound-at-disconnect", |p, ip| {
        let (a, _server, client, _listener) = default_pair(p, ip)?;
        let region = client.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
        let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
        bind_first_page(&client, &region, &w, 1)?;
        // R-MR-2 while bound.
        expect_status(
            region.deregister(),
            Status::DEVICE_BUSY,
            "Deregister with a bound window",
        )?;
        // The connection ends: the window goes with it, so the region deregisters, and the
        // Deregister completes (nothing holds the memory any more).
        wait_ok(
            &client.connector.disconnect().ctx("Disconnect")?,
            "Disconnect",
        )?;
        let ov = region
            .deregister()
            .ctx("Deregister after the connection ended")?;
        wait_ok(&ov, "Deregister after the connection ended")?;
        // The window may be bound again on another connection.
        let server2 = Side::on(&a, SideConfig::default())?;
        let client2 = Side::on(&a, SideConfig::default())?;
        let _l2 = connect_pair(&server2, &client2, ip)?;
        client2
            .qp
            .bind(
                2,
                &client2.mr,
                &w,
                client2.buf.as_ptr(),
                64,
                OpFlags::ALLOW_READ,
            )
            .ctx("Bind the window again on another connection")?;
        let r = next_results(&client2.scq, 1, "Bind")?;
        done(RequestType::Bind, Status::SUCCESS, 2, client2.qp_context).check(&r[0], "rebind")?;
        Ok(())
    });
}

/// docs/ND-RULES.md G10: applications release objects in any order, windows while still bound.
/// A released window unbinds itself: its region deregisters (no ND_DEVICE_BUSY, and the
/// Deregister completes), the peer's access through its token is refused, and binding and
/// releasing windows over and over keeps nothing bound.
#[test]
fn a_released_window_is_unbound() {
    each("rdma-window-released", |p, ip| {
        let (a, server, client, _listener) = default_pair(p, ip)?;
        let region = client.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
        let mut last = 0;
        for i in 0..100u64 {
            let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
            bind_first_page(&client, &region, &w, i)?;
            last = w.get_remote_token();
            drop(w);
        }
        let ov = region
            .deregister()
            .ctx("Deregister after its windows were released")?;
        wait_ok(&ov, "Deregister after its windows were released")?;
        server
            .rdma_write(7, &[0..8], client.addr(0), last, OpFlags::empty())
            .ctx("Write through a released window")?;
        let r = next_results(&server.scq, 1, "Write through a released window")?;
        done(
            RequestType::Write,
            Status::ACCESS_VIOLATION,
            7,
            server.qp_context,
        )
        .check(&r[0], "Write through a released window (D6)")?;
        Ok(())
    });
}

/// Two Writes to the same address, back to back: a small one the target places, then one too
/// large for the window it goes through. The Terminate names the large one only (its first
/// segment, which carries the same STag and TO as the small one's), so the small Write
/// completes, the large one fails ND_ACCESS_VIOLATION (D6) and what follows is flushed.
/// A first Write elsewhere goes ahead of both: over `tcp` its completion probe is still in
/// flight when the two follow, so nothing but the Terminate tells them apart.
#[test]
fn a_refused_write_is_told_from_an_earlier_one_to_the_same_address() {
    each("rdma-refused-write-same-address", |p, ip| {
        let a = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let server = Side::on(&a, SideConfig::default())?;
        let client = Side::on(
            &a,
            SideConfig {
                buf_len: 256 * 1024,
                ..SideConfig::default()
            },
        )?;
        let _listener = connect_pair(&server, &client, ip)?;
        let region = server.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
        let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
        bind_first_page(&server, &region, &w, 1)?;
        let (addr, token) = (server.addr(0), w.get_remote_token());
        // SAFETY: nothing is posted on the client yet.
        unsafe { client.write(&[0..8], b"placed!!") };
        let q = client.qp_context;
        client
            .rdma_write(0, &[0..8], addr + 64, token, OpFlags::empty())
            .ctx("first Write")?;
        client
            .rdma_write(1, &[0..8], addr, token, OpFlags::empty())
            .ctx("small Write")?;
        // 200 KiB through a 4 KiB window: more than one segment on any transport.
        client
            .rdma_write(2, &[0..200 * 1024], addr, token, OpFlags::empty())
            .ctx("large Write")?;
        client.send(3, &[0..8], OpFlags::empty()).ctx("Send")?;
        let r = next_results(&client.scq, 4, "the client's requests")?;
        let want = [
            done(RequestType::Write, Status::SUCCESS, 0, q),
            done(RequestType::Write, Status::SUCCESS, 1, q),
            done(RequestType::Write, Status::ACCESS_VIOLATION, 2, q),
            Expect::send(Status::CANCELED, 3, q),
        ];
        for (i, (got, want)) in r.iter().zip(&want).enumerate() {
            want.check(got, &format!("completion {i}"))?;
        }
        // SAFETY: the connection is gone; nothing writes the server's buffer.
        let got = unsafe { server.read(&[0..8, 64..72], 16) };
        ensure!(
            got == b"placed!!placed!!",
            "the small Writes were not placed: {got:?}"
        );
        Ok(())
    });
}

/// Writes into a region keep landing until it is deregistered; the next one, to the same
/// address and of the same size, is refused (ND_ACCESS_VIOLATION, D6) and places nothing.
/// The target's check must see the removal even right after it passed the same region: `shm`
/// checks a small Write against a copy of the region it placed the last one into, trusted only
/// while no registration has been removed since (`LocalCache::covers`).
#[test]
fn a_write_after_its_region_is_deregistered_is_refused() {
    each("rdma-write-after-deregister", |p, ip| {
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        let flags = MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE;
        let region = server.register_again(flags)?;
        let (addr, token) = (server.addr(0), region.get_remote_token());
        let q = client.qp_context;
        for (i, bytes) in [b"placed 1", b"placed 2"].into_iter().enumerate() {
            // SAFETY: nothing is posted on the client's first bytes.
            unsafe { client.write(&[0..8], bytes) };
            let ctx = i as u64;
            client
                .rdma_write(ctx, &[0..8], addr, token, OpFlags::INLINE)
                .ctx("Write")?;
            let r = next_results(&client.scq, 1, "a Write into the live region")?;
            done(RequestType::Write, Status::SUCCESS, ctx, q).check(&r[0], "Write")?;
        }
        wait_ok(&region.deregister().ctx("Deregister")?, "Deregister")?;
        // SAFETY: as above.
        unsafe { client.write(&[0..8], b"too late") };
        client
            .rdma_write(2, &[0..8], addr, token, OpFlags::INLINE)
            .ctx("Write after Deregister")?;
        let r = next_results(&client.scq, 1, "the Write after Deregister")?;
        done(RequestType::Write, Status::ACCESS_VIOLATION, 2, q)
            .check(&r[0], "the Write after Deregister")?;
        // SAFETY: the connection is gone; nothing writes the server's buffer.
        let got = unsafe { server.read(&[0..8], 8) };
        ensure!(got == b"placed 2", "the refused Write was placed: {got:?}");
        Ok(())
    });
}

/// A Write the target has placed completes successfully at the initiator even when the
/// target Flushes right after (Flush on a connected queue pair ends the connection): what the
/// target owes for it (tcp's zero-length Read Response, shm's held ACK) goes out before the
/// end, as on Disconnect. Only requests not done are ND_CANCELED.
#[test]
fn a_placed_write_succeeds_when_the_target_flushes() {
    each("rdma-write-then-target-flush", |p, ip| {
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        let flags = MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE;
        let region = server.register_again(flags)?;
        let (addr, token) = (server.addr(0), region.get_remote_token());
        // SAFETY: nothing is posted on the client's first bytes.
        unsafe { client.write(&[0..8], b"flushed!") };
        client
            .rdma_write(7, &[0..8], addr, token, OpFlags::empty())
            .ctx("Write")?;
        // Drive the target alone until the bytes are there (its CQ's poll drives its queue
        // pair); the initiator is not polled, so its Write has not completed yet.
        let mut none = [NdResult::default(); 1];
        let mut placed = false;
        for _ in 0..10_000_000 {
            let _ = server.rcq.get_results(&mut none);
            // SAFETY: a racing placement of these 8 bytes only makes this read see old bytes.
            if unsafe { server.read(&[0..8], 8) } == b"flushed!" {
                placed = true;
                break;
            }
        }
        ensure!(placed, "the Write was never placed");
        server.qp.flush().ctx("Flush")?;
        let r = next_results(&client.scq, 1, "the placed Write")?;
        done(RequestType::Write, Status::SUCCESS, 7, client.qp_context).check(&r[0], "Write")
    });
}

/// A window's token is not a local SGE token (ND2_SGE: the token comes from
/// `IND2MemoryRegion::GetLocalToken`), even on the queue pair that bound it and for memory
/// its Bind lets the peer write: a Send from it completes ND_ACCESS_VIOLATION, as for any
/// token that names no region, and the connection ends.
#[test]
fn a_windows_token_is_not_a_local_token() {
    each("rdma-window-token-local", |p, ip| {
        let (a, server, client, _listener) = default_pair(p, ip)?;
        let region = server.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
        let w = a.create_memory_window().ctx("CreateMemoryWindow")?;
        bind_first_page(&server, &region, &w, 1)?;
        client.recv(1, &[0..64]).ctx("post Receive")?;
        let mut sge = server.sges(&[0..8]);
        // The remote token is the STag in network byte order; an SGE's token is in host order.
        sge[0].memory_region_token = u32::from_be(w.get_remote_token());
        // SAFETY: the SGE names the server's registered buffer (through the window's token).
        unsafe { server.qp.send(2, &sge, OpFlags::empty()) }.ctx("Send")?;
        let r = next_results(&server.scq, 1, "the Send")?;
        Expect::send(Status::ACCESS_VIOLATION, 2, server.qp_context).check(&r[0], "the Send")?;
        let r = next_results(&client.rcq, 1, "the peer's Receive")?;
        Expect::recv(Status::CANCELED, 1, client.qp_context, None).check(&r[0], "the Receive")
    });
}

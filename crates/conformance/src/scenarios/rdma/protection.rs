//! `rdma-protection` and `rdma-window-other-qp`: every remote-access violation completes
//! `ND_ACCESS_VIOLATION` with the target's memory untouched (D6), and a window's token works
//! only through the queue pair it was bound to.

use super::*;

/// Server buffer: [guard | target 16 KiB | guard | good area | ... | messages].
const PROT_BUF: usize = 512 * 1024;
const TARGET: Range<usize> = 64 * 1024..80 * 1024;
const GOOD: Range<usize> = 256 * 1024..256 * 1024 + 4096;
const GUARD_SEED: u64 = 0x6A4D;
const GOOD_SEED: u64 = 0x600D;

/// How the target is exposed, and what the initiator does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A region over `TARGET` with these `ND_MR_FLAG_*`.
    Region(MrFlags),
    /// A region over `TARGET` that is deregistered before its token is sent.
    Deregistered,
    /// A window over `TARGET` (region without remote rights) with these Bind flags.
    Window(OpFlags),
    /// A window that is bound and invalidated before its token is sent.
    Invalidated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
}

/// Where the access goes, relative to the target the server announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    /// `len` bytes at the start, with a token whose index (or only the key) was changed.
    WrongIndex,
    WrongKey,
    /// `len` bytes inside the target.
    Inside,
    /// One byte before the start.
    BelowStart,
    /// The last `len - 1` bytes and one more.
    PastEnd,
    /// At `u64::MAX - 7`: address + length overflows.
    Overflow,
}

#[derive(Debug, Clone, Copy)]
struct ProtCase {
    name: &'static str,
    target: Target,
    op: Op,
    aim: Aim,
    len: usize,
}

const RW: MrFlags = MrFlags::ALLOW_REMOTE_READ.union(MrFlags::ALLOW_REMOTE_WRITE);

const PROT_CASES: &[ProtCase] = &[
    ProtCase {
        name: "Write with a token nobody issued",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::WrongIndex,
        len: 16,
    },
    ProtCase {
        name: "Read with a token nobody issued",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::WrongIndex,
        len: 16,
    },
    ProtCase {
        name: "Write with the right index and a wrong key",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::WrongKey,
        len: 16,
    },
    ProtCase {
        name: "Write to a deregistered region",
        target: Target::Deregistered,
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read from a deregistered region",
        target: Target::Deregistered,
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write to a region without remote write",
        target: Target::Region(MrFlags::ALLOW_REMOTE_READ),
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read from a region without remote read",
        target: Target::Region(MrFlags::ALLOW_REMOTE_WRITE),
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write one byte before the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::BelowStart,
        len: 16,
    },
    ProtCase {
        name: "Write one byte past the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::PastEnd,
        len: 16,
    },
    ProtCase {
        name: "Write of 200 KiB (several segments) from one byte before the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::BelowStart,
        len: 200 * 1024,
    },
    ProtCase {
        name: "Read one byte before the region",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::BelowStart,
        len: 16,
    },
    ProtCase {
        name: "Read one byte past the region",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::PastEnd,
        len: 16,
    },
    ProtCase {
        name: "Write where address + length overflows",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::Overflow,
        len: 16,
    },
    ProtCase {
        name: "Read where address + length overflows",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::Overflow,
        len: 16,
    },
    ProtCase {
        name: "Write through an invalidated window",
        target: Target::Invalidated,
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read through an invalidated window",
        target: Target::Invalidated,
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write through a read-only window",
        target: Target::Window(OpFlags::ALLOW_READ),
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read through a write-only window",
        target: Target::Window(OpFlags::ALLOW_WRITE),
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write one byte past a window",
        target: Target::Window(OpFlags::ALLOW_WRITE),
        op: Op::Write,
        aim: Aim::PastEnd,
        len: 16,
    },
];

/// The guard pattern of the server's buffer, outside the message area.
fn guard(len: usize) -> Vec<u8> {
    let mut g = fast_pattern(GUARD_SEED, len);
    g[GOOD].copy_from_slice(&fast_pattern(GOOD_SEED, GOOD.len()));
    g
}

/// The target of one case; what keeps it alive is returned with it.
fn expose(
    side: &Side,
    t: Target,
) -> Check<(
    Area,
    Vec<netdirect::MemoryRegion>,
    Option<netdirect::MemoryWindow>,
)> {
    let ptr = side.buf.sge(TARGET, 0).buffer;
    let region = |flags: MrFlags| -> Check<netdirect::MemoryRegion> {
        let mr = side.adapter.create_memory_region().ctx("create MR")?;
        // SAFETY: TARGET lies in the side's buffer, which outlives the region (the region is
        // dropped, and deregistered, before the side).
        let ov = unsafe { mr.register(ptr, TARGET.len(), flags) }.ctx("Register")?;
        wait_ok(&ov, "Register")?;
        Ok(mr)
    };
    let area = |token| Area {
        token,
        addr: side.addr(TARGET.start),
        len: TARGET.len() as u64,
    };
    match t {
        Target::Region(flags) => {
            let mr = region(flags)?;
            Ok((area(mr.get_remote_token()), vec![mr], None))
        }
        Target::Deregistered => {
            let mr = region(RW)?;
            let token = mr.get_remote_token();
            wait_ok(&mr.deregister().ctx("Deregister")?, "Deregister")?;
            Ok((area(token), vec![mr], None))
        }
        Target::Window(_) | Target::Invalidated => {
            let mr = region(MrFlags::ALLOW_LOCAL_WRITE)?;
            let w = side
                .adapter
                .create_memory_window()
                .ctx("CreateMemoryWindow")?;
            let flags = match t {
                Target::Window(f) => f,
                _ => OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
            };
            side.qp
                .bind(0xB, &mr, &w, ptr, TARGET.len(), flags)
                .ctx("Bind")?;
            let token = w.get_remote_token();
            let mut n = 1;
            if t == Target::Invalidated {
                side.qp
                    .invalidate(0x1, &w, OpFlags::empty())
                    .ctx("Invalidate")?;
                n = 2;
            }
            let r = next_results(&side.scq, n, "Bind/Invalidate")?;
            ensure!(
                r.iter().all(|c| c.status == Status::SUCCESS),
                "Bind/Invalidate failed: {r:?}"
            );
            Ok((area(token), vec![mr], Some(w)))
        }
    }
}

pub(crate) fn protection_server(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(any_port(ctx))?;
    let (listener, laddr) = listen(&adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    // Each case's connection lives until the client comes back for the next one: it has
    // read our Terminate by then.
    let mut previous: Option<Side> = None;
    for (i, case) in PROT_CASES.iter().enumerate() {
        let what = format!("case {i} ({})", case.name);
        let side = Side::on(
            &adapter,
            SideConfig {
                qp_context: SERVER_QP,
                ..config(PROT_BUF, 4)
            },
        )?;
        let body = PROT_BUF - 64 * 1024;
        // SAFETY: nothing is posted yet.
        unsafe { side.write(&[0..body], &guard(body)) };
        let good = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
        post_msg(&side, 0, 0xCA5E)?;
        let ov = listener
            .get_connection_request(&side.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&ov, &format!("{what}: GetConnectionRequest"))?;
        drop(previous.take());
        let aov = side.connector.accept(&side.qp, 2, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, &format!("{what}: Accept"))?;
        let (area, _keep_mr, _keep_mw) = expose(&side, case.target)?;
        let good_area = Area {
            token: good.get_remote_token(),
            addr: side.addr(GOOD.start),
            len: GOOD.len() as u64,
        };
        let mut m = area.encode().to_vec();
        m.extend_from_slice(&good_area.encode());
        send_msg(&side, 1, INFO, &m)?;
        // R-QP-6: the responder's fault flushes its outstanding Receive with ND_CANCELED.
        let r = next_results(&side.rcq, 1, &format!("{what}: the server's Receive"))?;
        Expect::recv(Status::CANCELED, 0xCA5E, side.qp_context, None).check(
            &r[0],
            &format!("{what}: the server's Receive after the violation"),
        )?;
        // Not one byte of the target (or around it) changed.
        // SAFETY: the connection is gone; nothing writes the buffer.
        let now = unsafe { side.read(&[0..body], body) };
        expect_bytes(&now, &guard(body), &format!("{what}: the server's memory"))?;
        previous = Some(side);
    }
    ctx.linger();
    Ok(())
}

pub(crate) fn protection_client(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(ctx.client_local())?;
    for (i, case) in PROT_CASES.iter().enumerate() {
        let what = format!("case {i} ({})", case.name);
        let side = Side::on(
            &adapter,
            SideConfig {
                qp_context: CLIENT_QP,
                ..config(256 * 1024 + 64 * 1024, 4)
            },
        )?;
        post_msg(&side, 0, INFO)?;
        post_msg(&side, 1, 0x999)?;
        let ov = side.connect(ctx.client_local(), ctx.addr, 0, 2, &[])?;
        wait_ok(&ov, &format!("{what}: Connect"))?;
        let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, &format!("{what}: CompleteConnect"))?;
        let m = recv_msg(&side, 0, INFO, &format!("{what}: the server's areas"))?;
        let (area, good) = (Area::decode(&m), Area::decode(&m[AREA_LEN..]));
        let host = u32::from_be(area.token);
        let (token, addr) = match case.aim {
            Aim::WrongIndex => ((host ^ 0x5A_5A00).to_be(), area.addr),
            Aim::WrongKey => ((host ^ 0x01).to_be(), area.addr),
            Aim::Inside => (area.token, area.addr),
            Aim::BelowStart => (area.token, area.addr - 1),
            Aim::PastEnd => (area.token, area.addr + area.len - case.len as u64 + 1),
            Aim::Overflow => (area.token, u64::MAX - 7),
        };
        let q = side.qp_context;
        // A good Read first: it completes; then the bad request; then a Send that must be
        // flushed.
        side.rdma_read(1, &[0..GOOD.len()], good.addr, good.token, OpFlags::empty())
            .ctx("good Read")?;
        let local = [8192..8192 + case.len];
        let (ty, r) = match case.op {
            Op::Write => (
                RequestType::Write,
                side.rdma_write(2, &local, addr, token, OpFlags::empty()),
            ),
            Op::Read => (
                RequestType::Read,
                side.rdma_read(2, &local, addr, token, OpFlags::empty()),
            ),
        };
        // D6: the post itself succeeds.
        r.ctx(&format!("{what}: post"))?;
        side.send(3, &[0..8], OpFlags::empty()).ctx("Send")?;
        let r = next_results(&side.scq, 3, &what)?;
        expect_results(
            &r,
            &[
                done(RequestType::Read, Status::SUCCESS, 1, q),
                done(ty, Status::ACCESS_VIOLATION, 2, q),
                Expect::send(Status::CANCELED, 3, q),
            ],
            &format!("{what}: completions (D6: ND_ACCESS_VIOLATION, then ND_CANCELED)"),
        )?;
        // SAFETY: the good Read completed.
        let got = unsafe { side.read(&[0..GOOD.len()], GOOD.len()) };
        expect_bytes(
            &got,
            &fast_pattern(GOOD_SEED, GOOD.len()),
            &format!("{what}: good Read"),
        )?;
        if case.op == Op::Read {
            // A refused Read brings nothing.
            // SAFETY: the Read completed.
            let sink = unsafe { side.read(&local, case.len) };
            ensure!(
                sink.iter().all(|&b| b == 0),
                "{what}: a refused Read wrote its sink"
            );
        }
        let r = next_results(&side.rcq, 1, &format!("{what}: the client's Receive"))?;
        Expect::recv(Status::CANCELED, 0x999, q, None).check(
            &r[0],
            &format!("{what}: the client's Receive after the violation"),
        )?;
        expect_empty(&side.scq, &format!("{what}: initiator CQ"))?;
        let d = side.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, &format!("{what}: Disconnect"))?;
    }
    Ok(())
}

pub(crate) fn window_other_qp_server(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(any_port(ctx))?;
    let cfg = SideConfig {
        qp_context: SERVER_QP,
        ..config(PROT_BUF, 4)
    };
    let a = Side::on(&adapter, cfg)?;
    let b = Side::on(
        &adapter,
        SideConfig {
            qp_context: SERVER_QP + 1,
            ..cfg
        },
    )?;
    let body = PROT_BUF - 64 * 1024;
    // SAFETY: nothing is posted yet.
    unsafe { a.write(&[0..body], &guard(body)) };
    post_msg(&b, 0, 0xB0)?;
    post_msg(&a, 0, 0xA0)?;
    let (listener, laddr) = listen(&adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    for s in [&a, &b] {
        let ov = listener
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&ov, "GetConnectionRequest")?;
        let aov = s.connector.accept(&s.qp, 2, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, "Accept")?;
    }
    // One window over A's buffer, bound through A's queue pair; its token goes out on both
    // connections.
    let region = a.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
    let w = adapter.create_memory_window().ctx("CreateMemoryWindow")?;
    a.qp.bind(
        0xB,
        &region,
        &w,
        a.buf.sge(TARGET, 0).buffer,
        TARGET.len(),
        OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
    )
    .ctx("Bind")?;
    next_results(&a.scq, 1, "Bind")?;
    let area = Area {
        token: w.get_remote_token(),
        addr: a.addr(TARGET.start),
        len: TARGET.len() as u64,
    };
    send_msg(&a, 1, INFO, &area.encode())?;
    send_msg(&b, 1, INFO, &area.encode())?;
    // The access through B is refused: B's connection ends, its Receive is flushed.
    let r = next_results(&b.rcq, 1, "B's Receive")?;
    Expect::recv(Status::CANCELED, 0xB0, b.qp_context, None).check(
        &r[0],
        "the Receive of the connection the window is not bound to",
    )?;
    // Through A it works; A's client says so.
    recv_msg(&a, 0, 0xA0, "A's done message")?;
    // SAFETY: both clients are done.
    let now = unsafe { a.read(&[0..body], body) };
    let mut want = guard(body);
    want[TARGET.start..TARGET.start + 16].copy_from_slice(&fast_pattern(0x0A, 16));
    expect_bytes(&now, &want, "memory after Writes through both connections")?;
    ctx.linger();
    Ok(())
}

pub(crate) fn window_other_qp_client(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(ctx.client_local())?;
    let cfg = SideConfig {
        qp_context: CLIENT_QP,
        ..config(128 * 1024, 4)
    };
    let a = Side::on(&adapter, cfg)?;
    let b = Side::on(
        &adapter,
        SideConfig {
            qp_context: CLIENT_QP + 1,
            ..cfg
        },
    )?;
    for s in [&a, &b] {
        post_msg(s, 0, INFO)?;
        let ov = s.connect(ctx.client_local(), ctx.addr, 0, 2, &[])?;
        wait_ok(&ov, "Connect")?;
        let cc = s.connector.complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, "CompleteConnect")?;
    }
    let area_a = Area::decode(&recv_msg(&a, 0, INFO, "window via A")?);
    let area_b = Area::decode(&recv_msg(&b, 0, INFO, "window via B")?);
    // SAFETY: nothing is posted on these ranges.
    unsafe {
        a.write(&[0..16], &fast_pattern(0x0A, 16));
        b.write(&[0..16], &fast_pattern(0x0B, 16));
    }
    b.rdma_write(1, &[0..16], area_b.addr, area_b.token, OpFlags::empty())
        .ctx("Write through the other connection")?;
    let r = next_results(&b.scq, 1, "Write through the other connection")?;
    done(
        RequestType::Write,
        Status::ACCESS_VIOLATION,
        1,
        b.qp_context,
    )
    .check(
        &r[0],
        "a window used through a connection it is not bound to (STag not associated)",
    )?;
    a.rdma_write(2, &[0..16], area_a.addr, area_a.token, OpFlags::empty())
        .ctx("Write through the window's own connection")?;
    let r = next_results(&a.scq, 1, "Write through the window's connection")?;
    done(RequestType::Write, Status::SUCCESS, 2, a.qp_context)
        .check(&r[0], "Write through the window's own connection")?;
    send_msg(&a, 1, 0xA0, &[])?;
    for s in [&a, &b] {
        let d = s.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, "Disconnect")?;
    }
    Ok(())
}

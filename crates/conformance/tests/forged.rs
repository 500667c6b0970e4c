//! Forged one-sided traffic: a raw TCP client (the `netdirect-wire` encoders over a plain
//! `std::net::TcpStream`) does a correct MPA v2 handshake with an ND listener and then sends
//! hand-made RDMA Writes and Read Requests: guessed STags, the right index with a wrong key,
//! stale STags, STags without the right, out-of-range and wrapping TOs, windows bound through
//! another connection, more Read Requests than the IRD. Not one byte may get into the server's
//! memory or out of it past the checks: each case must draw exactly the Terminate
//! (layer/type/code) of docs/WIRE.md §4.3–4.4 naming the offending segment, no Read Response
//! bytes, the server's Receive flushed, and the server's memory as it was.
//!
//! The `control` case is the same raw client doing a correct Write and Read: the server
//! places and answers them, so the other cases fail because of what they forge.

#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::ops::Range;
use std::sync::mpsc;

use common::{read_mpa, Segments};
use netdirect::{MemoryRegion, MemoryWindow, MrFlags, OpFlags, Provider, Status};
use netdirect_conformance::check::{
    expect_bytes, fast_pattern, next_results, wait_ok, Check, Context, Expect, WAIT,
};
use netdirect_conformance::harness;
use netdirect_conformance::side::listen;
use netdirect_conformance::{ensure, ensure_eq, Failure, Needs, Side, SideConfig};
use netdirect_wire::ddp::{DdpHeader, QN_SEND};
use netdirect_wire::fpdu::encode_fpdu;
use netdirect_wire::handshake::{
    rtr_fpdu, Initiator, InitiatorConfig, InitiatorOutcome, Negotiated,
};
use netdirect_wire::rdmap::{Opcode, ReadRequest, TermError, Terminate, TERMINATE_MAX_LEN};
use netdirect_wire::sequence::TxMsn;

const BUF: usize = 256 * 1024;
const GUARD_SEED: u64 = 0x6A4D_F0F0;
/// The server's memory the forged requests aim at.
const RW: Range<usize> = 16 * 1024..32 * 1024;
const RO: Range<usize> = 48 * 1024..52 * 1024;
const WO: Range<usize> = 64 * 1024..68 * 1024;
const DEAD: Range<usize> = 80 * 1024..84 * 1024;
const WIN: Range<usize> = 96 * 1024..100 * 1024;
/// The part of the buffer the checks cover (the rest holds Receives).
const BODY: Range<usize> = 0..192 * 1024;

/// Tokens (STags, host order) and addresses the server hands to the raw client.
#[derive(Debug, Clone, Copy)]
struct Tokens {
    base: u64,
    rw: u32,
    ro: u32,
    wo: u32,
    dead: u32,
    win: u32,
}

impl Tokens {
    fn at(&self, off: usize) -> u64 {
        self.base + off as u64
    }
}

/// What a forged message is.
#[derive(Debug, Clone, Copy)]
enum Forged {
    /// An RDMA Write of `len` bytes (one segment per `seg` bytes) to `stag`/`to`.
    Write {
        stag: u32,
        to: u64,
        len: usize,
        seg: usize,
    },
    /// An RDMA Read Request for `size` bytes at `stag`/`to`.
    Read { stag: u32, to: u64, size: u32 },
}

/// What must come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// This Terminate, naming the `n`-th forged message (0-based), and nothing after it.
    Terminate(TermError, usize),
    /// Every message accepted (the control case).
    Accepted,
}

struct Case {
    name: &'static str,
    /// Accept's inbound read limit (our IRD).
    ird: u32,
    /// Bytes of the server's memory the case may change (a Write's in-bounds segments).
    changes: Option<Range<usize>>,
    /// Use the second connection (the window is bound through the first).
    second: bool,
    msgs: fn(&Tokens) -> Vec<Forged>,
    outcome: Outcome,
}

fn cases() -> Vec<Case> {
    use Outcome::*;
    use TermError::*;
    vec![
        Case {
            name: "control: a correct Write and Read",
            ird: 4,
            changes: Some(RW.start..RW.start + 4000),
            second: false,
            msgs: |t| {
                vec![
                    Forged::Write {
                        stag: t.rw,
                        to: t.at(RW.start),
                        len: 4000,
                        seg: 1500,
                    },
                    Forged::Read {
                        stag: t.rw,
                        to: t.at(RW.start),
                        size: 4000,
                    },
                ]
            },
            outcome: Accepted,
        },
        Case {
            name: "Write with a guessed STag",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw ^ 0x00C0_FF00,
                    to: t.at(RW.start),
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedInvalidStag, 0),
        },
        Case {
            name: "Write with the right index and a wrong key",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw ^ 0x80,
                    to: t.at(RW.start),
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedInvalidStag, 0),
        },
        Case {
            name: "Write with a stale STag (deregistered region)",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.dead,
                    to: t.at(DEAD.start),
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedInvalidStag, 0),
        },
        Case {
            name: "Write to a region without remote write",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.ro,
                    to: t.at(RO.start),
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedInvalidStag, 0),
        },
        Case {
            name: "Write one byte before the region",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw,
                    to: t.at(RW.start) - 1,
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedBaseBounds, 0),
        },
        Case {
            name: "Write one byte past the region",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw,
                    to: t.at(RW.end) - 63,
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedBaseBounds, 0),
        },
        Case {
            name: "Write whose TO range wraps 2^64",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw,
                    to: u64::MAX - 15,
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedToWrap, 0),
        },
        Case {
            name: "Write whose second segment runs past the region",
            ird: 4,
            // The first segment is in bounds and placed (DDP places segments on their own);
            // the second, running 1000 bytes past the end, places nothing.
            changes: Some(RW.end - 3000..RW.end - 1000),
            second: false,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.rw,
                    to: t.at(RW.end) - 3000,
                    len: 4000,
                    seg: 2000,
                }]
            },
            outcome: Terminate(DdpTaggedBaseBounds, 0),
        },
        Case {
            name: "Write through a window bound to another connection",
            ird: 4,
            changes: None,
            second: true,
            msgs: |t| {
                vec![Forged::Write {
                    stag: t.win,
                    to: t.at(WIN.start),
                    len: 64,
                    seg: 64,
                }]
            },
            outcome: Terminate(DdpTaggedStagNotAssociated, 0),
        },
        Case {
            name: "Read Request past the region",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.rw,
                    to: t.at(RW.end) - 63,
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapBaseBounds, 0),
        },
        Case {
            name: "Read Request for another range: the whole buffer under a small region",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.ro,
                    to: t.base,
                    size: BODY.end as u32,
                }]
            },
            outcome: Terminate(RdmapBaseBounds, 0),
        },
        Case {
            name: "Read Request from a region without remote read",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.wo,
                    to: t.at(WO.start),
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapAccessRights, 0),
        },
        Case {
            name: "Read Request with a stale STag",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.dead,
                    to: t.at(DEAD.start),
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapInvalidStag, 0),
        },
        Case {
            name: "Read Request with a wrong key",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.rw ^ 0x01,
                    to: t.at(RW.start),
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapInvalidStag, 0),
        },
        Case {
            name: "Read Request whose TO range wraps 2^64",
            ird: 4,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.rw,
                    to: u64::MAX - 15,
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapToWrap, 0),
        },
        Case {
            name: "Read Request through a window bound to another connection",
            ird: 4,
            changes: None,
            second: true,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.win,
                    to: t.at(WIN.start),
                    size: 64,
                }]
            },
            outcome: Terminate(RdmapStagNotAssociated, 0),
        },
        Case {
            name: "a Read Request with an IRD of 0",
            ird: 0,
            changes: None,
            second: false,
            msgs: |t| {
                vec![Forged::Read {
                    stag: t.rw,
                    to: t.at(RW.start),
                    size: 64,
                }]
            },
            outcome: Terminate(DdpUntaggedNoBuffer, 0),
        },
        Case {
            name: "two Read Requests at once with an IRD of 1",
            ird: 1,
            changes: None,
            second: false,
            msgs: |t| {
                vec![
                    Forged::Read {
                        stag: t.rw,
                        to: t.at(RW.start),
                        size: 64,
                    },
                    Forged::Read {
                        stag: t.rw,
                        to: t.at(RW.start),
                        size: 64,
                    },
                ]
            },
            // The first is answered; the second exceeds the IRD (RFC 5040 §5.4).
            outcome: Terminate(DdpUntaggedNoBuffer, 1),
        },
    ]
}

/// Connect and do the MPA exchange (no Write completion probe: a plain iWARP peer); the stream
/// and what was agreed. No RTR is sent yet.
fn raw_handshake(addr: SocketAddr) -> Check<(TcpStream, Negotiated)> {
    let mut s = TcpStream::connect(addr).ctx("raw connect")?;
    s.set_read_timeout(Some(WAIT)).ctx("set_read_timeout")?;
    s.set_nodelay(true).ctx("set_nodelay")?;
    let mut init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 4,
        ord: 4,
        p2p: true,
        private_data: b"forger".to_vec(),
        probe: false,
    });
    s.write_all(&init.request()).ctx("send MPA Request")?;
    let neg = match read_mpa(&mut s, "MPA Reply", |b| init.handle_reply(b))? {
        InitiatorOutcome::Accepted(neg) => neg,
        InitiatorOutcome::Rejected { .. } => return Err(Failure("rejected".into())),
    };
    ensure!(
        !neg.probe,
        "the probe was negotiated with a client that did not offer it"
    );
    Ok((s, neg))
}

/// [`raw_handshake`], then the RTR.
fn raw_connect(addr: SocketAddr) -> Check<(TcpStream, TxMsn, bool)> {
    let (mut s, neg) = raw_handshake(addr)?;
    let rtr = neg.rtr.ok_or_else(|| Failure("no RTR agreed".into()))?;
    let mut tx = TxMsn::new();
    s.write_all(&rtr_fpdu(rtr, &mut tx, neg.crc))
        .ctx("send RTR")?;
    Ok((s, tx, neg.crc))
}

/// The bytes of the forged messages (Write payload: `fast_pattern(7, len)`), and the raw DDP
/// header of the first segment of each.
fn forge(msgs: &[Forged], tx: &mut TxMsn, crc: bool) -> (Vec<u8>, Vec<DdpHeader>) {
    let mut out = Vec::new();
    let mut firsts = Vec::new();
    for m in msgs {
        match *m {
            Forged::Write { stag, to, len, seg } => {
                let data = fast_pattern(7, len);
                let mut off = 0;
                loop {
                    let n = seg.min(len - off);
                    let last = off + n == len;
                    let h = DdpHeader::write(stag, to.wrapping_add(off as u64), last);
                    if off == 0 {
                        firsts.push(h);
                    }
                    out.extend_from_slice(&encode_fpdu(&h, &[], &data[off..off + n], crc));
                    off += n;
                    if last {
                        break;
                    }
                }
            }
            Forged::Read { stag, to, size } => {
                let rr = ReadRequest {
                    sink_stag: 0x5151_5151,
                    sink_to: 0x1000,
                    size,
                    src_stag: stag,
                    src_to: to,
                };
                let h = DdpHeader::read_request(tx.next(1));
                firsts.push(h);
                out.extend_from_slice(&encode_fpdu(&h, &rr.to_bytes(), &[], crc));
            }
        }
    }
    (out, firsts)
}

/// What the server sent back until it closed: Read Response payload bytes per response, and
/// the Terminate.
fn read_back(s: &mut TcpStream, crc: bool) -> Check<(Vec<Vec<u8>>, Option<Terminate>)> {
    let mut rx = Segments::new(crc);
    let mut responses: Vec<Vec<u8>> = Vec::new();
    let mut term = None;
    let mut in_response = false;
    while let Some((h, payload)) = rx.next(s)? {
        ensure!(
            term.is_none(),
            "the server sent an FPDU after its Terminate"
        );
        match h.ddp.opcode() {
            Opcode::ReadResponse => {
                if !in_response {
                    responses.push(Vec::new());
                }
                in_response = !h.ddp.last();
                if let Some(r) = responses.last_mut() {
                    r.extend_from_slice(&payload);
                }
            }
            Opcode::Terminate => term = h.terminate,
            other => return Err(Failure(format!("unexpected {other:?} from the server"))),
        }
    }
    Ok((responses, term))
}

/// The raw client's side of one case.
fn raw_case(addr: SocketAddr, case: &Case, t: &Tokens) -> Check {
    let (mut s, mut tx, crc) = raw_connect(addr)?;
    let msgs = (case.msgs)(t);
    let (bytes, firsts) = forge(&msgs, &mut tx, crc);
    s.write_all(&bytes).ctx("send the forged messages")?;
    if case.outcome == Outcome::Accepted {
        // Tell the server we are done: a Send for its Receive, then FIN.
        let send = encode_fpdu(
            &DdpHeader::send(Opcode::Send, tx.next(QN_SEND), 0, true, 0),
            &[],
            b"done",
            crc,
        );
        s.write_all(&send).ctx("send done")?;
        s.shutdown(std::net::Shutdown::Write).ctx("shutdown")?;
    }
    let (responses, term) = read_back(&mut s, crc)?;
    match case.outcome {
        Outcome::Accepted => {
            ensure!(term.is_none(), "the control case was terminated: {term:?}");
            ensure_eq!(responses.len(), 1, "Read Responses");
            expect_bytes(&responses[0], &fast_pattern(7, 4000), "the Read Response")?;
        }
        Outcome::Terminate(err, n) => {
            let t = term.ok_or_else(|| Failure("no Terminate came back".into()))?;
            ensure_eq!(t.error, err, "Terminate layer/type/code");
            // The Terminate names the offending segment (RFC 5040 §4.8: D, and for a Read
            // Request's protection error R with its header).
            let named = t
                .ddp_header
                .ok_or_else(|| Failure("the Terminate carries no DDP header".into()))?
                .decode()
                .map_err(|e| Failure(format!("Terminate DDP header: {e}")))?;
            match (named, firsts[n]) {
                (DdpHeader::Untagged(a), DdpHeader::Untagged(b)) => {
                    ensure_eq!((a.qn, a.msn), (b.qn, b.msn), "Terminate names QN/MSN")
                }
                (DdpHeader::Tagged(a), DdpHeader::Tagged(b)) => {
                    ensure_eq!(a.stag, b.stag, "Terminate names the STag")
                }
                (a, b) => return Err(Failure(format!("Terminate names {a:?}, sent {b:?}"))),
            }
            if err.layer() == 0 && err.etype() == 1 {
                ensure!(
                    t.rdma_header.is_some(),
                    "no Read Request header (R) in {t:?}"
                );
            }
            // Only the Read Requests before the offending one were answered.
            let answered = msgs[..n]
                .iter()
                .filter(|m| matches!(m, Forged::Read { .. }))
                .count();
            ensure_eq!(
                responses.len(),
                answered,
                "Read Responses before the Terminate"
            );
            for r in &responses {
                ensure!(
                    r.iter().all(|&b| b == 0x5A),
                    "a Read Response carried bytes other than the guard pattern of RW"
                );
            }
        }
    }
    Ok(())
}

fn register(side: &Side, r: Range<usize>, flags: MrFlags) -> Check<MemoryRegion> {
    let mr = side.adapter.create_memory_region().ctx("create MR")?;
    // SAFETY: the range lies in the side's buffer, which outlives every registration here.
    let ov = unsafe { mr.register(side.buf.sge(r.clone(), 0).buffer, r.len(), flags) }
        .ctx("Register")?;
    wait_ok(&ov, "Register")?;
    Ok(mr)
}

fn guard() -> Vec<u8> {
    let mut g = fast_pattern(GUARD_SEED, BODY.len());
    // RW holds a known byte, so an answered Read Response shows where it read from.
    g[RW].fill(0x5A);
    g
}

fn run(p: &Provider, ip: IpAddr) -> Check {
    let adapter = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let cfg = SideConfig {
        buf_len: BUF,
        ..SideConfig::default()
    };
    // The memory: one buffer, registered in pieces with different rights.
    let mem = Side::on(&adapter, cfg)?;
    // SAFETY: nothing is posted on this side.
    unsafe { mem.write(&[BODY], &guard()) };
    let rw = register(
        &mem,
        RW,
        MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE,
    )?;
    let ro = register(&mem, RO, MrFlags::ALLOW_REMOTE_READ)?;
    let wo = register(&mem, WO, MrFlags::ALLOW_REMOTE_WRITE)?;
    let dead = register(
        &mem,
        DEAD,
        MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE,
    )?;
    let dead_token = dead.get_remote_token();
    wait_ok(&dead.deregister().ctx("Deregister")?, "Deregister")?;
    let win_region = register(&mem, WIN, MrFlags::ALLOW_LOCAL_WRITE)?;
    let (listener, addr) = listen(&adapter, SocketAddr::new(ip, 0), 8)?;
    let host = |mr: &MemoryRegion| u32::from_be(mr.get_remote_token());
    let mut tokens = Tokens {
        base: mem.addr(0),
        rw: host(&rw),
        ro: host(&ro),
        wo: host(&wo),
        dead: u32::from_be(dead_token),
        win: 0,
    };
    for case in cases() {
        let what = case.name;
        // Connection 1 (and, for window cases, connection 2): fresh queue pairs.
        let first = Side::on(
            &adapter,
            SideConfig {
                buf_len: 8192,
                ..cfg
            },
        )?;
        let second = Side::on(
            &adapter,
            SideConfig {
                buf_len: 8192,
                ..cfg
            },
        )?;
        let target = if case.second { &second } else { &first };
        target.recv(1, &[0..64]).ctx("post Receive")?;
        let (tx_tokens, rx_tokens) = mpsc::channel::<Tokens>();
        let case = &case;
        let mut window: Option<MemoryWindow> = None;
        let result = std::thread::scope(|sc| -> Check {
            let client = sc.spawn(move || -> Check {
                let t = rx_tokens
                    .recv()
                    .map_err(|_| Failure("no tokens from the server".into()))?;
                if case.second {
                    // Connection 1 exists only to bind the window through it.
                    let (_keep, _, _) = raw_connect(addr)?;
                    let t = rx_tokens
                        .recv()
                        .map_err(|_| Failure("no window token from the server".into()))?;
                    raw_case(addr, case, &t)
                } else {
                    raw_case(addr, case, &t)
                }
            });
            // Serve connection 1.
            tx_tokens
                .send(tokens)
                .map_err(|_| Failure("client gone".into()))?;
            let ov = listener
                .get_connection_request(&first.connector)
                .ctx("GetConnectionRequest")?;
            wait_ok(&ov, &format!("{what}: GetConnectionRequest"))?;
            let aov = first
                .connector
                .accept(&first.qp, case.ird, 0, &[])
                .ctx("Accept")?;
            if case.second {
                // The window, bound through connection 1; its token goes to connection 2.
                let w = adapter.create_memory_window().ctx("CreateMemoryWindow")?;
                first
                    .qp
                    .bind(
                        9,
                        &win_region,
                        &w,
                        mem.buf.sge(WIN, 0).buffer,
                        WIN.len(),
                        OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
                    )
                    .ctx("Bind")?;
                tokens.win = u32::from_be(w.get_remote_token());
                tx_tokens
                    .send(tokens)
                    .map_err(|_| Failure("client gone".into()))?;
                let ov = listener
                    .get_connection_request(&second.connector)
                    .ctx("GetConnectionRequest")?;
                wait_ok(&ov, &format!("{what}: GetConnectionRequest 2"))?;
                let aov2 = second
                    .connector
                    .accept(&second.qp, case.ird, 0, &[])
                    .ctx("Accept")?;
                wait_ok(&aov2, &format!("{what}: Accept 2"))?;
                window = Some(w);
            }
            drop(aov);
            let r = next_results(&target.rcq, 1, &format!("{what}: the server's Receive"))?;
            let want = if case.outcome == Outcome::Accepted {
                Status::SUCCESS
            } else {
                Status::CANCELED
            };
            Expect::recv(want, 1, target.qp_context, None)
                .check(&r[0], &format!("{what}: the server's Receive"))?;
            // Our side ends too (the raw client reads until the connection closes).
            for s in [&first, &second] {
                if let Ok(d) = s.connector.disconnect() {
                    let _ = d.wait();
                }
            }
            let client = client
                .join()
                .unwrap_or_else(|_| Err(Failure("the raw client panicked".into())));
            client.map_err(|e| Failure(format!("{what}: raw client: {e}")))
        });
        drop(window);
        result?;
        // Not a byte changed except what the case may change.
        let mut want = guard();
        if let Some(r) = case.changes.clone() {
            let data = fast_pattern(7, r.len());
            want[r].copy_from_slice(&data);
        }
        // SAFETY: every connection of this case is closed.
        let now = unsafe { mem.read(&[BODY], BODY.len()) };
        expect_bytes(&now, &want, &format!("{what}: the server's memory"))?;
        // SAFETY: as above; the next case starts from the guard again.
        unsafe { mem.write(&[BODY], &guard()) };
    }
    Ok(())
}

#[test]
fn forged_one_sided_traffic() {
    harness::each_provider(Needs::IwarpWire, "forged-one-sided", |p, fam| {
        run(p, fam.ip())
    });
}

/// An initiator that cannot use our Reply answers with the LLP Terminate of RFC 6581 §9.2
/// instead of an RTR: the connection never came up, so the passive Accept completes
/// ND_CONNECTION_REFUSED (docs/ND-RULES.md D9), not ND_SUCCESS.
#[test]
fn a_terminate_instead_of_the_rtr_refuses_the_accept() {
    harness::each_provider(Needs::IwarpWire, "terminate-instead-of-rtr", |p, fam| {
        let ip = fam.ip();
        let adapter = p
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let side = Side::on(&adapter, SideConfig::default())?;
        let (listener, addr) = listen(&adapter, SocketAddr::new(ip, 0), 4)?;
        let gcr = listener
            .get_connection_request(&side.connector)
            .ctx("GetConnectionRequest")?;
        let client = std::thread::spawn(move || -> Check {
            let (mut s, neg) = raw_handshake(addr)?;
            let mut body = [0u8; TERMINATE_MAX_LEN];
            let n = Terminate::new(TermError::LlpNoMatchingRtr).encode(&mut body);
            let t = encode_fpdu(&DdpHeader::terminate(), &body[..n], &[], neg.crc);
            s.write_all(&t).ctx("send the Terminate")?;
            // Until the server closes.
            let mut sink = [0u8; 256];
            while s.read(&mut sink).ctx("read to the end")? > 0 {}
            Ok(())
        });
        wait_ok(&gcr, "GetConnectionRequest")?;
        let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
        netdirect_conformance::check::wait_status(
            &aov,
            Status::CONNECTION_REFUSED,
            "Accept answered by a Terminate",
        )?;
        client
            .join()
            .map_err(|_| Failure("the raw client panicked".into()))?
    });
}

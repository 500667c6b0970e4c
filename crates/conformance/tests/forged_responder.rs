//! A plain iWARP responder that refuses or garbles what the ND side asks of it: here the ND
//! queue pair is the *initiator* (in `forged.rs` it is the target). A raw TCP listener (the
//! `netdirect-wire` encoders over `std::net`) accepts the ND Connect with a correct MPA v2
//! Reply that takes the Write completion probe (so a Write completes only once the peer placed
//! it, and a refusal can still name it), takes the RTR, and then answers the ND side's RDMA
//! Write or Read with a Terminate, or with a forged Read Response.
//!
//! What the initiator must make of it (docs/WIRE.md §4.4, docs/ND-RULES.md D6 and the
//! ND2_RESULT status table of IND2CompletionQueue):
//!
//! * A Terminate naming the request (its DDP header, D): a protection error (EType 1 of RDMAP
//!   or DDP) completes it `ND_ACCESS_VIOLATION`; any other error `ND_REMOTE_ERROR` ("the
//!   request caused an error on the remote queue pair"). Everything posted after it is flushed
//!   `ND_CANCELED`, and so is the posted Receive.
//! * A Read Response that does not continue the outstanding Read exactly (another STag,
//!   another offset, more or fewer bytes than asked), or that answers no Read at all: not a
//!   byte is placed, the Read completes `ND_REMOTE_ERROR`, and the ND side sends exactly one
//!   Terminate (DDP tagged buffer error 0x1/0x1/0x00 for the STag, 0x1/0x1/0x01 for the
//!   offset or length, as siw does) naming the refused segment, and nothing after it.
//!
//! The `control` cases are the same responder answering correctly: the Write's bytes arrive as
//! posted, the Read's bytes land in its sink, and both complete `ND_SUCCESS`, so the other
//! cases fail because of what the responder forges.

mod common;

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::ops::Range;

use common::{read_mpa, Segments};
use netdirect::{OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{
    expect_bytes, expect_results, fast_pattern, next_results, wait_ok, wait_status, Check, Context,
    Expect, WAIT,
};
use netdirect_conformance::harness;
use netdirect_conformance::{ensure, ensure_eq, Failure, Needs, Side, SideConfig};
use netdirect_wire::ddp::{DdpHeader, QN_READ_REQUEST, QN_SEND};
use netdirect_wire::fpdu::{
    encode_fpdu, encode_terminate_fpdu, SegmentHeader, MAX_TERMINATE_FPDU_LEN,
};
use netdirect_wire::handshake::{accept, is_rtr, reject, AcceptConfig, Responder, Rtr};
use netdirect_wire::rdmap::{Opcode, ReadRequest, TermError, Terminate};
use netdirect_wire::sequence::TxMsn;

/// Bytes of the Write and of the Read.
const LEN: usize = 64;
/// Where the ND side's Write comes from, its Read goes to, its Send comes from and its Receive
/// goes to.
const SRC: Range<usize> = 0..LEN;
const SINK: Range<usize> = 1024..1024 + LEN;
const SEND: Range<usize> = 2048..2052;
const RECV: Range<usize> = 4096..4096 + LEN;
/// The responder's memory as the ND side names it: the STag (host order, as on the wire) and
/// the address. The responder has no memory; it only checks that the request names these.
const STAG: u32 = 0x0ABC_DE01;
const TO: u64 = 0x7F00_1234_0000;
/// Pattern seeds: the Write's bytes, the Read's bytes.
const WRITE_SEED: u64 = 0x5752;
const READ_SEED: u64 = 0x5244;
/// What the sink holds before the Read: a failed Read must leave it so.
const GUARD: u8 = 0xEE;

/// The ND side's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
    /// Nothing: the responder speaks first.
    None,
}

/// How the responder answers the ND side's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Correctly: the Write is taken, the Read answered with `fast_pattern(READ_SEED, LEN)`.
    Serve,
    /// With a Terminate naming the request, with the header fields RFC 5040 §4.8 Figure 10
    /// asks for.
    Terminate(TermError),
    /// With a Terminate that names nothing: Layer/EType/Code only (the form Figure 10 gives
    /// LLP and local catastrophic errors, and a receiver that cannot parse a header uses).
    Bare(TermError),
    /// With a Read Response whose STag is XORed with `stag`, whose TO is moved by `to`, and
    /// which carries `len` bytes (L set).
    Response { stag: u32, to: u64, len: usize },
    /// With a Read Response for no Read, right after the RTR.
    Unasked,
}

struct Case {
    name: &'static str,
    op: Op,
    answer: Answer,
    /// The ND request's completion status.
    status: Status,
    /// The Terminate the ND side must send back (it refused what came).
    refusal: Option<TermError>,
}

fn cases() -> Vec<Case> {
    use TermError::*;
    let forged = |name, stag, to, len, refusal| Case {
        name,
        op: Op::Read,
        answer: Answer::Response { stag, to, len },
        status: Status::REMOTE_ERROR,
        refusal: Some(refusal),
    };
    let refused = |name, op, err, status| Case {
        name,
        op,
        answer: Answer::Terminate(err),
        status,
        refusal: None,
    };
    let bare = |name, op, err, status| Case {
        answer: Answer::Bare(err),
        ..refused(name, op, err, status)
    };
    vec![
        Case {
            name: "control-write",
            op: Op::Write,
            answer: Answer::Serve,
            status: Status::SUCCESS,
            refusal: None,
        },
        Case {
            name: "control-read",
            op: Op::Read,
            answer: Answer::Serve,
            status: Status::SUCCESS,
            refusal: None,
        },
        // siw's answer to more Read Requests than its IRD (docs/WIRE.md §4.4).
        refused(
            "read-refused-stream-catastrophic",
            Op::Read,
            RdmapStreamCatastrophic,
            Status::REMOTE_ERROR,
        ),
        // The RFC's answer to the same: QN 1 has no buffer.
        refused(
            "read-refused-no-buffer",
            Op::Read,
            DdpUntaggedNoBuffer,
            Status::REMOTE_ERROR,
        ),
        refused(
            "read-refused-base-bounds",
            Op::Read,
            RdmapBaseBounds,
            Status::ACCESS_VIOLATION,
        ),
        refused(
            "write-refused-unexpected-opcode",
            Op::Write,
            RdmapUnexpectedOpcode,
            Status::REMOTE_ERROR,
        ),
        refused(
            "write-refused-base-bounds",
            Op::Write,
            DdpTaggedBaseBounds,
            Status::ACCESS_VIOLATION,
        ),
        // No DDP header (RFC 5040 §4.8 Figure 10): an error the peer found in our stream
        // fails the oldest request on the wire; the peer's own failure fails nothing of ours.
        bare(
            "write-refused-crc",
            Op::Write,
            LlpCrcError,
            Status::REMOTE_ERROR,
        ),
        bare(
            "read-refused-invalid-version",
            Op::Read,
            RdmapInvalidVersion,
            Status::REMOTE_ERROR,
        ),
        bare(
            "read-refused-peer-catastrophic",
            Op::Read,
            RdmapLocalCatastrophic(0xFF),
            Status::CANCELED,
        ),
        forged("response-foreign-stag", 0x100, 0, LEN, DdpTaggedInvalidStag),
        forged("response-wrong-offset", 0, 8, LEN - 8, DdpTaggedBaseBounds),
        forged("response-overlong", 0, 0, LEN + 8, DdpTaggedBaseBounds),
        forged("response-short", 0, 0, LEN - 8, DdpTaggedBaseBounds),
        Case {
            name: "response-unasked",
            op: Op::None,
            answer: Answer::Unasked,
            status: Status::CANCELED,
            refusal: Some(DdpTaggedInvalidStag),
        },
    ]
}

/// The responder's end of the stream, after the MPA exchange.
struct Raw {
    s: TcpStream,
    crc: bool,
    rx: Segments,
    /// Our Sends' message numbers.
    tx: TxMsn,
}

impl Raw {
    /// Take one connection on `l` and accept its MPA Request, with the probe; then take the
    /// RTR.
    fn accept(l: &TcpListener) -> Check<Self> {
        let (mut s, _) = l.accept().ctx("accept")?;
        s.set_read_timeout(Some(WAIT)).ctx("set_read_timeout")?;
        s.set_nodelay(true).ctx("set_nodelay")?;
        let mut r = Responder::new();
        let req = read_mpa(&mut s, "MPA Request", |b| r.handle_request(b))?;
        ensure!(
            req.probe,
            "the ND initiator did not offer the Write completion probe"
        );
        let cfg = AcceptConfig {
            crc: true,
            ird: 4,
            ord: 4,
            private_data: Vec::new(),
            probe: true,
        };
        let (reply, neg) = accept(&req, &cfg);
        s.write_all(&reply).ctx("send MPA Reply")?;
        let mut raw = Self {
            s,
            crc: neg.crc,
            rx: Segments::new(neg.crc),
            tx: TxMsn::new(),
        };
        let rtr = neg.rtr.ok_or_else(|| Failure("no RTR agreed".into()))?;
        let (h, _) = raw
            .segment()?
            .ok_or_else(|| Failure("the ND side closed before its RTR".into()))?;
        ensure!(is_rtr(rtr, &h), "the first FPDU is not the RTR: {h:?}");
        if rtr == Rtr::Read {
            raw.answer_read(&h, &[])?;
        }
        Ok(raw)
    }

    /// The next whole segment the ND side sent (header and payload), or `None` once it closed
    /// the stream between two FPDUs.
    fn segment(&mut self) -> Check<Option<(SegmentHeader, Vec<u8>)>> {
        self.rx.next(&mut self.s)
    }

    fn send(&mut self, bytes: &[u8], what: &str) -> Check {
        self.s.write_all(bytes).ctx(what)
    }

    /// Answer the Read Request `h` with one Read Response segment carrying `data`.
    fn answer_read(&mut self, h: &SegmentHeader, data: &[u8]) -> Check {
        let rr = h
            .read_request
            .ok_or_else(|| Failure("a Read Request without its header".into()))?;
        let ddp = DdpHeader::read_response(rr.sink_stag, rr.sink_to, true);
        let f = encode_fpdu(&ddp, &[], data, self.crc);
        self.send(&f, "send a Read Response")
    }

    fn terminate(&mut self, t: &Terminate) -> Check {
        let mut out = [0u8; MAX_TERMINATE_FPDU_LEN];
        let n = encode_terminate_fpdu(t, self.crc, &mut out);
        self.send(&out[..n], "send the Terminate")
    }

    /// The ND side's Terminate, if it sends one, and that nothing follows it; every other
    /// segment until the stream ends is ignored (what the ND side had already sent).
    fn drain(&mut self) -> Check<Option<Terminate>> {
        let mut term = None;
        while let Some((h, _)) = self.segment()? {
            ensure!(
                term.is_none(),
                "the ND side sent {:?} after its Terminate",
                h.ddp.opcode()
            );
            if h.ddp.opcode() == Opcode::Terminate {
                term = h.terminate;
            }
        }
        Ok(term)
    }
}

/// The responder's side of one case: what it saw checked, and the Terminate the ND side sent
/// back, if any.
fn respond(l: &TcpListener, case: &Case) -> Check<Option<Terminate>> {
    let mut raw = Raw::accept(l)?;
    if case.answer == Answer::Unasked {
        let stag = 0x4242_4201;
        let ddp = DdpHeader::read_response(stag, 0, true);
        let f = encode_fpdu(&ddp, &[], &[0xAB; 8], raw.crc);
        raw.send(&f, "send the unasked Read Response")?;
        return names_response(raw.drain()?, stag);
    }
    let mut written = Vec::new();
    loop {
        let Some((h, payload)) = raw.segment()? else {
            return Ok(None);
        };
        match h.ddp {
            DdpHeader::Tagged(t) if t.opcode == Opcode::Write => {
                ensure_eq!(t.stag, STAG, "the Write's STag (the token, in host order)");
                ensure_eq!(
                    t.to,
                    TO + written.len() as u64,
                    "the Write segment's tagged offset"
                );
                written.extend_from_slice(&payload);
                if !t.last {
                    continue;
                }
                expect_bytes(
                    &written,
                    &fast_pattern(WRITE_SEED, LEN),
                    "the Write's bytes",
                )?;
                match case.answer {
                    Answer::Terminate(e) => raw.terminate(&h.terminate_for(e))?,
                    Answer::Bare(e) => raw.terminate(&Terminate::new(e))?,
                    _ => continue,
                }
                ensure_eq!(case.op, Op::Write, "the request refused");
                return raw.drain();
            }
            DdpHeader::Untagged(u) if u.opcode == Opcode::ReadRequest => {
                ensure_eq!(u.qn, QN_READ_REQUEST, "the Read Request's queue");
                let rr: ReadRequest = h
                    .read_request
                    .ok_or_else(|| Failure("a Read Request without its header".into()))?;
                if rr.size == 0 {
                    // The Write completion probe: answered once what came before is placed.
                    raw.answer_read(&h, &[])?;
                    continue;
                }
                ensure_eq!(
                    (rr.src_stag, rr.src_to, rr.size as usize),
                    (STAG, TO, LEN),
                    "the Read Request's source and size"
                );
                match case.answer {
                    Answer::Serve => raw.answer_read(&h, &fast_pattern(READ_SEED, LEN))?,
                    Answer::Terminate(e) => {
                        raw.terminate(&h.terminate_for(e))?;
                        return raw.drain();
                    }
                    Answer::Bare(e) => {
                        raw.terminate(&Terminate::new(e))?;
                        return raw.drain();
                    }
                    Answer::Response { stag, to, len } => {
                        let ddp = DdpHeader::read_response(
                            rr.sink_stag ^ stag,
                            rr.sink_to.wrapping_add(to),
                            true,
                        );
                        let f = encode_fpdu(&ddp, &[], &vec![0xAB; len], raw.crc);
                        raw.send(&f, "send the forged Read Response")?;
                        return names_response(raw.drain()?, rr.sink_stag ^ stag);
                    }
                    Answer::Unasked => unreachable!("answered above"),
                }
            }
            DdpHeader::Untagged(u) if u.opcode == Opcode::Send => {
                ensure_eq!(u.qn, QN_SEND, "the Send's queue");
                expect_bytes(&payload, b"sent", "the Send's bytes")?;
                // Everything came: answer into the ND side's Receive, then wait for its close.
                let ddp = DdpHeader::send(Opcode::Send, raw.tx.next(QN_SEND), 0, true, 0);
                let f = encode_fpdu(&ddp, &[], b"done", raw.crc);
                raw.send(&f, "send done")?;
                return raw.drain();
            }
            other => return Err(Failure(format!("unexpected {other:?} from the ND side"))),
        }
    }
}

/// `term`, if there is one, names the refused Read Response (a DDP error: its DDP header,
/// RFC 5040 §4.8 Figure 10), which carried `stag`.
fn names_response(term: Option<Terminate>, stag: u32) -> Check<Option<Terminate>> {
    if let Some(t) = &term {
        let named = t
            .ddp_header
            .ok_or_else(|| Failure("the Terminate names no segment".into()))?
            .decode()
            .map_err(|e| Failure(format!("its DDP header: {e}")))?;
        ensure!(
            matches!(named, DdpHeader::Tagged(n)
                if n.opcode == Opcode::ReadResponse && n.stag == stag),
            "the Terminate names {named:?}, not the refused Read Response"
        );
    }
    Ok(term)
}

/// The ND side's part of one case.
fn initiate(side: &Side, ip: IpAddr, dest: SocketAddr, case: &Case) -> Check {
    let what = case.name;
    // SAFETY: nothing is posted yet.
    unsafe {
        side.write(&[SRC], &fast_pattern(WRITE_SEED, LEN));
        side.write(&[SINK], &[GUARD; LEN]);
        side.write(&[SEND], b"sent");
    }
    side.recv(1, &[RECV]).ctx("post Receive")?;
    let cov = side.connect(SocketAddr::new(ip, 0), dest, 4, 4, &[])?;
    wait_ok(&cov, &format!("{what}: Connect"))?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, &format!("{what}: CompleteConnect"))?;
    let token = STAG.to_be();
    let ty = match case.op {
        Op::Write => {
            side.rdma_write(2, &[SRC], TO, token, OpFlags::empty())
                .ctx("post Write")?;
            Some(RequestType::Write)
        }
        Op::Read => {
            side.rdma_read(2, &[SINK], TO, token, OpFlags::empty())
                .ctx("post Read")?;
            Some(RequestType::Read)
        }
        Op::None => None,
    };
    let ok = case.status == Status::SUCCESS;
    if let Some(ty) = ty {
        // A Send behind it: flushed when the request before it failed.
        side.send(3, &[SEND], OpFlags::empty()).ctx("post Send")?;
        let mut op = Expect::initiator(ty, case.status, 2, side.qp_context);
        let sent = if ok {
            Status::SUCCESS
        } else {
            Status::CANCELED
        };
        let mut send = Expect::send(sent, 3, side.qp_context);
        if ok {
            op = op.with_bytes(LEN as u32);
            send = send.with_bytes(4);
        }
        let got = next_results(&side.scq, 2, &format!("{what}: the requests"))?;
        expect_results(&got, &[op, send], &format!("{what}: the requests"))?;
    }
    let want = if ok {
        Expect::recv(Status::SUCCESS, 1, side.qp_context, Some(4))
    } else {
        Expect::recv(Status::CANCELED, 1, side.qp_context, None)
    };
    let got = next_results(&side.rcq, 1, &format!("{what}: the Receive"))?;
    expect_results(&got, &[want], &format!("{what}: the Receive"))?;
    // SAFETY: every request has completed.
    let (sink, recv) = unsafe { (side.read(&[SINK], LEN), side.read(&[RECV], 4)) };
    if ok {
        if case.op == Op::Read {
            expect_bytes(
                &sink,
                &fast_pattern(READ_SEED, LEN),
                &format!("{what}: the sink"),
            )?;
        }
        expect_bytes(&recv, b"done", &format!("{what}: the Receive's bytes"))?;
    } else {
        // Not a byte of a refused or forged response was placed.
        expect_bytes(&sink, &[GUARD; LEN], &format!("{what}: the sink"))?;
    }
    if case.op == Op::None {
        // The queue pair is in the error state: a Send posted now is flushed.
        side.send(3, &[SEND], OpFlags::empty()).ctx("post Send")?;
        let got = next_results(&side.scq, 1, &format!("{what}: a Send after the error"))?;
        expect_results(
            &got,
            &[Expect::send(Status::CANCELED, 3, side.qp_context)],
            &format!("{what}: a Send after the error"),
        )?;
    }
    // Our end closes; the responder reads until it does.
    if let Ok(d) = side.connector.disconnect() {
        let _ = d.wait();
    }
    Ok(())
}

fn run(p: &Provider, ip: IpAddr) -> Check {
    let adapter = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    for case in cases() {
        let what = case.name;
        let side = Side::on(
            &adapter,
            SideConfig {
                buf_len: 8192,
                ..SideConfig::default()
            },
        )?;
        let l = TcpListener::bind((ip, 0)).ctx("bind the responder")?;
        let dest = l.local_addr().ctx("local_addr")?;
        let case = &case;
        let (nd, raw) = std::thread::scope(|sc| {
            let raw = sc.spawn(move || respond(&l, case));
            let nd = initiate(&side, ip, dest, case);
            if nd.is_err() {
                // Let the responder's accept and reads end: our side goes, and a connection
                // that closes at once takes its accept if the ND side never connected.
                drop(side);
                let _ = TcpStream::connect(dest);
            }
            let raw = raw
                .join()
                .unwrap_or_else(|_| Err(Failure("the responder panicked".into())));
            (nd, raw)
        });
        nd.map_err(|e| Failure(format!("{what}: ND side: {e}")))?;
        let term = raw.map_err(|e| Failure(format!("{what}: responder: {e}")))?;
        match (case.refusal, term) {
            (None, None) => {}
            (Some(want), Some(t)) => ensure_eq!(
                t.error,
                want,
                "{what}: the ND side's Terminate (layer/type/code)"
            ),
            (want, got) => {
                return Err(Failure(format!(
                    "{what}: the ND side's Terminate: expected {want:?}, got {got:?}"
                )))
            }
        }
    }
    Ok(())
}

#[test]
fn a_misbehaving_responder() {
    harness::each_provider(Needs::IwarpWire, "forged-responder", |p, fam| {
        run(p, fam.ip())
    });
}

/// An ND side on `ip` and a plain TCP listener for the responder, with its address.
fn side_and_responder(
    p: &Provider,
    ip: IpAddr,
) -> Check<(netdirect::Adapter, Side, TcpListener, SocketAddr)> {
    let adapter = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let side = Side::on(&adapter, SideConfig::default())?;
    let l = TcpListener::bind((ip, 0)).ctx("bind the responder")?;
    let dest = l.local_addr().ctx("local_addr")?;
    Ok((adapter, side, l, dest))
}

/// An acceptor that grants more Reads than the ND side's Connect offered (its MPA Reply's IRD
/// and ORD at 64): the active side's GetReadLimits stays within the offer (docs/ND-RULES.md
/// §2.10, "each already clamped by both ends' hardware"), swapped to its view (D25), as its
/// queue pair is programmed.
#[test]
fn an_acceptor_cannot_widen_the_read_limits() {
    harness::each_provider(Needs::IwarpWire, "forged-read-limits", |p, fam| {
        let ip = fam.ip();
        let (_adapter, side, l, dest) = side_and_responder(p, ip)?;
        std::thread::scope(|sc| {
            let raw = sc.spawn(move || -> Check {
                let (mut s, _) = l.accept().ctx("accept")?;
                s.set_read_timeout(Some(WAIT)).ctx("set_read_timeout")?;
                let mut r = Responder::new();
                let req = read_mpa(&mut s, "MPA Request", |b| r.handle_request(b))?;
                let offer = req.enhanced.map(|e| (e.ird, e.ord));
                ensure_eq!(offer, Some((2, 1)), "the offer");
                let cfg = AcceptConfig {
                    crc: true,
                    ird: 64,
                    ord: 64,
                    private_data: Vec::new(),
                    probe: req.probe,
                };
                s.write_all(&accept(&req, &cfg).0).ctx("send MPA Reply")?;
                // Held open until the ND side is done with it.
                let _ = std::io::Read::read(&mut s, &mut [0u8; 64]);
                Ok(())
            });
            let nd = (|| -> Check {
                let cov = side.connect(SocketAddr::new(ip, 0), dest, 2, 1, &[])?;
                wait_ok(&cov, "Connect")?;
                let got = side.connector.get_read_limits().ctx("GetReadLimits")?;
                ensure_eq!(
                    (got.inbound, got.outbound),
                    (2, 1),
                    "GetReadLimits after an Accept granting 64 and 64"
                );
                Ok(())
            })();
            drop(side);
            raw.join()
                .unwrap_or_else(|_| Err(Failure("the responder panicked".into())))?;
            nd
        })
    });
}

/// How the ND side's first Connect ends in [`keeps_its_port`].
#[derive(Debug, Clone, Copy)]
enum FirstEnd {
    /// The responder rejects it (a Reply with R=1 and private data).
    Rejected,
    /// The responder takes the Request and says nothing; the ND side cancels
    /// (CancelOverlappedRequests).
    Cancelled,
}

/// A connector whose Connect failed after the TCP connection was made, and whose end is the
/// first to close it (the responder holds the connection open, as RFC 5044 §7.1.2 allows after
/// a reject: "leaving the TCP connection open"), stays bound as before
/// (IND2Connector::Connect: "The connection attempt may be retried"): the retry goes out from
/// the port it bound. A graceful close would leave that port to TCP's TIME_WAIT for a minute,
/// and the retry to an ephemeral one.
fn keeps_its_port(p: &Provider, ip: IpAddr, end: FirstEnd) -> Check {
    let (_adapter, side, l, dest) = side_and_responder(p, ip)?;
    let (took, request_taken) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        let raw = sc.spawn(move || -> Check<(SocketAddr, SocketAddr)> {
            let (mut s, first) = l.accept().ctx("accept")?;
            s.set_read_timeout(Some(WAIT)).ctx("set_read_timeout")?;
            let mut r = Responder::new();
            let req = read_mpa(&mut s, "MPA Request", |b| r.handle_request(b))?;
            if let FirstEnd::Rejected = end {
                s.write_all(&reject(&req, b"busy")).ctx("send the reject")?;
            }
            let _ = took.send(());
            // Open until the ND side closes: end of stream or reset, nothing else.
            match std::io::Read::read(&mut s, &mut [0u8; 64]) {
                Ok(0) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                other => {
                    return Err(Failure(format!(
                        "the ND side sent or waited after its attempt ended: {other:?}"
                    )))
                }
            }
            let (_s, second) = l.accept().ctx("accept the retry")?;
            Ok((first, second))
        });
        let nd = (|| -> Check {
            let cov = side.connect(SocketAddr::new(ip, 0), dest, 0, 0, &[])?;
            match end {
                FirstEnd::Rejected => {
                    wait_status(&cov, Status::CONNECTION_REFUSED, "Connect, rejected")?;
                    let mut pd = [0u8; 16];
                    let n = side
                        .connector
                        .get_private_data(&mut pd)
                        .ctx("GetPrivateData")?;
                    ensure_eq!(&pd[..n], &b"busy"[..], "the reject's private data");
                }
                FirstEnd::Cancelled => {
                    // Driven (each wait drives the adapter) until the responder has the
                    // Request: the connection is made and the attempt under way.
                    let deadline = std::time::Instant::now() + WAIT;
                    while request_taken.try_recv().is_err() {
                        let r = cov.wait_timeout(Some(std::time::Duration::from_millis(10)));
                        ensure!(r.is_none(), "Connect ended unanswered: {r:?}");
                        ensure!(
                            std::time::Instant::now() < deadline,
                            "the responder never had the MPA Request"
                        );
                    }
                    side.connector
                        .cancel_overlapped_requests()
                        .ctx("CancelOverlappedRequests")?;
                    wait_status(&cov, Status::CANCELED, "Connect, cancelled")?;
                }
            }
            let retry = side
                .connector
                .connect(&side.qp, dest, 0, 0, &[])
                .ctx("Connect again")?;
            drop(retry);
            Ok(())
        })();
        if nd.is_err() {
            // Whichever accept the responder waits in, a plain connection ends it.
            for _ in 0..2 {
                let _ = TcpStream::connect(dest);
            }
        }
        let ports = raw.join();
        drop(side);
        nd?;
        let (first, second) =
            ports.unwrap_or_else(|_| Err(Failure("the responder panicked".into())))?;
        ensure_eq!(
            second,
            first,
            "where the retry came from (the first attempt came from the bound port)"
        );
        Ok(())
    })
}

#[test]
fn a_connector_rejected_by_a_responder_that_waits_keeps_its_port() {
    harness::each_provider(Needs::IwarpWire, "forged-reject-waits", |p, fam| {
        keeps_its_port(p, fam.ip(), FirstEnd::Rejected)
    });
}

#[test]
fn a_connector_that_cancels_its_connect_keeps_its_port() {
    harness::each_provider(Needs::IwarpWire, "forged-cancelled-connect", |p, fam| {
        keeps_its_port(p, fam.ip(), FirstEnd::Cancelled)
    });
}

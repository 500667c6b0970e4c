//! Bad input from the wire: a raw TCP client (the `netdirect-wire` encoders over a plain
//! `std::net::TcpStream`) does a correct MPA v2 handshake with an ND listener, sends the RTR,
//! then misbehaves. The ND server must fail the affected requests with an error status, close
//! the connection, and never panic or hang.
//!
//! The `valid-send` case is the control: the same raw client sending a correct Send is
//! received intact, so the other cases fail because of what they send, not because the raw
//! client is wrong.

// Requests are lists of byte ranges (one per SGE): `&[0..64]` is a one-SGE request, not a
// mistaken attempt at a Vec of the range's elements.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};

use common::read_mpa;
use netdirect::{Provider, Status};
use netdirect_conformance::check::{
    expect_bytes, expect_results, next_results, wait_ok, Check, Context, Expect, WAIT,
};
use netdirect_conformance::harness;
use netdirect_conformance::side::listen;
use netdirect_conformance::{ensure, Failure, Needs, Side, SideConfig};
use netdirect_wire::ddp::{DdpHeader, QN_SEND};
use netdirect_wire::fpdu::encode_fpdu;
use netdirect_wire::handshake::{rtr_fpdu, Initiator, InitiatorConfig, InitiatorOutcome};
use netdirect_wire::rdmap::Opcode;
use netdirect_wire::sequence::TxMsn;

const PAYLOAD: &[u8] = b"hello from a raw iWARP client";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// A correct Send (the control).
    ValidSend,
    /// (a) A Send FPDU whose CRC is wrong.
    BadCrc,
    /// (b) A complete, length-consistent frame of garbage.
    Garbage,
    /// (c) The first bytes of a Send FPDU, then the connection is closed.
    TruncatedThenClose,
}

fn connect_raw(addr: SocketAddr) -> Check<TcpStream> {
    let s = TcpStream::connect(addr).ctx("raw connect")?;
    s.set_read_timeout(Some(WAIT)).ctx("set_read_timeout")?;
    s.set_write_timeout(Some(WAIT)).ctx("set_write_timeout")?;
    s.set_nodelay(true).ctx("set_nodelay")?;
    Ok(s)
}

/// Send the MPA Request and read the Reply.
fn handshake(s: &mut TcpStream, private_data: &[u8]) -> Check<InitiatorOutcome> {
    let mut init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 1,
        ord: 1,
        p2p: true,
        private_data: private_data.to_vec(),
        probe: false,
    });
    s.write_all(&init.request()).ctx("send MPA Request")?;
    read_mpa(s, "MPA Reply", |b| init.handle_reply(b))
}

/// Read until the server closes the connection (EOF or reset).
fn read_to_close(s: &mut TcpStream, what: &str) -> Check {
    let mut sink = [0u8; 4096];
    loop {
        match s.read(&mut sink) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure(format!("{what}: the server did not close: {e}"))),
        }
    }
}

/// The raw client's part of a case, after the listener is up.
fn raw_client(addr: SocketAddr, case: Case) -> Check {
    let mut s = connect_raw(addr)?;
    let InitiatorOutcome::Accepted(neg) = handshake(&mut s, b"raw")? else {
        return Err(Failure("the server rejected the raw client".into()));
    };
    let rtr = neg
        .rtr
        .ok_or_else(|| Failure("the Reply agreed no RTR".into()))?;
    let mut tx = TxMsn::new();
    let mut bytes = rtr_fpdu(rtr, &mut tx, neg.crc);
    let send = encode_fpdu(
        &DdpHeader::send(Opcode::Send, tx.next(QN_SEND), 0, true, 0),
        &[],
        PAYLOAD,
        neg.crc,
    );
    match case {
        Case::ValidSend => bytes.extend_from_slice(&send),
        Case::BadCrc => {
            ensure!(
                neg.crc,
                "CRCs were not negotiated, so a bad CRC means nothing"
            );
            let mut bad = send;
            *bad.last_mut().expect("an FPDU ends with its CRC") ^= 0x5A;
            bytes.extend_from_slice(&bad);
        }
        Case::Garbage => {
            // ULPDU length 32: 2 + 32 bytes, 2 pad bytes, 4 "CRC" bytes = one whole frame.
            bytes.extend_from_slice(&[0x00, 0x20]);
            bytes.extend((0..38u8).map(|i| i.wrapping_mul(37) ^ 0xA5));
        }
        Case::TruncatedThenClose => bytes.extend_from_slice(&send[..send.len() / 2]),
    }
    s.write_all(&bytes).ctx("send RTR and the case's bytes")?;
    if matches!(case, Case::ValidSend | Case::TruncatedThenClose) {
        // We end the connection; the server closes its side in turn.
        s.shutdown(std::net::Shutdown::Write).ctx("shutdown")?;
    }
    read_to_close(&mut s, "after the case's bytes")
}

/// The ND server's part: accept the raw client with two Receives posted and see them
/// complete.
fn nd_server(side: &Side, listener: &netdirect::Listener, case: Case) -> Check {
    let ov = listener
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest")?;
    wait_ok(&ov, "GetConnectionRequest")?;
    let pd = side.connector.private_data().ctx("private data")?;
    ensure!(pd.starts_with(b"raw"), "private data {pd:?}");
    side.recv(1, &[0..256]).ctx("post Receive")?;
    side.recv(2, &[256..512]).ctx("post Receive")?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept (the raw client's RTR)")?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let r = next_results(&side.rcq, 2, "the Receives")?;
    let q = side.qp_context;
    match case {
        Case::ValidSend => {
            expect_results(
                &r,
                &[
                    Expect::recv(Status::SUCCESS, 1, q, Some(PAYLOAD.len() as u32)),
                    Expect::recv(Status::CANCELED, 2, q, None),
                ],
                "Receives (valid Send, then the client closed)",
            )?;
            // SAFETY: both Receives have completed.
            let got = unsafe { side.read(&[0..256], PAYLOAD.len()) };
            expect_bytes(&got, PAYLOAD, "the raw client's Send")?;
        }
        _ => expect_results(
            &r,
            &[
                Expect::recv(Status::CANCELED, 1, q, None),
                Expect::recv(Status::CANCELED, 2, q, None),
            ],
            &format!("Receives after {case:?}"),
        )?,
    }
    wait_ok(&nd, "NotifyDisconnect")
}

/// How the server's adapter is driven: only by its own waits, or also with its overlapped
/// descriptor exported (`Adapter::fd`, for an event loop), which changes how a provider may
/// watch its sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drive {
    Waits,
    FdExported,
}

fn run_case(p: &Provider, ip: IpAddr, case: Case, drive: Drive) -> Check {
    let side = Side::open(p, ip, SideConfig::default())?;
    if drive == Drive::FdExported {
        let _ = side.adapter.fd();
    }
    let (listener, addr) = listen(&side.adapter, SocketAddr::new(ip, 0), 4)?;
    std::thread::scope(|s| {
        let server = s.spawn(|| nd_server(&side, &listener, case));
        let client = raw_client(addr, case);
        let server = server
            .join()
            .unwrap_or_else(|_| Err(Failure("the ND server thread panicked".into())));
        server.map_err(|e| Failure(format!("ND server: {e}")))?;
        client.map_err(|e| Failure(format!("raw client: {e}")))
    })
}

/// (d) A wrong MPA key before the handshake: the listener drops that connection without
/// bothering the application; the outstanding GetConnectionRequest goes to the next, correct
/// client, which is rejected so the run ends.
fn run_bad_key(p: &Provider, ip: IpAddr) -> Check {
    let side = Side::open(p, ip, SideConfig::default())?;
    let (listener, addr) = listen(&side.adapter, SocketAddr::new(ip, 0), 4)?;
    std::thread::scope(|s| {
        let server = s.spawn(|| -> Check {
            let ov = listener
                .get_connection_request(&side.connector)
                .ctx("GetConnectionRequest")?;
            wait_ok(&ov, "GetConnectionRequest")?;
            let pd = side.connector.private_data().ctx("private data")?;
            ensure!(
                pd.starts_with(b"good"),
                "the request delivered is not the good client's: {pd:?}"
            );
            side.connector.reject(b"no").ctx("Reject")
        });
        let client = (|| -> Check {
            let mut bad = connect_raw(addr)?;
            let mut req = Initiator::new(InitiatorConfig {
                crc: true,
                ird: 1,
                ord: 1,
                p2p: true,
                private_data: b"bad".to_vec(),
                probe: false,
            })
            .request();
            req[..4].copy_from_slice(b"XPA ");
            bad.write_all(&req).ctx("send a Request with a wrong key")?;
            read_to_close(&mut bad, "after a wrong MPA key")?;
            let mut good = connect_raw(addr)?;
            match handshake(&mut good, b"good")? {
                InitiatorOutcome::Rejected { private_data } => {
                    ensure!(
                        private_data.starts_with(b"no"),
                        "reject private data {private_data:?}"
                    );
                    Ok(())
                }
                InitiatorOutcome::Accepted(_) => {
                    Err(Failure("the good client was accepted, not rejected".into()))
                }
            }
        })();
        let server = server
            .join()
            .unwrap_or_else(|_| Err(Failure("the ND server thread panicked".into())));
        server.map_err(|e| Failure(format!("ND server: {e}")))?;
        client.map_err(|e| Failure(format!("raw client: {e}")))
    })
}

fn each(name: &'static str, f: fn(&Provider, IpAddr) -> Check) {
    harness::each_provider(Needs::IwarpWire, name, move |p, fam| f(p, fam.ip()));
}

#[test]
fn valid_send_from_raw_client() {
    each("raw-valid-send", |p, ip| {
        run_case(p, ip, Case::ValidSend, Drive::Waits)
    });
}

#[test]
fn valid_send_from_raw_client_fd_exported() {
    each("raw-valid-send-fd-exported", |p, ip| {
        run_case(p, ip, Case::ValidSend, Drive::FdExported)
    });
}

#[test]
fn fpdu_with_bad_crc() {
    each("raw-bad-crc", |p, ip| {
        run_case(p, ip, Case::BadCrc, Drive::Waits)
    });
}

#[test]
fn fpdu_with_bad_crc_fd_exported() {
    each("raw-bad-crc-fd-exported", |p, ip| {
        run_case(p, ip, Case::BadCrc, Drive::FdExported)
    });
}

#[test]
fn garbage_after_handshake() {
    each("raw-garbage", |p, ip| {
        run_case(p, ip, Case::Garbage, Drive::Waits)
    });
}

#[test]
fn garbage_after_handshake_fd_exported() {
    each("raw-garbage-fd-exported", |p, ip| {
        run_case(p, ip, Case::Garbage, Drive::FdExported)
    });
}

#[test]
fn truncated_frame_then_close() {
    each("raw-truncated", |p, ip| {
        run_case(p, ip, Case::TruncatedThenClose, Drive::Waits)
    });
}

#[test]
fn truncated_frame_then_close_fd_exported() {
    each("raw-truncated-fd-exported", |p, ip| {
        run_case(p, ip, Case::TruncatedThenClose, Drive::FdExported)
    });
}

#[test]
fn wrong_mpa_key() {
    each("raw-wrong-key", run_bad_key);
}

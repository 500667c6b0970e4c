//! MPA negotiation rules (RFC 5044 §7.1.2, RFC 6581 §9, §10) end to end.

use netdirect_wire::handshake::{
    accept, must_reject, reject, try_accept, AcceptConfig, ConnectRequest, Initiator,
    InitiatorConfig, InitiatorOutcome, Negotiated, Responder, Rtr,
};
use netdirect_wire::mpa::{EnhancedData, FrameKind, MpaError, MpaFlags, MpaFrame, RtrTypes};

fn init(crc: bool, p2p: bool, ord: u16) -> Initiator {
    Initiator::new(InitiatorConfig {
        crc,
        ird: 8,
        ord,
        p2p,
        private_data: b"hello".to_vec(),
        probe: false,
    })
}

fn cfg(crc: bool, ird: u16, ord: u16) -> AcceptConfig {
    AcceptConfig {
        crc,
        ird,
        ord,
        private_data: b"world".to_vec(),
        probe: false,
    }
}

/// Runs a full exchange; returns (initiator's result, responder's result).
fn exchange(i: &mut Initiator, c: &AcceptConfig) -> (Negotiated, Negotiated) {
    let req_bytes = i.request();
    // Fed one byte at a time: Ok(None) until complete.
    let mut r = Responder::new();
    for k in 0..req_bytes.len() {
        assert_eq!(r.handle_request(&req_bytes[..k]), Ok(None));
    }
    let (req, n) = r.handle_request(&req_bytes).unwrap().unwrap();
    assert_eq!(n, req_bytes.len());
    let (rep, resp_neg) = accept(&req, c);
    for k in 0..rep.len() {
        assert_eq!(i.handle_reply(&rep[..k]), Ok(None));
    }
    match i.handle_reply(&rep).unwrap().unwrap() {
        (InitiatorOutcome::Accepted(n), used) => {
            assert_eq!(used, rep.len());
            (n, resp_neg)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn plain_v2_exchange() {
    let (i, r) = exchange(&mut init(false, false, 4), &cfg(false, 4, 4));
    assert!(!i.crc && !r.crc);
    assert_eq!((i.rev, i.enhanced, i.rtr), (2, true, None));
    assert_eq!((r.rev, r.enhanced, r.rtr), (2, true, None));
    assert_eq!(i.private_data, b"world");
    assert_eq!(r.private_data, b"hello");
    assert_eq!((i.peer_ird, i.peer_ord), (4, 4));
    assert_eq!((r.peer_ird, r.peer_ord), (8, 4));
}

#[test]
fn crc_on_if_either_side() {
    for (a, b) in [(true, false), (false, true), (true, true)] {
        let (i, r) = exchange(&mut init(a, false, 4), &cfg(b, 4, 4));
        assert!(i.crc && r.crc, "{a} {b}");
    }
}

#[test]
fn p2p_prefers_write() {
    let mut i = init(true, true, 0);
    // ORD stays as the application asked; only the Write RTR is offered then.
    assert_eq!(i.ord(), 0);
    let bytes = i.request();
    let req = MpaFrame::decode(&bytes)
        .expect("valid")
        .expect("complete")
        .0;
    assert_eq!(req.enhanced.map(|e| e.rtr), Some(RtrTypes::WRITE));
    let mut i1 = init(true, true, 1);
    let bytes1 = i1.request();
    let req1 = MpaFrame::decode(&bytes1)
        .expect("valid")
        .expect("complete")
        .0;
    assert_eq!(
        req1.enhanced.map(|e| e.rtr),
        Some(RtrTypes::WRITE | RtrTypes::READ)
    );
    let _ = exchange(&mut i1, &cfg(true, 0, 4));
    let (ni, nr) = exchange(&mut i, &cfg(true, 0, 4));
    assert_eq!(ni.rtr, Some(Rtr::Write));
    assert_eq!(nr.rtr, Some(Rtr::Write));
    // Responder ORD limited to the Initiator's IRD (8): 4 stays.
    assert_eq!(nr.local_ord, 4);
}

#[test]
fn responder_picks_read_and_raises_ird() {
    let req = ConnectRequest {
        rev: 2,
        crc: true,
        markers: false,
        enhanced: Some(EnhancedData {
            p2p: true,
            rtr: RtrTypes::READ,
            ird: 2,
            ord: 1,
        }),
        private_data: Vec::new(),
        probe: false,
    };
    let (bytes, n) = accept(&req, &cfg(false, 0, 16));
    assert_eq!(n.rtr, Some(Rtr::Read));
    assert_eq!(n.local_ird, 1);
    // ORD 16 lowered to the Initiator's IRD 2 (RFC 6581 §9.1).
    assert_eq!(n.local_ord, 2);
    let (f, _) = MpaFrame::decode(&bytes).unwrap().unwrap();
    let e = f.enhanced.unwrap();
    assert!(e.p2p);
    assert_eq!(e.rtr, RtrTypes::READ);
    assert_eq!((e.ird, e.ord), (1, 2));
    // The Initiator then uses Read.
    let mut i = init(true, true, 1);
    let (out, _) = i.handle_reply(&bytes).unwrap().unwrap();
    let InitiatorOutcome::Accepted(ni) = out else {
        panic!()
    };
    assert_eq!(ni.rtr, Some(Rtr::Read));
}

#[test]
fn responder_proposes_write_when_nothing_offered() {
    let req = ConnectRequest {
        rev: 2,
        crc: false,
        markers: false,
        enhanced: Some(EnhancedData {
            p2p: true,
            rtr: RtrTypes::SEND,
            ird: 0x3FFF,
            ord: 1,
        }),
        private_data: Vec::new(),
        probe: false,
    };
    let (bytes, n) = accept(&req, &cfg(false, 4, 100));
    assert_eq!(n.rtr, Some(Rtr::Write));
    // 0x3FFF ("ULP negotiates") does not limit our ORD.
    assert_eq!(n.local_ord, 100);
    assert_eq!(bytes[22..24], [0x80, 100]);
}

#[test]
fn rev1_request_gets_rev1_reply() {
    let req = ConnectRequest {
        rev: 1,
        crc: true,
        markers: false,
        enhanced: None,
        private_data: b"old".to_vec(),
        probe: false,
    };
    let (bytes, n) = accept(&req, &cfg(false, 4, 4));
    assert_eq!(bytes.len(), 20 + 5);
    assert_eq!(bytes[16], 0x40); // C, no S
    assert_eq!(bytes[17], 1);
    assert_eq!(
        (n.rev, n.enhanced, n.rtr, n.peer_ird, n.peer_ord),
        (1, false, None, 0, 0)
    );
    // 256 bytes of ULP data are allowed without the word, not 257.
    assert!(try_accept(
        &req,
        &AcceptConfig {
            private_data: vec![0; 256],
            ..cfg(false, 0, 0)
        }
    )
    .is_ok());
    assert_eq!(
        try_accept(
            &req,
            &AcceptConfig {
                private_data: vec![0; 257],
                ..cfg(false, 0, 0)
            }
        )
        .err(),
        Some(MpaError::PrivateDataTooLong(257))
    );
}

#[test]
fn initiator_tolerates_rev1_and_stray_a() {
    // Rev 1 Reply to our Rev 2 P2P Request: no v2 features.
    let rep = MpaFrame {
        kind: FrameKind::Reply,
        flags: MpaFlags::empty(),
        rev: 1,
        enhanced: None,
        ulp_data: b"",
    }
    .to_vec();
    let (out, _) = init(true, true, 1).handle_reply(&rep).unwrap().unwrap();
    let InitiatorOutcome::Accepted(n) = out else {
        panic!()
    };
    assert_eq!((n.rev, n.enhanced, n.rtr, n.crc), (1, false, None, true));

    // Old softiwarp sets A in every Reply: ignored when we did not ask.
    let rep = MpaFrame {
        kind: FrameKind::Reply,
        flags: MpaFlags::empty(),
        rev: 2,
        enhanced: Some(EnhancedData {
            p2p: true,
            rtr: RtrTypes::WRITE,
            ird: 1,
            ord: 1,
        }),
        ulp_data: b"",
    }
    .to_vec();
    let (out, _) = init(false, false, 1).handle_reply(&rep).unwrap().unwrap();
    let InitiatorOutcome::Accepted(n) = out else {
        panic!()
    };
    assert_eq!(n.rtr, None);
}

#[test]
fn markers_request_must_be_rejected() {
    let bytes = MpaFrame {
        kind: FrameKind::Request,
        flags: MpaFlags::MARKERS | MpaFlags::CRC,
        rev: 2,
        enhanced: Some(EnhancedData {
            p2p: true,
            rtr: RtrTypes::WRITE,
            ird: 1,
            ord: 1,
        }),
        ulp_data: b"",
    }
    .to_vec();
    let (req, _) = Responder::new().handle_request(&bytes).unwrap().unwrap();
    assert!(req.markers);
    assert!(must_reject(&req));
    let rej = reject(&req, b"why");
    let (f, n) = MpaFrame::decode(&rej).unwrap().unwrap();
    assert_eq!(n, rej.len());
    assert!(f.flags.contains(MpaFlags::REJECT));
    assert!(!f.flags.contains(MpaFlags::MARKERS));
    assert_eq!(f.ulp_data, b"why");
    assert_eq!(f.enhanced.unwrap().rtr, RtrTypes::empty());
    let (out, _) = init(true, true, 1).handle_reply(&rej).unwrap().unwrap();
    assert_eq!(
        out,
        InitiatorOutcome::Rejected {
            private_data: b"why".to_vec()
        }
    );
}

#[test]
fn request_never_exceeds_interop_limit() {
    let i = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 0xFFFF,
        ord: 0xFFFF,
        p2p: false,
        private_data: vec![0; 252],
        probe: false,
    });
    let r = i.request();
    assert_eq!(r.len(), 20 + 256);
    // Clamped to the largest number, not to 0x3FFF ("the ULP negotiates", docs/WIRE.md §9).
    assert_eq!((i.ird(), i.ord()), (0x3FFE, 0x3FFE));
    let (f, _) = MpaFrame::decode(&r).unwrap().unwrap();
    let e = f.enhanced.expect("the IRD/ORD word");
    assert_eq!((e.ird, e.ord), (0x3FFE, 0x3FFE));
    assert_eq!(f.rev, 2);
    assert!(f.flags.contains(MpaFlags::ENHANCED | MpaFlags::CRC));
    assert!(!f.flags.contains(MpaFlags::MARKERS));
}

fn init_probe(probe: bool) -> Initiator {
    Initiator::new(InitiatorConfig {
        probe,
        ..InitiatorConfig {
            crc: true,
            ird: 2,
            ord: 3,
            p2p: true,
            private_data: b"hello".to_vec(),
            probe: false,
        }
    })
}

fn cfg_probe(probe: bool) -> AcceptConfig {
    AcceptConfig {
        probe,
        ..cfg(true, 3, 2)
    }
}

/// netdirect's private Write completion probe: the Initiator offers it with a reserved flag bit
/// (0x04) in its Request, the Responder accepts with another (0x02) in its Reply; both ends
/// learn it only when both want it, and the IRD/ORD word (what GetReadLimits reports) is the
/// same either way.
#[test]
fn completion_probe_negotiation() {
    for (ours, theirs) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut i = init_probe(ours);
        let req = i.request();
        assert_eq!(
            req[16] & 0x04 != 0,
            ours,
            "Request flag byte {:#04x}",
            req[16]
        );
        // The only reserved bit a Request ever carries is the offer.
        assert_eq!(req[16] & 0x0B, 0);
        let (r, _) = Responder::new().handle_request(&req).unwrap().unwrap();
        assert_eq!(r.probe, ours);
        let (rep, rn) = accept(&r, &cfg_probe(theirs));
        assert_eq!(
            (rep[16] & 0x02 != 0, rep[16] & 0x0D),
            (ours && theirs, 0),
            "Reply flag byte {:#04x}: the acceptance only, and only for an offer",
            rep[16]
        );
        let (n, _) = match i.handle_reply(&rep).unwrap().unwrap() {
            (InitiatorOutcome::Accepted(n), used) => (n, used),
            other => panic!("{other:?}"),
        };
        assert_eq!((n.probe, rn.probe), (ours && theirs, ours && theirs));
        // The read limits are the application's, probe or not.
        assert_eq!(
            (n.local_ird, n.local_ord, n.peer_ird, n.peer_ord),
            (2, 3, 3, 2)
        );
        assert_eq!((rn.local_ird, rn.local_ord), (3, 2));
    }
}

/// A Responder that builds its Reply from the Request's header, flag byte included, as Linux
/// siw does (`siw_proc_mpareq` swaps only the key; docs/WIRE.md §2.4): the echoed offer is not
/// an acceptance, so no probe is sent to a peer that would take it for a Read beyond its IRD.
#[test]
fn an_echoed_offer_is_not_an_acceptance() {
    let mut i = init_probe(true);
    let req = i.request();
    assert_ne!(req[16] & 0x04, 0, "offered");
    let (r, _) = Responder::new().handle_request(&req).unwrap().unwrap();
    let (mut rep, _) = accept(&r, &cfg_probe(false));
    rep[16] = req[16];
    match i.handle_reply(&rep).unwrap().unwrap() {
        (InitiatorOutcome::Accepted(n), _) => assert!(!n.probe, "an echo enabled the probe"),
        other => panic!("{other:?}"),
    }
}

/// A Reply with the bit from a peer we did not offer it to (it ignores "send 0") changes
/// nothing; a reject never carries it.
#[test]
fn completion_probe_needs_our_offer() {
    let mut i = init_probe(false);
    let req = i.request();
    let (r, _) = Responder::new().handle_request(&req).unwrap().unwrap();
    let (mut rep, _) = accept(&r, &cfg_probe(true));
    rep[16] |= 0x06;
    match i.handle_reply(&rep).unwrap().unwrap() {
        (InitiatorOutcome::Accepted(n), _) => assert!(!n.probe),
        other => panic!("{other:?}"),
    }
    let mut i = init_probe(true);
    let (r, _) = Responder::new()
        .handle_request(&i.request())
        .unwrap()
        .unwrap();
    let rej = reject(&r, b"no");
    assert_eq!(rej[16] & 0x0F, 0, "reject flags {:#04x}", rej[16]);
    assert!(matches!(
        i.handle_reply(&rej).unwrap().unwrap().0,
        InitiatorOutcome::Rejected { .. }
    ));
}

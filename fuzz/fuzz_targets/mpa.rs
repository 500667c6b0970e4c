//! Fuzzes MPA Request/Reply decoding and both handshake roles.
//!
//! Byte 0 selects the Initiator's configuration (CRC, P2P); the rest is the
//! bytes received from the peer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netdirect_wire::handshake::{
    must_reject, try_accept, try_reject, AcceptConfig, Initiator, InitiatorConfig, Responder,
};
use netdirect_wire::mpa::MpaFrame;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, buf)) = data.split_first() else {
        return;
    };
    if let Ok(Some((f, n))) = MpaFrame::decode(buf) {
        assert!(n <= buf.len());
        assert_eq!(n, 20 + f.pd_len());
        // Re-encoding a decoded frame gives a frame that decodes the same.
        let again = f.to_vec();
        let (g, m) = MpaFrame::decode(&again).unwrap().unwrap();
        assert_eq!((g, m), (f, n));
    }

    let mut init = Initiator::new(InitiatorConfig {
        crc: mode & 1 != 0,
        ird: u16::from(mode >> 4),
        ord: u16::from(mode >> 4),
        p2p: mode & 2 != 0,
        private_data: b"fuzz".to_vec(),
        probe: false,
    });
    if let Ok(Some((_, n))) = init.handle_reply(buf) {
        assert!(n <= buf.len());
    }

    let mut resp = Responder::new();
    if let Ok(Some((req, n))) = resp.handle_request(buf) {
        assert!(n <= buf.len());
        let _ = must_reject(&req);
        let cfg = AcceptConfig {
            crc: mode & 4 != 0,
            ird: u16::from(mode & 0x0F),
            ord: u16::from(mode >> 4),
            private_data: Vec::new(),
            probe: false,
        };
        if let Ok((reply, _)) = try_accept(&req, &cfg) {
            // Our own Reply always parses back as an accepting Reply.
            let (f, m) = MpaFrame::decode(&reply).unwrap().unwrap();
            assert_eq!(m, reply.len());
            assert!(!f.flags.contains(netdirect_wire::mpa::MpaFlags::REJECT));
        }
        let _ = try_reject(&req, b"no");
    }
});

//! A live connection whose peer writes garbage into its ring: the victim terminates the
//! connection (or delivers bounded bytes), never reads outside the segment, never hangs.

use super::*;
use crate::forge::{connect, connect_with, expose, next, Forger, EXPOSED};
use crate::ring::{flag, kind, Desc, RingMem};
use netdirect_spi::Sge;
use std::sync::atomic::Ordering;

/// A small deterministic generator (no dependency needed).
fn rng(state: &mut u64) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 16) as u32
}

#[test]
fn garbage_records_terminate_or_stay_in_bounds() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..40 {
        let (victim, attacker) = connect();
        // The attacker's ring to the victim: position 0 held its RTR; forge position 1 on.
        let mut f = Forger::new(&attacker);
        for _ in 1..4u32 {
            let kind = match round % 4 {
                0 => rng(&mut seed) & 0xFF,
                1 => 1,
                2 => 2,
                _ => rng(&mut seed) & 3,
            };
            let word = kind | (rng(&mut seed) & 0x700);
            let len = if round % 2 == 0 {
                rng(&mut seed)
            } else {
                rng(&mut seed) % 200
            };
            f.record(word, len, rng(&mut seed) % 300, &[]);
        }
        f.wake();
        let r = next(&victim.cq);
        match r.status {
            Status::SUCCESS => assert!(r.bytes_transferred <= 64, "{r:?}"),
            Status::DATA_OVERRUN | Status::CANCELED => {}
            s => panic!("unexpected status {s}"),
        }
        drop(attacker);
    }
}

/// The mapped-request records (`mapped`) out of turn end the connection: a GRANT nobody
/// asked for, a DONE for a grant nobody gave. A MAPW or MAPR for memory that cannot be
/// shared (heap memory registered raw) is refused with a GRANT carrying `flag::NO`, and
/// the connection goes on: the message after it is delivered.
#[test]
#[allow(unsafe_code)]
fn mapped_records_out_of_turn() {
    for case in 0..4 {
        // A MAPR needs an inbound Read credit (IRD) like any Read.
        let limits = netdirect_spi::ReadLimits {
            inbound: 1,
            outbound: 1,
        };
        let (mut victim, attacker) = connect_with(limits);
        let base = victim.buf.as_mut_ptr();
        let exposed = expose(&mut victim);
        let d = Desc {
            token: exposed.get_local_token(),
            addr: base as u64 + EXPOSED.start as u64,
        }
        .encode();
        let mut f = Forger::new(&attacker);
        match case {
            0 => f.record(u32::from(kind::GRANT), 16, 512, &[0; 16]),
            1 => f.record(u32::from(kind::DONE), 0, 0, &[]),
            2 => f.record(u32::from(kind::MAPW), 16, 512, &d),
            _ => f.record(u32::from(kind::MAPR), 16, 512, &d),
        }
        f.record(u32::from(kind::MSG), 8, 0, &[]);
        f.wake();
        let r = next(&victim.cq);
        let want = if case >= 2 {
            Status::SUCCESS
        } else {
            Status::CANCELED
        };
        assert_eq!(r.status, want, "case {case}: {r:?}");
        drop(attacker);
        drop(exposed);
    }
}

/// A peer that sends requests (zero-length Writes here: no token needed) and never takes
/// our answers from its ring is cut off once we owe it more answers than any initiator
/// queue could be waiting for, instead of queueing them without bound.
#[test]
fn a_peer_that_never_takes_our_answers_is_cut_off() {
    let (victim, attacker) = connect();
    let mut f = Forger::new(&attacker);
    let cells = ShmQp::downcast(&attacker.qp)
        .and_then(|q| q.link().map(|l| l.tx().cells()))
        .expect("connected");
    let d = Desc { token: 0, addr: 0 }.encode();
    let mut sent = 0usize;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut r = [NdResult::EMPTY];
    loop {
        if victim.cq.get_results(&mut r) == 1 {
            assert_eq!(r[0].status, Status::CANCELED, "the victim's Receive: {r:?}");
            break;
        }
        while f.in_flight() < cells - 1 {
            f.record(u32::from(kind::WRITE), Desc::LEN as u32, 0, &d);
            sent += 1;
        }
        assert!(
            sent <= MAX_ANSWERS_OWED + 4 * cells as usize,
            "{sent} requests without an answer taken, and the connection goes on"
        );
        assert!(std::time::Instant::now() < end, "the victim hangs");
    }
    assert!(sent > MAX_ANSWERS_OWED, "cut off after {sent}: too early");
}

/// An ACK riding on anything but a WRITE, or on a WRITE when none of our requests waits
/// for an answer, breaks the protocol: the connection ends (the Receive is flushed). A
/// zero-length WRITE without it is served and the message behind it delivered; with it,
/// while our Write waits, it completes that Write first.
#[test]
#[allow(unsafe_code)]
fn a_riding_ack_only_on_a_write_that_answers_one() {
    let d = Desc { token: 0, addr: 0 }.encode();
    let ack = u32::from(flag::ACK) << 8;
    let (msg, write) = (u32::from(kind::MSG), u32::from(kind::WRITE));
    for case in 0..4 {
        let (mut victim, attacker) = connect();
        if case == 3 {
            let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(512), 8, victim.token);
            // SAFETY: INLINE: the bytes are read during the call.
            unsafe { victim.qp.write(5, &[sge], 0, 0, OpFlags::INLINE) }.expect("Write");
        }
        let mut f = Forger::new(&attacker);
        match case {
            0 => f.record(msg | ack, 8, 0, &[]),
            1 => f.record(write | ack, Desc::LEN as u32, 0, &d),
            2 => f.record(write, Desc::LEN as u32, 0, &d),
            _ => f.record(write | ack, Desc::LEN as u32, 0, &d),
        }
        f.record(msg, 8, 0, &[]);
        f.wake();
        if case == 3 {
            let r = next(&victim.cq);
            assert_eq!((r.request_context, r.status), (5, Status::SUCCESS), "{r:?}");
        }
        let r = next(&victim.cq);
        let want = if case >= 2 {
            Status::SUCCESS
        } else {
            Status::CANCELED
        };
        assert_eq!(
            (r.request_context, r.status),
            (1, want),
            "case {case}: {r:?}"
        );
    }
}

/// An ACK carrying a lease (`mapped`: placed Writes) answers only a Write that asked for one:
/// for a Write that did not ask (a zero-length one never does) it breaks the protocol and
/// the connection ends; a plain one completes it. A lease naming memory that was never sent
/// to us is taken as a refusal: the Write completes and the connection goes on.
#[test]
#[allow(unsafe_code)]
fn a_lease_only_for_a_write_that_asked() {
    let (msg, ack) = (u32::from(kind::MSG), u32::from(kind::ACK));
    let lease = [0xAB; LEASE_LEN as usize];
    for case in 0..3 {
        let (mut victim, attacker) = connect();
        let len = if case == 2 { 8 } else { 0 };
        if case == 2 {
            // The Write asks once we have proved ourselves to the peer, which needs the
            // peer's side set up (its nonce published).
            let link = ShmQp::downcast(&victim.qp).and_then(|q| q.link().cloned());
            let link = link.expect("connected");
            let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while !link.prove() {
                assert!(
                    std::time::Instant::now() < end,
                    "cannot read the peer's nonce"
                );
                std::thread::yield_now();
            }
        }
        let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(512), len, victim.token);
        // SAFETY: INLINE: the bytes are read during the call. (Token 0 is never asked for.)
        unsafe { victim.qp.write(5, &[sge], 0, 0x100, OpFlags::INLINE) }.expect("Write");
        let mut f = Forger::new(&attacker);
        match case {
            1 => f.record(ack, 0, 0, &[]),
            _ => f.record(ack, lease.len() as u32, 0, &lease),
        }
        f.record(msg, 8, 0, &[]);
        f.wake();
        let want = if case == 0 {
            Status::CANCELED
        } else {
            Status::SUCCESS
        };
        for ctx in [5, 1] {
            let r = next(&victim.cq);
            assert_eq!(
                (r.request_context, r.status),
                (ctx, want),
                "case {case}: {r:?}"
            );
        }
    }
}

/// The ACK a polling pass held rides on the next INLINE Write: one record, not two.
#[test]
#[allow(unsafe_code)]
fn a_held_ack_rides_on_the_next_write() {
    let (mut victim, attacker) = connect();
    let mut f = Forger::new(&attacker);
    let d = Desc { token: 0, addr: 0 }.encode();
    f.record(u32::from(kind::WRITE), Desc::LEN as u32, 0, &d);
    let mut r = [NdResult::EMPTY];
    let tx = ShmQp::downcast(&victim.qp).unwrap().link().unwrap().clone();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Polled until the WRITE is taken: its ACK is held (nothing went into our ring).
    while tx.rx().tail().load(Ordering::Acquire) < 2 {
        assert_eq!(victim.cq.get_results(&mut r), 0, "{r:?}");
        assert!(std::time::Instant::now() < end, "the WRITE is never taken");
    }
    let ours = tx.tx();
    assert_eq!(
        ours.seq(0).load(Ordering::Acquire),
        0,
        "an ACK record went alone"
    );
    let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(512), 8, victim.token);
    // SAFETY: INLINE: the bytes are read during the call.
    unsafe { victim.qp.write(5, &[sge], 0, 0, OpFlags::INLINE) }.expect("Write");
    let [word, len, _] = ours.meta(0);
    assert_eq!(
        ours.seq(0).load(Ordering::Acquire),
        1,
        "the Write is in the ring"
    );
    assert_eq!(
        word.load(Ordering::Relaxed),
        u32::from(kind::WRITE) | u32::from(flag::ACK) << 8,
        "the WRITE carries the ACK"
    );
    assert_eq!(len.load(Ordering::Relaxed), (Desc::LEN + 8) as u32);
    assert_eq!(ours.seq(1).load(Ordering::Acquire), 0, "one record");
}

/// A busy poll takes whole inline messages for posted Receives (`ShmQp::poll_lane`): in
/// order, as many as the caller has room for, each in its own Receive; what does not fit
/// stays in the ring for the next poll.
#[test]
fn a_poll_hands_inline_messages_over_in_order() {
    let (mut victim, attacker) = connect();
    for (i, off) in [(2u64, 64usize), (3, 128)] {
        let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(off), 64, victim.token);
        // SAFETY: the slot is read only after its Receive completed.
        unsafe { victim.qp.receive(i, &[sge]) }.expect("receive");
    }
    let mut f = Forger::new(&attacker);
    for msg in [&b"one"[..], b"two", b"three"] {
        f.record(u32::from(kind::MSG), msg.len() as u32, 0, msg);
    }
    let mut got = Vec::new();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while got.len() < 3 {
        let mut r = [NdResult::EMPTY; 2];
        let n = victim.cq.get_results(&mut r);
        got.extend_from_slice(&r[..n]);
        assert!(
            std::time::Instant::now() < end,
            "messages not taken: {got:?}"
        );
    }
    let seen: Vec<_> = got
        .iter()
        .map(|r| {
            (
                r.status,
                r.request_type,
                r.request_context,
                r.bytes_transferred,
            )
        })
        .collect();
    let recv = RequestType::Receive;
    let ok = Status::SUCCESS;
    assert_eq!(seen, [(ok, recv, 1, 3), (ok, recv, 2, 3), (ok, recv, 3, 5)]);
    assert_eq!(&victim.buf[..3], b"one");
    assert_eq!(&victim.buf[64..67], b"two");
    assert_eq!(&victim.buf[128..133], b"three");
}

/// With a Notify armed, a poll's own drive does not hand its completions over past the
/// queue (`CqCore::may_bypass`): they are queued, fire the Notify, and the same poll
/// returns them.
#[test]
fn a_poll_under_an_armed_notify_fires_it() {
    let (victim, attacker) = connect();
    let ov = victim
        .cq
        .notify(netdirect_spi::NotifyType::Any)
        .expect("notify");
    assert_eq!(ov.status(), Status::PENDING);
    let mut f = Forger::new(&attacker);
    f.record(u32::from(kind::MSG), 4, 0, b"ping");
    let r = next(&victim.cq);
    assert_eq!(
        (r.status, r.request_context, r.bytes_transferred),
        (Status::SUCCESS, 1, 4)
    );
    assert_eq!(ov.status(), Status::SUCCESS, "the Notify fired");
}

/// A MAP message (a memory's descriptor) that no MAPW or MAPR of ours asked for is
/// dropped: nothing is mapped, and the connection goes on. The same message while we ask
/// is taken.
#[test]
fn unasked_memory_is_not_mapped() {
    let (victim, attacker) = connect();
    let peer = ShmQp::downcast(&attacker.qp)
        .unwrap()
        .link()
        .unwrap()
        .clone();
    let me = ShmQp::downcast(&victim.qp).unwrap().link().unwrap().clone();
    let m = netdirect_spi::kit::shared_mem::SharedMemory::new(1 << 20).unwrap();
    for asking in [false, true] {
        me.maps.asking(asking);
        let msg = crate::proto::Msg::Map { id: m.id() };
        peer.send_msg(&msg, Some(m.fd())).unwrap();
        me.service_socket(64);
        assert_eq!(
            me.find_peer_memory(m.id()).is_some(),
            asking,
            "asking: {asking}"
        );
    }
    let mut f = Forger::new(&attacker);
    f.record(u32::from(kind::MSG), 8, 0, &[]);
    f.wake();
    assert_eq!(next(&victim.cq).status, Status::SUCCESS);
}

/// Forged one-sided records (WRITE, WPULL, READ with random tokens, addresses, lengths and
/// bytes) toward a victim that exposes 1 KiB in the middle of a 4 KiB buffer: whatever the
/// victim makes of them, no byte outside the exposed range (and the Receive's 64 bytes)
/// changes, and it never hangs.
#[test]
#[allow(unsafe_code)]
fn forged_one_sided_records_stay_inside_the_exposed_range() {
    const LO: usize = EXPOSED.start;
    const HI: usize = EXPOSED.end;
    let mut seed = 0x51A7_E5EE_D000_0001u64;
    for round in 0..120 {
        let (mut victim, attacker) = connect();
        let base = victim.buf.as_mut_ptr();
        let exposed = expose(&mut victim);
        let token = exposed.get_local_token();
        victim.buf[64..].fill(0xAA);
        let mut f = Forger::new(&attacker);
        // Position 0 held the attacker's RTR: forge position 1, then an 8-byte message.
        let kind = [kind::WRITE, kind::WPULL, kind::READ, kind::MAPW, kind::MAPR][round % 5];
        let tok = match rng(&mut seed) % 4 {
            0 => rng(&mut seed),
            1 => token ^ (1 + rng(&mut seed) % 255),
            _ => token,
        };
        let lo = base as u64 + LO as u64;
        // Around the edges of the range as often as inside it.
        let off = match rng(&mut seed) % 3 {
            0 => -i64::from(rng(&mut seed) % 16),
            1 => (HI - LO) as i64 - i64::from(rng(&mut seed) % 16),
            _ => i64::from(rng(&mut seed) % (HI - LO) as u32),
        };
        let addr = lo.wrapping_add_signed(off);
        let total = match rng(&mut seed) % 3 {
            0 | 1 if kind == kind::WRITE => rng(&mut seed) % 33,
            0 => rng(&mut seed) % 40,
            1 => rng(&mut seed) % 2000,
            _ => rng(&mut seed),
        };
        let d = Desc { token: tok, addr }.encode();
        let mut cell = [0u8; INLINE_MAX];
        cell[..16].copy_from_slice(&d);
        for b in &mut cell[16..] {
            *b = rng(&mut seed) as u8;
        }
        let (len, data) = match kind {
            // Mostly well-formed (the inline bytes are the whole Write), so the range
            // checks are what decides.
            kind::WRITE if round % 2 == 0 => (16 + total.min(32), 0),
            kind::WRITE => (16 + rng(&mut seed) % 33, 0),
            kind::READ | kind::MAPW | kind::MAPR => (16, 0),
            _ => (16 * (2 + rng(&mut seed) % 4), 1),
        };
        if data != 0 {
            // The descriptor and up to four scatter entries.
            let mut list = [0u8; 80];
            list[..16].copy_from_slice(&d);
            for b in &mut list[16..] {
                *b = rng(&mut seed) as u8;
            }
            f.data(&list[..len as usize]);
            f.record(u32::from(kind), len, total, &[]);
        } else {
            f.record(u32::from(kind), len, total, &cell[..len as usize]);
        }
        // Then an 8-byte message at position 2: delivered if the forged record was
        // accepted, flushed with the Receive otherwise.
        f.record(u32::from(kind::MSG), 8, 0, &[]);
        f.wake();
        let r = next(&victim.cq);
        assert!(
            matches!(r.status, Status::SUCCESS | Status::CANCELED),
            "round {round}: {r:?}"
        );
        let outside = victim.buf[64..LO]
            .iter()
            .chain(&victim.buf[HI..])
            .all(|&b| b == 0xAA);
        assert!(
            outside,
            "round {round}: a byte outside the exposed range changed"
        );
        drop(attacker);
        drop(exposed);
    }
}

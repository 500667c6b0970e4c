//! The receiver-not-ready bound of the `shm` provider (R-QP-7, `ND_SHM_RNR_TIMEOUT_MS`): a
//! message that finds no Receive stays in the ring, and once the receiver has held it longer
//! than the bound it ends the connection and the sender's Send fails `ND_IO_TIMEOUT`. Its own
//! test binary: the bound is set for this process only, before any adapter opens.

#![cfg(not(loom))]

mod common;

use common::{End, DEADLINE};
use netdirect::{RequestType, Status};

/// Buffer size of both ends.
const BIG: usize = 4 << 20;

/// A connected pair (active, passive), with the bound set short for this process.
fn connected() -> (End, End) {
    std::env::set_var("ND_SHM_RNR_TIMEOUT_MS", "200");
    let s = End::new(BIG, 4);
    let (l, addr) = s.listen();
    let c = End::new(BIG, 4);
    std::thread::scope(|t| {
        t.spawn(|| s.accept_one(&l));
        c.connect(addr);
    });
    (c, s)
}

/// The receiver posts nothing and sleeps on NotifyDisconnect: its wait must wake by itself
/// when the bound runs out.
fn receiver_posts_nothing(s: &End) {
    s.connector
        .notify_disconnect()
        .expect("notify disconnect")
        .wait_timeout(Some(DEADLINE))
        .expect("the receiver ends the connection within the deadline")
        .expect("NotifyDisconnect");
}

#[test]
fn a_send_held_past_the_bound_fails_with_io_timeout() {
    // 4 MiB: more than the ring's data area holds, so the Send is still in progress (not
    // locally complete) when the receiver gives up.
    let (c, s) = connected();
    std::thread::scope(|t| {
        t.spawn(|| receiver_posts_nothing(&s));
        c.send(1, 0, BIG).expect("post Send");
        let r = c.poll();
        assert_eq!(
            (r.status, r.request_type, r.request_context),
            (Status::IO_TIMEOUT, RequestType::Send, 1),
            "the Send nobody receives"
        );
    });
    // The receiver reports nothing for the message it never took; later Sends are flushed.
    let mut none = [netdirect::NdResult::EMPTY];
    assert_eq!(s.cq.get_results(&mut none), 0, "receiver CQ: {none:?}");
    c.send(2, 0, 8).expect("post Send after the end");
    let r = c.poll();
    assert_eq!((r.status, r.request_context), (Status::CANCELED, 2));
}

/// The record that ends the connection names the message held: a Send whose bytes were all in
/// the ring (locally complete) is that message here, so the big Send behind it, still being
/// pushed, is flushed (ND_CANCELED), not failed for a wait it never had (ND_IO_TIMEOUT).
#[test]
fn only_the_held_message_fails_with_io_timeout() {
    let (c, s) = connected();
    std::thread::scope(|t| {
        t.spawn(|| receiver_posts_nothing(&s));
        // 100 KiB: all in the data area at once (complete locally); then 3 MiB, which is not.
        c.send(1, 0, 100 << 10).expect("post Send");
        c.send(2, 0, 3 << 20).expect("post Send");
        let got: Vec<_> = (0..2)
            .map(|_| c.poll())
            .map(|r| (r.request_context, r.status))
            .collect();
        assert_eq!(got, [(1, Status::SUCCESS), (2, Status::CANCELED)]);
    });
}

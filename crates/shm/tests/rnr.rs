//! The receiver-not-ready bound of the `shm` provider (R-QP-7, `ND_SHM_RNR_TIMEOUT_MS`): a
//! message that finds no Receive stays in the ring, and once the receiver has held it longer
//! than the bound it ends the connection and the sender's Send fails `ND_IO_TIMEOUT`. Its own
//! test binary: the bound is set for this process only, before any adapter opens.

#![cfg(not(loom))]

mod common;

use common::{End, DEADLINE};
use netdirect::{RequestType, Status};

#[test]
fn a_send_held_past_the_bound_fails_with_io_timeout() {
    std::env::set_var("ND_SHM_RNR_TIMEOUT_MS", "200");
    // 4 MiB: more than the ring's data area holds, so the Send is still in progress (not
    // locally complete) when the receiver gives up.
    const BIG: usize = 4 << 20;
    let s = End::new(BIG, 4);
    let (l, addr) = s.listen();
    let c = End::new(BIG, 4);
    std::thread::scope(|t| {
        t.spawn(|| s.accept_one(&l));
        c.connect(addr);
    });
    std::thread::scope(|t| {
        // The receiver posts nothing and sleeps on NotifyDisconnect: its wait must wake by
        // itself when the bound runs out.
        t.spawn(|| {
            s.connector
                .notify_disconnect()
                .expect("notify disconnect")
                .wait_timeout(Some(DEADLINE))
                .expect("the receiver ends the connection within the deadline")
                .expect("NotifyDisconnect");
        });
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

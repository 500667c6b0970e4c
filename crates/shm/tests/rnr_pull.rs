//! Pulled (RTS) messages at a receiver that cannot take them at once: a pull that found its
//! Receive stops the receiver-not-ready clock, so a later, brief wait for a Receive is not
//! mistaken for an old one; a pulled message longer than its Receive fails the Send (which a
//! pull keeps in progress until the receiver answers) `STATUS_DATA_ERROR`. Its own test
//! binary: the bound and the pull size are set for this process only, before any adapter opens.

#![cfg(not(loom))]

mod common;

use common::{message, pair, End};
use netdirect::{NdResult, Status};

/// The bound and the pull size, set once for both tests before either opens an adapter.
fn configure() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("ND_SHM_RNR_TIMEOUT_MS", "100");
        std::env::set_var("ND_SHM_PULL_MIN_KIB", "4");
    });
}

#[test]
fn a_pulled_message_stops_the_receiver_not_ready_clock() {
    configure();
    let s = End::new(1 << 20, 4);
    let (l, addr) = s.listen();
    let c = End::new(1 << 20, 4);
    std::thread::scope(|t| {
        t.spawn(|| s.accept_one(&l));
        c.connect(addr);
    });
    let big = message(1, 64 << 10);
    c.fill(0, &big);
    c.send(1, 0, big.len()).expect("post Send");
    let mut r = [NdResult::EMPTY];
    // No Receive yet: the message is held and the clock runs.
    assert_eq!(s.cq.get_results(&mut r), 0, "{r:?}");
    s.recv(2, 0, big.len());
    assert_eq!((s.poll().request_context, c.poll().request_context), (2, 1));
    assert_eq!(s.read(0, big.len()), big, "pulled");
    // Longer than the bound later, another message finds no Receive for a moment: held, not
    // refused at once.
    std::thread::sleep(std::time::Duration::from_millis(200));
    c.send(3, 0, 8).expect("post Send");
    assert_eq!(s.cq.get_results(&mut r), 0, "{r:?}");
    s.recv(4, 0, 8);
    let (got, sent) = (s.poll(), c.poll());
    assert_eq!(
        (
            got.request_context,
            got.status,
            sent.request_context,
            sent.status
        ),
        (4, Status::SUCCESS, 3, Status::SUCCESS)
    );
}

/// docs/ND-RULES.md D5: the Receive too small for a pulled message completes ND_DATA_OVERRUN,
/// the Send, still waiting for the receiver's answer, STATUS_DATA_ERROR (as tcp completes a
/// Send a Terminate names), and the Send behind it ND_CANCELED.
#[test]
fn a_pulled_message_too_long_for_its_receive_fails_the_send() {
    configure();
    let (c, s) = pair(1 << 20);
    s.recv(1, 0, 4096);
    c.send(2, 0, 64 << 10).expect("post Send");
    c.send(3, 0, 8).expect("post Send behind it");
    let got = s.poll();
    assert_eq!((got.request_context, got.status), (1, Status::DATA_OVERRUN));
    let (first, second) = (c.poll(), c.poll());
    assert_eq!(
        (
            first.request_context,
            first.status,
            second.request_context,
            second.status
        ),
        (2, Status::DATA_ERROR, 3, Status::CANCELED)
    );
}

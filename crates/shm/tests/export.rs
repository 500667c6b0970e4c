//! The adapter's descriptor exported while work already waits for the application's next call.
//!
//! A shm peer announces its records with a WAKE on the connection's socket only when our side
//! is armed (`ring::wake`), and an exported descriptor reports nothing but such wakes. So
//! whatever was left before the export (a record in the ring that no poll took yet, an ACK a
//! polling pass held) must make the descriptor readable at the export itself: an event loop
//! that now waits on it would otherwise wait for ever, and so would a peer that waits for the
//! answer. Each test runs both ends in one process; nothing sleeps, every wait has a deadline.

#![cfg(not(loom))]

mod common;

use std::os::fd::BorrowedFd;

use common::{done_ok, pair, place, write_inline, End, DEADLINE};
use netdirect::RequestType;
use rustix::event::{poll, PollFd, PollFlags};

/// Whether `fd` becomes readable within the deadline.
fn readable(fd: BorrowedFd<'_>) -> bool {
    let t = rustix::time::Timespec {
        tv_sec: DEADLINE.as_secs() as _,
        tv_nsec: 0,
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&t)), Ok(n) if n > 0)
}

/// A connected pair whose target `s` has read every WAKE its peer sent while it was armed
/// during the set-up: the socket is level-triggered in the epoll set, so a stale one would
/// make the exported descriptor readable whatever the export did. With nothing to do, one
/// progress pass drains them (`Link::on_ready`).
fn quiet_pair() -> (End, End) {
    let (c, s) = pair(64 << 10);
    s.adapter.progress();
    (c, s)
}

/// A Write the target placed in a polling pass, which held its ACK (no thread waited and the
/// descriptor was not exported then). Exporting the descriptor next must announce that ACK,
/// and the progress an event loop runs on readiness sends it: the initiator's Write completes.
#[test]
fn an_ack_held_before_the_export_makes_the_descriptor_readable() {
    let (c, s) = quiet_pair();
    let data = common::message(3, 8);
    write_inline(&c, &s, 1, &data);
    place(&s, &data);
    assert!(
        readable(s.adapter.fd()),
        "the export did not announce the held ACK"
    );
    s.adapter.progress();
    done_ok(
        c.poll(),
        RequestType::Write,
        1,
        8,
        "the Write, after the export",
    );
}

/// A message in the ring that no poll took yet (the receiver was not armed, so the sender sent
/// no WAKE): exporting the descriptor must announce it.
#[test]
fn a_record_waiting_in_the_ring_makes_the_descriptor_readable() {
    let (c, s) = quiet_pair();
    s.recv(7, 0, 64);
    c.fill(0, &common::message(5, 16));
    c.send(2, 0, 16).expect("send");
    done_ok(c.poll(), RequestType::Send, 2, 0, "the Send");
    assert!(
        readable(s.adapter.fd()),
        "the export did not announce the waiting message"
    );
    s.adapter.progress();
    done_ok(s.poll(), RequestType::Receive, 7, 16, "the Receive");
    assert_eq!(s.read(0, 16), common::message(5, 16));
}

/// Nothing waits: the export leaves the descriptor silent (a readiness that announces nothing
/// would spin an event loop).
#[test]
fn an_idle_connection_leaves_the_exported_descriptor_silent() {
    let (_c, s) = quiet_pair();
    let fd = s.adapter.fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    assert_eq!(
        poll(&mut fds, Some(&rustix::time::Timespec::default())),
        Ok(0)
    );
}

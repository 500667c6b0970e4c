//! The adapter's descriptor exported on an idle connection stays silent.
//!
//! Work left before an export (a record published while nothing was armed, an ACK a polling
//! pass held) makes the shm descriptor readable at once (`Engine::fd`); the conformance suite
//! checks that for both providers (`crates/conformance/tests/export.rs`). This is the other
//! half, shm's own: with nothing waiting, the export writes no wake-up, which would spin an
//! event loop once for nothing. (tcp's descriptor reports each socket's writability once when
//! it is exported: its streams join the epoll set edge-triggered.)

#![cfg(not(loom))]

mod common;

use common::pair;
use rustix::event::{poll, PollFd, PollFlags};

#[test]
fn an_idle_connection_leaves_the_exported_descriptor_silent() {
    let (_c, s) = pair(64 << 10);
    // Whatever the set-up left to read (a WAKE sent while the target was armed) is read now:
    // with nothing to do, one progress pass drains it (`Link::on_ready`).
    s.adapter.progress();
    let fd = s.adapter.fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    assert_eq!(
        poll(&mut fds, Some(&rustix::time::Timespec::default())),
        Ok(0)
    );
}

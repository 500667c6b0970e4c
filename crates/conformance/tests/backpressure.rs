//! Small Sends that outrun their receiver, for every provider and both loopback families.
//!
//! The sender posts 256-byte Sends to a peer that has no Receive posted, so nothing is taken
//! off the connection (tcp: the socket's buffers fill; shm: the ring does), until its
//! initiator queue is full (`ND_NO_MORE_ENTRIES`). Then the receiver posts Receives and both
//! ends drain. Every message must arrive once, in order and intact, and every Send complete
//! `ND_SUCCESS` in posting order. This crosses each provider's path from a Send written
//! within its post (tcp: framed on the stack and written by `send(2)` at once; shm: pushed
//! into the ring) to one queued behind a full connection, and back.

use std::ops::Range;
use std::time::{Duration, Instant};

use netdirect::{NdResult, OpFlags, RequestType, Status};
use netdirect_conformance::check::{fail, fill_pattern, Check, Context};
use netdirect_conformance::harness;
use netdirect_conformance::side::connect_pair;
use netdirect_conformance::{ensure, ensure_eq, Needs, Side, SideConfig};

/// The message size: the largest one tcp writes within the post.
const LEN: usize = 256;
/// How long the drain may take.
const DRAIN: Duration = Duration::from_secs(60);
/// Sends after which a connection that still takes them all counts as never full (about
/// 110 MB: far beyond any socket's or ring's buffering).
const MOST: usize = 400_000;

fn slot(i: usize) -> Range<usize> {
    i * LEN..(i + 1) * LEN
}

#[test]
fn small_sends_outrunning_the_receiver_arrive_in_order() {
    harness::each_provider(Needs::TwoSided, "small-sends-backpressure", |p, fam| {
        let ip = fam.ip();
        let a = p
            .open_adapter_for(std::net::SocketAddr::new(ip, 0))
            .ctx("open adapter")?;
        let info = a.query();
        let depth = info.max_initiator_queue_depth.min(1024);
        // One slot more than Sends can be outstanding: a slot is rewritten only after the
        // Send that used it before completed.
        let slots = depth as usize + 1;
        let server = Side::on(
            &a,
            SideConfig {
                buf_len: slots * LEN,
                depth,
                sge: 1,
                ..SideConfig::default()
            },
        )?;
        let rdepth = info.max_receive_queue_depth.min(1024) as usize;
        let client = Side::on(
            &a,
            SideConfig {
                buf_len: rdepth * LEN,
                depth: rdepth as u32,
                sge: 1,
                ..SideConfig::default()
            },
        )?;
        let _listener = connect_pair(&server, &client, ip)?;

        let mut msg = [0u8; LEN];
        let mut out = [NdResult::EMPTY; 64];
        let (mut posted, mut completed) = (0usize, 0usize);
        let take_completions = |completed: &mut usize, out: &mut [NdResult]| -> Check {
            let n = server.scq.get_results(out);
            for r in &out[..n] {
                ensure_eq!(r.status, Status::SUCCESS, "Send #{completed}");
                ensure_eq!(
                    r.request_context,
                    *completed as u64,
                    "Send completions out of posting order"
                );
                *completed += 1;
            }
            Ok(())
        };
        let mut backlogged = false;
        loop {
            ensure!(
                posted < MOST,
                "{posted} Sends of {LEN} bytes went out to a receiver with no Receive posted, \
                 and the initiator queue never filled"
            );
            let s = slot(posted % slots);
            fill_pattern(posted as u64, &mut msg);
            // SAFETY: at most `depth` Sends are outstanding, so the one that used this slot
            // before (`slots` Sends ago) has completed.
            unsafe { server.write(std::slice::from_ref(&s), &msg) };
            match server.send(posted as u64, &[s], OpFlags::empty()) {
                Ok(()) => posted += 1,
                Err(e) if e.status() == Status::NO_MORE_ENTRIES => break,
                Err(e) => return fail(format!("Send #{posted}: {e}")),
            }
            if !backlogged {
                // A Send that went out within its post has its completion queued, and this
                // poll returns it without driving the receiver. The first that did not marks
                // the full connection; from then on the initiator queue fills.
                take_completions(&mut completed, &mut out)?;
                backlogged = completed < posted;
            }
        }
        ensure!(
            posted - completed == depth as usize,
            "ND_NO_MORE_ENTRIES with {} of {depth} Sends outstanding",
            posted - completed
        );

        for i in 0..rdepth {
            client.recv(i as u64, &[slot(i)]).ctx("Receive")?;
        }
        let mut received = 0usize;
        let end = Instant::now() + DRAIN;
        while received < posted || completed < posted {
            ensure!(
                Instant::now() < end,
                "after {DRAIN:?}: {received} of {posted} messages received, {completed} Sends \
                 completed"
            );
            let n = client.rcq.get_results(&mut out);
            for r in &out[..n] {
                ensure_eq!(r.status, Status::SUCCESS, "Receive of message #{received}");
                ensure_eq!(r.request_type, RequestType::Receive, "completion type");
                ensure_eq!(
                    r.request_context,
                    received as u64,
                    "Receives completed out of posting order"
                );
                ensure_eq!(
                    r.bytes_transferred as usize,
                    LEN,
                    "message #{received}'s length"
                );
                let s = slot(received % rdepth);
                // SAFETY: this Receive completed; its slot is reposted only below.
                let got = unsafe { client.read(std::slice::from_ref(&s), LEN) };
                fill_pattern(received as u64, &mut msg);
                ensure!(
                    got == msg,
                    "message #{received} arrived with other bytes (lost, repeated or reordered)"
                );
                let next = received + rdepth;
                if next < posted {
                    client.recv(next as u64, &[s]).ctx("Receive again")?;
                }
                received += 1;
            }
            take_completions(&mut completed, &mut out)?;
        }
        Ok(())
    });
}

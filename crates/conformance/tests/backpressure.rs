//! The order of Sends that go out within their post, for every provider and both loopback
//! families: when they outrun their receiver, and when two threads post them at once.
//!
//! The sender posts 256-byte Sends to a peer that has no Receive posted, so nothing is taken
//! off the connection (tcp: the socket's buffers fill; shm: the ring does), until its
//! initiator queue is full (`ND_NO_MORE_ENTRIES`). Then the receiver posts Receives and both
//! ends drain. Every message must arrive once, in order and intact, and every Send complete
//! `ND_SUCCESS` in posting order. This crosses each provider's path from a Send written
//! within its post (tcp: framed on the stack and written by `send(2)` at once; shm: pushed
//! into the ring) to one queued behind a full connection, and back. The second test has two
//! threads post at once and holds each Send's completion to its place on the wire.

use std::ops::Range;
use std::time::{Duration, Instant};

use netdirect::{Listener, NdResult, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{fail, fill_pattern, Check, Context};
use netdirect_conformance::harness::{self, Family};
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

/// A connected sender (`server`) and receiver (`client`) on one adapter.
struct Pair {
    server: Side,
    client: Side,
    /// The sender's queue depth.
    depth: usize,
    /// The receiver's queue depth: one `msg`-byte slot of its buffer per Receive.
    rdepth: usize,
    _listener: Listener,
}

/// A [`Pair`] with one SGE per request: the queues are `most` deep (or the adapter's limit),
/// the sender's buffer is `sender_buf(depth)` bytes and the receiver's holds one `msg`-byte
/// slot per Receive.
fn sender_and_receiver(
    p: &Provider,
    fam: Family,
    most: u32,
    sender_buf: impl Fn(usize) -> usize,
    msg: usize,
) -> Check<Pair> {
    let ip = fam.ip();
    let a = p
        .open_adapter_for(std::net::SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let info = a.query();
    let depth = info.max_initiator_queue_depth.min(most);
    let server = Side::on(
        &a,
        SideConfig {
            buf_len: sender_buf(depth as usize),
            depth,
            sge: 1,
            ..SideConfig::default()
        },
    )?;
    let rdepth = info.max_receive_queue_depth.min(most);
    let client = Side::on(
        &a,
        SideConfig {
            buf_len: rdepth as usize * msg,
            depth: rdepth,
            sge: 1,
            ..SideConfig::default()
        },
    )?;
    let listener = connect_pair(&server, &client, ip)?;
    Ok(Pair {
        server,
        client,
        depth: depth as usize,
        rdepth: rdepth as usize,
        _listener: listener,
    })
}

#[test]
fn small_sends_outrunning_the_receiver_arrive_in_order() {
    harness::each_provider(Needs::TwoSided, "small-sends-backpressure", |p, fam| {
        // One slot more than Sends can be outstanding: a slot is rewritten only after the
        // Send that used it before completed.
        let pair = sender_and_receiver(p, fam, 1024, |depth| (depth + 1) * LEN, LEN)?;
        let Pair {
            server,
            client,
            depth,
            rdepth,
            ..
        } = &pair;
        let (depth, rdepth) = (*depth, *rdepth);
        let slots = depth + 1;

        let mut msg = [0u8; LEN];
        let mut out = [NdResult::EMPTY; 64];
        let (mut posted, mut completed) = (0usize, 0usize);
        let take_one = |completed: &mut usize, r: &NdResult| -> Check {
            ensure_eq!(r.status, Status::SUCCESS, "Send #{completed}");
            ensure_eq!(
                r.request_context,
                *completed as u64,
                "Send completions out of posting order"
            );
            *completed += 1;
            Ok(())
        };
        let take_completions = |completed: &mut usize, out: &mut [NdResult]| -> Check {
            let n = server.scq.get_results(out);
            for r in &out[..n] {
                take_one(completed, r)?;
            }
            Ok(())
        };
        let mut backlogged = false;
        // When the queue refused a Send, the time by which it must have been shown full.
        let mut refused_since: Option<Instant> = None;
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
                Ok(()) => {
                    posted += 1;
                    refused_since = None;
                }
                Err(e) if e.status() == Status::NO_MORE_ENTRIES => {
                    // Sends may have completed since the last poll (the socket's buffers grow
                    // while they fill): a Send's slot is free once its completion is queued,
                    // reaped or not. So take every queued completion; then the count not yet
                    // completed is exact, and the refusal was right only if it is `depth`.
                    while server.scq.get_results(&mut out[..1]) == 1 {
                        take_one(&mut completed, &out[0])?;
                    }
                    let outstanding = posted - completed;
                    ensure!(
                        outstanding <= depth,
                        "{outstanding} Sends outstanding on a queue {depth} deep"
                    );
                    if outstanding == depth {
                        break;
                    }
                    // Fewer: Sends completed after the refusal, or the queue leaks slots.
                    // Post again; a queue that keeps refusing with room in it is the latter.
                    let since = *refused_since.get_or_insert_with(Instant::now);
                    ensure!(
                        since.elapsed() < DRAIN,
                        "ND_NO_MORE_ENTRIES for {DRAIN:?} with {outstanding} of {depth} Sends \
                         outstanding"
                    );
                    continue;
                }
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

/// Messages per posting thread in [`sends_from_two_threads_complete_in_the_order_they_left`].
const PER_THREAD: usize = 50_000;
/// The 8-byte messages' size.
const TAG: usize = 8;

/// Two threads post Sends on one queue pair at once. A queue pair has one initiator queue,
/// whatever thread posts to it: its Sends leave in the order the provider accepted them, and
/// complete in that order (docs/ND-RULES.md §2.5, GetResults: "within one QP, initiator
/// requests complete in issue order"). So the sender's completions must come in
/// exactly the order the messages arrive at the receiver. Each Send may be written within its
/// post (tcp: by `send(2)`; shm: into the ring) and complete there, under the queue pair's
/// lock: a completion queued after that lock is released could be overtaken by the next
/// poster's. Every message is 8 bytes naming its thread and number; a third thread (this
/// one) drains both ends.
#[test]
fn sends_from_two_threads_complete_in_the_order_they_left() {
    harness::each_provider(Needs::TwoSided, "two-posting-threads", |p, fam| {
        // The sender's buffer holds every message, written before any is posted: no slot is
        // ever rewritten while a Send of it may be outstanding.
        let pair = sender_and_receiver(p, fam, 256, |_| 2 * PER_THREAD * TAG, TAG)?;
        let Pair {
            server,
            client,
            rdepth,
            ..
        } = &pair;
        let rdepth = *rdepth;
        let tag = |t: usize, i: usize| ((t as u64) << 32) | i as u64;
        let at = |t: usize, i: usize| (t * PER_THREAD + i) * TAG;
        for t in 0..2 {
            for i in 0..PER_THREAD {
                let s = at(t, i)..at(t, i) + TAG;
                // SAFETY: nothing is posted yet.
                unsafe { server.write(std::slice::from_ref(&s), &tag(t, i).to_le_bytes()) };
            }
        }
        for k in 0..rdepth {
            let s = k * TAG..(k + 1) * TAG;
            client
                .recv(k as u64, std::slice::from_ref(&s))
                .ctx("Receive")?;
        }

        let total = 2 * PER_THREAD;
        let (mut arrived, mut completed) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let end = Instant::now() + DRAIN;
        std::thread::scope(|scope| -> Check {
            let posters: Vec<_> = (0..2)
                .map(|t| {
                    let server = &server;
                    scope.spawn(move || -> Check {
                        for i in 0..PER_THREAD {
                            let s = at(t, i)..at(t, i) + TAG;
                            loop {
                                match server.send(
                                    tag(t, i),
                                    std::slice::from_ref(&s),
                                    OpFlags::empty(),
                                ) {
                                    Ok(()) => break,
                                    // The initiator queue is full: the drainer frees it.
                                    Err(e) if e.status() == Status::NO_MORE_ENTRIES => {
                                        ensure!(Instant::now() < end, "thread {t} stuck at #{i}");
                                        std::thread::yield_now();
                                    }
                                    Err(e) => return fail(format!("thread {t}, Send #{i}: {e}")),
                                }
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            let mut out = [NdResult::EMPTY; 64];
            while arrived.len() < total || completed.len() < total {
                ensure!(
                    Instant::now() < end,
                    "after {DRAIN:?}: {} of {total} messages received, {} Sends completed",
                    arrived.len(),
                    completed.len()
                );
                let n = client.rcq.get_results(&mut out);
                for r in &out[..n] {
                    ensure_eq!(r.status, Status::SUCCESS, "a Receive");
                    let k = r.request_context as usize;
                    let s = k * TAG..(k + 1) * TAG;
                    // SAFETY: this Receive completed; its slot is reposted only below.
                    let got = unsafe { client.read(std::slice::from_ref(&s), TAG) };
                    arrived.push(u64::from_le_bytes(got.try_into().expect("8 bytes")));
                    client.recv(k as u64, &[s]).ctx("Receive again")?;
                }
                let n = server.scq.get_results(&mut out);
                for r in &out[..n] {
                    ensure_eq!(r.status, Status::SUCCESS, "a Send");
                    completed.push(r.request_context);
                }
            }
            for p in posters {
                p.join().expect("poster panicked")?;
            }
            Ok(())
        })?;
        for t in 0..2 {
            let mine: Vec<u64> = arrived.iter().copied().filter(|x| x >> 32 == t).collect();
            let want: Vec<u64> = (0..PER_THREAD).map(|i| tag(t as usize, i)).collect();
            ensure!(
                mine == want,
                "thread {t}'s messages arrived out of its posting order"
            );
        }
        if let Some(k) = (0..total).find(|&k| arrived[k] != completed[k]) {
            return fail(format!(
                "completion #{k} is the Send of message {:#x}, but message {:#x} left before \
                 it (arrived #{k})",
                completed[k], arrived[k]
            ));
        }
        Ok(())
    });
}

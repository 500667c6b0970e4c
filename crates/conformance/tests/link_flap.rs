//! A `tcp` connection rides out a 2 s link flap, shorter than `ND_TCP_TIMEOUT_MS` (8 s here):
//! two hosts (network namespaces joined by a veth pair, `netns::on_two_hosts`) stream 64 KiB
//! Sends to each other over one connection; halfway through, host a's end of the link goes
//! down for 2 s, with both hosts' second halves posted meanwhile. Every message must arrive
//! once, in order and intact, every Send complete `ND_SUCCESS`, and the connection stay up:
//! TCP's retransmissions carry the data once the link is back, and the dead-path limit
//! (`sockets::watch_path`) does not fire.
//!
//! Needs root and `ip`; skipped without them, failed under CI.

// Requests are lists of byte ranges (one per SGE).
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use netdirect::{NdResult, NotifyType, OpFlags, Provider, RequestType, Status};
use netdirect_conformance::check::{expect_pending, fail, pattern, wait_ok, Check, Context};
use netdirect_conformance::netns::{on_two_hosts, Host};
use netdirect_conformance::side::listen;
use netdirect_conformance::{ensure, ensure_eq, Side, SideConfig};

/// The flap.
const FLAP: Duration = Duration::from_secs(2);
/// Messages each way, and their size.
const COUNT: u64 = 64;
const MSG: usize = 64 * 1024;
/// Receives and Sends in flight per direction.
const DEPTH: usize = 8;
/// The whole exchange, flap included, must end within this.
const LIMIT: Duration = Duration::from_secs(40);

/// What the two hosts' threads tell each other.
#[derive(Debug)]
enum Msg {
    Listening(SocketAddr),
    /// The link went down: post the second half.
    Down,
    /// All sent and received, the connection still up.
    Done,
}

fn recv(from: &Receiver<Msg>) -> Check<Msg> {
    from.recv()
        .map_err(|_| netdirect_conformance::Failure("the other host gave up".into()))
}

/// Receive slot `i` and send slot `i` of the buffer.
fn rslot(i: usize) -> std::ops::Range<usize> {
    i * MSG..(i + 1) * MSG
}
fn sslot(i: usize) -> std::ops::Range<usize> {
    rslot(DEPTH + i)
}

/// One host's stream: sends `COUNT` messages (the second half only once `may_finish` says
/// so), receives `COUNT`, checks each.
struct Stream<'a> {
    side: &'a Side,
    /// Sends posted, completed; messages received.
    posted: u64,
    sent: u64,
    received: u64,
}

impl Stream<'_> {
    /// Post Sends while the window and `allowed` let.
    fn post(&mut self, allowed: u64) -> Check {
        while self.posted < allowed && self.posted - self.sent < DEPTH as u64 {
            let slot = (self.posted % DEPTH as u64) as usize;
            // SAFETY: the Send that used this slot last completed.
            unsafe { self.side.write(&[sslot(slot)], &pattern(self.posted, MSG)) };
            self.side
                .send(self.posted, &[sslot(slot)], OpFlags::empty())
                .ctx("post Send")?;
            self.posted += 1;
        }
        Ok(())
    }

    /// Take what completed; whether anything did.
    fn poll(&mut self) -> Check<bool> {
        let mut r = [NdResult::EMPTY; DEPTH];
        let n = self.side.scq.get_results(&mut r);
        for c in &r[..n] {
            ensure!(
                c.status == Status::SUCCESS
                    && c.request_type == RequestType::Send
                    && c.request_context == self.sent,
                "Send {} completed as {c:?}",
                self.sent
            );
            self.sent += 1;
        }
        let m = self.side.rcq.get_results(&mut r);
        for c in &r[..m] {
            let slot = c.request_context as usize;
            ensure!(
                c.status == Status::SUCCESS && c.bytes_transferred as usize == MSG,
                "message {} arrived as {c:?}",
                self.received
            );
            // SAFETY: this Receive completed; nothing else writes its slot until reposted.
            let got = unsafe { self.side.read(&[rslot(slot)], MSG) };
            ensure!(
                got == pattern(self.received, MSG),
                "message {} arrived damaged, or not in order",
                self.received
            );
            self.received += 1;
            if self.received + DEPTH as u64 <= COUNT {
                self.side.recv(slot as u64, &[rslot(slot)]).ctx("Receive")?;
            }
        }
        Ok(n + m > 0)
    }

    fn done(&self) -> bool {
        self.sent == COUNT && self.received == COUNT
    }

    /// Wait a little for a Receive (the wait drives the adapter, so Sends complete too).
    fn nap(&self) -> Check {
        let ov = self.side.rcq.notify(NotifyType::Any).ctx("Notify")?;
        if ov.wait_timeout(Some(Duration::from_millis(20))).is_none() {
            let _ = self.side.rcq.cancel_overlapped_requests();
            let _ = ov.wait_timeout(Some(Duration::from_secs(5)));
        }
        Ok(())
    }
}

/// Stream both ways. Host a (`flap` set) takes its link down after its first half is sent,
/// and up again `FLAP` later; host b posts its second half once told the link is down.
fn exchange(
    h: &Host,
    side: &Side,
    flap: bool,
    to: &Sender<Msg>,
    from: &Receiver<Msg>,
) -> Check<Option<Duration>> {
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let mut s = Stream {
        side,
        posted: 0,
        sent: 0,
        received: 0,
    };
    let start = Instant::now();
    let mut down_at: Option<Instant> = None;
    let mut link_up = true;
    let mut may_finish = false;
    while !s.done() {
        ensure!(
            start.elapsed() < LIMIT,
            "after {LIMIT:?}: {} of {COUNT} sent, {} received",
            s.sent,
            s.received
        );
        s.post(if may_finish { COUNT } else { COUNT / 2 })?;
        if flap && down_at.is_none() && s.sent >= COUNT / 2 {
            h.set_link(false)?;
            link_up = false;
            down_at = Some(Instant::now());
            let _ = to.send(Msg::Down);
            may_finish = true;
        }
        if !flap && !may_finish {
            match from.try_recv() {
                Ok(Msg::Down) => may_finish = true,
                Ok(m) => return fail(format!("unexpected {m:?}")),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return fail("host a gave up"),
            }
        }
        if down_at.is_some_and(|t| !link_up && t.elapsed() >= FLAP) {
            h.set_link(true)?;
            link_up = true;
        }
        if !s.poll()? {
            s.nap()?;
        }
    }
    expect_pending(
        &nd,
        "NotifyDisconnect after the flap: the connection must be up",
    )?;
    Ok(down_at.map(|t| t.elapsed()))
}

fn host_a(h: Host, to_b: Sender<Msg>, from_b: Receiver<Msg>) -> Check {
    let p = Provider::open("tcp").ctx("tcp")?;
    let a = p.open_adapter_for(SocketAddr::new(h.ip, 0)).ctx("open")?;
    let side = Side::on(&a, config())?;
    for i in 0..DEPTH {
        side.recv(i as u64, &[rslot(i)]).ctx("Receive")?;
    }
    let Msg::Listening(at) = recv(&from_b)? else {
        return fail("expected host b's listener");
    };
    let cov = side.connect(SocketAddr::new(h.ip, 0), at, 0, 0, &[])?;
    wait_ok(&cov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    let took = exchange(&h, &side, true, &to_b, &from_b)?;
    eprintln!("host a: done {took:?} after the link went down");
    let _ = to_b.send(Msg::Done);
    let Msg::Done = recv(&from_b)? else {
        return fail("expected host b done");
    };
    Ok(())
}

fn host_b(h: Host, to_a: Sender<Msg>, from_a: Receiver<Msg>) -> Check {
    let p = Provider::open("tcp").ctx("tcp")?;
    let a = p.open_adapter_for(SocketAddr::new(h.ip, 0)).ctx("open")?;
    let side = Side::on(&a, config())?;
    for i in 0..DEPTH {
        side.recv(i as u64, &[rslot(i)]).ctx("Receive")?;
    }
    let (listener, at) = listen(&a, SocketAddr::new(h.ip, 0), 4)?;
    let _ = to_a.send(Msg::Listening(at));
    let gcr = listener
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest")?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    exchange(&h, &side, false, &to_a, &from_a)?;
    let _ = to_a.send(Msg::Done);
    let m = recv(&from_a)?;
    ensure_eq!(format!("{m:?}"), "Done", "host a's last word");
    Ok(())
}

fn config() -> SideConfig {
    SideConfig {
        buf_len: 2 * DEPTH * MSG,
        depth: DEPTH as u32,
        ..SideConfig::default()
    }
}

#[test]
fn a_two_second_link_flap_loses_nothing() {
    // Read when an adapter opens: longer than the flap.
    std::env::set_var("ND_TCP_TIMEOUT_MS", "8000");
    let (to_b, from_a) = mpsc::channel();
    let (to_a, from_b) = mpsc::channel();
    on_two_hosts(
        "the link-flap check",
        move |h| host_a(h, to_b, from_b),
        move |h| host_b(h, to_a, from_a),
    );
}

//! `nd pingpong --api ndk`: the same Send/Receive ping-pong as `nd pingpong`, through
//! `netdirect::ndk` (NDK's objects, NTSTATUS returns, completion callbacks, a connect event
//! on the server, `NdkGetCqResultsEx` polling, or `NdkArmCq` and its notification callback
//! with `--blocking`). The loop is `pingpong`'s, answer first and repost after (or
//! `--repost-first`), so the two APIs' rows compare directly. Both ends must use NDK or both
//! ND v2 only as far as the settings check goes: the wire is the same, but this path sends
//! no settings, so pair it with itself.

use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use netdirect::ndk::{
    CompletionMode, NdkAdapter, NdkConnector, NdkCq, NdkCqNotifyType, NdkMr, NdkOpFlags,
    NdkOperationType, NdkPd, NdkQp, NdkResultEx, NdkSge, NtStatus, OpenParams,
};
use netdirect::{Buffer, MrFlags, Provider};

use crate::common::{Laps, PeerArgs, Plan, Report, Role, Row, LAT_COLS};

const SLOTS: usize = 2;
const SEND_CTX: u64 = u64::MAX;
const INLINE: u32 = 256;
/// How long a connection step may take.
const STEP: Duration = Duration::from_secs(30);

/// Wakes a blocked poller from the CQ notification callback.
#[derive(Default)]
struct Bell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut r = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        while !*r {
            r = self.cv.wait(r).unwrap_or_else(|e| e.into_inner());
        }
        *r = false;
    }
}

struct Ndk {
    adapter: NdkAdapter,
    pd: NdkPd,
    cq: NdkCq,
    qp: NdkQp,
    mr: NdkMr,
    buf: Buffer,
    connector: Option<NdkConnector>,
    bell: Arc<Bell>,
    blocking: bool,
}

fn fail(what: &str, s: NtStatus) -> String {
    format!("{what}: {s:?}")
}

/// Run an NDK request to its end: its inline status, or the one its callback delivers.
fn request(
    what: &str,
    f: impl FnOnce(Box<dyn FnOnce(NtStatus) + Send>) -> NtStatus,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let mut s = f(Box::new(move |s| {
        let _ = tx.send(s);
    }));
    if s == NtStatus::PENDING {
        s = rx
            .recv_timeout(STEP)
            .map_err(|_| format!("{what}: no completion in {STEP:?}"))?;
    }
    if s == NtStatus::SUCCESS {
        Ok(())
    } else {
        Err(fail(what, s))
    }
}

impl Ndk {
    fn open(
        provider: &Provider,
        local: SocketAddr,
        buf_len: usize,
        blocking: bool,
    ) -> Result<Self, String> {
        let params = OpenParams {
            completion: CompletionMode::Inline,
            ..OpenParams::default()
        };
        let adapter =
            NdkAdapter::open(provider, local, params).map_err(|s| fail("open adapter", s))?;
        let bell = Arc::new(Bell::default());
        let b = bell.clone();
        let cq = adapter
            .create_cq(16, move |_| b.ring(), None)
            .map_err(|s| fail("create cq", s))?;
        let pd = adapter.create_pd().map_err(|s| fail("create pd", s))?;
        let qp = pd
            .create_qp(
                &cq,
                &cq,
                0,
                SLOTS as u32 + 2,
                SLOTS as u32 + 2,
                1,
                1,
                INLINE,
            )
            .map_err(|s| fail("create qp", s))?;
        let mr = pd.create_mr(false).map_err(|s| fail("create mr", s))?;
        let buf = Buffer::new(buf_len).map_err(|e| format!("buffer: {e}"))?;
        request("register", |cb| {
            mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE, cb)
        })?;
        Ok(Self {
            adapter,
            pd,
            cq,
            qp,
            mr,
            buf,
            connector: None,
            bell,
            blocking,
        })
    }

    fn sge(&self, range: std::ops::Range<usize>) -> NdkSge {
        self.buf.sge(range, self.mr.get_local_token())
    }

    /// The next completion: polled, or with `--blocking` slept for through `NdkArmCq`.
    #[inline]
    fn next(&self) -> Result<NdkResultEx, String> {
        let mut r = [NdkResultEx::EMPTY; 1];
        loop {
            if self.cq.get_cq_results_ex(&mut r) == 1 {
                if r[0].status != NtStatus::SUCCESS {
                    return Err(fail("completion", r[0].status));
                }
                return Ok(r[0]);
            }
            if self.blocking {
                self.cq.arm_cq(NdkCqNotifyType::Any);
                if self.cq.get_cq_results_ex(&mut r) == 1 {
                    // The arm stays set; its callback just rings a bell nobody waits on.
                    if r[0].status != NtStatus::SUCCESS {
                        return Err(fail("completion", r[0].status));
                    }
                    return Ok(r[0]);
                }
                self.bell.wait();
            }
        }
    }

    fn repost(&self, slots: &[NdkSge; SLOTS], i: usize) -> Result<(), String> {
        // SAFETY: each slot is used by one posted Receive at a time; its bytes are never read.
        let s = unsafe { self.qp.receive(i as u64, std::slice::from_ref(&slots[i])) };
        if s == NtStatus::SUCCESS {
            Ok(())
        } else {
            Err(fail("receive", s))
        }
    }

    fn close(self) {
        if let Some(c) = &self.connector {
            let _ = request("disconnect", |cb| c.disconnect(cb));
            let _ = c.close(|| {});
        }
        let _ = self.qp.close(|| {});
        let _ = self.cq.close(|| {});
        let _ = self.mr.close(|| {});
        let _ = self.pd.close(|| {});
        self.adapter.close();
    }
}

/// Reap completions until the awaited Send and/or Receive have come; the Receive's slot.
#[inline]
fn complete(ep: &Ndk, size: usize, mut send: bool, mut recv: bool) -> Result<usize, String> {
    let mut slot = 0;
    while send || recv {
        let r = ep.next()?;
        match r.ty {
            NdkOperationType::Send if send => send = false,
            NdkOperationType::Receive
                if recv
                    && r.bytes_transferred as usize == size
                    && (r.request_context as usize) < SLOTS =>
            {
                slot = r.request_context as usize;
                recv = false;
            }
            other => {
                return Err(format!(
                    "unexpected {other:?} completion ({} bytes)",
                    r.bytes_transferred
                ))
            }
        }
    }
    Ok(slot)
}

/// One run as `role`: `pingpong::run_as` through NDK.
pub(crate) fn run_as(
    peer: &PeerArgs,
    repost_first: bool,
    role: Role,
    plan: &Plan,
    provider: &Provider,
) -> Result<(), String> {
    let repost = if repost_first { "first" } else { "after" };
    let slot = plan.max_size().max(1);
    let buf_len = slot * (SLOTS + 1);
    let ep = match role {
        Role::Server(addr) => {
            let mut ep = Ndk::open(provider, addr, buf_len, peer.blocking)?;
            let (tx, rx) = mpsc::channel();
            let tx = Mutex::new(tx);
            let l = ep
                .adapter
                .create_listener(move |c| {
                    let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(c);
                })
                .map_err(|s| fail("create listener", s))?;
            request("listen", |cb| l.listen(addr, cb))?;
            if peer.announce {
                let a = l
                    .get_local_address()
                    .map_err(|s| fail("local address", s))?;
                println!("LISTENING {a}");
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
            let c: NdkConnector = rx.recv().map_err(|_| "no connection request".to_string())?;
            let slots: [NdkSge; SLOTS] =
                std::array::from_fn(|i| ep.sge(slot * (i + 1)..slot * (i + 2)));
            (0..SLOTS).try_for_each(|i| ep.repost(&slots, i))?;
            request("accept", |cb| c.accept(&ep.qp, 0, 0, &[], None, cb))?;
            let _ = l.close(|| {});
            ep.connector = Some(c);
            ep
        }
        Role::Client(dest) => {
            let local =
                netdirect::support::resolve_address(dest).map_err(|e| format!("resolve: {e}"))?;
            let mut ep = Ndk::open(provider, local, buf_len, peer.blocking)?;
            let slots: [NdkSge; SLOTS] =
                std::array::from_fn(|i| ep.sge(slot * (i + 1)..slot * (i + 2)));
            (0..SLOTS).try_for_each(|i| ep.repost(&slots, i))?;
            let c = ep
                .adapter
                .create_connector()
                .map_err(|s| fail("create connector", s))?;
            request("connect", |cb| {
                c.connect(&ep.qp, local, dest, 0, 0, &[], cb)
            })?;
            request("complete connect", |cb| c.complete_connect(None, cb))?;
            ep.connector = Some(c);
            ep
        }
    };
    let header = vec![format!(
        " NDK {}.{} over {} ({})",
        ep.adapter.version().major,
        ep.adapter.version().minor,
        provider.name(),
        peer.mode()
    )];
    let mut report = Report::new(peer.json, plan.sweep, LAT_COLS).with_header(header);
    let slots: [NdkSge; SLOTS] = std::array::from_fn(|i| ep.sge(slot * (i + 1)..slot * (i + 2)));
    let mut owed = None;
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let flags = if size as u32 <= INLINE {
            NdkOpFlags::INLINE
        } else {
            NdkOpFlags::NONE
        };
        let sge = ep.sge(0..size);
        let sge: &[NdkSge] = if size == 0 {
            &[]
        } else {
            std::slice::from_ref(&sge)
        };
        let ping = |ep: &Ndk| -> Result<(), String> {
            // SAFETY: the send area is never written, and each Send completes before the next.
            let s = unsafe { ep.qp.send(SEND_CTX, sge, flags) };
            if s == NtStatus::SUCCESS {
                Ok(())
            } else {
                Err(fail("send", s))
            }
        };
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    let i = complete(&ep, size, false, true)?;
                    if repost_first {
                        ep.repost(&slots, i)?;
                    }
                    ping(&ep)?;
                    if !repost_first {
                        ep.repost(&slots, i)?;
                    }
                    complete(&ep, size, true, false)?;
                }
            }
            Role::Client(_) => {
                let e = &ep;
                let mut laps = Laps::time(warmup, n, || {
                    ping(e)?;
                    if let Some(i) = owed.take() {
                        e.repost(&slots, i)?;
                    }
                    let i = complete(e, size, true, true)?;
                    if repost_first {
                        e.repost(&slots, i)
                    } else {
                        owed = Some(i);
                        Ok(())
                    }
                })?;
                let row = Row::new("pingpong", provider.name(), "send", peer.mode(), size, n)
                    .with("repost", repost)
                    .with("api", "ndk");
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    ep.close();
    report.finish();
    Ok(())
}

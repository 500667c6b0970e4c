//! One end of a connection through `netdirect::ndk`, for the tools' `--api ndk`: the NDK
//! objects (adapter, PD, CQ, QP, a registered buffer), the server's connect event or the
//! client's Connect and CompleteConnect, completions polled with `NdkGetCqResultsEx` or, with
//! `--blocking`, slept for through `NdkArmCq` and its notification callback. Both ends must
//! use NDK: this path exchanges no settings.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use netdirect::ndk::{
    CompletionMode, NdkAdapter, NdkConnector, NdkCq, NdkCqNotifyType, NdkMr, NdkPd, NdkQp,
    NdkResultEx, NdkSge, NtStatus, OpenParams,
};
use netdirect::{Buffer, MrFlags, Provider};

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

/// What an end needs.
pub(crate) struct NdkConfig {
    pub(crate) buf_len: usize,
    /// Each queue's depth.
    pub(crate) depth: u32,
    pub(crate) inline: u32,
    /// (inbound, outbound) RDMA Read limits offered.
    pub(crate) read_limits: (u32, u32),
    pub(crate) mr_flags: MrFlags,
    pub(crate) blocking: bool,
}

pub(crate) struct NdkEndpoint {
    pub(crate) adapter: NdkAdapter,
    pd: NdkPd,
    cq: NdkCq,
    pub(crate) qp: NdkQp,
    pub(crate) mr: NdkMr,
    pub(crate) buf: Buffer,
    connector: Option<NdkConnector>,
    bell: Arc<Bell>,
    blocking: bool,
}

pub(crate) fn fail(what: &str, s: NtStatus) -> String {
    format!("{what}: {s:?}")
}

/// `Ok` for `STATUS_SUCCESS`, else the status named.
pub(crate) fn ok(what: &str, s: NtStatus) -> Result<(), String> {
    if s == NtStatus::SUCCESS {
        Ok(())
    } else {
        Err(fail(what, s))
    }
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
    ok(what, s)
}

impl NdkEndpoint {
    fn open(provider: &Provider, local: SocketAddr, cfg: &NdkConfig) -> Result<Self, String> {
        let params = OpenParams {
            completion: CompletionMode::Inline,
            ..OpenParams::default()
        };
        let adapter =
            NdkAdapter::open(provider, local, params).map_err(|s| fail("open adapter", s))?;
        let bell = Arc::new(Bell::default());
        let b = bell.clone();
        let cq = adapter
            .create_cq(cfg.depth * 2, move |_| b.ring(), None)
            .map_err(|s| fail("create cq", s))?;
        let pd = adapter.create_pd().map_err(|s| fail("create pd", s))?;
        let qp = pd
            .create_qp(&cq, &cq, 0, cfg.depth, cfg.depth, 1, 1, cfg.inline)
            .map_err(|s| fail("create qp", s))?;
        let mr = pd.create_mr(false).map_err(|s| fail("create mr", s))?;
        let buf = Buffer::new(cfg.buf_len).map_err(|e| format!("buffer: {e}"))?;
        request("register", |cb| mr.register_buffer(&buf, cfg.mr_flags, cb))?;
        Ok(Self {
            adapter,
            pd,
            cq,
            qp,
            mr,
            buf,
            connector: None,
            bell,
            blocking: cfg.blocking,
        })
    }

    /// Listen on `addr`, take one connection through the connect event, run `pre_accept`
    /// (post Receives), accept.
    pub(crate) fn serve(
        provider: &Provider,
        addr: SocketAddr,
        announce: bool,
        cfg: &NdkConfig,
        pre_accept: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let mut ep = Self::open(provider, addr, cfg)?;
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let l = ep
            .adapter
            .create_listener(move |c| {
                let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(c);
            })
            .map_err(|s| fail("create listener", s))?;
        request("listen", |cb| l.listen(addr, cb))?;
        if announce {
            let a = l
                .get_local_address()
                .map_err(|s| fail("local address", s))?;
            println!("LISTENING {a}");
            let _ = std::io::stdout().flush();
        }
        let c: NdkConnector = rx.recv().map_err(|_| "no connection request".to_string())?;
        pre_accept(&ep)?;
        let (inbound, outbound) = cfg.read_limits;
        request("accept", |cb| {
            c.accept(&ep.qp, inbound, outbound, &[], None, cb)
        })?;
        // The listener closes once the connector it handed over has.
        let _ = l.close(|| {});
        ep.connector = Some(c);
        Ok(ep)
    }

    /// Connect to `dest`, run `pre_connect` (post Receives) first, complete the connection.
    pub(crate) fn connect(
        provider: &Provider,
        dest: SocketAddr,
        cfg: &NdkConfig,
        pre_connect: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let local =
            netdirect::support::resolve_address(dest).map_err(|e| format!("resolve: {e}"))?;
        let mut ep = Self::open(provider, local, cfg)?;
        pre_connect(&ep)?;
        let c = ep
            .adapter
            .create_connector()
            .map_err(|s| fail("create connector", s))?;
        let (inbound, outbound) = cfg.read_limits;
        request("connect", |cb| {
            c.connect(&ep.qp, local, dest, inbound, outbound, &[], cb)
        })?;
        request("complete connect", |cb| c.complete_connect(None, cb))?;
        ep.connector = Some(c);
        Ok(ep)
    }

    pub(crate) fn sge(&self, range: std::ops::Range<usize>) -> NdkSge {
        self.buf.sge(range, self.mr.get_local_token())
    }

    /// Whatever completions are queued now, up to `out.len()`; failed ones are errors.
    #[inline]
    pub(crate) fn poll(&self, out: &mut [NdkResultEx]) -> Result<usize, String> {
        let n = self.cq.get_cq_results_ex(out);
        for r in &out[..n] {
            ok("completion", r.status)?;
        }
        Ok(n)
    }

    /// The next completion: polled, or with `--blocking` slept for through `NdkArmCq`.
    #[inline]
    pub(crate) fn next(&self) -> Result<NdkResultEx, String> {
        let mut r = [NdkResultEx::EMPTY; 1];
        loop {
            if self.poll(&mut r)? == 1 {
                return Ok(r[0]);
            }
            if self.blocking {
                self.cq.arm_cq(NdkCqNotifyType::Any);
                // An arm that finds an entry that came after the empty poll fires at once; a
                // poll here takes it without the wake-up (the arm stays set, and its
                // callback rings a bell nobody waits on).
                if self.poll(&mut r)? == 1 {
                    return Ok(r[0]);
                }
                self.bell.wait();
            }
        }
    }

    /// Disconnect and close everything; returns once every callback has.
    pub(crate) fn close(self) {
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

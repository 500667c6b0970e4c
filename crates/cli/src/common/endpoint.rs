//! One end of a connection (adapter, CQ, QP, registered buffer) and how it waits for
//! completions: spinning, or asleep on a CQ notification.

use std::cell::Cell;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

use netdirect::{
    Adapter, CompletionQueue, Connector, MemoryRegion, MrFlags, NdResult, NotifyType, OpFlags,
    Overlapped, Provider, QueuePair, Sge, Status,
};

use super::process::resolve_local;
use super::settings::check_settings;

/// One end of a connection with one CQ, one QP and one registered buffer.
pub(crate) struct Endpoint {
    pub(crate) adapter: Adapter,
    pub(crate) cq: CompletionQueue,
    pub(crate) qp: QueuePair,
    pub(crate) connector: Connector,
    pub(crate) mr: MemoryRegion,
    pub(crate) buf: netdirect::Buffer,
    /// `mr`'s local token, read once: SGEs are made on the tools' data paths.
    token: u32,
    blocking: bool,
    /// This end accepted (the server): it lets the client disconnect first.
    passive: bool,
    /// A `Notify(ANY)` armed by an earlier wait that has not fired yet: reused rather than
    /// armed again, so a blocking loop keeps at most one request outstanding.
    armed: Cell<Option<Overlapped>>,
}

/// Sizes of an [`Endpoint`].
#[derive(Default)]
pub(crate) struct EndpointConfig {
    pub(crate) buf_len: usize,
    pub(crate) depth: u32,
    pub(crate) inline: u32,
    /// The read limits to Connect or Accept with (inbound, outbound): Reads the peer may
    /// issue to us, Reads we issue.
    pub(crate) read_limits: (u32, u32),
    /// Sleep on CQ notifications instead of spinning in [`Endpoint::next`].
    pub(crate) blocking: bool,
    /// The [`settings`](super::settings()) both ends must agree on.
    pub(crate) settings: String,
}

pub(crate) fn err(what: &str) -> impl Fn(netdirect::Error) -> String + '_ {
    move |e| failed(what, e)
}

/// [`err`]'s message. Out of line: the ping-pongs' loops map their posts' errors with `err`,
/// and the formatting stays off their path.
#[cold]
#[inline(never)]
fn failed(what: &str, e: netdirect::Error) -> String {
    format!("{what}: {e}")
}

/// A completion that did not succeed, as an error.
#[inline]
pub(crate) fn check(r: NdResult) -> Result<NdResult, String> {
    if r.status == Status::SUCCESS {
        Ok(r)
    } else {
        Err(unsuccessful(&r))
    }
}

/// The error of a failed completion; out of line, off the ping-pongs' path.
#[cold]
#[inline(never)]
fn unsuccessful(r: &NdResult) -> String {
    format!(
        "{:?} completed with {} (context {:#x})",
        r.request_type, r.status, r.request_context
    )
}

impl Endpoint {
    fn open(provider: &Provider, local: IpAddr, cfg: &EndpointConfig) -> Result<Self, String> {
        let adapter = provider
            .open_adapter_for(SocketAddr::new(local, 0))
            .map_err(err("open adapter"))?;
        let info = adapter.query();
        let depth = cfg
            .depth
            .min(info.max_completion_queue_depth / 2)
            .min(info.max_receive_queue_depth)
            .min(info.max_initiator_queue_depth);
        let cq = adapter
            .create_completion_queue(depth * 2, 0, 0)
            .map_err(err("create CQ"))?;
        let inline = cfg.inline.min(info.max_inline_data_size);
        let qp = adapter
            .create_queue_pair(&cq, &cq, 0, depth, depth, 1, 1, inline)
            .map_err(err("create QP"))?;
        let buf = netdirect::Buffer::new(cfg.buf_len).map_err(err("buffer"))?;
        let mr = adapter.create_memory_region().map_err(err("create MR"))?;
        mr.register_buffer(
            &buf,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ,
        )
        .map_err(err("register"))?
        .wait()
        .map_err(err("register"))?;
        let connector = adapter
            .create_connector()
            .map_err(err("create connector"))?;
        let token = mr.get_local_token();
        Ok(Self {
            adapter,
            cq,
            qp,
            connector,
            mr,
            buf,
            token,
            blocking: cfg.blocking,
            passive: false,
            armed: Cell::new(None),
        })
    }

    /// Listen on `addr`, take one connection, check the client's settings (a mismatch rejects
    /// the connection, sending ours back, and is an error here too), run `pre_accept` (post
    /// Receives), accept.
    pub(crate) fn serve(
        provider: &Provider,
        addr: SocketAddr,
        announce: bool,
        cfg: &EndpointConfig,
        pre_accept: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let mut ep = Self::open(provider, addr.ip(), cfg)?;
        ep.passive = true;
        let listener = ep
            .adapter
            .create_listener()
            .map_err(err("create listener"))?;
        listener.bind(addr).map_err(err("bind"))?;
        listener.listen(1).map_err(err("listen"))?;
        if announce {
            let a = listener.get_local_address().map_err(err("local address"))?;
            println!("LISTENING {a}");
            let _ = std::io::stdout().flush();
        }
        listener
            .get_connection_request(&ep.connector)
            .map_err(err("get connection request"))?
            .wait()
            .map_err(err("get connection request"))?;
        let theirs = ep.connector.private_data().map_err(err("private data"))?;
        let theirs = String::from_utf8_lossy(&theirs);
        if let Err(e) = check_settings(&cfg.settings, &theirs, "client") {
            let _ = ep.connector.reject(cfg.settings.as_bytes());
            return Err(e);
        }
        pre_accept(&ep)?;
        let (inbound, outbound) = cfg.read_limits;
        ep.connector
            .accept(&ep.qp, inbound, outbound, &[])
            .map_err(err("accept"))?
            .wait()
            .map_err(err("accept"))?;
        Ok(ep)
    }

    /// Connect to `dest` offering our settings, run `pre_connect` (post Receives), complete
    /// the connection. A server that rejects us for a settings mismatch sends its own
    /// settings back, and the error names what differs.
    pub(crate) fn connect(
        provider: &Provider,
        dest: SocketAddr,
        cfg: &EndpointConfig,
        pre_connect: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let local = resolve_local(dest)?;
        let ep = Self::open(provider, local, cfg)?;
        pre_connect(&ep)?;
        ep.connector
            .bind(SocketAddr::new(local, 0))
            .map_err(err("bind"))?;
        let (inbound, outbound) = cfg.read_limits;
        let r = ep
            .connector
            .connect(&ep.qp, dest, inbound, outbound, cfg.settings.as_bytes())
            .and_then(|ov| ov.wait());
        if let Err(e) = r {
            if e.status() == Status::CONNECTION_REFUSED {
                if let Ok(theirs) = ep.connector.private_data() {
                    if !theirs.is_empty() {
                        check_settings(&cfg.settings, &String::from_utf8_lossy(&theirs), "server")?;
                    }
                }
            }
            return Err(format!("connect: {e}"));
        }
        ep.connector
            .complete_connect()
            .map_err(err("complete connect"))?
            .wait()
            .map_err(err("complete connect"))?;
        Ok(ep)
    }

    /// An SGE over bytes `range` of the registered buffer (panics outside it).
    #[inline]
    pub(crate) fn sge(&self, range: std::ops::Range<usize>) -> Sge {
        self.buf.sge(range, self.token)
    }

    /// The flags the examples post `size` bytes of a Send or Write with: `INLINE` below the
    /// adapter's `InlineRequestThreshold` (nd-reference §5.0), none from it on.
    pub(crate) fn inline_flags(&self, size: usize) -> OpFlags {
        if size < self.adapter.query().inline_request_threshold as usize {
            OpFlags::INLINE
        } else {
            OpFlags::empty()
        }
    }

    /// One `GetResults` call: the next completion, if any, whatever its status.
    #[inline]
    pub(crate) fn try_next(&self) -> Option<NdResult> {
        let mut r = [NdResult::EMPTY; 1];
        (self.cq.get_results(&mut r) == 1).then_some(r[0])
    }

    /// The next completion, which must have succeeded. Polling mode spins on `GetResults`,
    /// with no `PAUSE` between calls, as ucx_perftest's ping-pong loop polls (progress, read
    /// the sequence number, again): on this 2-vCPU VM a `PAUSE` takes about 28 ns, and a
    /// two-process flag ping-pong that pauses in its wait loop measured 160–195 ns per half
    /// round trip against 50–70 ns without (docs/ARCHITECTURE.md, "Busy polling without
    /// PAUSE").
    /// Blocking mode arms `Notify(ND_CQ_NOTIFY_ANY)` (or keeps the one still armed from an
    /// earlier call), then polls, then sleeps in `GetOverlappedResult(wait)` if the queue was
    /// empty. Polling after arming is what makes this race-free (nd-reference R-CQ: a
    /// completion that lands after the `GetResults` fires the armed Notify, so it cannot be
    /// slept through), and it costs one `GetResults` per wake-up, not two. The wait drives the
    /// provider's I/O: one wake-up per completion that finds us asleep.
    // Inlined into the ping-pongs' loops: between seeing a message and answering it, the
    // tool's own layers are on the measured path (issue 5).
    #[inline]
    pub(crate) fn next(&self) -> Result<NdResult, String> {
        if !self.blocking {
            let mut r = [NdResult::EMPTY; 1];
            while self.cq.get_results(&mut r) == 0 {}
            return check(r[0]);
        }
        self.next_blocking()
    }

    /// [`Endpoint::next`] in blocking mode.
    #[inline(never)]
    fn next_blocking(&self) -> Result<NdResult, String> {
        loop {
            let ov = self.arm()?;
            if let Some(r) = self.try_next() {
                self.armed.set(Some(ov));
                return check(r);
            }
            ov.wait().map_err(err("notify"))?;
            // The completion that woke us is taken before arming again: arming is not on the
            // path from wake-up to answer (the next call arms, if it has to wait).
            if let Some(r) = self.try_next() {
                return check(r);
            }
        }
    }

    /// The armed `Notify(ANY)` if it has not fired yet, else a new one.
    fn arm(&self) -> Result<Overlapped, String> {
        match self.armed.take() {
            Some(ov) if !ov.is_complete() => Ok(ov),
            _ => self.cq.notify(NotifyType::Any).map_err(err("notify")),
        }
    }

    /// Wait for something that makes no completion here (a peer's RDMA Write landing): in
    /// blocking mode sleep until the adapter's descriptor says its I/O needs driving, then
    /// drive it; in polling mode return at once, to be called again (the caller's
    /// `GetResults` drives the I/O; no `PAUSE`, as in [`Endpoint::next`]).
    pub(crate) fn idle(&self) -> Result<(), String> {
        if !self.blocking {
            return Ok(());
        }
        let fd = self.adapter.fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        self.adapter.progress();
        Ok(())
    }

    /// End the connection. The server waits for the client to disconnect first (the client
    /// always knows when the run is over: it receives the last message), so a client still
    /// reaping its last completions never sees its Receives flushed under it.
    pub(crate) fn shutdown(&self) {
        if let Some(ov) = self.armed.take() {
            let _ = self.cq.cancel_overlapped_requests();
            let _ = ov.wait();
        }
        if self.passive {
            if let Ok(ov) = self.connector.notify_disconnect() {
                let _ = ov.wait();
            }
        }
        if let Ok(ov) = self.connector.disconnect() {
            let _ = ov.wait();
        }
    }
}

/// Finish an overlapped request: `GetOverlappedResult(wait)` when blocking, else poll it
/// with `GetOverlappedResult(no wait)` until it is no longer `ND_PENDING`.
pub(crate) fn finish(ov: &Overlapped, blocking: bool) -> netdirect::Result<()> {
    if blocking {
        return ov.wait();
    }
    loop {
        match ov.get_overlapped_result(false) {
            Err(e) if e.is_pending() => {}
            r => return r,
        }
    }
}

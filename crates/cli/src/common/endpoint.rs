//! One end of a connection (adapter, CQ, QP, registered buffer) and how it waits for
//! completions: spinning, or asleep on a CQ notification.

use std::cell::Cell;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use netdirect::{
    Adapter, CompletionQueue, Connector, MemoryRegion, MrFlags, NdResult, NotifyType, OpFlags,
    Overlapped, Provider, QueuePair, Sge, Status,
};

use super::process::resolve_local;
use super::settings::check_settings;
use super::v1::{Api, V1};

/// One end of a connection with one CQ, one QP and one registered buffer.
pub(crate) struct Endpoint {
    pub(crate) adapter: Adapter,
    pub(crate) cq: CompletionQueue,
    /// Posts go through [`Endpoint::send`] and its siblings, which take the v1 path under
    /// `--api v1`.
    qp: QueuePair,
    pub(crate) connector: Connector,
    /// The registration (v2; under `--api v1` the v1 adapter holds it, by handle).
    mr: Option<MemoryRegion>,
    pub(crate) buf: netdirect::Buffer,
    /// `--api v1`: the v1 objects every post and completion goes through.
    v1: Option<V1>,
    /// `mr`'s local token, read once: SGEs are made on the tools' data paths.
    token: u32,
    blocking: bool,
    /// This end accepted (the server): it lets the client disconnect first.
    passive: bool,
    /// The queue pair's depth (initiator and receive) and inline size, for [`Endpoint::header`].
    depth: u32,
    inline: u32,
    /// A `Notify(ANY)` armed by an earlier wait that has not fired yet: reused rather than
    /// armed again, so a blocking loop keeps at most one request outstanding.
    armed: Cell<Option<Overlapped>>,
    /// `NotifyDisconnect`, armed once connected: a loop that waits with no request posted
    /// ([`Endpoint::idle`]) would get no flushed completion when the peer goes away.
    ended: Option<Overlapped>,
}

/// Whether a client's connection request reached [`Endpoint::serve`] since
/// [`take_request_seen`] last read it: a `--forever` server goes on after a failed run only if
/// a client took part (an error of its own set-up would recur for every client).
static REQUEST_SEEN: AtomicBool = AtomicBool::new(false);

/// The address the last [`Endpoint::serve`] listened on: a `--forever` server asked for port 0
/// keeps the port it got for the clients after the first.
static LISTENED_ON: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// The address the last [`Endpoint::serve`] listened on, if any.
pub(crate) fn listened_on() -> Option<SocketAddr> {
    *LISTENED_ON.lock().unwrap_or_else(|e| e.into_inner())
}

/// Read and clear [`REQUEST_SEEN`].
pub(crate) fn take_request_seen() -> bool {
    REQUEST_SEEN.swap(false, Ordering::Relaxed)
}

/// Sizes of an [`Endpoint`].
#[derive(Default)]
pub(crate) struct EndpointConfig {
    pub(crate) buf_len: usize,
    /// The largest message the run transfers: checked against the adapter's
    /// `MaxTransferLength` before anything is allocated.
    pub(crate) max_message: usize,
    pub(crate) depth: u32,
    pub(crate) inline: u32,
    /// The read limits to Connect or Accept with (inbound, outbound): Reads the peer may
    /// issue to us, Reads we issue.
    pub(crate) read_limits: (u32, u32),
    /// Sleep on CQ notifications instead of spinning in [`Endpoint::next`].
    pub(crate) blocking: bool,
    /// The run sleeps on the adapter's descriptor for events that make no completion
    /// ([`Endpoint::idle`]): the adapter runs in manual mode, since a progress engine would
    /// take those events and place a peer's Write unseen, leaving the sleeper asleep.
    pub(crate) sleeps_on_fd: bool,
    /// The [`settings`](super::settings()) both ends must agree on.
    pub(crate) settings: String,
    /// ND v2 or v1 (`--api`).
    pub(crate) api: Api,
}

pub(crate) fn err(what: &str) -> impl Fn(netdirect::Error) -> String + '_ {
    move |e| failed(what, e)
}

/// [`err`]'s message. Out of line: the ping-pongs' loops map their posts' errors with `err`,
/// and the formatting stays off their path.
#[cold]
#[inline(never)]
fn failed(what: &str, e: netdirect::Error) -> String {
    if ended_by_peer(e.status()) {
        return format!("the peer disconnected ({what}: {e})");
    }
    format!("{what}: {e}")
}

/// The statuses a request gets once the connection has ended under it. The tools never end
/// a connection during a run, so in a run they mean the peer did (it exited, or was killed).
fn ended_by_peer(s: Status) -> bool {
    [
        Status::CONNECTION_DISCONNECTED,
        Status::CONNECTION_ABORTED,
        Status::CONNECTION_INVALID,
        // A Receive or request flushed when the connection ended.
        Status::CANCELED,
    ]
    .contains(&s)
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
    if ended_by_peer(r.status) {
        return format!(
            "the peer disconnected (a {:?} completed with {})",
            r.request_type, r.status
        );
    }
    format!(
        "{:?} completed with {} (context {:#x})",
        r.request_type, r.status, r.request_context
    )
}

impl Endpoint {
    fn open(provider: &Provider, local: IpAddr, cfg: &EndpointConfig) -> Result<Self, String> {
        if cfg.api == Api::Ndk {
            return Err("--api ndk: only nd pingpong and nd rping run through NDK".into());
        }
        let adapter = provider
            .open_adapter_for(SocketAddr::new(local, 0))
            .map_err(err("open adapter"))?;
        if cfg.sleeps_on_fd {
            adapter
                .set_progress_mode(netdirect::ProgressMode::Manual)
                .map_err(err("set_progress_mode"))?;
        }
        let info = adapter.query();
        check_limits(cfg, &info)?;
        let depth = cfg
            .depth
            .min(info.max_completion_queue_depth / 2)
            .min(info.max_receive_queue_depth)
            .min(info.max_initiator_queue_depth);
        let cq = adapter
            .create_completion_queue(depth * 2, 0, 0)
            .map_err(err("create CQ"))?;
        let inline = cfg.inline.min(info.max_inline_data_size);
        let buf = netdirect::Buffer::new(cfg.buf_len).map_err(err("buffer"))?;
        if cfg.api == Api::V1 {
            // The same provider and adapter address, opened and used the v1 way; the v2
            // handles below are its objects' own (for Notify, the descriptor, the header).
            drop((cq, adapter));
            let v = V1::open(provider, local, depth, cfg.read_limits, &buf)?;
            // SAFETY: the v2 queue pair and CQ are kept for what is not a post or a poll
            // (Notify, the header); every post and poll of `--api v1` goes through `v1`
            // (the `qp` field is private, used only when `v1` is `None`).
            let (cq, qp) = unsafe { (v.cq.as_v2().clone(), v.ep.as_v2().clone()) };
            return Ok(Self {
                adapter: v.adapter.as_v2().clone(),
                cq,
                qp,
                connector: v.connector.as_v2().clone(),
                mr: None,
                buf,
                v1: Some(v),
                token: 0,
                blocking: cfg.blocking,
                passive: false,
                depth,
                inline: info.max_inline_data_size,
                armed: Cell::new(None),
                ended: None,
            });
        }
        let qp = adapter
            .create_queue_pair(&cq, &cq, 0, depth, depth, 1, 1, inline)
            .map_err(err("create QP"))?;
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
            mr: Some(mr),
            buf,
            v1: None,
            token,
            blocking: cfg.blocking,
            passive: false,
            depth,
            inline,
            armed: Cell::new(None),
            ended: None,
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
        // v2: CreateListener, Bind, Listen; v1: INDAdapter::Listen, in one call.
        let (listener, v1_listen, a) = match &ep.v1 {
            None => {
                let listener = ep
                    .adapter
                    .create_listener()
                    .map_err(err("create listener"))?;
                listener.bind(addr).map_err(err("bind"))?;
                listener.listen(1).map_err(err("listen"))?;
                let a = listener.get_local_address().map_err(err("local address"))?;
                (Some(listener), None, a)
            }
            Some(v) => {
                let (l, a) = v.listen(addr)?;
                (None, Some(l), a)
            }
        };
        *LISTENED_ON.lock().unwrap_or_else(|e| e.into_inner()) = Some(a);
        if announce {
            println!("LISTENING {a}");
            let _ = std::io::stdout().flush();
        }
        let request = match (&listener, &v1_listen, &ep.v1) {
            (Some(l), _, _) => l.get_connection_request(&ep.connector),
            (None, Some(l), Some(v)) => l.get_connection_request(&v.connector),
            _ => unreachable!("one listener or the other"),
        };
        request
            .map_err(err("get connection request"))?
            .wait()
            .map_err(err("get connection request"))?;
        REQUEST_SEEN.store(true, Ordering::Relaxed);
        let theirs = match &ep.v1 {
            None => ep.connector.private_data().map_err(err("private data"))?,
            Some(v) => v.private_data(),
        };
        let theirs = String::from_utf8_lossy(&theirs);
        let ours = with_provider(&cfg.settings, provider);
        if let Err(e) = check_settings(&ours, &theirs, "client") {
            let _ = match &ep.v1 {
                None => ep.connector.reject(ours.as_bytes()),
                Some(v) => v.connector.reject(ours.as_bytes()),
            };
            return Err(e);
        }
        pre_accept(&ep)?;
        let (inbound, outbound) = cfg.read_limits;
        match &ep.v1 {
            // v1: the endpoint's read limits, fixed when it was made.
            Some(v) => v.connector.accept(&v.ep, &[]),
            None => ep.connector.accept(&ep.qp, inbound, outbound, &[]),
        }
        .map_err(err("accept"))?
        .wait()
        .map_err(err("accept"))?;
        ep.watch_disconnect()?;
        if announce {
            // For whoever started us (the tests): the run has begun. A reader that has gone
            // is no error (its pipe is closed; SIGPIPE is ignored in Rust programs).
            let peer = ep
                .connector
                .get_peer_address()
                .map_err(err("peer address"))?;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "CONNECTED {peer}").and_then(|()| out.flush());
        }
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
        let mut ep = Self::open(provider, local, cfg)?;
        pre_connect(&ep)?;
        let (inbound, outbound) = cfg.read_limits;
        let ours = with_provider(&cfg.settings, provider);
        let r = match &ep.v1 {
            // v1: Connect binds the adapter's address itself (LocalPort 0) and offers the
            // endpoint's read limits.
            Some(v) => super::v1::connect(v, dest, ours.as_bytes()),
            None => ep
                .connector
                .bind(SocketAddr::new(local, 0))
                .and_then(|()| {
                    ep.connector
                        .connect(&ep.qp, dest, inbound, outbound, ours.as_bytes())
                })
                .and_then(|ov| ov.wait()),
        };
        if let Err(e) = r {
            if e.status() != Status::CONNECTION_REFUSED {
                return Err(failed("connect", e));
            }
            let theirs = match &ep.v1 {
                Some(v) => v.private_data(),
                None => ep.connector.private_data().unwrap_or_default(),
            };
            if !theirs.is_empty() {
                // Rejected for a settings mismatch: the server sent its settings back.
                check_settings(&ours, &String::from_utf8_lossy(&theirs), "server")?;
            }
            // Nobody listens there on this provider. A server on another provider cannot see
            // our request at all (each provider has its own transport), so it would wait on;
            // offering our settings through the others makes it refuse us, and say why.
            if let Some(other) = probe_other_providers(provider, local, dest, &ours) {
                return Err(format!(
                    "the server uses provider {other}, this client {}: give both ends the same \
                     --provider (or ND_PROVIDER)",
                    provider.name()
                ));
            }
            return Err(format!(
                "connect: no {} server listens at {dest} ({e})",
                provider.name()
            ));
        }
        ep.connector
            .complete_connect()
            .map_err(err("complete connect"))?
            .wait()
            .map_err(err("complete connect"))?;
        ep.watch_disconnect()?;
        Ok(ep)
    }

    fn watch_disconnect(&mut self) -> Result<(), String> {
        let ov = self
            .connector
            .notify_disconnect()
            .map_err(err("notify disconnect"))?;
        self.ended = Some(ov);
        Ok(())
    }

    /// The block printed before a result table, as perftest prints one: the provider, both
    /// addresses, the queue pair's parameters and the inline size.
    pub(crate) fn header(&self, mode: &str) -> Vec<String> {
        let info = self.adapter.query();
        let addr = |a: netdirect::Result<SocketAddr>| a.map_or("?".into(), |a| a.to_string());
        let (inbound, outbound) = self
            .connector
            .get_read_limits()
            .map_or((0, 0), |l| (l.inbound, l.outbound));
        let rule = "-".repeat(90);
        vec![
            rule.clone(),
            format!(" provider: {}, {mode}", self.adapter.provider_name()),
            format!(
                " local address: {}   remote address: {}",
                addr(self.connector.get_local_address()),
                addr(self.connector.get_peer_address())
            ),
            format!(
                " queue pair: depth {} (initiator and receive), 1 SGE, read limits {inbound} in, \
                 {outbound} out",
                self.depth
            ),
            format!(
                " inline: up to {} bytes; sent INLINE below {} bytes (InlineRequestThreshold)",
                self.inline, info.inline_request_threshold
            ),
            format!(" MaxTransferLength: {} bytes", info.max_transfer_length),
            rule,
        ]
    }

    /// An SGE over bytes `range` of the registered buffer (panics outside it).
    #[inline]
    pub(crate) fn sge(&self, range: std::ops::Range<usize>) -> Sge {
        self.buf.sge(range, self.token)
    }

    /// The flags the examples post `size` bytes of a Send or Write with: `INLINE` below the
    /// adapter's `InlineRequestThreshold` (docs/ND-RULES.md §5.0), none from it on.
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
        (self.poll(&mut r) == 1).then_some(r[0])
    }

    /// `GetResults` into `out` (v1: the `ND_RESULT`s handed back, as v2 results).
    #[inline]
    pub(crate) fn poll(&self, out: &mut [NdResult]) -> usize {
        match &self.v1 {
            None => self.cq.get_results(out),
            Some(v) => v.get_results(out),
        }
    }

    /// Post a Send.
    ///
    /// # Safety
    /// As `IND2QueuePair::Send`.
    #[inline]
    pub(crate) unsafe fn send(
        &self,
        ctx: u64,
        sge: &[Sge],
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match &self.v1 {
                None => self.qp.send(ctx, sge, flags),
                Some(v) => v.send(ctx, sge, flags),
            }
        }
    }

    /// Post a Receive.
    ///
    /// # Safety
    /// As `IND2QueuePair::Receive`.
    #[inline]
    pub(crate) unsafe fn receive(&self, ctx: u64, sge: &[Sge]) -> netdirect::Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match &self.v1 {
                None => self.qp.receive(ctx, sge),
                Some(v) => v.receive(ctx, sge),
            }
        }
    }

    /// Post an RDMA Write.
    ///
    /// # Safety
    /// As `IND2QueuePair::Write`.
    #[inline]
    pub(crate) unsafe fn write(
        &self,
        ctx: u64,
        sge: &[Sge],
        remote: u64,
        token: u32,
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match &self.v1 {
                None => self.qp.write(ctx, sge, remote, token, flags),
                Some(v) => v.rdma(true, ctx, sge, remote, token, flags),
            }
        }
    }

    /// Post an RDMA Read.
    ///
    /// # Safety
    /// As `IND2QueuePair::Read`.
    #[inline]
    pub(crate) unsafe fn read(
        &self,
        ctx: u64,
        sge: &[Sge],
        remote: u64,
        token: u32,
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match &self.v1 {
                None => self.qp.read(ctx, sge, remote, token, flags),
                Some(v) => v.rdma(false, ctx, sge, remote, token, flags),
            }
        }
    }

    /// The token the peer Writes and Reads the buffer with (v2: the region's remote token;
    /// v1: a window bound over the buffer, v1's only way to expose memory).
    pub(crate) fn remote_token(&self) -> Result<u32, String> {
        match (&self.v1, &self.mr) {
            (Some(v), _) => v.remote_token(&self.buf),
            (None, Some(mr)) => Ok(mr.get_remote_token()),
            (None, None) => Err("no registration".into()),
        }
    }

    /// The next completion, which must have succeeded. Polling mode spins on `GetResults`,
    /// with no `PAUSE` between calls, as ucx_perftest's ping-pong loop polls (progress, read
    /// the sequence number, again): on this 2-vCPU VM a `PAUSE` takes about 28 ns, and a
    /// two-process flag ping-pong that pauses in its wait loop measured 160–195 ns per half
    /// round trip against 50–70 ns without (docs/ARCHITECTURE.md, "Busy polling without
    /// PAUSE").
    /// Blocking mode arms `Notify(ND_CQ_NOTIFY_ANY)` (or keeps the one still armed from an
    /// earlier call), then polls, then sleeps in `GetOverlappedResult(wait)` if the queue was
    /// empty. Polling after arming is what makes this race-free (docs/ND-RULES.md R-CQ: a
    /// completion that lands after the `GetResults` fires the armed Notify, so it cannot be
    /// slept through), and it costs one `GetResults` per wake-up, not two. The wait drives the
    /// provider's I/O: one wake-up per completion that finds us asleep.
    // Inlined into the ping-pongs' loops: between seeing a message and answering it, the
    // tool's own layers are on the measured path (issue 5).
    #[inline]
    pub(crate) fn next(&self) -> Result<NdResult, String> {
        if !self.blocking {
            let mut r = [NdResult::EMPTY; 1];
            match &self.v1 {
                None => while self.cq.get_results(&mut r) == 0 {},
                Some(v) => while v.get_results(&mut r) == 0 {},
            }
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
    /// A peer that has gone is an error: nothing would ever arrive.
    pub(crate) fn idle(&self) -> Result<(), String> {
        if self.ended.as_ref().is_some_and(Overlapped::is_complete) {
            return Err("the peer disconnected (NotifyDisconnect completed)".into());
        }
        self.wait_io()
    }

    /// [`Endpoint::idle`] without the disconnect check: for a wait that a disconnect ends by
    /// itself (a request still outstanding is flushed).
    pub(crate) fn wait_io(&self) -> Result<(), String> {
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
            if let Some(ov) = &self.ended {
                let _ = ov.wait();
            }
        }
        if let Ok(ov) = self.connector.disconnect() {
            let _ = ov.wait();
        }
    }
}

/// Sizes the adapter cannot carry, refused before any buffer is allocated: the message against
/// `MaxTransferLength`, the buffer against `MaxRegistrationSize`.
fn check_limits(cfg: &EndpointConfig, info: &netdirect::AdapterInfo) -> Result<(), String> {
    let max = info.max_transfer_length as usize;
    if cfg.max_message > max {
        return Err(format!(
            "--size {} is larger than the adapter's MaxTransferLength ({max} bytes); give \
             --size {max} or less",
            cfg.max_message
        ));
    }
    if cfg.buf_len > info.max_registration_size {
        return Err(format!(
            "the run needs a {}-byte registration, larger than the adapter's \
             MaxRegistrationSize ({} bytes); give a smaller --size",
            cfg.buf_len, info.max_registration_size
        ));
    }
    Ok(())
}

/// The settings a connection offers: the tool's, and the provider, so that a server and a
/// client on different providers can name the difference.
fn with_provider(settings: &str, provider: &Provider) -> String {
    format!("{settings} provider={}", provider.name())
}

/// Offer `settings` to `dest` through every provider but `ours`; the name of the provider
/// whose server answered with a rejection (the settings it sends back), if one did. Every
/// failure here is just "not this one".
fn probe_other_providers(
    ours: &Provider,
    local: IpAddr,
    dest: SocketAddr,
    settings: &str,
) -> Option<&'static str> {
    Provider::all()
        .into_iter()
        .filter(|p| p.name() != ours.name())
        .find(|p| {
            let rejected = || -> netdirect::Result<bool> {
                let adapter = p.open_adapter_for(SocketAddr::new(local, 0))?;
                let cq = adapter.create_completion_queue(2, 0, 0)?;
                let qp = adapter.create_queue_pair(&cq, &cq, 0, 1, 1, 1, 1, 0)?;
                let connector = adapter.create_connector()?;
                connector.bind(SocketAddr::new(local, 0))?;
                match connector
                    .connect(&qp, dest, 0, 0, settings.as_bytes())
                    .and_then(|ov| ov.wait())
                {
                    // Our settings name another provider, so no server accepts them.
                    Ok(()) => Ok(false),
                    Err(e) => Ok(e.status() == Status::CONNECTION_REFUSED
                        && !connector.private_data()?.is_empty()),
                }
            };
            rejected().unwrap_or(false)
        })
        .map(|p| p.name())
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

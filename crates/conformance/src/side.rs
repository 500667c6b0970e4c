//! One end of a connection (adapter, CQs, QP, connector, registered buffer) and the role
//! context a scenario runs in.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

use netdirect::{
    Adapter, AdapterInfo, Buffer, CompletionQueue, Connector, Listener, MemoryRegion, MrFlags,
    OpFlags, Provider, QueuePair, Sge,
};

use crate::check::{expect_results, next_results, wait_ok, Check, Context, Expect};
use crate::ensure;

/// ND's ephemeral port range (R-CONN-1).
pub const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// Where a role runs: the provider and the address (the server binds it with port 0; the
/// client connects to it).
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The provider under test.
    pub provider: Provider,
    /// Server: the local address to listen on. Client: the server's address.
    pub addr: SocketAddr,
    /// Export each adapter's overlapped descriptor (`Adapter::fd`) as an event-loop user
    /// would; a provider may watch its sockets differently then.
    pub export_fd: bool,
}

impl Ctx {
    /// Print `LISTENING <addr>` on standard output (one line, flushed): the harness starts the
    /// client when it reads it.
    pub fn announce_listening(&self, addr: SocketAddr) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "LISTENING {addr}");
        let _ = out.flush();
    }

    /// Print `READY` (flushed): the harness acts on it in scenarios that need a step from
    /// outside, such as killing the server.
    pub fn ready(&self) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "READY");
        let _ = out.flush();
    }

    /// Block until standard input reaches end-of-file. The harness closes a server's input
    /// once the client has exited, so a server that calls this outlives its client: it never
    /// closes its sockets while the client still reads them.
    pub fn linger(&self) {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    }

    /// An adapter of the provider under test serving `local`, with its overlapped descriptor
    /// exported when the run asks for it ([`Ctx::export_fd`]): every role opens its adapters
    /// here, so the "fd exported" runs really run that way.
    pub fn adapter(&self, local: SocketAddr) -> Check<Adapter> {
        let a = self.provider.open_adapter_for(local).ctx("open adapter")?;
        if self.export_fd {
            let _ = a.fd();
        }
        Ok(a)
    }

    /// The local address a client binds its connector to: the server's IP (a loopback
    /// address in the harness), port 0.
    pub fn client_local(&self) -> SocketAddr {
        SocketAddr::new(self.addr.ip(), 0)
    }
}

/// Sizes of a [`Side`].
#[derive(Debug, Clone, Copy)]
pub struct SideConfig {
    /// Bytes in the registered buffer.
    pub buf_len: usize,
    /// Receive and initiator queue depth.
    pub depth: u32,
    /// SGEs per request, both queues.
    pub sge: u32,
    /// The queue pair's context (comes back in every completion).
    pub qp_context: u64,
}

impl Default for SideConfig {
    fn default() -> Self {
        Self {
            buf_len: 64 * 1024,
            depth: 8,
            sge: 4,
            qp_context: 0x5157_0000_0000_0001,
        }
    }
}

/// One end: an adapter, a receive CQ, an initiator CQ, a QP, a connector and one registered
/// buffer.
#[derive(Debug)]
pub struct Side {
    /// The adapter.
    pub adapter: Adapter,
    /// Its limits.
    pub info: AdapterInfo,
    /// Receive completions.
    pub rcq: CompletionQueue,
    /// Send completions.
    pub scq: CompletionQueue,
    /// The queue pair.
    pub qp: QueuePair,
    /// The connector.
    pub connector: Connector,
    /// The region `buf` is registered with.
    pub mr: MemoryRegion,
    /// The registered memory.
    pub buf: Buffer,
    /// The context given to `create_queue_pair`.
    pub qp_context: u64,
}

impl Side {
    /// Open an adapter for `ip` and build a side on it.
    pub fn open(provider: &Provider, ip: IpAddr, cfg: SideConfig) -> Check<Self> {
        let adapter = provider
            .open_adapter_for(SocketAddr::new(ip, 0))
            .ctx(&format!("open adapter for {ip}"))?;
        Self::on(&adapter, cfg)
    }

    /// Build a side on an open adapter (single-process tests put both ends on one adapter,
    /// so that one waiting thread drives both).
    pub fn on(adapter: &Adapter, cfg: SideConfig) -> Check<Self> {
        let info = adapter.query();
        let rcq = adapter
            .create_completion_queue(cfg.depth * 2, 0, 0)
            .ctx("create receive CQ")?;
        let scq = adapter
            .create_completion_queue(cfg.depth * 2, 0, 0)
            .ctx("create initiator CQ")?;
        let qp = adapter
            .create_queue_pair(
                &rcq,
                &scq,
                cfg.qp_context,
                cfg.depth,
                cfg.depth,
                cfg.sge,
                cfg.sge,
                0,
            )
            .ctx("create QP")?;
        let buf = Buffer::new(cfg.buf_len).ctx("allocate buffer")?;
        let mr = adapter.create_memory_region().ctx("create MR")?;
        let ov = mr
            .register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
            .ctx("register")?;
        wait_ok(&ov, "register")?;
        let connector = adapter.create_connector().ctx("create connector")?;
        Ok(Self {
            adapter: adapter.clone(),
            info,
            rcq,
            scq,
            qp,
            connector,
            mr,
            buf,
            qp_context: cfg.qp_context,
        })
    }

    /// SGEs for byte ranges of the buffer.
    pub fn sges(&self, ranges: &[Range<usize>]) -> Vec<Sge> {
        let token = self.mr.get_local_token();
        ranges
            .iter()
            .map(|r| self.buf.sge(r.clone(), token))
            .collect()
    }

    /// Post a Receive into byte ranges of the buffer (none: a zero-byte Receive).
    pub fn recv(&self, context: u64, ranges: &[Range<usize>]) -> netdirect::Result<()> {
        let sge = self.sges(ranges);
        // SAFETY: the SGEs lie inside `buf`, which the registration keeps alive; this crate
        // reads a Receive's bytes (`read`) only after its completion was reported.
        unsafe { self.qp.receive(context, &sge) }
    }

    /// Post a Send of byte ranges of the buffer (none: a zero-byte Send).
    pub fn send(
        &self,
        context: u64,
        ranges: &[Range<usize>],
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        let sge = self.sges(ranges);
        // SAFETY: as for `recv`; this crate writes send bytes (`write`) only before posting.
        unsafe { self.qp.send(context, &sge, flags) }
    }

    /// Post an RDMA Write of byte ranges of the buffer (none: a zero-byte Write) to the peer's
    /// `remote` address under its remote `token`.
    pub fn rdma_write(
        &self,
        context: u64,
        ranges: &[Range<usize>],
        remote: u64,
        token: u32,
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        let sge = self.sges(ranges);
        // SAFETY: as for `send`: this crate writes source bytes only before posting.
        unsafe { self.qp.write(context, &sge, remote, token, flags) }
    }

    /// Post an RDMA Read from the peer's `remote` address under its remote `token` into byte
    /// ranges of the buffer (none: a zero-byte Read).
    pub fn rdma_read(
        &self,
        context: u64,
        ranges: &[Range<usize>],
        remote: u64,
        token: u32,
        flags: OpFlags,
    ) -> netdirect::Result<()> {
        let sge = self.sges(ranges);
        // SAFETY: as for `recv`: the sink bytes are read only after the Read completed.
        unsafe { self.qp.read(context, &sge, remote, token, flags) }
    }

    /// The address of byte `offset` of the buffer, as a peer names it in a Read or Write.
    pub fn addr(&self, offset: usize) -> u64 {
        self.buf.as_ptr() as u64 + offset as u64
    }

    /// A second registration of the whole buffer with `flags` (the same memory may be
    /// registered several times with different rights, §2.7).
    pub fn register_again(&self, flags: MrFlags) -> Check<MemoryRegion> {
        let mr = self.adapter.create_memory_region().ctx("create MR")?;
        let ov = mr.register_buffer(&self.buf, flags).ctx("register")?;
        wait_ok(&ov, "register")?;
        Ok(mr)
    }

    /// Copy `bytes` into the buffer, spread over `ranges` in order.
    ///
    /// # Safety
    /// No posted request may cover these ranges (none is outstanding on them).
    pub unsafe fn write(&self, ranges: &[Range<usize>], bytes: &[u8]) {
        // SAFETY: the caller rules out concurrent access to the buffer.
        let mem = unsafe { self.buf.as_mut_slice() };
        let mut at = 0;
        for r in ranges {
            let n = r.len().min(bytes.len() - at);
            mem[r.start..r.start + n].copy_from_slice(&bytes[at..at + n]);
            at += n;
        }
    }

    /// The first `len` bytes of `ranges`, concatenated.
    ///
    /// # Safety
    /// No outstanding request may write these ranges.
    pub unsafe fn read(&self, ranges: &[Range<usize>], len: usize) -> Vec<u8> {
        // SAFETY: the caller rules out concurrent writers.
        let mem = unsafe { self.buf.as_slice() };
        let mut out = Vec::with_capacity(len);
        for r in ranges {
            let n = r.len().min(len - out.len());
            out.extend_from_slice(&mem[r.start..r.start + n]);
        }
        out
    }

    /// Active side, step 2–3: bind the connector to `local` (port 0 is fine) and Connect to
    /// `dest`; returns the pending request.
    pub fn connect(
        &self,
        local: SocketAddr,
        dest: SocketAddr,
        inbound: u32,
        outbound: u32,
        private_data: &[u8],
    ) -> Check<netdirect::Overlapped> {
        self.connector.bind(local).ctx("Connector::bind")?;
        self.connector
            .connect(&self.qp, dest, inbound, outbound, private_data)
            .ctx("Connector::connect")
    }
}

/// An adapter for `ip` on `p` and two sides on it with the default configuration, `server`
/// connected to `client` (in that order; keep the listener while the pair is in use).
pub fn default_pair(p: &Provider, ip: IpAddr) -> Check<(Adapter, Side, Side, Listener)> {
    reading_pair(p, ip, 0)
}

/// [`default_pair`], with `reads` RDMA Reads allowed in flight each way (both read limits of
/// both Connect and Accept).
pub fn reading_pair(
    p: &Provider,
    ip: IpAddr,
    reads: u32,
) -> Check<(Adapter, Side, Side, Listener)> {
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let server = Side::on(&a, SideConfig::default())?;
    let client = Side::on(&a, SideConfig::default())?;
    let listener = connect_pair_reading(&server, &client, ip, reads)?;
    Ok((a, server, client, listener))
}

/// Connect `client` to `server` inside one process. Both sides must be on the same adapter:
/// then every wait drives both ends, and no second thread is needed. Returns the listener
/// (keep it while the pair is in use).
pub fn connect_pair(server: &Side, client: &Side, ip: IpAddr) -> Check<Listener> {
    connect_pair_reading(server, client, ip, 0)
}

/// [`connect_pair`], with `reads` RDMA Reads allowed in flight each way.
pub fn connect_pair_reading(
    server: &Side,
    client: &Side,
    ip: IpAddr,
    reads: u32,
) -> Check<Listener> {
    let (listener, laddr) = listen(&server.adapter, SocketAddr::new(ip, 0), 4)?;
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let cov = client.connect(SocketAddr::new(ip, 0), laddr, reads, reads, &[])?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    establish(server, client, &cov, reads)?;
    Ok(listener)
}

/// The rest of a connection whose `GetConnectionRequest` completed at `server` for the
/// Connect `cov` of `client`: Accept (with `reads` as both read limits), Connect's
/// completion, CompleteConnect, Accept's completion.
fn establish(server: &Side, client: &Side, cov: &netdirect::Overlapped, reads: u32) -> Check {
    let aov = server
        .connector
        .accept(&server.qp, reads, reads, &[])
        .ctx("Accept")?;
    wait_ok(cov, "Connect")?;
    let cc = client.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    wait_ok(&aov, "Accept")
}

/// `establish` with no Reads, then one 8-byte Send into a Receive, checked, so the
/// connection is shown to work.
pub fn accept_and_exchange(server: &Side, client: &Side, cov: &netdirect::Overlapped) -> Check {
    establish(server, client, cov, 0)?;
    server.recv(1, &[0..64]).ctx("Receive")?;
    client.send(2, &[0..8], OpFlags::empty()).ctx("Send")?;
    let r = next_results(&server.rcq, 1, "the Receive")?;
    expect_results(
        &r,
        &[Expect::recv(
            netdirect::Status::SUCCESS,
            1,
            server.qp_context,
            Some(8),
        )],
        "the Receive",
    )
}

/// A listener on `at` (its port assigned) takes `client`'s Connect (the connector as it is:
/// bound or not) into `server`, and [`accept_and_exchange`] shows the connection works. The
/// listener is returned (dropping it does not end the connection).
pub fn connect_and_exchange(server: &Side, client: &Side, at: IpAddr) -> Check<Listener> {
    let (listener, laddr) = listen(&server.adapter, SocketAddr::new(at, 0), 4)?;
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let cov = client
        .connector
        .connect(&client.qp, laddr, 0, 0, &[])
        .ctx("Connect")?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    accept_and_exchange(server, client, &cov)?;
    Ok(listener)
}

/// Passive side, step 1: a listener bound to `addr` and listening; returns it with its
/// address (port assigned).
pub fn listen(adapter: &Adapter, addr: SocketAddr, backlog: u32) -> Check<(Listener, SocketAddr)> {
    let l = adapter.create_listener().ctx("create listener")?;
    l.bind(addr).ctx(&format!("Listener::bind {addr}"))?;
    l.listen(backlog).ctx("Listener::listen")?;
    let a = l.get_local_address().ctx("Listener::get_local_address")?;
    ensure!(
        a.ip() == addr.ip(),
        "listener address {a} is not on the bound IP {}",
        addr.ip()
    );
    if addr.port() == 0 {
        ensure!(
            EPHEMERAL.contains(&a.port()),
            "listener bound with port 0 got port {}, outside 49152-65535 (R-CONN-1)",
            a.port()
        );
    }
    Ok((l, a))
}

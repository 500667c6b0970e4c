//! Many ND connections served from one thread under tokio.
//!
//! One task drives the adapter (`netdirect::tokio::AdapterDriver`: the adapter's descriptor on
//! tokio's reactor, `Adapter::progress` when it is readable). Every other task just awaits ND
//! requests (`Overlapped` is a `Future`) and completions (`CompletionQueue::next_results`).
//! The example starts an echo server and `CLIENTS` clients in the same runtime, on one thread,
//! sends `ROUNDS` messages per client and checks every echo.
//!
//! Run: `cargo run --release -p netdirect --features tokio --example tokio_echo`

use std::rc::Rc;

use netdirect::tokio::AdapterDriver;
use netdirect::{Adapter, Buffer, ConnectConfig, MrFlags, NdResult, OpFlags, Provider, Status};

const CLIENTS: usize = 32;
const ROUNDS: usize = 100;
const MSG: usize = 64;

/// One connected endpoint: a CQ, a QP and a registered buffer [send | recv].
struct Conn {
    cq: netdirect::CompletionQueue,
    qp: netdirect::QueuePair,
    buf: Buffer,
    token: u32,
    _mr: netdirect::MemoryRegion,
}

impl Conn {
    fn new(adapter: &Adapter) -> netdirect::Result<Self> {
        let cq = adapter.create_completion_queue(8, 0, 0)?;
        let config = netdirect::QueuePairConfig::new()
            .receive_depth(4)
            .initiator_depth(4);
        let qp = adapter.create_queue_pair_with(&cq, &cq, config)?;
        let buf = Buffer::new(2 * MSG)?;
        let mr = adapter.create_memory_region()?;
        mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?
            .get_overlapped_result(true)?;
        let token = mr.get_local_token();
        Ok(Self {
            cq,
            qp,
            buf,
            token,
            _mr: mr,
        })
    }

    fn post_recv(&self) -> netdirect::Result<()> {
        // SAFETY: the receive half is read only after its completion.
        unsafe {
            self.qp
                .receive(1, &[self.buf.sge(MSG..2 * MSG, self.token)])
        }
    }

    fn send(&self, payload: &[u8]) -> netdirect::Result<()> {
        // SAFETY: no request uses the send half now (the previous Send completed).
        unsafe { self.buf.as_mut_slice()[..MSG].copy_from_slice(payload) };
        // SAFETY: the send half is not written until this Send completes.
        unsafe {
            self.qp
                .send(2, &[self.buf.sge(0..MSG, self.token)], OpFlags::empty())
        }
    }

    /// Await completions until the Receive is in; returns its bytes.
    async fn recv(&self) -> netdirect::Result<[u8; MSG]> {
        let mut r = [NdResult::EMPTY; 4];
        loop {
            let n = self.cq.next_results(&mut r).await?;
            for c in &r[..n] {
                if c.status != Status::SUCCESS {
                    return Err(c.status.into());
                }
                if c.request_context == 1 {
                    let mut out = [0u8; MSG];
                    // SAFETY: the Receive completed; nothing writes the receive half now.
                    out.copy_from_slice(unsafe { &self.buf.as_slice()[MSG..] });
                    return Ok(out);
                }
            }
        }
    }
}

async fn serve_one(adapter: Adapter, connector: netdirect::Connector) -> netdirect::Result<()> {
    let c = Conn::new(&adapter)?;
    c.post_recv()?;
    connector.accept_with(&c.qp, &ConnectConfig::new())?.await?;
    for _ in 0..ROUNDS {
        let m = c.recv().await?;
        c.post_recv()?;
        c.send(&m)?;
    }
    Ok(())
}

async fn client(adapter: Adapter, addr: std::net::SocketAddr, id: usize) -> netdirect::Result<()> {
    let c = Conn::new(&adapter)?;
    c.post_recv()?;
    let connector = adapter.create_connector()?;
    connector.bind("127.0.0.1:0".parse().expect("addr"))?;
    connector
        .connect_with(&c.qp, addr, &ConnectConfig::new())?
        .await?;
    connector.complete_connect()?.await?;
    for round in 0..ROUNDS {
        let mut m = [0u8; MSG];
        m[..16].copy_from_slice(&((id as u64) << 32 | round as u64).to_le_bytes().repeat(2));
        c.send(&m)?;
        let echo = c.recv().await?;
        assert_eq!(echo, m, "client {id} round {round}: wrong echo");
        c.post_recv()?;
    }
    connector.disconnect()?.await?;
    Ok(())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let provider = Provider::open("tcp").expect("tcp provider");
        let adapter = provider
            .open_adapter_for("127.0.0.1:0".parse().expect("addr"))
            .expect("adapter");
        let _driver = AdapterDriver::spawn(&adapter).expect("drive the adapter");

        let listener = adapter.create_listener().expect("listener");
        listener
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        listener.listen(0).expect("listen");
        let addr = listener.get_local_address().expect("address");
        let served = Rc::new(std::cell::Cell::new(0usize));
        let (a, l, s) = (adapter.clone(), listener.clone(), served.clone());
        tokio::task::spawn_local(async move {
            loop {
                let conn = a.create_connector().expect("connector");
                l.get_connection_request(&conn)
                    .expect("request")
                    .await
                    .expect("connection request");
                let (a2, s2) = (a.clone(), s.clone());
                tokio::task::spawn_local(async move {
                    serve_one(a2, conn).await.expect("serve");
                    s2.set(s2.get() + 1);
                });
            }
        });

        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| tokio::task::spawn_local(client(adapter.clone(), addr, id)))
            .collect();
        for c in clients {
            c.await.expect("client task").expect("client");
        }
        println!("{CLIENTS} connections × {ROUNDS} echoes, all verified, on one thread");
    });
}

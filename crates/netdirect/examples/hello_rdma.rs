//! A server and a client in one program: the server registers a buffer and passes its address
//! and remote token to the client in the Accept's private data; the client RDMA-Writes a
//! message into it, Reads it back into its own buffer, checks the bytes, and tells the server
//! with a Send that it is done; the server checks its buffer too.
//!
//! Run: `cargo run -p netdirect --example hello_rdma` (the `tcp` provider), or with
//! `ND_PROVIDER=shm` for the shared-memory one.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;

use netdirect::{
    Adapter, Buffer, CompletionQueue, MrFlags, NdResult, OpFlags, Provider, Result, Status,
};

const MESSAGE: &[u8] = b"hello, RDMA";

/// Poll `cq` until one completion arrives; fail on an error status. Polling a completion
/// queue is also what drives the provider's I/O on this thread.
fn next_completion(cq: &CompletionQueue) -> Result<NdResult> {
    let mut r = [NdResult::EMPTY; 1];
    while cq.get_results(&mut r) == 0 {
        thread::yield_now();
    }
    match r[0].status {
        Status::SUCCESS => Ok(r[0]),
        failed => Err(failed.into()),
    }
}

fn open_adapter(local: SocketAddr) -> Result<Adapter> {
    // ND_PROVIDER picks the provider (`tcp` when unset).
    Provider::from_env()?.open_adapter_for(local)
}

fn server(listening: mpsc::Sender<SocketAddr>) -> Result<()> {
    let adapter = open_adapter("127.0.0.1:0".parse().unwrap())?;
    let cq = adapter.create_completion_queue(8, 0, 0)?;
    // Receive and initiator CQ, context, depths 4/4, one SGE each way, no inline data.
    let qp = adapter.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;

    // The buffer the client writes to and reads from.
    let buf = Buffer::new(64)?;
    let mr = adapter.create_memory_region()?;
    let flags = MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE;
    mr.register_buffer(&buf, flags)?.wait()?;

    // A zero-byte Receive for the client's "done" message, posted before accepting.
    // SAFETY: an empty SGE list touches no memory.
    unsafe { qp.receive(1, &[])? };

    let listener = adapter.create_listener()?;
    listener.bind("127.0.0.1:0".parse().unwrap())?;
    listener.listen(0)?;
    listening.send(listener.get_local_address()?).unwrap();

    let connector = adapter.create_connector()?;
    listener.get_connection_request(&connector)?.wait()?;
    // Private data: where the buffer is and the token that opens it.
    let mut private = (buf.as_ptr() as u64).to_le_bytes().to_vec();
    private.extend_from_slice(&mr.get_remote_token().to_le_bytes());
    // Allow the client one Read in flight (inbound limit 1); we issue none.
    connector.accept(&qp, 1, 0, &private)?.wait()?;

    // The client's Write and Read progress while this thread polls for its Send.
    next_completion(&cq)?;
    // SAFETY: the client is done with the buffer (its Send says so).
    let got = unsafe { &buf.as_slice()[..MESSAGE.len()] };
    assert_eq!(got, MESSAGE, "server: the Write did not land");
    println!("server: buffer holds {:?}", String::from_utf8_lossy(got));
    connector.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

fn client(server: SocketAddr) -> Result<()> {
    let adapter = open_adapter("127.0.0.1:0".parse().unwrap())?;
    let cq = adapter.create_completion_queue(8, 0, 0)?;
    let qp = adapter.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;

    // [0..16): what we Write; [16..32): where the Read lands.
    let buf = Buffer::new(32)?;
    let mr = adapter.create_memory_region()?;
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE | MrFlags::RDMA_READ_SINK)?
        .wait()?;
    let token = mr.get_local_token();

    let connector = adapter.create_connector()?;
    connector.bind("127.0.0.1:0".parse().unwrap())?;
    // Inbound limit 0 (the server reads nothing), outbound 1 (we Read once at a time).
    connector.connect(&qp, server, 0, 1, b"")?.wait()?;
    let private = connector.private_data()?;
    let remote_address = u64::from_le_bytes(private[..8].try_into().unwrap());
    let remote_token = u32::from_le_bytes(private[8..12].try_into().unwrap());
    connector.complete_connect()?.wait()?;

    let n = MESSAGE.len();
    let (source, sink) = (buf.sge(0..n, token), buf.sge(16..16 + n, token));
    // SAFETY: no request uses the buffer yet.
    unsafe { buf.as_mut_slice()[..n].copy_from_slice(MESSAGE) };
    // SAFETY: the source bytes stay untouched until the Write completes.
    unsafe { qp.write(1, &[source], remote_address, remote_token, OpFlags::empty())? };
    next_completion(&cq)?;
    // SAFETY: the sink bytes are not read until the Read completes.
    unsafe { qp.read(2, &[sink], remote_address, remote_token, OpFlags::empty())? };
    next_completion(&cq)?;
    // SAFETY: the Read completed; no request uses the buffer now.
    let back = unsafe { &buf.as_slice()[16..16 + n] };
    assert_eq!(back, MESSAGE, "client: the Read brought back other bytes");
    println!("client: read back {:?}", String::from_utf8_lossy(back));

    // A zero-byte Send: "done".
    // SAFETY: an empty SGE list touches no memory.
    unsafe { qp.send(3, &[], OpFlags::empty())? };
    next_completion(&cq)?;
    connector.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

fn main() -> Result<()> {
    let (tx, rx) = mpsc::channel();
    let server = thread::spawn(move || server(tx));
    let Ok(addr) = rx.recv() else {
        // The server failed before it listened: report its error.
        return server.join().expect("server thread panicked");
    };
    client(addr)?;
    server.join().expect("server thread panicked")?;
    println!("ok");
    Ok(())
}

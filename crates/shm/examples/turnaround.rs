//! The software cost of one Send/Receive on the `shm` provider, without cross-core effects:
//! both ends of a connection in one thread, one 8-byte message per iteration (post Receive,
//! Send, reap the Send completion, reap the Receive completion).
//!
//! `cargo run --release -p netdirect-shm --example turnaround [iterations]`

use std::net::SocketAddr;
use std::time::Instant;

use netdirect::{Buffer, MrFlags, NdResult, OpFlags, Provider};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let p = Provider::open("shm").expect("shm");
    let a = p
        .open_adapter_for("127.0.0.1:0".parse().unwrap())
        .expect("adapter");
    let cq_a = a.create_completion_queue(64, 0, 0).unwrap();
    let cq_b = a.create_completion_queue(64, 0, 0).unwrap();
    let qa = a
        .create_queue_pair(&cq_a, &cq_a, 1, 16, 16, 1, 1, 0)
        .unwrap();
    let qb = a
        .create_queue_pair(&cq_b, &cq_b, 2, 16, 16, 1, 1, 0)
        .unwrap();
    let buf = Buffer::new(4096).unwrap();
    let mr = a.create_memory_region().unwrap();
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
        .unwrap()
        .wait()
        .unwrap();
    let l = a.create_listener().unwrap();
    l.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    l.listen(0).unwrap();
    let addr: SocketAddr = l.get_local_address().unwrap();
    let (ca, cb) = (a.create_connector().unwrap(), a.create_connector().unwrap());
    let ov_req = l.get_connection_request(&cb).unwrap();
    let ov_conn = ca.connect(&qa, addr, 0, 0, &[]).unwrap();
    ov_req.wait().unwrap();
    let ov_acc = cb.accept(&qb, 0, 0, &[]).unwrap();
    ov_conn.wait().unwrap();
    ca.complete_connect().unwrap().wait().unwrap();
    ov_acc.wait().unwrap();
    let tok = mr.get_local_token();
    let reap = |cq: &netdirect::CompletionQueue| {
        let mut r = [NdResult::EMPTY];
        while cq.get_results(&mut r) == 0 {}
        r[0]
    };
    let t = Instant::now();
    for _ in 0..n {
        let rs = buf.sge(64..72, mr.get_local_token());
        // SAFETY: the receive area is never read; the send area never written.
        unsafe { qb.receive(0, &[rs]).unwrap() };
        let ss = buf.sge(0..8, tok);
        // SAFETY: as above.
        unsafe { qa.send(0, &[ss], OpFlags::empty()).unwrap() };
        reap(&cq_a);
        reap(&cq_b);
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    println!("{ns:.1} ns per message (post Receive + Send + two completions, one thread)");
}

//! The wire is real iWARP: capture a loopback `nd pingpong` with tshark and check that
//! Wireshark's own dissectors (`iwarp_mpa`, `iwarp_ddp_rdmap`) decode the MPA Request and Reply
//! and every FPDU, with good CRCs and nothing malformed.
//!
//! Needs `tshark` and permission to capture on `lo` (root). Under CI (`CI` set) either
//! missing fails the test; elsewhere the test says it was skipped and why.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const ND: &str = env!("CARGO_BIN_EXE_nd");

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Kills a child on drop, so a failed assertion never leaves a process behind.
struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn analyze(pcap: &std::path::Path, extra: &[&str]) -> String {
    let out = Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().expect("utf-8 path"),
            "-o",
            "tcp.try_heuristic_first:TRUE",
        ])
        .args([
            "--disable-heuristic",
            "rpcrdma_iwarp",
            "--disable-heuristic",
            "smb_direct_iwarp",
        ])
        .args(extra)
        .stderr(Stdio::null())
        .output()
        .expect("run tshark");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run one loopback `nd` pair (`server_args` with `-s 127.0.0.1:0 --announce`, then
/// `client_args` with `-c <addr>`) while tshark captures its port; returns the pcap path (in
/// a fresh temporary directory) once every packet of the run is in it.
fn capture(name: &str, server_args: &[&str], client_args: &[&str]) -> std::path::PathBuf {
    let mut server = Guard(
        Command::new(ND)
            .args(server_args)
            .args(["-s", "127.0.0.1:0", "--announce"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server"),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("read LISTENING");
    let addr = line
        .trim()
        .strip_prefix("LISTENING ")
        .expect("server announces its address")
        .to_string();
    let port = addr.rsplit(':').next().expect("port").to_string();

    // A port nobody listens on: connecting to it draws an RST, a marker we can see tshark print.
    let marker = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind marker");
        l.local_addr().expect("marker address")
    };
    let dir = std::env::temp_dir().join(format!("nd-capture-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join(format!("{name}.pcap"));
    let mut tshark = Guard(
        Command::new("tshark")
            // -P -l: also print each packet's summary, line by line, as it is captured.
            // -B: a capture buffer large enough that bursts of 64 KiB segments are not dropped.
            .args([
                "-i",
                "lo",
                "-B",
                "64",
                "-f",
                &format!("tcp port {port} or tcp port {}", marker.port()),
                "-w",
                pcap.to_str().expect("utf-8"),
                "-P",
                "-l",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tshark"),
    );
    let mut err = BufReader::new(tshark.0.stderr.take().expect("piped"));
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut summaries = BufReader::new(tshark.0.stdout.take().expect("piped")).lines();
    // tshark's "Capturing on" comes before the capture is really live: knock on the marker
    // port until tshark shows the RST, then the capture is known to be running.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in summaries.by_ref() {
            let Ok(l) = l else { break };
            if l.contains("RST") && tx.send(()).is_err() {
                break;
            }
        }
    });
    let knock = |what: &str| {
        for _ in 0..50 {
            let _ = std::net::TcpStream::connect(marker);
            if rx
                .recv_timeout(std::time::Duration::from_millis(200))
                .is_ok()
            {
                return;
            }
        }
        panic!("tshark never showed the {what} marker");
    };
    knock("start");
    let client = Command::new(ND)
        .args(client_args)
        .args(["-c", &addr])
        .status()
        .expect("run client");
    assert!(client.success(), "client failed");
    assert!(server.0.wait().expect("server").success(), "server failed");
    // Once tshark shows a marker sent after the run, every earlier packet is captured too
    // (lo delivers in order).
    while rx.try_recv().is_ok() {}
    knock("end");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(tshark.0.id() as i32).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("signal tshark");
    assert!(tshark.0.wait().expect("tshark").success() || pcap.exists());
    pcap
}

/// Every FPDU of the capture, as (RDMAP opcode, ULPDU length) pairs, after checking that each
/// has a checked CRC; and the MPA Request and Reply counts.
fn fpdus(pcap: &std::path::Path) -> (Vec<(String, String)>, usize, usize, String) {
    let fields = analyze(
        pcap,
        &[
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-e",
            "iwarp_mpa.key.req",
            "-e",
            "iwarp_mpa.key.rep",
            "-e",
            "iwarp_rdma.opcode",
            "-e",
            "iwarp_mpa.ulpdulength",
            "-e",
            "iwarp_mpa.crc_check",
        ],
    );
    let (mut requests, mut replies, mut out) = (0, 0, Vec::new());
    for line in fields.lines() {
        let f: Vec<&str> = line.split(';').collect();
        if f.len() < 5 {
            continue;
        }
        requests += usize::from(!f[0].is_empty());
        replies += usize::from(!f[1].is_empty());
        // One TCP segment may carry several FPDUs: tshark lists them comma-separated.
        let opcodes: Vec<&str> = f[2].split(',').filter(|s| !s.is_empty()).collect();
        let lens: Vec<&str> = f[3].split(',').filter(|s| !s.is_empty()).collect();
        let crcs: Vec<&str> = f[4].split(',').filter(|s| !s.is_empty()).collect();
        assert_eq!(
            opcodes.len(),
            crcs.len(),
            "every FPDU has a checked CRC: {line}"
        );
        for (op, len) in opcodes.iter().zip(&lens) {
            out.push((op.to_string(), len.to_string()));
        }
    }
    (out, requests, replies, fields)
}

/// tshark's expert info: no errors, nothing malformed, no bad CRC.
fn expert_clean(pcap: &std::path::Path) {
    let expert = analyze(pcap, &["-q", "-z", "expert"]);
    assert!(
        !expert.contains("Errors ("),
        "tshark reports errors:\n{expert}"
    );
    assert!(
        !expert.contains("Malformed"),
        "tshark reports malformed packets:\n{expert}"
    );
    assert!(
        !expert.contains("Bad CRC"),
        "tshark reports bad CRCs:\n{expert}"
    );
}

fn skip_without_tshark() -> bool {
    // Capturing on `lo` takes root (or a dumpcap with capabilities, which a fresh machine's
    // package does not grant).
    let why = if !tshark_available() {
        "tshark not installed (apt-get install tshark)"
    } else if !rustix::process::geteuid().is_root() {
        "capturing on lo needs root"
    } else {
        return false;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the wire check must run under CI: {why}"
    );
    eprintln!("SKIPPED: {why} — the wire check did not run");
    true
}

/// `nd rping --op write` and `--op read`: RDMA Write, Read Request and Read Response FPDUs
/// (RFC 5040 §4.3–4.5), segmented to the MULPDU, decode with good CRCs; the Writes' completion
/// probes are zero-length Read Requests answered by zero-length Read Responses.
#[test]
fn rping_capture_decodes_as_iwarp() {
    if skip_without_tshark() {
        return;
    }
    let size = 200_000usize;
    for op in ["write", "read"] {
        let common = [
            "rping", "--op", op, "--size", "200000", "-n", "6", "--warmup", "1", "-q", "2",
        ];
        let pcap = capture(&format!("rping-{op}"), &common, &common);
        let (fpdus, requests, replies, fields) = fpdus(&pcap);
        assert_eq!(
            (requests, replies),
            (1, 1),
            "one MPA Request and Reply:\n{fields}"
        );
        let count = |code: &str, nonzero: bool| {
            fpdus
                .iter()
                .filter(|(o, l)| o == code && (l.parse::<usize>().unwrap_or(0) > 14) == nonzero)
                .count()
        };
        // 7 transfers of 200,000 bytes, each in ceil(200000 / (64768 - 14)) = 4 segments.
        let segments = 7 * size.div_ceil(64768 - 14);
        match op {
            "write" => {
                assert_eq!(
                    count("0x00", true),
                    segments,
                    "RDMA Write segments:\n{fields}"
                );
                assert!(
                    fpdus.iter().any(|(o, l)| o == "0x01" && l == "46"),
                    "completion probes (Read Requests: 18 + 28 bytes)"
                );
                assert!(
                    count("0x02", false) >= 1,
                    "their zero-length Read Responses"
                );
                assert_eq!(count("0x02", true), 0, "no Read Response carries data");
            }
            _ => {
                assert_eq!(
                    fpdus.iter().filter(|(o, _)| o == "0x01").count(),
                    7,
                    "one Read Request per Read:\n{fields}"
                );
                assert_eq!(
                    count("0x02", true),
                    segments,
                    "Read Response segments:\n{fields}"
                );
            }
        }
        expert_clean(&pcap);
        let _ = std::fs::remove_dir_all(pcap.parent().expect("dir"));
    }
}

#[test]
fn pingpong_capture_decodes_as_iwarp() {
    if skip_without_tshark() {
        return;
    }
    let iters = 20;
    let warmup = 2;
    let n = iters.to_string();
    let w = warmup.to_string();
    let args = ["pingpong", "-n", &n, "--warmup", &w];
    let pcap = capture("pingpong", &args, &args);
    let (fpdus, requests, replies, fields) = fpdus(&pcap);
    let (mut sends, mut rtr) = (0, 0);
    for (op, len) in &fpdus {
        match op.as_str() {
            "0x03" => sends += 1,
            // The MPA v2 RTR: a zero-length RDMA Write (ULPDU = the 14-byte tagged header).
            "0x00" if len == "14" => rtr += 1,
            other => panic!("unexpected RDMAP opcode {other} in:\n{fields}"),
        }
    }
    assert_eq!(
        (requests, replies, rtr),
        (1, 1, 1),
        "one MPA Request, one Reply, one RTR in:\n{fields}"
    );
    assert_eq!(
        sends,
        2 * (iters + warmup),
        "every ping and pong decodes as an RDMAP Send"
    );
    expert_clean(&pcap);
    let _ = std::fs::remove_dir_all(pcap.parent().expect("dir"));
}

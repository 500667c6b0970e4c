//! The options both ends of a run must agree on, exchanged when they connect.

use std::io::Write;

use super::args::{PeerArgs, Plan};

/// The options both ends must agree on, as `key=value` words; the client sends them in the
/// Connect private data (≤ MaxCallerData, 252 bytes here) and the server compares them with
/// its own before accepting (perftest's "exchange and verify at connect time").
pub(crate) fn settings(
    tool: &str,
    peer: &PeerArgs,
    plan: &Plan,
    extra: &[(&str, String)],
) -> String {
    let mut s = format!("tool={tool} mode={}", peer.mode());
    if plan.sweep {
        let n = plan.rounds.iter().map(|r| r.1).max().unwrap_or(0);
        s += &format!(" sweep={} n={n}", plan.rounds.len());
    } else {
        s += &format!(" size={} n={}", plan.rounds[0].0, plan.rounds[0].1);
    }
    s += &format!(" warmup={}", plan.warmup);
    for (k, v) in extra {
        s += &format!(" {k}={v}");
    }
    s
}

/// `Ok` if `theirs` equals `ours`; otherwise an error naming every key that differs.
pub(crate) fn check_settings(ours: &str, theirs: &str, peer_is: &str) -> Result<(), String> {
    if ours == theirs {
        return Ok(());
    }
    let kv = |s: &str| -> Vec<(String, String)> {
        s.split_whitespace()
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (w.to_string(), String::new()),
            })
            .collect()
    };
    let (a, b) = (kv(ours), kv(theirs));
    // A different provider first, and alone: every other difference follows from it.
    let provider = |v: &[(String, String)]| {
        v.iter()
            .find(|(k, _)| k == "provider")
            .map(|(_, v)| v.clone())
    };
    if let (Some(here), Some(there)) = (provider(&a), provider(&b)) {
        if here != there {
            return Err(format!(
                "the {peer_is} uses provider {there}, this end {here}: give both ends the same \
                 --provider (or ND_PROVIDER)"
            ));
        }
    }
    let mut diffs = Vec::new();
    for (k, v) in &a {
        let other = b.iter().find(|(k2, _)| k2 == k).map(|(_, v)| v.as_str());
        if other != Some(v.as_str()) {
            diffs.push(format!(
                "{k}: here {v}, {peer_is} {}",
                other.unwrap_or("(unset)")
            ));
        }
    }
    for (k, v) in &b {
        if !a.iter().any(|(k2, _)| k2 == k) {
            diffs.push(format!("{k}: here (unset), {peer_is} {v}"));
        }
    }
    Err(format!(
        "option mismatch with the {peer_is} ({}); give both ends the same options",
        diffs.join("; ")
    ))
}

/// The settings exchange of the raw-TCP yardsticks: the client sends its settings as one
/// length-prefixed line, the server answers with its own, and each end checks the other's
/// (the same rule as [`Endpoint::connect`](super::Endpoint::connect)). Call on a blocking
/// socket, before the run.
pub(crate) fn exchange_tcp_settings(
    s: &mut std::net::TcpStream,
    ours: &str,
    client: bool,
) -> Result<(), String> {
    use std::io::Read;
    let io = |e: std::io::Error| format!("settings exchange: {e}");
    let send = |s: &mut std::net::TcpStream| -> Result<(), String> {
        let b = ours.as_bytes();
        let len = u8::try_from(b.len()).map_err(|_| "settings too long".to_string())?;
        s.write_all(&[len])
            .and_then(|()| s.write_all(b))
            .map_err(io)
    };
    if client {
        send(s)?;
    }
    let mut len = [0u8; 1];
    s.read_exact(&mut len).map_err(io)?;
    let mut theirs = vec![0u8; len[0] as usize];
    s.read_exact(&mut theirs).map_err(io)?;
    if !client {
        send(s)?;
    }
    let peer = if client { "server" } else { "client" };
    check_settings(ours, &String::from_utf8_lossy(&theirs), peer)
}

#[cfg(test)]
mod tests {
    use super::check_settings;

    #[test]
    fn equal_settings_pass() {
        assert!(check_settings("tool=ping size=8", "tool=ping size=8", "server").is_ok());
    }

    #[test]
    fn a_mismatch_names_each_differing_key_both_ways() {
        let e = check_settings(
            "tool=ping size=8 n=10",
            "tool=ping size=16 op=read",
            "server",
        )
        .unwrap_err();
        assert!(e.contains("size: here 8, server 16"), "{e}");
        assert!(e.contains("n: here 10, server (unset)"), "{e}");
        assert!(e.contains("op: here (unset), server read"), "{e}");
        assert!(!e.contains("tool:"), "{e}");
    }

    #[test]
    fn a_different_provider_is_named_alone() {
        let e = check_settings(
            "tool=ping size=8 provider=shm",
            "tool=ping size=16 provider=tcp",
            "client",
        )
        .unwrap_err();
        assert!(
            e.starts_with("the client uses provider tcp, this end shm"),
            "{e}"
        );
        assert!(!e.contains("size"), "{e}");
    }

    #[test]
    fn garbage_from_the_peer_is_a_mismatch_not_a_panic() {
        assert!(check_settings("tool=ping", "\u{fffd}\u{0}==x", "client").is_err());
        assert!(check_settings("tool=ping", "", "client").is_err());
    }
}

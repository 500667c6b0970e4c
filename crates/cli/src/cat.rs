//! `nd cat`: the ND address catalog check of Microsoft's ndcat (docs/ND-RULES.md §5.7), for
//! every provider (or `--provider`): the given address must be one a provider serves
//! (`NdCheckAddress`: ResolveAddress succeeds), `QueryAddressList` must list at least one
//! address, and every listed address must resolve to an adapter whose own address list
//! holds it.
//!
//! JSON: one object per provider, in an array: `tool` = `cat`, `provider`, `address` (the one
//! checked), `addresses` (the catalog), `adapters` (distinct adapter ids), `passed` (true;
//! a failed check exits non-zero with the reason on standard error).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use netdirect::Provider;

use crate::common;

/// Arguments of `nd cat`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The address to check (ndcat's `<IPv4>` argument).
    #[arg(default_value = "127.0.0.1")]
    address: IpAddr,
    /// Only this provider.
    #[arg(long)]
    provider: Option<String>,
    /// Print JSON: an array with one object per provider.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let providers = common::listed_providers(args.provider.as_deref())?;
    let mut out = Vec::new();
    for p in providers {
        let v = check(&p, SocketAddr::new(args.address, 0))
            .map_err(|e| format!("provider {}: {e}", p.name()))?;
        if !args.json {
            println!("provider {}: retrieving the full address list", p.name());
            println!(
                "  {} addresses on {} adapter(s): {}",
                v["addresses"].as_array().map_or(0, Vec::len),
                v["adapters"].as_array().map_or(0, Vec::len),
                v["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!("  validation of the full address list passed");
        }
        out.push(v);
    }
    if args.json {
        println!("{}", serde_json::Value::Array(out));
    }
    Ok(())
}

/// ndcat's steps 2–6 for one provider.
fn check(p: &Provider, addr: SocketAddr) -> Result<serde_json::Value, String> {
    p.resolve_address(addr)
        .map_err(|e| format!("{} is not an ND address: {e}", addr.ip()))?;
    let list = p
        .query_address_list()
        .map_err(common::err("QueryAddressList"))?;
    if list.is_empty() {
        return Err("QueryAddressList returned no addresses".into());
    }
    let mut adapters = BTreeSet::new();
    for a in &list {
        let id = p
            .resolve_address(*a)
            .map_err(|e| format!("listed address {} does not resolve: {e}", a.ip()))?;
        let adapter = p.open_adapter(id).map_err(common::err("OpenAdapter"))?;
        let own = adapter
            .query_address_list()
            .map_err(common::err("adapter QueryAddressList"))?;
        if !own.iter().any(|o| o.ip() == a.ip()) {
            return Err(format!(
                "adapter {id:#x} does not list {} among its addresses",
                a.ip()
            ));
        }
        adapters.insert(id);
    }
    Ok(serde_json::json!({
        "tool": "cat",
        "provider": p.name(),
        "address": addr.ip().to_string(),
        "addresses": list.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>(),
        "adapters": adapters.iter().map(|id| format!("{id:#018x}")).collect::<Vec<_>>(),
        "passed": true,
    }))
}

//! `nd info`: what ndadapterinfo and ndcat print, for every provider.

use netdirect::{AdapterFlags, ND_VERSION_2};

/// Arguments of `nd info`.
///
/// JSON: an array with one object per provider: `provider`, `adapters` (one object per
/// adapter: `addresses` and every ND2_ADAPTER_INFO field under its ND name, `AdapterFlags` as
/// flag names), `variables` (`name`, `default`, `meaning` of every configuration variable);
/// then one object with `provider` null and the library's own `variables` (`ND_PROVIDER`).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only this provider.
    #[arg(long, short = 'p')]
    provider: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The library's own variables: `ND_PROVIDER`, read by `Provider::from_env`, and
/// `ND_PROGRESS`, read when an adapter opens (every provider's).
const LIBRARY_VARIABLES: &[(&str, &str, &str)] = &[
    (
        "ND_PROVIDER",
        netdirect::DEFAULT_PROVIDER,
        "which provider Provider::from_env opens: a name, a list tried in order (shm,tcp), or ^name to exclude one (FI_PROVIDER syntax)",
    ),
    (
        "ND_PROGRESS",
        "manual",
        "who advances an adapter's I/O besides the application's polls and waits: manual (nobody) or thread (a progress engine that drives it while the application does not; the C ABI's default); Adapter::set_progress_mode overrides it",
    ),
];

/// Every configuration variable of provider `name`: (name, default, meaning), as `fi_info -e`
/// lists them.
fn variables(name: &str) -> Vec<(&'static str, &'static str, &'static str)> {
    match name {
        "tcp" => netdirect::config::TCP_VARIABLES
            .iter()
            .map(|v| (v.name, v.default, v.meaning))
            .collect(),
        "shm" => netdirect::config::SHM_VARIABLES
            .iter()
            .map(|v| (v.name, v.default, v.meaning))
            .collect(),
        _ => Vec::new(),
    }
}

fn flag_names(f: AdapterFlags) -> Vec<String> {
    let mut v: Vec<String> = f
        .iter_names()
        .map(|(n, _)| format!("ND_ADAPTER_FLAG_{n}"))
        .collect();
    let unknown = f.bits() & !AdapterFlags::all().bits();
    if unknown != 0 {
        v.push(format!("{unknown:08x}"));
    }
    v
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let providers = crate::common::listed_providers(args.provider.as_deref())?;
    let mut json = Vec::new();
    for p in providers {
        let mut adapter_json = Vec::new();
        let addrs = p.query_address_list().map_err(|e| e.to_string())?;
        let mut adapters = std::collections::BTreeMap::new();
        for a in &addrs {
            if let Ok(id) = p.resolve_address(*a) {
                adapters.entry(id).or_insert_with(Vec::new).push(*a);
            }
        }
        if !args.json {
            println!("provider {}", p.name());
        }
        for (id, addrs) in adapters {
            let adapter = p.open_adapter(id).map_err(|e| e.to_string())?;
            let i = adapter.query();
            if args.json {
                adapter_json.push(serde_json::json!({
                    "addresses": addrs.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>(),
                    "InfoVersion": i.info_version, "VendorId": i.vendor_id, "DeviceId": i.device_id,
                    "AdapterId": i.adapter_id, "MaxRegistrationSize": i.max_registration_size,
                    "MaxWindowSize": i.max_window_size, "MaxInitiatorSge": i.max_initiator_sge,
                    "MaxReceiveSge": i.max_receive_sge, "MaxReadSge": i.max_read_sge,
                    "MaxTransferLength": i.max_transfer_length, "MaxInlineDataSize": i.max_inline_data_size,
                    "MaxInboundReadLimit": i.max_inbound_read_limit, "MaxOutboundReadLimit": i.max_outbound_read_limit,
                    "MaxReceiveQueueDepth": i.max_receive_queue_depth, "MaxInitiatorQueueDepth": i.max_initiator_queue_depth,
                    "MaxSharedReceiveQueueDepth": i.max_shared_receive_queue_depth,
                    "MaxCompletionQueueDepth": i.max_completion_queue_depth,
                    "InlineRequestThreshold": i.inline_request_threshold, "LargeRequestThreshold": i.large_request_threshold,
                    "MaxCallerData": i.max_caller_data, "MaxCalleeData": i.max_callee_data,
                    "AdapterFlags": flag_names(i.adapter_flags),
                }));
                continue;
            }
            println!(
                "  adapter {:#018x} serving {}",
                id,
                addrs
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let rows: [(&str, String); 21] = [
                (
                    "InfoVersion",
                    format!(
                        "{} ({})",
                        i.info_version,
                        if i.info_version == ND_VERSION_2 {
                            "ND_VERSION_2"
                        } else {
                            "?"
                        }
                    ),
                ),
                ("VendorId", i.vendor_id.to_string()),
                ("DeviceId", i.device_id.to_string()),
                ("AdapterId", format!("0x{:08x}", i.adapter_id)),
                ("MaxRegistrationSize", i.max_registration_size.to_string()),
                ("MaxWindowSize", i.max_window_size.to_string()),
                ("MaxInitiatorSge", i.max_initiator_sge.to_string()),
                ("MaxReceiveSge", i.max_receive_sge.to_string()),
                ("MaxReadSge", i.max_read_sge.to_string()),
                ("MaxTransferLength", i.max_transfer_length.to_string()),
                ("MaxInlineDataSize", i.max_inline_data_size.to_string()),
                ("MaxInboundReadLimit", i.max_inbound_read_limit.to_string()),
                (
                    "MaxOutboundReadLimit",
                    i.max_outbound_read_limit.to_string(),
                ),
                (
                    "MaxReceiveQueueDepth",
                    i.max_receive_queue_depth.to_string(),
                ),
                (
                    "MaxInitiatorQueueDepth",
                    i.max_initiator_queue_depth.to_string(),
                ),
                (
                    "MaxSharedReceiveQueueDepth",
                    i.max_shared_receive_queue_depth.to_string(),
                ),
                (
                    "MaxCompletionQueueDepth",
                    i.max_completion_queue_depth.to_string(),
                ),
                (
                    "InlineRequestThreshold",
                    i.inline_request_threshold.to_string(),
                ),
                (
                    "LargeRequestThreshold",
                    i.large_request_threshold.to_string(),
                ),
                ("MaxCallerData", i.max_caller_data.to_string()),
                ("MaxCalleeData", i.max_callee_data.to_string()),
            ];
            for (k, v) in rows {
                println!("    {k:<28} {v}");
            }
            println!("    AdapterFlags:");
            for f in flag_names(i.adapter_flags) {
                println!("\t{f}");
            }
        }
        let vars = variables(p.name());
        if args.json {
            json.push(serde_json::json!({
                "provider": p.name(),
                "adapters": adapter_json,
                "variables": vars.iter().map(|(name, default, meaning)| serde_json::json!({
                    "name": name, "default": default, "meaning": meaning,
                })).collect::<Vec<_>>(),
            }));
        } else if !vars.is_empty() {
            println!("  configuration (environment variables, read when an adapter opens):");
            for (name, default, meaning) in vars {
                println!("    {name:<28} default {default:<8} {meaning}");
            }
        }
    }
    if args.json {
        json.push(serde_json::json!({
            "provider": null,
            "variables": LIBRARY_VARIABLES.iter().map(|(name, default, meaning)| serde_json::json!({
                "name": name, "default": default, "meaning": meaning,
            })).collect::<Vec<_>>(),
        }));
        println!("{}", serde_json::Value::Array(json));
    } else {
        println!("library configuration (environment variables):");
        for (name, default, meaning) in LIBRARY_VARIABLES {
            println!("    {name:<28} default {default:<8} {meaning}");
        }
    }
    Ok(())
}

//! NDK adapter-level contracts in one process: version negotiation, `NDK_ADAPTER_INFO`, the
//! functions this provider does not offer, create-time parameter checks, and shared
//! endpoints (reservation, clashes, a connector through one, the endpoint closing after it).

mod ndk_common;

use std::sync::{mpsc, Mutex};

use ndk_common::*;
use netdirect::ndk::{
    CompletionMode, NdkAdapter, NdkAdapterInfo, NdkConnector, NdkVersion, NtStatus, OpenParams,
};
use netdirect::Provider;

fn cfgs() -> Vec<Cfg> {
    matrix()
        .into_iter()
        .map(|(p, ip)| Cfg {
            provider: p.to_string(),
            ip,
            mode: CompletionMode::Inline,
        })
        .collect()
}

#[test]
fn versions_negotiate_as_ndis_says() {
    let p = Provider::open("tcp").unwrap();
    let at = "127.0.0.1:0".parse().unwrap();
    let open = |major, minor| {
        let params = OpenParams {
            version: NdkVersion { major, minor },
            ..OpenParams::default()
        };
        NdkAdapter::open(&p, at, params)
    };
    for (major, minor) in [(2, 0), (0, 1), (1, 3)] {
        assert_eq!(
            open(major, minor).err(),
            Some(NtStatus::NDIS_BAD_VERSION),
            "{major}.{minor}"
        );
    }
    for minor in [0, 1, 2] {
        let a = open(1, minor).expect("supported");
        // The provider's highest minor, whatever the lowest the consumer accepts.
        assert_eq!(a.version(), NdkVersion { major: 1, minor: 2 });
        assert_eq!(a.query_adapter_info().version, a.version());
        a.close();
    }
    let foreign = "192.0.2.1:0".parse().unwrap();
    assert_eq!(
        NdkAdapter::open(&p, foreign, OpenParams::default()).err(),
        Some(NtStatus::INVALID_ADDRESS)
    );
}

#[test]
fn adapter_info_limits_and_what_is_not_offered() {
    for cfg in cfgs() {
        let a = cfg.open();
        let calls = Calls::default();
        let info = a.query_adapter_info();
        let v2 = a.as_v2().query();
        assert_eq!(info.max_cq_depth, v2.max_completion_queue_depth);
        assert_eq!(info.max_inline_data_size, v2.max_inline_data_size);
        assert_eq!(info.frmr_page_count, 0);
        assert_eq!(info.adapter_flags & 0x4, 0, "no interrupt moderation");
        let mut size = 0;
        assert_eq!(
            a.query_adapter_info_sized(None, &mut size),
            NtStatus::BUFFER_TOO_SMALL
        );
        assert_eq!(size, 0x68);
        let mut out = NdkAdapterInfo::default();
        assert_eq!(
            a.query_adapter_info_sized(Some(&mut out), &mut size),
            NtStatus::SUCCESS
        );
        assert_eq!(out, info);

        let cq = a.create_cq(16, |_| {}, None).expect("cq");
        assert_eq!(
            cq.control_cq_interrupt_moderation(10, 10),
            NtStatus::NOT_SUPPORTED
        );
        // NdkResizeCq: a request with a completion callback, inline here.
        let resizable = info.adapter_flags & 0x100 != 0;
        let s = call(&calls, |cb| cq.resize_cq(32, cb));
        let want = if resizable {
            NtStatus::SUCCESS
        } else {
            NtStatus::NOT_SUPPORTED
        };
        assert_eq!(s, want);
        if resizable {
            assert_eq!(
                call(&calls, |cb| cq.resize_cq(0, cb)),
                NtStatus::INVALID_PARAMETER
            );
        }
        assert_eq!(
            a.create_cq(0, |_| {}, None).err(),
            Some(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            a.create_cq(info.max_cq_depth + 1, |_| {}, None).err(),
            Some(NtStatus::INVALID_PARAMETER)
        );
        let pd = a.create_pd().expect("pd");
        assert_eq!(pd.create_mr(true).err(), Some(NtStatus::NOT_SUPPORTED));
        // NdkModifySrq: beyond MaxSrqDepth is an invalid parameter, inline or not.
        if info.max_srq_depth > 0 {
            let srq = pd.create_srq(4, 1, 0, None, None).expect("srq");
            let s = call(&calls, |cb| srq.modify_srq(info.max_srq_depth + 1, 0, cb));
            assert_eq!(s, NtStatus::INVALID_PARAMETER);
            assert_eq!(
                call(&calls, |cb| srq.modify_srq(8, 0, cb)),
                NtStatus::SUCCESS
            );
            assert_eq!(srq.close(|| panic!("inline")), NtStatus::SUCCESS);
        }
        assert_eq!(
            pd.get_privileged_memory_region_token().err(),
            Some(NtStatus::NOT_SUPPORTED)
        );
        assert_eq!(
            pd.create_qp(&cq, &cq, 0, info.max_receive_queue_depth + 1, 1, 1, 1, 0)
                .err(),
            Some(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(a.build_lam(), NtStatus::NOT_SUPPORTED);
        assert_eq!(a.query_extension_interface(), NtStatus::NOT_SUPPORTED);
        // A QP that was never connected: posts fail inline.
        let qp = pd.create_qp(&cq, &cq, 0, 1, 1, 1, 1, 0).expect("qp");
        let data = [0u8; 8];
        let sge = netdirect::Sge::new(data.as_ptr().cast_mut(), 8, 0);
        // SAFETY: INLINE copies the bytes during the call.
        let s = unsafe { qp.send(1, &[sge], netdirect::ndk::NdkOpFlags::INLINE) };
        assert_eq!(s, NtStatus::CONNECTION_INVALID);
        // Antecedents first: the PD and CQ wait for the QP.
        let (tx, rx) = mpsc::channel();
        let t2 = tx.clone();
        assert_eq!(pd.close(move || t2.send("pd").unwrap()), NtStatus::PENDING);
        let t3 = tx.clone();
        assert_eq!(cq.close(move || t3.send("cq").unwrap()), NtStatus::PENDING);
        assert!(rx.try_recv().is_err());
        assert_eq!(qp.close(|| panic!("inline")), NtStatus::SUCCESS);
        let mut got = vec![
            rx.recv_timeout(BOUND).unwrap(),
            rx.recv_timeout(BOUND).unwrap(),
        ];
        got.sort_unstable();
        assert_eq!(got, ["cq", "pd"]);
        a.close();
        calls.assert_quiet();
    }
}

#[test]
fn shared_endpoints_reserve_clash_and_outlive_their_connectors() {
    for cfg in cfgs() {
        let a = cfg.open();
        let calls = Calls::default();
        let ep = a.create_shared_endpoint(cfg.addr(0)).expect("endpoint");
        let port = ep.get_local_address().port();
        assert!((49152..=65535).contains(&port));
        assert_eq!(
            a.create_shared_endpoint(cfg.addr(port)).err(),
            Some(NtStatus::SHARING_VIOLATION)
        );
        assert_eq!(
            a.create_shared_endpoint(cfg.foreign()).err(),
            Some(NtStatus::INVALID_ADDRESS)
        );
        // A connection through it, to a listener of this process.
        let (tx, rx) = mpsc::channel::<NdkConnector>();
        let tx = Mutex::new(tx);
        let l = a
            .create_listener(move |c| tx.lock().unwrap().send(c).unwrap())
            .expect("listener");
        assert_eq!(
            call(&calls, |cb| l.listen(cfg.addr(0), cb)),
            NtStatus::SUCCESS
        );
        let at = l.get_local_address().expect("address");
        let pd = a.create_pd().expect("pd");
        let cq = a.create_cq(16, |_| {}, None).expect("cq");
        let (qa, qb) = (
            pd.create_qp(&cq, &cq, 1, 4, 4, 1, 1, 0).expect("qp"),
            pd.create_qp(&cq, &cq, 2, 4, 4, 1, 1, 0).expect("qp"),
        );
        let c = a.create_connector().expect("connector");
        let (done_tx, done_rx) = mpsc::channel();
        let s = c.connect_with_shared_endpoint(&qa, &ep, at, 0, 0, b"", move |s| {
            done_tx.send(s).unwrap();
        });
        let incoming = rx.recv_timeout(BOUND).expect("request");
        let accepted = incoming.accept(&qb, 0, 0, b"", None, |_| {});
        assert!(accepted == NtStatus::PENDING || accepted == NtStatus::SUCCESS);
        let s = if s == NtStatus::PENDING {
            done_rx.recv_timeout(BOUND).unwrap()
        } else {
            s
        };
        assert_eq!(s, NtStatus::SUCCESS);
        assert_eq!(c.get_local_address().expect("local").port(), port);
        assert_eq!(incoming.get_peer_address().expect("peer").port(), port);
        // The endpoint closes after the connector through it.
        let (ctx, crx) = mpsc::channel();
        assert_eq!(ep.close(move || ctx.send(()).unwrap()), NtStatus::PENDING);
        assert!(crx.try_recv().is_err());
        let _ = c.close(|| {});
        crx.recv_timeout(BOUND).expect("the endpoint's close");
        let _ = incoming.close(|| {});
        let _ = l.close(|| {});
        let _ = qa.close(|| {});
        let _ = qb.close(|| {});
        let _ = cq.close(|| {});
        let _ = pd.close(|| {});
        a.close();
        calls.assert_quiet();
    }
}

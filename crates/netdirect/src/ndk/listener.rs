//! `NDK_LISTENER`: `NdkListen` (the seed's contract: SUCCESS or PENDING with one callback;
//! INSUFFICIENT_RESOURCES, SHARING_VIOLATION, INVALID_ADDRESS inline or through the callback;
//! TOO_MANY_ADDRESSES when port 0 finds no free port in 49152–65535), and the connect event,
//! which hands each incoming request over in a provider-created connector.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::adapter::Shared;
use super::callbacks::{self, CloseCompletion, Core, ObjectType, RequestCompletion};
use super::{NdkConnector, NtStatus};
use crate::{Listener, Status};

/// A connect event callback (`NDK_FN_CONNECT_EVENT_CALLBACK`): the consumer owns the
/// connector it receives, and must close it; closing it without accepting rejects.
pub type ConnectEvent = Arc<dyn Fn(NdkConnector) + Send + Sync>;

pub(crate) struct ListenerInner {
    shared: Arc<Shared>,
    core: Arc<Core>,
    /// Taken by close: the port stops taking requests at once.
    l: Mutex<Option<Listener>>,
    /// The consumer's callback, let go of when the close completes.
    event: Mutex<Option<ConnectEvent>>,
    paused: AtomicBool,
}

/// A listener (`NDK_LISTENER`). Cloning shares it.
#[derive(Clone)]
pub struct NdkListener {
    inner: Arc<ListenerInner>,
}

impl fmt::Debug for NdkListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkListener")
            .field("core", &self.inner.core)
            .finish()
    }
}

impl NdkListener {
    pub(crate) fn new(
        shared: Arc<Shared>,
        core: Arc<Core>,
        l: Listener,
        event: ConnectEvent,
    ) -> Self {
        Self {
            inner: Arc::new(ListenerInner {
                shared,
                core,
                l: Mutex::new(Some(l)),
                event: Mutex::new(Some(event)),
                paused: AtomicBool::new(false),
            }),
        }
    }

    fn listener(&self) -> Option<Listener> {
        self.inner
            .l
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `NdkListen` on `addr` (port 0: a free port of 49152–65535). Returns `STATUS_SUCCESS`,
    /// or `STATUS_PENDING` and calls `completion` once with the status; the failures, inline
    /// or through the callback alike: `STATUS_INSUFFICIENT_RESOURCES`,
    /// `STATUS_SHARING_VIOLATION` (the address is in use), `STATUS_INVALID_ADDRESS` (not an
    /// address of this adapter), `STATUS_TOO_MANY_ADDRESSES` (port 0 and no free port). From
    /// then on each incoming request reaches the connect event callback.
    pub fn listen(
        &self,
        addr: SocketAddr,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let cb: RequestCompletion = Box::new(completion);
        let status = match self.listener() {
            None => NtStatus::INVALID_DEVICE_STATE,
            Some(l) => match l.bind(addr).and_then(|()| l.listen(0)) {
                Ok(()) => NtStatus::SUCCESS,
                Err(e) => match e.status() {
                    Status::ADDRESS_ALREADY_ASSOCIATED => NtStatus::INVALID_DEVICE_STATE,
                    s => NtStatus::from_nd(s),
                },
            },
        };
        // The completion is queued before any connect event can be.
        let r = callbacks::finish(&self.inner.core, self.inner.shared.mode, status, cb);
        if status == NtStatus::SUCCESS {
            self.arm();
        }
        r
    }

    /// Take the next incoming request. Until close starts the request counts as the
    /// listener's (its close waits for it); once closing, the listener keeps one uncounted
    /// request armed, which refuses every peer, until its final close drops the port.
    fn arm(&self) {
        let i = &self.inner;
        let Some(l) = self.listener() else {
            return;
        };
        let Ok(c) = i.shared.v2.create_connector() else {
            return;
        };
        let Ok(ov) = l.get_connection_request(&c) else {
            return;
        };
        let counted = i.core.begin();
        let me = self.clone();
        let done = ov.clone();
        callbacks::on_completion(
            &i.core.disp,
            &ov,
            Box::new(move || {
                let _end = counted.then(|| me.inner.core.ending());
                match done.try_result() {
                    Some(Ok(())) => {
                        me.deliver(c);
                        me.arm();
                    }
                    // The close withdrew the counted request: keep refusing peers.
                    Some(Err(e)) if e.status() == Status::CANCELED && counted => me.arm(),
                    _ => {}
                }
            }),
        );
    }

    /// Hand a request to the consumer, or refuse it (paused, or closing: as if nobody
    /// listened).
    fn deliver(&self, c: crate::Connector) {
        let i = &self.inner;
        if i.core.is_closing() || i.paused.load(Ordering::Acquire) {
            let _ = c.reject(&[]);
            return;
        }
        let event = i.event.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(event) = event else {
            let _ = c.reject(&[]);
            return;
        };
        let core = Core::new(ObjectType::Connector, &i.core.disp, &[&i.core]);
        event(NdkConnector::new(i.shared.clone(), core, c, true));
    }

    /// `NdkGetListenerLocalAddress`: the address, with the port port 0 chose.
    pub fn get_local_address(&self) -> Result<SocketAddr, NtStatus> {
        match self.listener() {
            Some(l) => Ok(l.get_local_address()?),
            None => Err(NtStatus::INVALID_DEVICE_STATE),
        }
    }

    /// `NdkControlConnectEvents`: while paused, incoming requests are refused, as if nobody
    /// listened; `false` resumes.
    pub fn control_connect_events(&self, pause: bool) {
        self.inner.paused.store(pause, Ordering::Release);
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseListener`: stops taking requests at once (peers are refused);
    /// `STATUS_PENDING` until every connector handed over by its connect event has closed.
    /// The listener's endpoint (its address and port) stays taken until then, as NDK's
    /// endpoint reference counting has it: a Listen on it meanwhile gets
    /// `STATUS_SHARING_VIOLATION`.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        let i = &self.inner;
        i.core.start_close();
        if let Some(l) = self.listener() {
            // Withdraws the counted request; its callback task arms the refusing one.
            let _ = l.cancel_overlapped_requests();
        }
        let me = self.inner.clone();
        let cb: CloseCompletion = Box::new(completion);
        i.core.finish_close(
            Box::new(move || {
                let l = me.l.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(l) = l {
                    let _ = l.cancel_overlapped_requests();
                }
                // Nothing calls it any more: the consumer's context goes with the close.
                drop(me.event.lock().unwrap_or_else(|e| e.into_inner()).take());
            }),
            cb,
        )
    }
}

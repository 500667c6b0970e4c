//! `NDK_CONNECTOR`: connection setup and teardown on either side, and the disconnect event
//! (nd-v1-ndk §2.5, §2.7, §2.8).

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::adapter::Shared;
use super::callbacks::{self, CloseCompletion, Core, RequestCompletion};
use super::{NdkQp, NdkSharedEndpoint, NtStatus};
use crate::{Connector, Status};

/// A disconnect event callback (`NDK_FN_DISCONNECT_EVENT_CALLBACK`): called once, when the
/// peer disconnects.
pub type DisconnectEvent = Box<dyn FnOnce() + Send>;

#[derive(Debug, Default)]
struct State {
    /// Accept or CompleteConnect succeeded.
    established: bool,
    /// Connect succeeded (the peer accepted; CompleteConnect or Reject is this side's move).
    connected: bool,
    /// Reject was called (closing need not reject again).
    rejected: bool,
    /// This side called Disconnect: the connection's end is not the peer's doing.
    disconnecting: bool,
}

pub(crate) struct ConnInner {
    shared: Arc<Shared>,
    pub(crate) core: Arc<Core>,
    c: Connector,
    /// Provider-created, handed over by a listener's connect event.
    incoming: bool,
    state: Mutex<State>,
}

/// A connector (`NDK_CONNECTOR`). Cloning shares it.
#[derive(Clone)]
pub struct NdkConnector {
    pub(crate) inner: Arc<ConnInner>,
}

impl fmt::Debug for NdkConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkConnector")
            .field("incoming", &self.inner.incoming)
            .field("core", &self.inner.core)
            .finish()
    }
}

fn bind_status(e: crate::Error) -> NtStatus {
    match e.status() {
        // NDK names a connector already bound or connecting this way.
        Status::ADDRESS_ALREADY_ASSOCIATED => NtStatus::INVALID_DEVICE_STATE,
        s => NtStatus::from_nd(s),
    }
}

impl NdkConnector {
    pub(crate) fn new(shared: Arc<Shared>, core: Arc<Core>, c: Connector, incoming: bool) -> Self {
        Self {
            inner: Arc::new(ConnInner {
                shared,
                core,
                c,
                incoming,
                state: Mutex::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mode(&self) -> callbacks::CompletionMode {
        self.inner.shared.mode
    }

    /// `NdkConnect` `qp` from `source` (port 0: one from 49152–65535) to `dest`, offering
    /// the read limits (capped at the adapter's, then at the peer's) and private data.
    /// Completes when the peer accepts; statuses, inline or through `completion`:
    /// `STATUS_CONNECTION_REFUSED` (rejected, or nobody listens), `STATUS_IO_TIMEOUT`,
    /// `STATUS_NETWORK_UNREACHABLE`/`STATUS_HOST_UNREACHABLE`, and for the source
    /// `STATUS_SHARING_VIOLATION`, `STATUS_INVALID_ADDRESS`, `STATUS_TOO_MANY_ADDRESSES`.
    /// The QP stays open until this connector has closed.
    pub fn connect(
        &self,
        qp: &NdkQp,
        source: SocketAddr,
        dest: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let cb: RequestCompletion = Box::new(completion);
        if let Err(e) = self.inner.c.bind(source) {
            return callbacks::finish(&self.inner.core, self.mode(), bind_status(e), cb);
        }
        self.start_connect(
            qp,
            dest,
            inbound_read_limit,
            outbound_read_limit,
            private_data,
            cb,
        )
    }

    fn start_connect(
        &self,
        qp: &NdkQp,
        dest: SocketAddr,
        ird: u32,
        ord: u32,
        private_data: &[u8],
        cb: RequestCompletion,
    ) -> NtStatus {
        self.inner.core.depend_on(&qp.core);
        let ov = self.inner.c.connect(&qp.qp, dest, ird, ord, private_data);
        let me = self.clone();
        let after = move |s: NtStatus| {
            if s == NtStatus::SUCCESS {
                me.lock().connected = true;
            }
            s
        };
        callbacks::track(&self.inner.core, self.mode(), ov, after, cb)
    }

    /// `NdkConnectWithSharedEndpoint`: [`NdkConnector::connect`] from the shared endpoint's
    /// address, which stays open until this connector has closed.
    pub fn connect_with_shared_endpoint(
        &self,
        qp: &NdkQp,
        endpoint: &NdkSharedEndpoint,
        dest: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let cb: RequestCompletion = Box::new(completion);
        self.inner.core.depend_on(&endpoint.core);
        if let Err(e) = endpoint.bind_connector(&self.inner.c) {
            return callbacks::finish(&self.inner.core, self.mode(), bind_status(e), cb);
        }
        self.start_connect(
            qp,
            dest,
            inbound_read_limit,
            outbound_read_limit,
            private_data,
            cb,
        )
    }

    /// `NdkCompleteConnect`: finish the active side after Connect succeeded, and register
    /// `disconnect_event`. `STATUS_CONNECTION_INVALID` if Connect has not succeeded.
    pub fn complete_connect(
        &self,
        disconnect_event: Option<DisconnectEvent>,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let ov = self.inner.c.complete_connect();
        let me = self.clone();
        let after = move |s: NtStatus| {
            if s == NtStatus::SUCCESS {
                me.established(disconnect_event);
            }
            s
        };
        callbacks::track(
            &self.inner.core,
            self.mode(),
            ov,
            after,
            Box::new(completion),
        )
    }

    /// `NdkAccept` the request this (provider-created) connector carries, on `qp`, and
    /// register `disconnect_event`. Completes when the peer has completed its side;
    /// `STATUS_CONNECTION_REFUSED` or `STATUS_CONNECTION_ABORTED` if it went away. The QP
    /// stays open until this connector has closed.
    pub fn accept(
        &self,
        qp: &NdkQp,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
        disconnect_event: Option<DisconnectEvent>,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        self.inner.core.depend_on(&qp.core);
        let ov = self.inner.c.accept(
            &qp.qp,
            inbound_read_limit,
            outbound_read_limit,
            private_data,
        );
        let me = self.clone();
        let after = move |s: NtStatus| {
            if s == NtStatus::SUCCESS {
                me.established(disconnect_event);
            }
            s
        };
        callbacks::track(
            &self.inner.core,
            self.mode(),
            ov,
            after,
            Box::new(completion),
        )
    }

    /// The connection is up: arm the disconnect event.
    fn established(&self, event: Option<DisconnectEvent>) {
        self.lock().established = true;
        let Some(event) = event else {
            return;
        };
        let i = &self.inner;
        let Ok(ov) = i.c.notify_disconnect() else {
            return;
        };
        if !i.core.begin() {
            ov.cancel();
            return;
        }
        let me = self.clone();
        let done = ov.clone();
        callbacks::on_completion(
            &i.core.disp,
            &ov,
            Box::new(move || {
                let _end = me.inner.core.ending();
                let peer =
                    !matches!(done.try_result(), Some(Err(e)) if e.status() == Status::CANCELED);
                if peer && !me.lock().disconnecting && !me.inner.core.is_closing() {
                    event();
                }
            }),
        );
    }

    /// `NdkReject` (synchronous): the peer's Connect fails with `STATUS_CONNECTION_REFUSED`
    /// and sees `private_data`. `STATUS_CONNECTION_ABORTED` if the peer went away.
    pub fn reject(&self, private_data: &[u8]) -> NtStatus {
        let r = self.inner.c.reject(private_data);
        let mut st = self.lock();
        st.rejected = true;
        match r {
            Ok(()) => NtStatus::SUCCESS,
            Err(e) => e.into(),
        }
    }

    /// `NdkGetConnectionData`: the effective read limits and the peer's private data.
    /// `private_data` `None` with `*len` 0 is the size probe (`STATUS_SUCCESS`); a buffer
    /// shorter than the data gets what fits and `STATUS_BUFFER_TOO_SMALL`. `*len` is set to
    /// the data's size either way; `None` with `*len` above 0 is `STATUS_INVALID_PARAMETER`.
    pub fn get_connection_data(
        &self,
        inbound_read_limit: Option<&mut u32>,
        outbound_read_limit: Option<&mut u32>,
        private_data: Option<&mut [u8]>,
        len: &mut u32,
    ) -> NtStatus {
        if private_data.is_none() && *len > 0 {
            return NtStatus::INVALID_PARAMETER;
        }
        let limits = match self.inner.c.get_read_limits() {
            Ok(l) => l,
            Err(e) => return e.into(),
        };
        let data = match self.inner.c.private_data() {
            Ok(d) => d,
            Err(e) => return e.into(),
        };
        if let Some(i) = inbound_read_limit {
            *i = limits.inbound;
        }
        if let Some(o) = outbound_read_limit {
            *o = limits.outbound;
        }
        let have = *len as usize;
        *len = data.len() as u32;
        match private_data {
            None => NtStatus::SUCCESS,
            Some(buf) => {
                let n = have.min(buf.len()).min(data.len());
                buf[..n].copy_from_slice(&data[..n]);
                if have.min(buf.len()) < data.len() {
                    NtStatus::BUFFER_TOO_SMALL
                } else {
                    NtStatus::SUCCESS
                }
            }
        }
    }

    /// `NdkGetLocalAddress`.
    pub fn get_local_address(&self) -> Result<SocketAddr, NtStatus> {
        Ok(self.inner.c.get_local_address()?)
    }

    /// `NdkGetPeerAddress`.
    pub fn get_peer_address(&self) -> Result<SocketAddr, NtStatus> {
        Ok(self.inner.c.get_peer_address()?)
    }

    /// `NdkDisconnect`: graceful; flushes the QP (outstanding requests complete with
    /// `STATUS_CANCELLED`). The disconnect event is not called for a disconnect this side
    /// started.
    pub fn disconnect(&self, completion: impl FnOnce(NtStatus) + Send + 'static) -> NtStatus {
        self.lock().disconnecting = true;
        let ov = self.inner.c.disconnect();
        callbacks::track(
            &self.inner.core,
            self.mode(),
            ov,
            |s| s,
            Box::new(completion),
        )
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseConnector`: an incoming connector neither accepted nor rejected rejects its
    /// request (and an active one whose Connect succeeded, without CompleteConnect, rejects
    /// the peer's Accept); an established connection is torn down; a pending Connect, Accept,
    /// CompleteConnect or Disconnect completes (`STATUS_CANCELLED` if it had not finished)
    /// before the close completion, and the disconnect event stops.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        let i = &self.inner;
        i.core.start_close();
        let (established, connected, rejected, disconnecting) = {
            let s = self.lock();
            (s.established, s.connected, s.rejected, s.disconnecting)
        };
        // A request not taken (incoming), or a peer's Accept not completed (active side
        // after Connect): declined.
        if (i.incoming || connected) && !established && !rejected {
            let _ = i.c.reject(&[]);
        } else if established && !disconnecting {
            self.lock().disconnecting = true;
            let _ = i.c.disconnect();
        }
        let _ = i.c.cancel_overlapped_requests();
        let cb: CloseCompletion = Box::new(completion);
        i.core.finish_close(Box::new(|| {}), cb)
    }
}

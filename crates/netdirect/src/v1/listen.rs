//! `INDListen`: a listener `INDAdapter::Listen` created and started.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use super::{Adapter, Connector};
use crate::{Error, Overlapped, Result};

/// A v1 listener (`INDListen`), from [`Adapter::listen`]. Clones share it; when the last one
/// goes, the listener stops and every pending [`Listen::get_connection_request`] completes
/// `ND_CANCELED`.
#[derive(Clone)]
pub struct Listen {
    inner: Arc<Inner>,
}

struct Inner {
    v2: crate::Listener,
    adapter: Adapter,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Releasing the listener ends its pending requests (v1: "or by releasing the object").
        let _ = self.v2.cancel_overlapped_requests();
    }
}

impl fmt::Debug for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::Listen").field(&self.inner.v2).finish()
    }
}

impl Listen {
    pub(crate) fn new(v2: crate::Listener, adapter: Adapter) -> Self {
        Self {
            inner: Arc::new(Inner { v2, adapter }),
        }
    }

    /// `GetConnectionRequest`: the next incoming request goes into `connector` (made by
    /// [`Adapter::create_connector`] of the same adapter, else `ND_INVALID_PARAMETER_1`).
    /// Several may be outstanding; each completes on one arriving request, in order.
    pub fn get_connection_request(&self, connector: &Connector) -> Result<Overlapped> {
        if !connector.adapter.same(&self.inner.adapter) {
            return Err(Error::invalid_parameter(1));
        }
        self.inner.v2.get_connection_request(&connector.v2)
    }

    /// `CancelOverlappedRequests`: pending GetConnectionRequests complete `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.v2.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`, with v1's byte count (0).
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<usize> {
        ov.get_overlapped_result(wait).map(|()| 0)
    }

    /// The address it listens on (not a v1 method: what `pAssignedPort` said, with the IP).
    pub fn local_address(&self) -> Result<SocketAddr> {
        self.inner.v2.get_local_address()
    }
}
